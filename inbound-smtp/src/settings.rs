//! The listener's role, limits and names, with defaults a public MX would use.

use std::sync::Arc;
use std::time::Duration;

use tidings_core::domain_name::DomainName;
use tokio_rustls::rustls::ServerConfig;

/// The default largest message, 10 MiB ([`InboundSettings::max_message_bytes`]).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 10 * 1024 * 1024;

/// The default messages per client and window on a report listener, 100
/// ([`InboundSettings::max_messages_per_client`]).
pub const DEFAULT_MAX_MESSAGES_PER_CLIENT: usize = 100;

/// Which mail the listener takes, and from whom.
#[derive(Debug, Clone)]
pub enum Role {
    /// Bounce and complaint reports from anyone: no STARTTLS, no AUTH, and `RCPT TO` only on
    /// `accept_domain` (the server-wide return-path domain) or at an address the handler's
    /// [`accepts_report_to`](crate::InboundHandler::accepts_report_to) takes (a sending
    /// domain's own return path); any other gets `550 5.7.1 relaying denied`. Matching is
    /// case-insensitive (`DomainName` is lower-case).
    Reports {
        /// The domain accepted whole in `RCPT TO`, if any.
        accept_domain: Option<DomainName>,
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
    /// Concurrent sessions (default 100). At the cap a newcomer waits up to 10 s for a place
    /// while the session idle longest (for at least `evict_idle_after`) is closed with
    /// `421 4.4.2` to make room; if none frees, it is greeted with `421 4.3.2` and closed.
    pub max_connections: usize,
    /// Concurrent sessions from one client (default 10): an IPv4 address, or an IPv6 /64
    /// (`tidings_core::client_group`). More are greeted with `421 4.7.0` and closed.
    pub max_connections_per_ip: usize,
    /// Message data held at once by all sessions, from `354` until the handler has taken
    /// the message (default 64 MiB; at least `max_message_bytes`). One client may hold a
    /// quarter of it, or one largest message if that is more ([`Self::data_share`]). A
    /// session the budget cannot serve within 10 s, or whose client holds its share, is
    /// closed with `421 4.3.2`; when the budget is spent, the holder idle longest (for at
    /// least `evict_idle_after`) is closed to free its part.
    pub max_data_bytes_in_flight: usize,
    /// How long a session must have made no progress (no command, no chunk of message
    /// data) before it may be closed to make room for another client or message (default
    /// 1 s, as on the HTTPS listener under pressure: long enough for a live client's next
    /// command, short enough that a newcomer is served at once).
    pub evict_idle_after: Duration,
    /// Idle time allowed while waiting for a command (default 5 min, RFC 5321 §4.5.3.2).
    pub command_timeout: Duration,
    /// Time allowed for the whole message data, from `354` to the final dot (default 10 min).
    pub data_timeout: Duration,
    /// Failed commands (syntax errors, bad sequence, refused recipients, failed AUTH, `MAIL`
    /// over `max_messages_per_client`) before the session is closed with `421` (default 10).
    pub max_errors: usize,
    /// Messages one client (an IPv4 address or an IPv6 /64, as for `max_connections_per_ip`)
    /// may hand over per `message_window`, across all its sessions and connections (at least
    /// 1). Over it, `MAIL` gets `450 4.7.1` and counts as a failed command; the sender
    /// retries later, as it does for greylisting. A transaction holds its place from `MAIL`,
    /// so parallel sessions cannot overshoot, but only an accepted message (the `250` after
    /// the data) keeps counting: `RSET` or a refused message gives it back.
    ///
    /// Reports default to 100 per minute: one remote MTA reporting more than that many
    /// bounces or answers a minute to our customers' domains is a flood, not a mail queue
    /// (big providers spread over many addresses and retry what is deferred), while a burst
    /// after an outage still passes within minutes. Submission defaults to `usize::MAX`
    /// (no limit by address): `MAIL` needs AUTH there, each message goes through the key's
    /// own send rate limit, and one application server's address carries all of its mail.
    pub max_messages_per_client: usize,
    /// The window of `max_messages_per_client` (default 1 minute; not zero). It slides: no
    /// interval this long sees more than the limit, and a message stops counting at most a
    /// sixteenth of the window after the window has passed over it.
    pub message_window: Duration,
    /// The longest a session may last, from the connection on (default 30 min: a few
    /// hundred messages at a brisk pace; not zero). When it is over, the session is closed
    /// with `421 4.4.2` at its next command, or at once while it waits for a command, a TLS
    /// handshake or message data. Without it, a client keeping each command inside
    /// `command_timeout` and each message inside `data_timeout` would hold its place
    /// forever. A session the server is working for (a handler call) is never cut short:
    /// the time is checked again when the handler is done.
    pub max_session_time: Duration,
    /// On shutdown, how long sessions busy with a message may take to finish (default 5 s).
    pub shutdown_grace: Duration,
}

impl InboundSettings {
    /// The defaults for a report listener accepting mail for `accept_domain`.
    pub fn new(accept_domain: DomainName) -> Self {
        Self::reports(Some(accept_domain))
    }

    /// The defaults for a report listener accepting mail for `accept_domain` if any and for
    /// the addresses the handler accepts.
    pub fn reports(accept_domain: Option<DomainName>) -> Self {
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
        let max_messages_per_client = match role {
            Role::Reports { .. } => DEFAULT_MAX_MESSAGES_PER_CLIENT,
            Role::Submission { .. } => usize::MAX,
        };
        Self {
            role,
            hostname: "tidings".to_owned(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_line_bytes: 4096,
            max_recipients: 100,
            max_connections: 100,
            max_connections_per_ip: 10,
            max_data_bytes_in_flight: 64 * 1024 * 1024,
            evict_idle_after: Duration::from_secs(1),
            command_timeout: Duration::from_secs(5 * 60),
            data_timeout: Duration::from_secs(10 * 60),
            max_errors: 10,
            max_messages_per_client,
            message_window: Duration::from_secs(60),
            max_session_time: Duration::from_secs(30 * 60),
            shutdown_grace: Duration::from_secs(5),
        }
    }

    /// The most message data one client may hold across its sessions: a quarter of
    /// `max_data_bytes_in_flight`, but at least one message of `max_message_bytes` (and never
    /// more than the whole budget).
    pub fn data_share(&self) -> usize {
        (self.max_data_bytes_in_flight / 4).max(self.max_message_bytes).min(self.max_data_bytes_in_flight)
    }

    /// Whether the hostname can be written into a reply line as it is.
    pub(crate) fn hostname_is_valid(&self) -> bool {
        !self.hostname.is_empty() && self.hostname.len() <= 255 && self.hostname.bytes().all(|b| b.is_ascii_graphic())
    }
}

#[cfg(test)]
mod tests {
    use tokio_rustls::rustls::crypto::aws_lc_rs;
    use tokio_rustls::rustls::server::ResolvesServerCertUsingSni;

    use super::*;

    #[test]
    fn reports_are_limited_by_address_and_submission_by_key() {
        let tls = ServerConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(ResolvesServerCertUsingSni::new()));
        let tls = Arc::new(tls);

        assert_eq!(InboundSettings::reports(None).max_messages_per_client, 100);
        assert_eq!(InboundSettings::submission(Arc::clone(&tls)).max_messages_per_client, usize::MAX);
        assert_eq!(InboundSettings::submission_implicit_tls(tls).max_messages_per_client, usize::MAX);
        let settings = InboundSettings::reports(None);
        assert_eq!(
            (settings.message_window, settings.max_session_time),
            (Duration::from_secs(60), Duration::from_secs(1800))
        );
    }
}
