//! What the listener hands over: the envelope and the raw message, to a handler that stores
//! it (or refuses it) before the sender is told `250`; and, for submission, the hooks that
//! authenticate a client and vet each recipient.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use async_trait::async_trait;
use tidings_core::email::EmailAddress;
use tidings_core::usecases::Principal;

/// The SMTP envelope of one accepted message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// `MAIL FROM`; `None` for the null reverse path `<>`, which bounce reports use.
    pub mail_from: Option<EmailAddress>,
    /// The accepted `RCPT TO` addresses, in order: for reports all on the accepted domain.
    pub recipients: Vec<EmailAddress>,
    /// The name the client gave in `EHLO`/`HELO` (printable ASCII, at most 255 bytes).
    pub helo: String,
    /// The client's address.
    pub peer: SocketAddr,
    /// Who authenticated the session (submission); `None` on a report listener.
    pub principal: Option<Principal>,
}

/// A reply a handler chose: a 4xx or 5xx code, its enhanced status code and a short text.
/// The text is cleaned on output (printable ASCII only, at most 200 characters), so it may
/// quote what the authenticated client sent without letting it inject reply lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    code: u16,
    status: &'static str,
    text: String,
}

impl Refusal {
    /// A refusal; a `code` outside 400–599 is taken as `451` (a handler bug must not look
    /// like success or a protocol reply).
    pub fn new(code: u16, status: &'static str, text: impl Into<String>) -> Self {
        let code = if (400..600).contains(&code) { code } else { 451 };
        Self { code, status, text: text.into() }
    }

    /// The reply code.
    pub fn code(&self) -> u16 {
        self.code
    }

    /// The reply line, CRLF included.
    pub(crate) fn line(&self) -> String {
        let text: String =
            self.text.chars().take(200).map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
        format!("{} {} {}\r\n", self.code, self.status, text)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.code, self.status, self.text)
    }
}

/// Why a handler did not take a message or a recipient; decides the reply the client gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Could not store it now (storage down, overloaded): `451 4.3.0`, the sender retries.
    #[error("temporary failure: {0}")]
    Temporary(String),
    /// Will never take it: `554 5.6.0`, the sender gives up. The text is logged, not sent.
    #[error("permanent failure: {0}")]
    Permanent(String),
    /// Refused with exactly this reply.
    #[error("refused: {0}")]
    Refused(Refusal),
}

/// Credentials from `AUTH PLAIN` or `AUTH LOGIN`. `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The authentication identity (PLAIN's authcid, LOGIN's username).
    pub username: String,
    /// The password.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials").field("username", &self.username).field("password", &"<redacted>").finish()
    }
}

/// Why an `AUTH` failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// Wrong credentials: `535 5.7.8`.
    Invalid,
    /// The client failed too often and must wait: `454 4.7.0`.
    Throttled,
    /// The credentials could not be checked now: `454 4.7.0`.
    Unavailable,
}

impl std::fmt::Display for AuthFailure {
    /// `invalid`, `throttled` or `unavailable`, as logs name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Invalid => "invalid",
            Self::Throttled => "throttled",
            Self::Unavailable => "unavailable",
        })
    }
}

/// Receives each message the listener accepts; on a submission listener also decides who
/// may submit and to whom.
#[async_trait]
pub trait InboundHandler: Send + Sync {
    /// Called once per accepted message, after the final dot and before the 250 is sent;
    /// `Ok` → `250`, `Err(Temporary)` → `451 4.3.0` (the sender retries), `Err(Permanent)` →
    /// `554`, `Err(Refused)` → its reply. `raw` is the message as sent, after
    /// dot-unstuffing, line endings untouched.
    async fn receive(&self, envelope: Envelope, raw: Vec<u8>) -> Result<(), HandlerError>;

    /// Submission only: who the credentials of `client` belong to. A report listener never
    /// calls it; the default refuses everyone.
    async fn authenticate(&self, client: IpAddr, credentials: Credentials) -> Result<Principal, AuthFailure> {
        let _ = (client, credentials);
        Err(AuthFailure::Invalid)
    }

    /// Submission only: whether `principal` may send to `recipient`, asked at `RCPT TO` so a
    /// refusal concerns that recipient alone. The default accepts.
    async fn check_recipient(&self, principal: &Principal, recipient: &EmailAddress) -> Result<(), HandlerError> {
        let _ = (principal, recipient);
        Ok(())
    }

    /// Reports only: whether to take mail for `recipient`, which is not on the listener's
    /// own return-path domain (a sending domain's `bounces.<domain>` return path, say),
    /// asked at `RCPT TO`. `Err(Temporary)` is a `451` for that recipient. The default
    /// refuses: the listener then takes its own domain only.
    async fn accepts_report_to(&self, recipient: &EmailAddress) -> Result<bool, HandlerError> {
        let _ = recipient;
        Ok(false)
    }
}
