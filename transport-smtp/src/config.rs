//! Settings shared by the SMTP transports (timeouts, connection pooling, EHLO name) and the
//! typed error the server prints when a setting is unusable.

use std::path::PathBuf;
use std::time::Duration;

use lettre::transport::smtp::extension::ClientId;

/// Why a transport could not be built. The text is fit for an operator; it never quotes a
/// relay URL, which may hold a password.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `TIDINGS_SMTP_RELAY` is not `smtp[s]://[user:pass@]host[:port]`.
    #[error("invalid SMTP relay URL: {0}")]
    RelayUrl(String),
    /// The extra CA certificate given for the relay is not PEM, or holds no certificate.
    #[error("invalid CA certificate for the SMTP relay: {0}")]
    CaCertificate(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// rustls refused the TLS settings (should not happen with the built-in ones).
    #[error("cannot set up TLS for {host}: {source}")]
    Tls {
        /// The server the settings were for.
        host: String,
        /// rustls' complaint, through lettre.
        #[source]
        source: lettre::transport::smtp::Error,
    },
    /// The EHLO name is empty or holds spaces or control characters.
    #[error("invalid EHLO name {0:?}: it must be a host name or an address literal such as [192.0.2.1]")]
    EhloName(String),
    /// A timeout, limit or port that would make every delivery fail.
    #[error("invalid SMTP transport settings: {0}")]
    Settings(&'static str),
    /// The outbox directory cannot be created or read.
    #[error("cannot use the outbox directory {}: {source}", path.display())]
    Outbox {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// How long each part of a delivery may take. A step that exceeds its timeout fails the
/// attempt with [`SendError::Unreachable`](tidings_core::ports::SendError) naming the step,
/// and its connection is closed (its state is unknown).
///
/// RFC 5321 §4.5.3.2 suggests 5 minutes per command and 10 minutes for the reply to the
/// message; those protect a queue that may wait. Ours are shorter because the delivery
/// worker leases a message for a bounded time and retries later anyway: a server that takes
/// a minute to answer one command is better tried again later than waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect, per address. Default 30 s.
    pub connect: Duration,
    /// Each reply: STARTTLS with its handshake, AUTH, MAIL, RCPT, DATA, RSET; and the
    /// greeting and EHLO reply together, after the TCP connect (with implicit TLS, whose
    /// handshake lettre performs inside its connect, all of it must arrive within
    /// `connect + command` of starting to connect). Default 60 s.
    pub command: Duration,
    /// Sending the message and receiving the reply to its final dot. Default 180 s.
    pub message: Duration,
    /// Everything one `send` does, DNS, queueing for a connection slot and trying several MX
    /// hosts included. Default 300 s. The delivery worker's lease must be longer.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(30),
            command: Duration::from_secs(60),
            message: Duration::from_secs(180),
            total: Duration::from_secs(300),
        }
    }
}

impl Timeouts {
    /// The default timeouts with each step cut to at most `total`, and `total` as the budget
    /// of a whole send: one knob for an operator (or a test) who wants sends to give up
    /// sooner.
    pub fn capped(total: Duration) -> Self {
        let default = Self::default();
        Self {
            connect: default.connect.min(total),
            command: default.command.min(total),
            message: default.message.min(total),
            total,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let all = [self.connect, self.command, self.message, self.total];
        if all.iter().any(Duration::is_zero) {
            return Err(ConfigError::Settings("every timeout must be more than zero"));
        }
        Ok(())
    }
}

/// Connection reuse and concurrency, per destination (the relay, or one MX host). With
/// shaping ([`MxMailer::with_shaping`](crate::MxMailer::with_shaping)), an MX host's site's
/// `connection_limit` (over all the site's hosts) and `max_deliveries_per_connection`
/// replace `max_connections` and `max_messages_per_connection`; `idle_timeout` still applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSettings {
    /// Connections open at once to one destination; further sends wait for one to become
    /// free (within [`Timeouts::total`]). Also the most idle connections kept. Default 10.
    pub max_connections: usize,
    /// An idle connection older than this is closed rather than reused. Default 30 s, well
    /// under the 5 minutes after which servers commonly drop an idle client (Postfix's
    /// `smtpd_timeout`).
    pub idle_timeout: Duration,
    /// Messages sent over one connection before it is closed; many receivers limit this
    /// and answer 4xx beyond it. Default 100.
    pub max_messages_per_connection: u32,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self { max_connections: 10, idle_timeout: Duration::from_secs(30), max_messages_per_connection: 100 }
    }
}

impl PoolSettings {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.max_connections == 0 {
            return Err(ConfigError::Settings("max_connections must be at least 1"));
        }
        if self.max_messages_per_connection == 0 {
            return Err(ConfigError::Settings("max_messages_per_connection must be at least 1"));
        }
        if self.idle_timeout.is_zero() {
            return Err(ConfigError::Settings("idle_timeout must be more than zero"));
        }
        Ok(())
    }
}

/// Settings of [`MxMailer`](crate::MxMailer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MxConfig {
    /// Port of every MX host (`TIDINGS_MX_PORT`). Default 25.
    pub port: u16,
    /// Name sent with EHLO (`TIDINGS_EHLO_NAME`); `None`: this machine's host name.
    /// Receivers check it against the connecting address's reverse DNS, so production should
    /// set the sending host's public name.
    pub ehlo_name: Option<String>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Reuse and per-host concurrency (per site with shaping, see [`PoolSettings`]).
    pub pool: PoolSettings,
    /// Addresses tried for one message, over all its MX hosts (Postfix's
    /// `smtp_mx_address_limit`). Default 5.
    pub max_addresses: usize,
    /// MX hosts for which connections are kept; beyond it, hosts without a connection in use
    /// are forgotten. Default 1000.
    pub max_destinations: usize,
    /// Connect to MX hosts on loopback, private, link-local and other non-public addresses
    /// (`TIDINGS_MX_ALLOW_PRIVATE`, for tests). Default `false`: such addresses are never
    /// dialled, and a domain whose MX hosts have no other address fails with the reason.
    pub allow_private: bool,
}

impl Default for MxConfig {
    fn default() -> Self {
        Self {
            port: 25,
            ehlo_name: None,
            timeouts: Timeouts::default(),
            pool: PoolSettings::default(),
            max_addresses: 5,
            max_destinations: 1000,
            allow_private: false,
        }
    }
}

impl MxConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.timeouts.validate()?;
        self.pool.validate()?;
        if self.port == 0 {
            return Err(ConfigError::Settings("the MX port must not be 0"));
        }
        if self.max_addresses == 0 || self.max_destinations == 0 {
            return Err(ConfigError::Settings("max_addresses and max_destinations must be at least 1"));
        }
        Ok(())
    }
}

/// Checks the settings both SMTP transports share.
pub(crate) fn validate_common(timeouts: &Timeouts, pool: &PoolSettings) -> Result<(), ConfigError> {
    timeouts.validate()?;
    pool.validate()
}

/// The EHLO identity: the configured name, else this machine's host name (lettre's default,
/// `localhost` when the host name is unknown).
pub(crate) fn client_id(name: Option<&str>) -> Result<ClientId, ConfigError> {
    match name {
        None => Ok(ClientId::default()),
        Some(name) => {
            let valid = !name.is_empty() && name.len() <= 255 && name.bytes().all(|b| b.is_ascii_graphic());
            if valid { Ok(ClientId::Domain(name.to_owned())) } else { Err(ConfigError::EhloName(name.to_owned())) }
        }
    }
}

/// The name both transports send with EHLO when none is configured: this machine's host
/// name (`localhost` when it is unknown), as text (`[192.0.2.1]` for an address literal).
/// For an operator's log line, and for checking that name at start.
pub fn default_ehlo_name() -> String {
    ClientId::default().to_string()
}

/// `30s`, `1.5s` or `300ms`: how timeouts read in error texts.
pub(crate) fn human(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else if millis > 1000 {
        format!("{:.1}s", duration.as_secs_f64())
    } else {
        format!("{millis}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_timeouts_never_exceed_the_total() {
        let short = Timeouts::capped(Duration::from_secs(5));
        assert_eq!(
            (short.connect, short.command, short.message, short.total),
            (Duration::from_secs(5), Duration::from_secs(5), Duration::from_secs(5), Duration::from_secs(5))
        );
        let long = Timeouts::capped(Duration::from_secs(600));
        assert_eq!(
            (long.connect, long.command, long.message, long.total),
            (Duration::from_secs(30), Duration::from_secs(60), Duration::from_secs(180), Duration::from_secs(600))
        );
        assert!(Timeouts::capped(Duration::ZERO).validate().is_err());
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human(Duration::from_secs(30)), "30s");
        assert_eq!(human(Duration::from_millis(300)), "300ms");
        assert_eq!(human(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn ehlo_names_without_spaces_or_controls_are_accepted() {
        assert!(matches!(client_id(Some("mail.acme.test")), Ok(ClientId::Domain(name)) if name == "mail.acme.test"));
        assert!(client_id(Some("[192.0.2.1]")).is_ok());
        for bad in ["", "two words", "line\r\nbreak"] {
            assert!(matches!(client_id(Some(bad)), Err(ConfigError::EhloName(_))), "{bad:?}");
        }
    }

    #[test]
    fn the_default_ehlo_name_is_the_one_sent_without_a_setting() {
        let sent = client_id(None).unwrap().to_string();
        assert_eq!(default_ehlo_name(), sent);
        assert!(!sent.is_empty());
    }

    #[test]
    fn settings_that_would_fail_every_delivery_are_refused() {
        let zero = Timeouts { command: Duration::ZERO, ..Timeouts::default() };
        assert!(validate_common(&zero, &PoolSettings::default()).is_err());
        let no_connections = PoolSettings { max_connections: 0, ..PoolSettings::default() };
        assert!(validate_common(&Timeouts::default(), &no_connections).is_err());
        assert!(MxConfig { port: 0, ..MxConfig::default() }.validate().is_err());
        assert!(MxConfig::default().validate().is_ok());
    }
}
