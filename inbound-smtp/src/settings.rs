//! The listener's role, limits and names, with defaults a public MX would use.

use std::sync::Arc;
use std::time::Duration;

use tidings_core::domain_name::DomainName;
use tokio_rustls::rustls::ServerConfig;

/// Which mail the listener takes, and from whom.
#[derive(Debug, Clone)]
pub enum Role {
    /// Bounce and complaint reports from anyone: no STARTTLS, no AUTH, and `RCPT TO` only on
    /// `accept_domain` (the return-path domain); any other gets `550 5.7.1 relaying denied`.
    /// Matching is case-insensitive (`DomainName` is lower-case).
    Reports {
        /// The only domain accepted in `RCPT TO`.
        accept_domain: DomainName,
    },
    /// Message submission (RFC 6409) by applications holding an API key: STARTTLS with this
    /// configuration (RFC 3207), then AUTH PLAIN or LOGIN (RFC 4954) checked by the
    /// handler's [`authenticate`](crate::InboundHandler::authenticate); `MAIL` needs both,
    /// and every recipient goes to the handler's
    /// [`check_recipient`](crate::InboundHandler::check_recipient). AUTH is neither offered
    /// nor accepted on the plaintext session, so a key never crosses the wire in clear.
    Submission {
        /// The TLS server configuration (the HTTPS certificate).
        tls: Arc<ServerConfig>,
        /// Implicit TLS (RFC 8314, port 465): the handshake comes first, before the
        /// greeting, and STARTTLS is neither offered nor needed.
        implicit_tls: bool,
    },
}

/// How the listener behaves. Build with [`InboundSettings::new`] (reports) or
/// [`InboundSettings::submission`] and override fields.
#[derive(Debug, Clone)]
pub struct InboundSettings {
    /// Reports or submission.
    pub role: Role,
    /// Our name in the greeting and the EHLO reply. Printable ASCII without spaces.
    pub hostname: String,
    /// Largest message accepted, in bytes after dot-unstuffing (default 10 MiB). A larger
    /// `SIZE=` is refused at `MAIL`; larger data is read to its end, discarded, and refused.
    pub max_message_bytes: usize,
    /// Longest command line, CRLF included (default 4096; RFC 5321 asks for at least 512).
    /// Message data has no per-line limit, only `max_message_bytes`: real bounces quote
    /// lines longer than RFC 5322's 998 characters, and refusing them would lose the report.
    pub max_line_bytes: usize,
    /// Recipients per transaction (default 100); more get `452 4.5.3`.
    pub max_recipients: usize,
    /// Concurrent sessions (default 100); more are greeted with `421 4.3.2` and closed.
    pub max_connections: usize,
    /// Idle time allowed while waiting for a command (default 5 min, RFC 5321 §4.5.3.2).
    pub command_timeout: Duration,
    /// Time allowed for the whole message data, from `354` to the final dot (default 10 min).
    pub data_timeout: Duration,
    /// Failed commands (syntax errors, bad sequence, refused recipients, failed AUTH) before
    /// the session is closed with `421` (default 10).
    pub max_errors: usize,
    /// On shutdown, how long sessions busy with a message may take to finish (default 5 s).
    pub shutdown_grace: Duration,
}

impl InboundSettings {
    /// The defaults for a report listener accepting mail for `accept_domain`.
    pub fn new(accept_domain: DomainName) -> Self {
        Self::with_role(Role::Reports { accept_domain })
    }

    /// The defaults for a submission listener whose STARTTLS uses `tls`.
    pub fn submission(tls: Arc<ServerConfig>) -> Self {
        Self::with_role(Role::Submission { tls, implicit_tls: false })
    }

    /// The defaults for a submission listener with implicit TLS (port 465 style).
    pub fn submission_implicit_tls(tls: Arc<ServerConfig>) -> Self {
        Self::with_role(Role::Submission { tls, implicit_tls: true })
    }

    fn with_role(role: Role) -> Self {
        Self {
            role,
            hostname: "tidings".to_owned(),
            max_message_bytes: 10 * 1024 * 1024,
            max_line_bytes: 4096,
            max_recipients: 100,
            max_connections: 100,
            command_timeout: Duration::from_secs(5 * 60),
            data_timeout: Duration::from_secs(10 * 60),
            max_errors: 10,
            shutdown_grace: Duration::from_secs(5),
        }
    }

    /// Whether the hostname can be written into a reply line as it is.
    pub(crate) fn hostname_is_valid(&self) -> bool {
        !self.hostname.is_empty() && self.hostname.len() <= 255 && self.hostname.bytes().all(|b| b.is_ascii_graphic())
    }
}
