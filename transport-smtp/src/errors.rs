//! The one place that turns what an SMTP exchange went through into a [`SendError`]: a reply
//! becomes `Rejected` with its real code and full text; a refused, reset or silent
//! connection, a timeout or a TLS failure becomes `Unreachable` with a reason a person can
//! read ("connection refused by 127.0.0.1:2525", "timed out after 30s waiting for the DATA
//! reply from mx1.example.net[192.0.2.1]:25"); our own inability becomes `Local`.
//!
//! Nothing here decides whether a reply is temporary or permanent: core classifies.

use std::error::Error as _;
use std::io;
use std::time::Duration;

use lettre::transport::smtp::Error as SmtpError;
use lettre::transport::smtp::response::Response;
use tidings_core::ports::{SendError, SmtpReply};

use crate::config::human;
use crate::mx_guard::NotPublic;

/// Where in the exchange something went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The TCP connection (and, for implicit TLS, the handshake).
    Connect,
    /// The greeting and the EHLO reply.
    Greeting,
    /// STARTTLS and the handshake after it.
    StartTls,
    /// AUTH.
    Auth,
    /// MAIL FROM.
    Mail,
    /// RCPT TO.
    Rcpt,
    /// The DATA command.
    Data,
    /// The message itself and the reply to its final dot.
    Message,
    /// RSET after a refused transaction.
    Reset,
}

impl Stage {
    /// What we were waiting for, as a noun phrase.
    fn awaited(self) -> &'static str {
        match self {
            Self::Connect => "the TCP connection",
            Self::Greeting => "the greeting and EHLO reply",
            Self::StartTls => "the STARTTLS reply and TLS handshake",
            Self::Auth => "the AUTH reply",
            Self::Mail => "the MAIL FROM reply",
            Self::Rcpt => "the RCPT TO reply",
            Self::Data => "the DATA reply",
            Self::Message => "the reply to the message",
            Self::Reset => "the RSET reply",
        }
    }

    /// Whether the SMTP transaction (MAIL onwards) had started.
    pub(crate) fn in_transaction(self) -> bool {
        matches!(self, Self::Mail | Self::Rcpt | Self::Data | Self::Message | Self::Reset)
    }
}

/// What happened.
#[derive(Debug)]
pub(crate) enum Cause {
    /// The server answered with a negative reply.
    Reply(SmtpReply),
    /// No answer within the step's timeout.
    Timeout(Duration),
    /// Any other failure lettre reported (I/O, TLS, an unreadable reply, a closed connection).
    Smtp(SmtpError),
    /// We cannot send this message this way (see the text).
    Local(String),
    /// Our own TCP connect failed (refused, unreachable, no such host).
    Connect(io::Error),
    /// The connected peer is not a public address (the MX guard).
    NotPublic(NotPublic),
    /// The server cannot meet the recipient domain's TLS policy (see the text).
    Policy(String),
}

/// A failed step of an SMTP exchange.
#[derive(Debug)]
pub(crate) struct Failure {
    /// Where.
    pub(crate) stage: Stage,
    /// What.
    pub(crate) cause: Cause,
}

impl Failure {
    /// A lettre error at `stage`; negative replies become [`Cause::Reply`].
    pub(crate) fn smtp(stage: Stage, error: SmtpError) -> Self {
        let cause = match reply_of(&error) {
            Some(reply) => Cause::Reply(reply),
            None => Cause::Smtp(error),
        };
        Self { stage, cause }
    }

    /// The TCP connect failed.
    pub(crate) fn connect(error: io::Error) -> Self {
        Self { stage: Stage::Connect, cause: Cause::Connect(error) }
    }

    /// The MX guard refused the connected peer.
    pub(crate) fn not_public(refused: NotPublic) -> Self {
        Self { stage: Stage::Connect, cause: Cause::NotPublic(refused) }
    }

    /// No answer within `after`.
    pub(crate) fn timeout(stage: Stage, after: Duration) -> Self {
        Self { stage, cause: Cause::Timeout(after) }
    }

    /// Something on our side.
    pub(crate) fn local(stage: Stage, reason: String) -> Self {
        Self { stage, cause: Cause::Local(reason) }
    }

    /// The server cannot meet a TLS policy; `reason` names the server and the policy.
    pub(crate) fn policy(stage: Stage, reason: String) -> Self {
        Self { stage, cause: Cause::Policy(reason) }
    }

    /// The error the port reports for this failure with `remote`.
    pub(crate) fn to_send_error(&self, remote: &str) -> SendError {
        match &self.cause {
            Cause::Reply(reply) => SendError::Rejected { reply: reply.clone(), remote: remote.to_owned() },
            Cause::Timeout(after) if self.stage == Stage::Connect => {
                SendError::Unreachable { reason: format!("timed out after {} connecting to {remote}", human(*after)) }
            }
            Cause::Timeout(after) => SendError::Unreachable {
                reason: format!("timed out after {} waiting for {} from {remote}", human(*after), self.stage.awaited()),
            },
            Cause::Smtp(error) if error.is_client() => {
                SendError::Local { reason: format!("{remote}: {}", source_text(error)) }
            }
            Cause::Smtp(error) => SendError::Unreachable { reason: describe(self.stage, error, remote) },
            Cause::Local(reason) => SendError::Local { reason: reason.clone() },
            Cause::Connect(io) if io.kind() == io::ErrorKind::ConnectionRefused => {
                SendError::Unreachable { reason: format!("connection refused by {remote}") }
            }
            Cause::Connect(io) => SendError::Unreachable { reason: format!("cannot connect to {remote}: {io}") },
            Cause::NotPublic(refused) => SendError::Unreachable { reason: format!("{remote}: {refused}") },
            // Temporary: the policy or the server may change, and RFC 8461 §5.1 asks that
            // mail is not bounced before a new policy was looked for.
            Cause::Policy(reason) => SendError::Unreachable { reason: reason.clone() },
        }
    }

    /// After this failure the connection is in a known state and may carry the next
    /// message (after RSET): the server refused a transaction without closing.
    pub(crate) fn keeps_connection(&self) -> bool {
        matches!(&self.cause, Cause::Reply(reply) if reply.code != 421) && self.stage.in_transaction()
    }

    /// A reused connection failing at its first command most likely went stale while idle
    /// (the server closed it, or says it is closing with 421): nothing was sent, so the
    /// message may be retried at once on a new connection.
    pub(crate) fn suggests_stale_connection(&self) -> bool {
        self.stage == Stage::Mail
            && match &self.cause {
                Cause::Reply(reply) => reply.code == 421,
                Cause::Smtp(_) => true,
                Cause::Timeout(_) | Cause::Local(_) | Cause::Connect(_) | Cause::NotPublic(_) | Cause::Policy(_) => {
                    false
                }
            }
    }

    /// STARTTLS was offered but did not work: refused, or the handshake failed.
    pub(crate) fn is_starttls_failure(&self) -> bool {
        self.stage == Stage::StartTls && !matches!(self.cause, Cause::Timeout(_))
    }

    /// STARTTLS was accepted and then the TLS handshake failed (or the connection broke
    /// during it): not a reply, which may be temporary, nor a timeout, which may be the
    /// network's.
    pub(crate) fn is_tls_handshake_failure(&self) -> bool {
        self.stage == Stage::StartTls && matches!(self.cause, Cause::Smtp(_))
    }
}

/// The reply inside a lettre error for a 4xx/5xx answer.
pub(crate) fn reply_of(error: &SmtpError) -> Option<SmtpReply> {
    if !(error.is_transient() || error.is_permanent()) {
        return None;
    }
    let code = u16::from(error.status()?);
    // lettre keeps every line of the reply, joined with spaces, as the error's source.
    let text = error.source().map(ToString::to_string).unwrap_or_default();
    Some(SmtpReply::new(code, &text))
}

/// A positive reply as the port speaks it: lines joined with a space, the enhanced code
/// kept once (servers repeat it on every line).
pub(crate) fn reply_from_response(response: &Response) -> SmtpReply {
    let mut lines = response.message();
    let first = lines.next().unwrap_or_default();
    let status = first.split_whitespace().next().filter(|word| word.contains('.'));
    let mut text = first.to_owned();
    for line in lines {
        let line = match status {
            Some(status) => line.strip_prefix(status).map(str::trim_start).unwrap_or(line),
            None => line,
        };
        text.push(' ');
        text.push_str(line);
    }
    SmtpReply::new(u16::from(response.code()), &text)
}

/// A readable reason for a lettre error that is not a reply.
fn describe(stage: Stage, error: &SmtpError, remote: &str) -> String {
    let awaited = stage.awaited();
    if let Some(io) = io_error(error) {
        return match (stage, io.kind()) {
            (_, io::ErrorKind::ConnectionRefused) => format!("connection refused by {remote}"),
            // tokio-rustls reports handshake failures (bad certificate, garbage instead of
            // TLS) as InvalidData wrapping the rustls error.
            (Stage::Connect | Stage::StartTls, io::ErrorKind::InvalidData) => {
                format!("TLS handshake with {remote} failed: {io}")
            }
            (Stage::Connect, _) => format!("cannot connect to {remote}: {io}"),
            (_, io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted) => {
                format!("connection reset by {remote} while waiting for {awaited}")
            }
            (_, io::ErrorKind::UnexpectedEof | io::ErrorKind::BrokenPipe) => {
                format!("connection closed by {remote} while waiting for {awaited}")
            }
            _ => format!("network error with {remote} while waiting for {awaited}: {io}"),
        };
    }
    if error.is_response() {
        // lettre's word for end-of-stream before a complete reply.
        return if source_text(error) == "incomplete response" {
            format!("connection closed by {remote} while waiting for {awaited}")
        } else {
            format!("unreadable reply from {remote} while waiting for {awaited}: {}", source_text(error))
        };
    }
    if error.is_tls() {
        return format!("TLS with {remote} failed: {}", source_text(error));
    }
    format!("{error} (with {remote}, waiting for {awaited})")
}

/// The first I/O error in the chain, if any.
fn io_error(error: &SmtpError) -> Option<&io::Error> {
    let mut source = error.source();
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<io::Error>() {
            return Some(io);
        }
        source = current.source();
    }
    None
}

/// The innermost description lettre has: its `Display` prefixes a kind ("response error:").
fn source_text(error: &SmtpError) -> String {
    error.source().map_or_else(|| error.to_string(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[test]
    fn multi_line_replies_are_joined_with_the_status_once() {
        let response = Response::from_str("250-2.0.0 first line\r\n250 2.0.0 queued as 42\r\n").unwrap();
        let reply = reply_from_response(&response);
        assert_eq!(reply.code, 250);
        assert_eq!(reply.to_string(), "250 2.0.0 first line queued as 42");
        let plain = Response::from_str("250 OK\r\n").unwrap();
        assert_eq!(reply_from_response(&plain).to_string(), "250 OK");
    }

    #[test]
    fn timeouts_name_the_step_and_the_server() {
        let failure = Failure::timeout(Stage::Data, Duration::from_secs(30));
        let error = failure.to_send_error("127.0.0.1:2525");
        assert_eq!(error.to_string(), "timed out after 30s waiting for the DATA reply from 127.0.0.1:2525");
        let connect = Failure::timeout(Stage::Connect, Duration::from_millis(500)).to_send_error("mx[192.0.2.1]:25");
        assert_eq!(connect.to_string(), "timed out after 500ms connecting to mx[192.0.2.1]:25");
    }

    #[test]
    fn only_refused_transactions_keep_their_connection() {
        let refused = |stage, code| Failure { stage, cause: Cause::Reply(SmtpReply::new(code, "x")) };
        assert!(refused(Stage::Rcpt, 550).keeps_connection());
        assert!(refused(Stage::Message, 451).keeps_connection());
        assert!(!refused(Stage::Rcpt, 421).keeps_connection(), "421 means the server is closing");
        assert!(!refused(Stage::Greeting, 554).keeps_connection());
        assert!(!Failure::timeout(Stage::Rcpt, Duration::from_secs(1)).keeps_connection());
    }

    #[test]
    fn a_reused_connection_is_suspected_stale_only_at_its_first_command() {
        let at = |stage, code| Failure { stage, cause: Cause::Reply(SmtpReply::new(code, "4.4.2 idle")) };
        assert!(at(Stage::Mail, 421).suggests_stale_connection());
        assert!(!at(Stage::Mail, 451).suggests_stale_connection());
        assert!(!at(Stage::Rcpt, 421).suggests_stale_connection());
    }
}
