//! Configuration: the server's `TIDINGS_*` settings, declared once in [`Settings`] (flag,
//! variable, default, help) and read from the command line, the environment and an optional
//! TOML file (same keys, lower-case without the prefix: `listen = "…"`), in that order of
//! precedence. Everything is parsed and checked here, once, at start; an error names the
//! variable and where its value came from, and never echoes a secret.
//!
//! This is the only module that reads the environment (STYLE: no `std::env::var` below it).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tidings_core::delivery::RetrySchedule;
use tidings_core::dns_records::DEFAULT_SPF_MECHANISM;
use tidings_core::domain_name::{DnsName, DomainName};
use tidings_core::model::ApiKeyPlaintext;
use tidings_core::reputation::{ReputationPolicy, Thresholds, parse_threshold};
use tidings_core::sealing::SealingKey;
use tidings_core::shaping::ShapingTable;
use tidings_core::tracking::PublicUrl;
use tidings_core::usecases::MetricsToken;
use tidings_http::TrustedProxies;
use tidings_inbound_smtp::DEFAULT_MAX_MESSAGE_BYTES;
use tokio_rustls::rustls::pki_types::CertificateDer;
use url::Url;

use crate::sending_host::EhloName;

mod parse;
mod settings;
mod sources;

pub use parse::duration;
use parse::{
    boolean, byte_size, ca_file, count, delay, delivery, log_filter, mx_host, pool_size, port, public_url, retention,
    retry_schedule, shaping_file, smtp_url, socket_addr, spf_terms,
};
pub use settings::Settings;
pub use sources::{Origin, Sources};

/// A setting that cannot be used: which variable, from where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}{}: {message}", origin.as_ref().map(|o| format!(" (from {o})")).unwrap_or_default())]
pub struct ConfigError {
    /// The variable, e.g. `TIDINGS_LISTEN`.
    pub var: String,
    /// Where its value came from, when known.
    pub origin: Option<Origin>,
    /// What is wrong with it.
    pub message: String,
}

impl ConfigError {
    /// An error about `var`.
    pub fn new(var: impl Into<String>, origin: Option<Origin>, message: impl Into<String>) -> Self {
        Self { var: var.into(), origin, message: message.into() }
    }
}

/// A certificate and private key in PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `TIDINGS_TLS_CERT`: the certificate chain, leaf first.
    pub cert: PathBuf,
    /// `TIDINGS_TLS_KEY`: the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// `TIDINGS_MTA_STS_CA_FILE`: CA certificates read from a PEM file at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFile {
    /// The file.
    pub path: PathBuf,
    /// Its certificates, at least one.
    pub certificates: Vec<CertificateDer<'static>>,
}

/// MTA-STS for `mx` delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MtaStsConfig {
    /// `TIDINGS_MTA_STS`: recipient domains' policies are looked up and obeyed.
    pub enabled: bool,
    /// `TIDINGS_MTA_STS_CA_FILE` (tests, private CAs): the only roots trusted for policy
    /// hosts and MX certificates; `None`: the system's store.
    pub ca_file: Option<CaFile>,
    /// `TIDINGS_MTA_STS_PORT` (tests): the policy host's HTTPS port, 443 by default.
    pub port: u16,
}

/// How messages leave (`TIDINGS_DELIVERY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Through `TIDINGS_SMTP_RELAY`.
    Relay,
    /// Directly to each recipient's MX.
    Mx,
    /// `.eml` files in `<data>/outbox`.
    Outbox,
    /// Nothing is delivered: messages are accepted and stay `Queued` until the server runs
    /// with another mode (maintenance, or tests that read freshly queued messages).
    Hold,
}

/// Limits of the HTTPS listener's connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionConfig {
    /// `TIDINGS_MAX_CONNECTIONS`: most open connections.
    pub max_connections: usize,
    /// `TIDINGS_MAX_CONNECTIONS_PER_IP`: most open connections from one client address.
    pub max_connections_per_ip: usize,
    /// `TIDINGS_IDLE_TIMEOUT`: a connection without a request in flight this long is closed.
    pub idle_timeout: Duration,
    /// `TIDINGS_HANDSHAKE_TIMEOUT`: longest TLS handshake.
    pub handshake_timeout: Duration,
    /// `TIDINGS_HTTP2_MAX_STREAMS`: most concurrent requests on one HTTP/2 connection.
    pub http2_max_streams: u32,
}

/// Inbound mail's limits (contract §13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundConfig {
    /// Largest inbound message.
    pub max_message_bytes: usize,
    /// Messages per client address and minute.
    pub messages_per_minute: usize,
    /// What one workspace keeps.
    pub quota: tidings_core::ports::InboundQuota,
}

/// Limits of each SMTP listener (bounce reports and submission), each listener counting
/// its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpLimits {
    /// `TIDINGS_SMTP_MAX_SESSIONS`: most sessions at once.
    pub max_sessions: usize,
    /// `TIDINGS_SMTP_MAX_SESSIONS_PER_IP`: most sessions from one client (IPv4 address or
    /// IPv6 /64).
    pub max_sessions_per_ip: usize,
    /// `TIDINGS_SMTP_DATA_BYTES_IN_FLIGHT`: most message data held at once.
    pub data_bytes_in_flight: usize,
}

/// How messages are delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryConfig {
    /// `TIDINGS_DELIVERY`.
    pub mode: Delivery,
    /// `TIDINGS_SMTP_RELAY` (may hold a password: never log it whole).
    pub smtp_relay: Option<Url>,
    /// `TIDINGS_MX_PORT`.
    pub mx_port: u16,
    /// `TIDINGS_MX_ALLOW_PRIVATE`: direct MX delivery may connect to loopback, private and
    /// link-local addresses (tests); off, such addresses are never dialled.
    pub mx_allow_private: bool,
    /// MTA-STS (`TIDINGS_MTA_STS*`).
    pub mta_sts: MtaStsConfig,
    /// `TIDINGS_SHAPING_FILE` over the built-in table (the built-in table alone when unset):
    /// each site's limits and adaptive rules for `mx` delivery.
    pub shaping: ShapingTable,
    /// `TIDINGS_RETRY_SCHEDULE`.
    pub retry_schedule: RetrySchedule,
    /// `TIDINGS_RETURN_PATH_DOMAIN`.
    pub return_path_domain: Option<DomainName>,
    /// `TIDINGS_INBOUND_MX_HOST`: the public name of the bounce listener's host, which turns
    /// on each domain's own return path (`bounces.<domain>`).
    pub inbound_mx_host: Option<DnsName>,
    /// `TIDINGS_EHLO_NAME`; `None`: the machine's host name.
    pub ehlo_name: Option<EhloName>,
    /// `TIDINGS_DOMAIN_RECHECK_INTERVAL`.
    pub domain_recheck_interval: Duration,
    /// `TIDINGS_DKIM_RETIRE_AFTER`: how long a DKIM pair replaced by a rotation stays
    /// published (`Retiring`), and then listed as `Retired`.
    pub dkim_retire_after: Duration,
    /// `TIDINGS_DKIM_ROTATE_EVERY`: automatic DKIM rotation of keys older than this; `None`
    /// (`off`, the default): only when asked.
    pub dkim_rotate_every: Option<Duration>,
    /// `TIDINGS_SMTP_TIMEOUT`: the longest one delivery attempt may take.
    pub smtp_timeout: Duration,
}

/// `TIDINGS_DATABASE_URL`: where the PostgreSQL store is. It may hold a password, so its
/// `Debug` and [`DatabaseUrl::redacted`] show `***` in its place; only
/// [`DatabaseUrl::expose`] gives the text to connect with.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl {
    /// Exactly what the operator wrote (the driver parses it, not `url`).
    text: String,
    /// The same, password masked.
    redacted: String,
    /// The password as written and percent-decoded, to scrub from driver errors.
    secrets: Vec<String>,
}

impl DatabaseUrl {
    /// Checks `text` is a `postgres://` or `postgresql://` URL. The error never contains it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut url =
            Url::parse(text).map_err(|e| format!("not a URL such as postgres://user:pass@host:5432/tidings ({e})"))?;
        if !matches!(url.scheme(), "postgres" | "postgresql") {
            return Err(format!("scheme must be postgres or postgresql, not {}", url.scheme()));
        }
        let mut secrets = Vec::new();
        if let Some(password) = url.password().filter(|p| !p.is_empty()).map(str::to_owned) {
            let decoded = percent_encoding::percent_decode_str(&password)
                .decode_utf8()
                .ok()
                .map(|d| d.into_owned())
                .filter(|d| *d != password);
            secrets.push(password);
            secrets.extend(decoded);
            if url.set_password(Some("***")).is_err() {
                // A URL that has a password but cannot take another: show none of it.
                let redacted = format!("{}://***", url.scheme());
                return Ok(Self { text: text.to_owned(), redacted, secrets });
            }
        }
        Ok(Self { text: text.to_owned(), redacted: url.to_string(), secrets })
    }

    /// The URL with its password (if any) replaced by `***`: safe to log and print.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// The URL as configured, password included: for connecting only.
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// `message` with every occurrence of the password masked (for errors of the driver,
    /// which might quote what it was given).
    pub fn scrub(&self, message: &str) -> String {
        let mut message = message.replace(&self.text, &self.redacted);
        for secret in &self.secrets {
            message = message.replace(secret.as_str(), "***");
        }
        message
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DatabaseUrl").field(&self.redacted).finish()
    }
}

/// The server's validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `TIDINGS_DATA_DIR`.
    pub data_dir: PathBuf,
    /// `TIDINGS_SECRET_KEY`: the key that seals the store's secrets.
    pub secret_key: Option<SealingKey>,
    /// `TIDINGS_SECRET_KEY_FILE`: a file holding it. With neither, `<data>/secret.key`
    /// (see [`crate::secret_key`]).
    pub secret_key_file: Option<PathBuf>,
    /// `TIDINGS_PREVIOUS_SECRET_KEY`: during a change of the key, the key the secrets were
    /// sealed with until now (opens, never seals; see [`crate::secret_key`]).
    pub previous_secret_key: Option<SealingKey>,
    /// `TIDINGS_PREVIOUS_SECRET_KEY_FILE`: a file holding it.
    pub previous_secret_key_file: Option<PathBuf>,
    /// `TIDINGS_DATABASE_URL`; `None`: the sled store in `<data>/store`.
    pub database_url: Option<DatabaseUrl>,
    /// `TIDINGS_DATABASE_POOL`: most pooled connections to PostgreSQL per node (plus the one
    /// that listens for webhook changes).
    pub database_pool: usize,
    /// `TIDINGS_LISTEN`.
    pub listen: SocketAddr,
    /// `TIDINGS_TLS_CERT` + `TIDINGS_TLS_KEY`; `None`: self-signed in the data dir.
    pub tls: Option<TlsFiles>,
    /// `TIDINGS_BOOTSTRAP_KEY`.
    pub bootstrap_key: Option<ApiKeyPlaintext>,
    /// `TIDINGS_DNS_SERVER`; `None`: the system resolver.
    pub dns_server: Option<SocketAddr>,
    /// `TIDINGS_SPF_INCLUDE`: the SPF term(s) domains must publish; `None` when unset, and
    /// then [`DEFAULT_SPF_MECHANISM`] is asked for ([`Config::spf_mechanism`]).
    pub spf_include: Option<String>,
    /// `TIDINGS_MAX_BODY_BYTES`.
    pub max_body_bytes: usize,
    /// `TIDINGS_MAX_SEND_BODY_BYTES`: the send route's own limit (attachments).
    pub max_send_body_bytes: usize,
    /// `TIDINGS_MAX_BODY_BYTES_IN_FLIGHT`: most request-body bytes held at once.
    pub max_body_bytes_in_flight: usize,
    /// The listener's connection limits.
    pub connections: ConnectionConfig,
    /// `TIDINGS_STORE_CACHE`: sled's page cache.
    pub store_cache_bytes: u64,
    /// `TIDINGS_IDEMPOTENCY_WINDOW`.
    pub idempotency_window: Duration,
    /// `TIDINGS_WEBHOOK_ALLOW_PRIVATE`: checked when endpoints are created and at every
    /// connection the webhook sender opens.
    pub webhook_allow_private: bool,
    /// `TIDINGS_WEBHOOK_RETRY_SCHEDULE`.
    pub webhook_retry_schedule: RetrySchedule,
    /// `TIDINGS_LEASE_MARGIN`: added to the longest time the work of a claim can take (the
    /// timeouts) to make the lease on claimed messages and webhook deliveries. A crashed
    /// node's work waits for its leases to end before another node takes it over.
    pub lease_margin: Duration,
    /// `TIDINGS_PUBLIC_URL`: the base of tracking links; `None`: `https://<listen>` with the
    /// port actually bound.
    pub public_url: Option<PublicUrl>,
    /// `TIDINGS_INBOUND_SMTP_LISTEN`: the bounce and complaint listener (needs
    /// `TIDINGS_RETURN_PATH_DOMAIN` or `TIDINGS_INBOUND_MX_HOST`: it accepts mail for the
    /// first and for the domains' own return paths only).
    pub inbound_smtp_listen: Option<SocketAddr>,
    /// `TIDINGS_SUBMISSION_LISTEN`: the SMTP submission listener for applications (STARTTLS
    /// with the HTTPS certificate, AUTH with an API key).
    pub submission_listen: Option<SocketAddr>,
    /// `TIDINGS_SUBMISSION_TLS_LISTEN`: the same with implicit TLS (port 465 style).
    pub submission_tls_listen: Option<SocketAddr>,
    /// The SMTP listeners' session and message data limits.
    pub smtp_limits: SmtpLimits,
    /// Inbound mail: `TIDINGS_INBOUND_MAX_MESSAGE_BYTES`, `…_MESSAGES_PER_MINUTE`,
    /// `…_QUOTA_MESSAGES`, `…_QUOTA_BYTES`.
    pub inbound: InboundConfig,
    /// `TIDINGS_LOG`: a tracing `EnvFilter` directive.
    pub log: String,
    /// `TIDINGS_RETENTION`: how long message bodies and timelines are kept; `None` (`off`):
    /// forever.
    pub retention: Option<Duration>,
    /// `TIDINGS_RETENTION_INTERVAL`: how often the retention purge runs.
    pub retention_interval: Duration,
    /// The reputation guard: `TIDINGS_REPUTATION_WINDOW`, `…_MIN_VOLUME`,
    /// `…_CHECK_INTERVAL`, and the `TIDINGS_BOUNCE_RATE_*` and `TIDINGS_COMPLAINT_RATE_*`
    /// thresholds.
    pub reputation: ReputationPolicy,
    /// `TIDINGS_SHUTDOWN_DELAY`: after a shutdown signal, how long the server keeps accepting
    /// requests while `/readyz` answers 503, before it stops accepting and drains.
    pub shutdown_delay: Duration,
    /// `TIDINGS_TRUSTED_PROXIES`: proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
    /// `TIDINGS_METRICS_TOKEN`: the bearer token `/metrics` requires; `None`: open.
    pub metrics_token: Option<MetricsToken>,
    /// `TIDINGS_OPERATOR_TOKEN`: the bearer token of the operator's API (`/v1/operator`);
    /// `None`: not served.
    pub operator_token: Option<MetricsToken>,
    /// `TIDINGS_METRICS_LISTEN`: a plain-HTTP listener of its own for `/metrics`, which the
    /// HTTPS listener then does not serve.
    pub metrics_listen: Option<SocketAddr>,
    /// `TIDINGS_DASHBOARD`: whether the HTTPS listener serves the web dashboard beside the API.
    pub dashboard: bool,
    /// Delivery.
    pub delivery: DeliveryConfig,
}

impl Config {
    /// Reads and validates the configuration from the environment (`env`, a lookup such as
    /// `std::env::var`) and the file (if any), the environment winning.
    pub fn load(file: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_sources(&Sources::load(file, env, |_| None)?)
    }

    /// Validates already-read settings.
    pub fn from_sources(s: &Sources) -> Result<Self, ConfigError> {
        let database_url = s.parse("TIDINGS_DATABASE_URL", DatabaseUrl::parse)?;
        let database_pool = s.value("TIDINGS_DATABASE_POOL", pool_size)?;
        let data_dir = s.value("TIDINGS_DATA_DIR", |t| Ok(PathBuf::from(t)))?;
        let secret_key =
            s.parse("TIDINGS_SECRET_KEY", |t| SealingKey::from_base64(t).map_err(|e| format!("the key {e}")))?;
        let secret_key_file = s.parse("TIDINGS_SECRET_KEY_FILE", |t| Ok(PathBuf::from(t)))?;
        if secret_key.is_some() && secret_key_file.is_some() {
            return Err(ConfigError::new(
                "TIDINGS_SECRET_KEY_FILE",
                s.origin("TIDINGS_SECRET_KEY_FILE"),
                "set either TIDINGS_SECRET_KEY or TIDINGS_SECRET_KEY_FILE, not both",
            ));
        }
        let previous_secret_key =
            s.parse("TIDINGS_PREVIOUS_SECRET_KEY", |t| SealingKey::from_base64(t).map_err(|e| format!("the key {e}")))?;
        let previous_secret_key_file = s.parse("TIDINGS_PREVIOUS_SECRET_KEY_FILE", |t| Ok(PathBuf::from(t)))?;
        if previous_secret_key.is_some() && previous_secret_key_file.is_some() {
            return Err(ConfigError::new(
                "TIDINGS_PREVIOUS_SECRET_KEY_FILE",
                s.origin("TIDINGS_PREVIOUS_SECRET_KEY_FILE"),
                "set either TIDINGS_PREVIOUS_SECRET_KEY or TIDINGS_PREVIOUS_SECRET_KEY_FILE, not both",
            ));
        }
        let listen = s.value("TIDINGS_LISTEN", socket_addr)?;
        let cert = s.parse("TIDINGS_TLS_CERT", |t| Ok(PathBuf::from(t)))?;
        let key = s.parse("TIDINGS_TLS_KEY", |t| Ok(PathBuf::from(t)))?;
        let tls = match (cert, key) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(ConfigError::new("TIDINGS_TLS_KEY", None, "must be set when TIDINGS_TLS_CERT is"));
            }
            (None, Some(_)) => {
                return Err(ConfigError::new("TIDINGS_TLS_CERT", None, "must be set when TIDINGS_TLS_KEY is"));
            }
        };
        let bootstrap_key = s.parse("TIDINGS_BOOTSTRAP_KEY", |t| {
            ApiKeyPlaintext::parse(t).ok_or_else(|| "must be `tid_` followed by 40 letters or digits".to_owned())
        })?;
        let dns_server = s.parse("TIDINGS_DNS_SERVER", socket_addr)?;
        let spf_include = s.parse_set("TIDINGS_SPF_INCLUDE", spf_terms)?;
        let max_body_bytes = s.value("TIDINGS_MAX_BODY_BYTES", byte_size)?;
        let max_send_body_bytes = s.value("TIDINGS_MAX_SEND_BODY_BYTES", byte_size)?;
        let max_body_bytes_in_flight = s.value("TIDINGS_MAX_BODY_BYTES_IN_FLIGHT", byte_size)?;
        if max_body_bytes_in_flight < max_send_body_bytes.max(max_body_bytes) {
            return Err(ConfigError::new(
                "TIDINGS_MAX_BODY_BYTES_IN_FLIGHT",
                s.origin("TIDINGS_MAX_BODY_BYTES_IN_FLIGHT"),
                format!(
                    "must be at least the largest body one request may have ({} bytes, TIDINGS_MAX_SEND_BODY_BYTES), or such a request could never be served",
                    max_send_body_bytes.max(max_body_bytes)
                ),
            ));
        }
        let connections = ConnectionConfig {
            max_connections: s.value("TIDINGS_MAX_CONNECTIONS", |t| count(t, 1_000_000))?,
            max_connections_per_ip: s.value("TIDINGS_MAX_CONNECTIONS_PER_IP", |t| count(t, 1_000_000))?,
            idle_timeout: s.value("TIDINGS_IDLE_TIMEOUT", duration)?,
            handshake_timeout: s.value("TIDINGS_HANDSHAKE_TIMEOUT", duration)?,
            http2_max_streams: s.value("TIDINGS_HTTP2_MAX_STREAMS", |t| count(t, 10_000).map(|n| n as u32))?,
        };
        let store_cache_bytes = s.value("TIDINGS_STORE_CACHE", byte_size)? as u64;
        let idempotency_window = s.value("TIDINGS_IDEMPOTENCY_WINDOW", duration)?;
        let webhook_allow_private = s.value("TIDINGS_WEBHOOK_ALLOW_PRIVATE", boolean)?;
        let log = s.value("TIDINGS_LOG", log_filter)?;
        let retention = s.value("TIDINGS_RETENTION", retention)?;
        let retention_interval = s.value("TIDINGS_RETENTION_INTERVAL", duration)?;
        let threshold = |t: &str| parse_threshold(t).map_err(|e| e.to_string());
        let check_every = s.value("TIDINGS_REPUTATION_CHECK_INTERVAL", duration)?;
        let reputation = ReputationPolicy {
            window: chrono::Duration::from_std(s.value("TIDINGS_REPUTATION_WINDOW", duration)?)
                .unwrap_or(chrono::Duration::days(7)),
            min_volume: s.value("TIDINGS_REPUTATION_MIN_VOLUME", |t| count(t, 1_000_000_000))? as u64,
            check_every,
            // Held mail is looked at again as often as the rates are, at most every minute.
            hold: chrono::Duration::from_std(check_every.min(Duration::from_secs(60)))
                .unwrap_or(chrono::Duration::minutes(1)),
            bounce: Thresholds {
                warn: s.value("TIDINGS_BOUNCE_RATE_WARN", threshold)?,
                pause: s.value("TIDINGS_BOUNCE_RATE_PAUSE", threshold)?,
            },
            complaint: Thresholds {
                warn: s.value("TIDINGS_COMPLAINT_RATE_WARN", threshold)?,
                pause: s.value("TIDINGS_COMPLAINT_RATE_PAUSE", threshold)?,
            },
        };
        let shutdown_delay = s.value("TIDINGS_SHUTDOWN_DELAY", delay)?;
        let trusted_proxies = s.parse("TIDINGS_TRUSTED_PROXIES", TrustedProxies::parse)?.unwrap_or_default();
        // The error describes the token's shape and never quotes it.
        let metrics_token = s.parse("TIDINGS_METRICS_TOKEN", |t| MetricsToken::parse(t).map_err(|e| e.to_string()))?;
        let operator_token =
            s.parse("TIDINGS_OPERATOR_TOKEN", |t| MetricsToken::parse(t).map_err(|e| e.to_string()))?;
        let metrics_listen = s.parse("TIDINGS_METRICS_LISTEN", socket_addr)?;
        let dashboard = s.value("TIDINGS_DASHBOARD", boolean)?;

        let smtp_relay = s.parse("TIDINGS_SMTP_RELAY", smtp_url)?;
        let delivery = s.parse("TIDINGS_DELIVERY", delivery)?;
        let delivery = match (delivery, &smtp_relay) {
            (Some(Delivery::Relay), None) => {
                return Err(ConfigError::new(
                    "TIDINGS_DELIVERY",
                    s.origin("TIDINGS_DELIVERY"),
                    "`relay` needs TIDINGS_SMTP_RELAY to be set",
                ));
            }
            (Some(d), _) => d,
            (None, Some(_)) => Delivery::Relay,
            (None, None) => Delivery::Outbox,
        };
        let delivery = DeliveryConfig {
            mode: delivery,
            smtp_relay,
            mx_port: s.value("TIDINGS_MX_PORT", port)?,
            mx_allow_private: s.value("TIDINGS_MX_ALLOW_PRIVATE", boolean)?,
            mta_sts: MtaStsConfig {
                enabled: s.value("TIDINGS_MTA_STS", boolean)?,
                ca_file: s.parse("TIDINGS_MTA_STS_CA_FILE", ca_file)?,
                port: s.value("TIDINGS_MTA_STS_PORT", port)?,
            },
            shaping: s.parse("TIDINGS_SHAPING_FILE", shaping_file)?.unwrap_or_default(),
            retry_schedule: s.value("TIDINGS_RETRY_SCHEDULE", retry_schedule)?,
            return_path_domain: s
                .parse("TIDINGS_RETURN_PATH_DOMAIN", |t| DomainName::parse(t).map_err(|e| format!("`{t}`: {e}")))?,
            inbound_mx_host: s.parse("TIDINGS_INBOUND_MX_HOST", mx_host)?,
            ehlo_name: s.parse("TIDINGS_EHLO_NAME", EhloName::parse)?,
            domain_recheck_interval: s.value("TIDINGS_DOMAIN_RECHECK_INTERVAL", duration)?,
            dkim_retire_after: s.value("TIDINGS_DKIM_RETIRE_AFTER", duration)?,
            dkim_rotate_every: s.value("TIDINGS_DKIM_ROTATE_EVERY", parse::retention)?,
            smtp_timeout: s.value("TIDINGS_SMTP_TIMEOUT", duration)?,
        };
        let webhook_retry_schedule = s.value("TIDINGS_WEBHOOK_RETRY_SCHEDULE", retry_schedule)?;
        let lease_margin = s.value("TIDINGS_LEASE_MARGIN", duration)?;
        let inbound_smtp_listen = s.parse("TIDINGS_INBOUND_SMTP_LISTEN", socket_addr)?;
        if inbound_smtp_listen.is_some() && delivery.return_path_domain.is_none() && delivery.inbound_mx_host.is_none()
        {
            return Err(ConfigError::new(
                "TIDINGS_INBOUND_SMTP_LISTEN",
                s.origin("TIDINGS_INBOUND_SMTP_LISTEN"),
                "needs TIDINGS_RETURN_PATH_DOMAIN or TIDINGS_INBOUND_MX_HOST: the listener accepts reports sent to return paths only",
            ));
        }
        let submission_listen = s.parse("TIDINGS_SUBMISSION_LISTEN", socket_addr)?;
        let submission_tls_listen = s.parse("TIDINGS_SUBMISSION_TLS_LISTEN", socket_addr)?;
        let smtp_limits = SmtpLimits {
            max_sessions: s.value("TIDINGS_SMTP_MAX_SESSIONS", |t| count(t, 100_000))?,
            max_sessions_per_ip: s.value("TIDINGS_SMTP_MAX_SESSIONS_PER_IP", |t| count(t, 100_000))?,
            data_bytes_in_flight: s.value("TIDINGS_SMTP_DATA_BYTES_IN_FLIGHT", byte_size)?,
        };
        let inbound = InboundConfig {
            max_message_bytes: s.value("TIDINGS_INBOUND_MAX_MESSAGE_BYTES", byte_size)?,
            messages_per_minute: s.value("TIDINGS_INBOUND_MESSAGES_PER_MINUTE", |t| count(t, 1_000_000))?,
            quota: tidings_core::ports::InboundQuota {
                max_messages: s.value("TIDINGS_INBOUND_QUOTA_MESSAGES", |t| count(t, 100_000_000))? as u64,
                max_bytes: s.value("TIDINGS_INBOUND_QUOTA_BYTES", byte_size)? as u64,
            },
        };
        if inbound_smtp_listen.is_some() && smtp_limits.data_bytes_in_flight < inbound.max_message_bytes {
            return Err(ConfigError::new(
                "TIDINGS_SMTP_DATA_BYTES_IN_FLIGHT",
                s.origin("TIDINGS_SMTP_DATA_BYTES_IN_FLIGHT"),
                format!(
                    "must be at least TIDINGS_INBOUND_MAX_MESSAGE_BYTES ({} bytes), or such a message could never be received",
                    inbound.max_message_bytes
                ),
            ));
        }
        if smtp_limits.data_bytes_in_flight < DEFAULT_MAX_MESSAGE_BYTES {
            return Err(ConfigError::new(
                "TIDINGS_SMTP_DATA_BYTES_IN_FLIGHT",
                s.origin("TIDINGS_SMTP_DATA_BYTES_IN_FLIGHT"),
                format!(
                    "must be at least the largest message the SMTP listeners take ({DEFAULT_MAX_MESSAGE_BYTES} bytes), or such a message could never be received"
                ),
            ));
        }
        let public_url = s.parse("TIDINGS_PUBLIC_URL", |t| {
            let url = public_url(t)?;
            PublicUrl::parse(url.as_str()).map_err(|e| format!("`{t}`: {e}"))
        })?;
        Ok(Self {
            data_dir,
            secret_key,
            secret_key_file,
            previous_secret_key,
            previous_secret_key_file,
            database_url,
            database_pool,
            listen,
            tls,
            bootstrap_key,
            dns_server,
            spf_include,
            max_body_bytes,
            max_send_body_bytes,
            max_body_bytes_in_flight,
            connections,
            store_cache_bytes,
            idempotency_window,
            webhook_allow_private,
            webhook_retry_schedule,
            lease_margin,
            inbound_smtp_listen,
            submission_listen,
            submission_tls_listen,
            smtp_limits,
            inbound,
            log,
            retention,
            retention_interval,
            reputation,
            shutdown_delay,
            trusted_proxies,
            metrics_token,
            operator_token,
            metrics_listen,
            dashboard,
            delivery,
            public_url,
        })
    }

    /// Where the sled store lives (when there is no `TIDINGS_DATABASE_URL`).
    pub fn store_dir(&self) -> PathBuf {
        self.data_dir.join("store")
    }

    /// The SPF term(s) domains are asked to publish: `TIDINGS_SPF_INCLUDE`, or
    /// [`DEFAULT_SPF_MECHANISM`] when it is unset.
    pub fn spf_mechanism(&self) -> &str {
        self.spf_include.as_deref().unwrap_or(DEFAULT_SPF_MECHANISM)
    }

    /// Why the SPF term is wrong for how this server delivers, if it is: with relay or MX
    /// delivery and `TIDINGS_SPF_INCLUDE` unset, domains are asked for the loopback-only
    /// default, and receivers soft-fail SPF for every message sent for them. Logged at start
    /// and shown on every domain's SPF record. `None` with the outbox and hold transports
    /// (nothing reaches a receiver) and whenever the variable is set, even to the default
    /// (the operator chose it).
    pub fn spf_warning(&self) -> Option<String> {
        let how = match self.delivery.mode {
            Delivery::Relay => "through an SMTP relay (TIDINGS_DELIVERY=relay)",
            Delivery::Mx => "directly to recipients' mail servers (TIDINGS_DELIVERY=mx)",
            Delivery::Outbox | Delivery::Hold => return None,
        };
        if self.spf_include.is_some() {
            return None;
        }
        Some(format!(
            "TIDINGS_SPF_INCLUDE is not set on this Tidings server, so the SPF record asks for \
             {DEFAULT_SPF_MECHANISM}, which authorises only loopback, while mail is delivered {how}: \
             receivers will soft-fail SPF for this domain's mail. The server's operator must set \
             TIDINGS_SPF_INCLUDE to the term that authorises the hosts mail leaves from (e.g. \
             include:_spf.example.net or ip4:192.0.2.1); the record shown follows on the next \
             verification."
        ))
    }

    /// The settings that weaken a protection, each as the warning the server logs at start:
    /// they have their uses (tests, a trusted network) but should never be on by accident.
    pub fn risky_settings(&self) -> Vec<String> {
        let mut risky = Vec::new();
        if self.webhook_allow_private {
            risky.push(
                "TIDINGS_WEBHOOK_ALLOW_PRIVATE is on: webhook URLs may reach loopback and private addresses and \
                 use plain http, so any workspace can make this server POST into its own network (for tests \
                 and local trials only)"
                    .to_owned(),
            );
        }
        if self.delivery.mx_allow_private {
            risky.push(
                "TIDINGS_MX_ALLOW_PRIVATE is on: direct MX delivery may connect to loopback and private \
                 addresses, so a domain whose MX points there makes this server speak SMTP into its own \
                 network (for tests only)"
                    .to_owned(),
            );
        }
        let mta_sts = &self.delivery.mta_sts;
        if self.delivery.mode == Delivery::Mx && !mta_sts.enabled {
            risky.push(
                "TIDINGS_MTA_STS is off: direct MX delivery ignores recipient domains' MTA-STS policies, so mail \
                 to a domain that requires verified TLS may go in plain text or to a host it does not list"
                    .to_owned(),
            );
        }
        if let Some(ca_file) = &mta_sts.ca_file {
            risky.push(format!(
                "TIDINGS_MTA_STS_CA_FILE replaces the system's CA store for MTA-STS with the {} certificate(s) of \
                 {}: real domains' policy hosts and MX hosts, certified by public CAs, fail verification, so their \
                 policies are not found and mail under an enforce policy is deferred (for tests and private CAs)",
                ca_file.certificates.len(),
                ca_file.path.display()
            ));
        }
        if mta_sts.port != 443 {
            risky.push(format!(
                "TIDINGS_MTA_STS_PORT is {}: real domains serve their MTA-STS policy on port 443 only, so no \
                 policy is found (for tests only)",
                mta_sts.port
            ));
        }
        if let Some(addr) = self.metrics_listen.filter(|a| !a.ip().is_loopback()) {
            risky.push(format!(
                "TIDINGS_METRICS_LISTEN serves /metrics over plain HTTP on {addr}, a non-loopback address{}",
                if self.metrics_token.is_some() { ": the token crosses the network unencrypted" } else { "" }
            ));
        }
        if let Some(url) = self.public_url.as_ref().filter(|u| u.as_str().starts_with("http://")) {
            risky.push(format!(
                "TIDINGS_PUBLIC_URL is plain http ({url}): tracking links and pixels are fetched unencrypted"
            ));
        }
        if let Some(relay) = &self.delivery.smtp_relay
            && relay.scheme() == "smtp"
            && !relay.host_str().is_some_and(is_loopback_host)
        {
            risky.push(format!(
                "TIDINGS_SMTP_RELAY is smtp://{}: mail goes to the relay in plain text when it offers no \
                 STARTTLS (smtps:// is TLS always)",
                relay.host_str().unwrap_or_default()
            ));
        }
        risky
    }

    /// Where the outbox transport writes messages.
    pub fn outbox_dir(&self) -> PathBuf {
        self.data_dir.join("outbox")
    }

    /// Where a generated certificate is kept.
    pub fn generated_tls_dir(&self) -> PathBuf {
        self.data_dir.join("tls")
    }
}

#[cfg(test)]
mod tests;

/// `localhost` or a loopback address (`127.0.0.1`, `[::1]`).
fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
