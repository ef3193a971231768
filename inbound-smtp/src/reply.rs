//! The fixed replies. None of them carries text the client sent (RFC 5321 allows it, but
//! echoing unbounded input back is how reply injection and log pollution start).

use crate::command::CommandError;

pub(crate) const OK: &str = "250 2.0.0 OK\r\n";
pub(crate) const SENDER_OK: &str = "250 2.1.0 Sender OK\r\n";
pub(crate) const RECIPIENT_OK: &str = "250 2.1.5 Recipient OK\r\n";
pub(crate) const QUEUED: &str = "250 2.0.0 Report received\r\n";
pub(crate) const START_DATA: &str = "354 End data with <CR><LF>.<CR><LF>\r\n";
pub(crate) const BYE: &str = "221 2.0.0 Bye\r\n";
pub(crate) const VRFY: &str = "252 2.5.0 Cannot VRFY user, but will accept message and attempt delivery\r\n";
pub(crate) const HELP: &str =
    "214 2.0.0 Bounce and complaint reports only: EHLO HELO MAIL RCPT DATA RSET NOOP QUIT VRFY HELP\r\n";
pub(crate) const NOT_IMPLEMENTED: &str = "502 5.5.1 Command not implemented\r\n";
pub(crate) const LINE_TOO_LONG: &str = "500 5.5.2 Line too long\r\n";
pub(crate) const NEED_HELO: &str = "503 5.5.1 Send EHLO or HELO first\r\n";
pub(crate) const NESTED_MAIL: &str = "503 5.5.1 Sender already specified\r\n";
pub(crate) const NEED_MAIL: &str = "503 5.5.1 Need MAIL before RCPT\r\n";
pub(crate) const NEED_RCPT: &str = "503 5.5.1 Need RCPT before DATA\r\n";
pub(crate) const RELAY_DENIED: &str = "550 5.7.1 Relaying denied\r\n";
pub(crate) const TOO_MANY_RECIPIENTS: &str = "452 4.5.3 Too many recipients\r\n";
pub(crate) const SIZE_EXCEEDED: &str = "552 5.3.4 Message size exceeds fixed maximum message size\r\n";
pub(crate) const HANDLER_TEMPORARY: &str = "451 4.3.0 Temporary failure, try again later\r\n";
pub(crate) const HANDLER_PERMANENT: &str = "554 5.6.0 Message rejected\r\n";
pub(crate) const TOO_MANY_ERRORS: &str = "421 4.7.0 Too many errors, closing connection\r\n";
pub(crate) const TIMEOUT: &str = "421 4.4.2 Timeout, closing connection\r\n";
pub(crate) const SHUTTING_DOWN: &str = "421 4.3.2 Service shutting down, closing connection\r\n";
pub(crate) const TOO_MANY_CONNECTIONS: &str = "421 4.3.2 Too many connections, try again later\r\n";

/// The reply for a line that did not parse.
pub(crate) fn for_error(error: CommandError) -> &'static str {
    match error {
        CommandError::Unrecognized => "500 5.5.1 Command unrecognized\r\n",
        CommandError::Syntax => "500 5.5.2 Syntax error\r\n",
        CommandError::Arguments => "501 5.5.4 Syntax error in parameters or arguments\r\n",
        CommandError::Address => "501 5.1.3 Bad address syntax\r\n",
        CommandError::Parameter => "555 5.5.4 Parameter not recognized\r\n",
    }
}

/// `220 <hostname> ESMTP`.
pub(crate) fn greeting(hostname: &str) -> String {
    format!("220 {hostname} ESMTP Tidings report receiver\r\n")
}

/// The EHLO reply with our extensions. ENHANCEDSTATUSCODES because every reply carries one.
pub(crate) fn ehlo(hostname: &str, max_message_bytes: usize) -> String {
    format!(
        "250-{hostname}\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-SIZE {max_message_bytes}\r\n\
         250 ENHANCEDSTATUSCODES\r\n"
    )
}

/// The HELO reply.
pub(crate) fn helo(hostname: &str) -> String {
    format!("250 {hostname}\r\n")
}
