//! The fixed replies. None of them carries text the client sent (RFC 5321 allows it, but
//! echoing unbounded input back is how reply injection and log pollution start).

use crate::command::CommandError;
use crate::handler::HandlerError;
use crate::sasl::SaslError;
use crate::settings::Role;

pub(crate) const OK: &str = "250 2.0.0 OK\r\n";
pub(crate) const SENDER_OK: &str = "250 2.1.0 Sender OK\r\n";
pub(crate) const RECIPIENT_OK: &str = "250 2.1.5 Recipient OK\r\n";
pub(crate) const START_DATA: &str = "354 End data with <CR><LF>.<CR><LF>\r\n";
pub(crate) const BYE: &str = "221 2.0.0 Bye\r\n";
pub(crate) const VRFY: &str = "252 2.5.0 Cannot VRFY user, but will accept message and attempt delivery\r\n";
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
pub(crate) const TOO_MANY_FROM_CLIENT: &str = "421 4.7.0 Too many connections from your address, try again later\r\n";
pub(crate) const SESSION_TIME: &str = "421 4.4.2 Session time limit reached, closing connection\r\n";
pub(crate) const TOO_MANY_MESSAGES: &str = "450 4.7.1 Too many messages from your address, try again later\r\n";
pub(crate) const EVICTED: &str = "421 4.4.2 Idle while the server is busy, closing connection\r\n";
pub(crate) const DATA_BUDGET_SPENT: &str = "421 4.3.2 Too much message data in flight, try again later\r\n";
pub(crate) const DATA_SHARE_SPENT: &str =
    "421 4.3.2 Too much message data in flight from your address, try again later\r\n";
pub(crate) const READY_FOR_TLS: &str = "220 2.0.0 Ready to start TLS\r\n";
pub(crate) const TLS_ACTIVE: &str = "503 5.5.1 TLS already active\r\n";
pub(crate) const NEED_STARTTLS: &str = "530 5.7.0 Must issue a STARTTLS command first\r\n";
pub(crate) const NEED_AUTH: &str = "530 5.7.0 Authentication required\r\n";
pub(crate) const AUTH_OK: &str = "235 2.7.0 Authentication successful\r\n";
pub(crate) const AUTH_INVALID: &str = "535 5.7.8 Authentication credentials invalid\r\n";
pub(crate) const AUTH_THROTTLED: &str = "454 4.7.0 Too many failed authentications, try again later\r\n";
pub(crate) const AUTH_UNAVAILABLE: &str = "454 4.7.0 Temporary authentication failure\r\n";
pub(crate) const ALREADY_AUTHENTICATED: &str = "503 5.5.1 Already authenticated\r\n";
pub(crate) const AUTH_IN_TRANSACTION: &str = "503 5.5.1 AUTH not permitted during a mail transaction\r\n";
/// An empty PLAIN challenge: the client sends its response on the next line.
pub(crate) const PLAIN_CHALLENGE: &str = "334 \r\n";

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

/// The reply for a refused `AUTH` exchange.
pub(crate) fn for_sasl(error: SaslError) -> &'static str {
    match error {
        SaslError::UnknownMechanism => "504 5.5.4 Unrecognized authentication type\r\n",
        SaslError::Arguments => "501 5.5.4 Syntax error in parameters or arguments\r\n",
        SaslError::Undecodable => "501 5.5.2 Cannot decode response\r\n",
        SaslError::Cancelled => "501 5.0.0 Authentication cancelled\r\n",
    }
}

/// The reply for a message or recipient the handler did not take.
pub(crate) fn for_handler(error: &HandlerError) -> String {
    match error {
        HandlerError::Temporary(_) => HANDLER_TEMPORARY.to_owned(),
        HandlerError::Permanent(_) => HANDLER_PERMANENT.to_owned(),
        HandlerError::Refused(refusal) => refusal.line(),
    }
}

/// `220 <hostname> ESMTP`.
pub(crate) fn greeting(hostname: &str, role: &Role) -> String {
    let what = match role {
        Role::Reports { .. } => "report receiver",
        Role::Submission { .. } => "submission",
    };
    format!("220 {hostname} ESMTP Tidings {what}\r\n")
}

/// The 250 after the final dot.
pub(crate) fn queued(role: &Role) -> &'static str {
    match role {
        Role::Reports { .. } => "250 2.0.0 Report received\r\n",
        Role::Submission { .. } => "250 2.0.0 Message queued\r\n",
    }
}

/// The HELP reply.
pub(crate) fn help(role: &Role) -> &'static str {
    match role {
        Role::Reports { .. } => {
            "214 2.0.0 Bounce and complaint reports only: EHLO HELO MAIL RCPT DATA RSET NOOP QUIT VRFY HELP\r\n"
        }
        Role::Submission { .. } => {
            "214 2.0.0 Submission with an API key: EHLO STARTTLS AUTH MAIL RCPT DATA RSET NOOP QUIT VRFY HELP\r\n"
        }
    }
}

/// The EHLO reply with our extensions. ENHANCEDSTATUSCODES because every reply carries one;
/// `extra` adds STARTTLS or AUTH where the session offers them.
pub(crate) fn ehlo(hostname: &str, max_message_bytes: usize, extra: Option<&str>) -> String {
    let extra = extra.map(|e| format!("250-{e}\r\n")).unwrap_or_default();
    format!(
        "250-{hostname}\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-SIZE {max_message_bytes}\r\n{extra}\
         250 ENHANCEDSTATUSCODES\r\n"
    )
}

/// The HELO reply.
pub(crate) fn helo(hostname: &str) -> String {
    format!("250 {hostname}\r\n")
}
