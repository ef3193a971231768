//! Configuration: the `TIDINGS_*` settings of contract §9, read from the environment and from
//! an optional TOML file (same keys, lower-case without the prefix: `listen = "…"`), the
//! environment winning. Everything is parsed and checked here, once, at start; an error names
//! the variable and where it came from, and never echoes a secret.
//!
//! This is the only module that reads the environment (STYLE: no `std::env::var` below it).
//! Settings for features that later issues build (SMTP relay, delivery, MX port, retry
//! schedules, public URL, inbound SMTP, return path) are validated now so a deployment learns
//! of a typo at once, but nothing uses them yet: they live in [`LaterSettings`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tidings_core::dns_records::DEFAULT_SPF_MECHANISM;
use tidings_core::domain_name::DomainName;
use tidings_core::model::ApiKeyPlaintext;
use url::Url;

/// Every key, with its default and meaning, for `--help` (and the README table).
pub const HELP: &str = "\
CONFIGURATION (environment variables; a TOML file given by --config or TIDINGS_CONFIG may set
the same keys in lower case without the prefix, e.g. listen = \"127.0.0.1:8443\"; the
environment wins over the file):

  TIDINGS_DATA_DIR             ./data          sled store (<dir>/store), generated TLS files (<dir>/tls)
  TIDINGS_DATABASE_URL         unset           postgres://... (not built yet, issue #7: refused)
  TIDINGS_LISTEN               127.0.0.1:8443  HTTPS listener, IP:port (port 0 picks a free one)
  TIDINGS_TLS_CERT             unset           PEM certificate chain (with TIDINGS_TLS_KEY); unset: a
  TIDINGS_TLS_KEY              unset             self-signed certificate is made and kept in <dir>/tls
  TIDINGS_BOOTSTRAP_KEY        unset           first full key of a fresh store (tid_ + 40 letters/digits);
                                               unset: generated and printed once on stdout
  TIDINGS_DNS_SERVER           system          ip:port of the resolver used for domain checks
  TIDINGS_SPF_INCLUDE          ip4:127.0.0.1   SPF term(s) the domains' SPF record must contain,
                                               e.g. include:_spf.example.net
  TIDINGS_MAX_BODY_BYTES       10MiB           largest request body (bytes, or with KiB/MiB/GiB)
  TIDINGS_IDEMPOTENCY_WINDOW   24h             how long Idempotency-Keys are remembered (e.g. 90s, 12h)
  TIDINGS_WEBHOOK_ALLOW_PRIVATE false          allow webhook URLs on private addresses and plain http
  TIDINGS_LOG                  info            log filter, RUST_LOG syntax (e.g. info,tidings_http=debug)

Validated at start but not used yet (the delivery, webhook, tracking and bounce issues use them):
  TIDINGS_SMTP_RELAY           unset           smtp://[user:pass@]host:port or smtps://...
  TIDINGS_DELIVERY             outbox|relay    relay, mx or outbox (default relay if a relay is set)
  TIDINGS_MX_PORT              25              port for direct MX delivery
  TIDINGS_RETRY_SCHEDULE       contract §3     delivery retry delays, e.g. 1s,2s,4s
  TIDINGS_WEBHOOK_RETRY_SCHEDULE contract §7   webhook retry delays
  TIDINGS_PUBLIC_URL           https://<listen> base of tracking URLs
  TIDINGS_INBOUND_SMTP_LISTEN  unset           ip:port of the bounce/complaint listener
  TIDINGS_RETURN_PATH_DOMAIN   unset           domain of the per-message return path
";

/// Where a setting's text came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The process environment.
    Env,
    /// The TOML file at this path.
    File(PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Env => f.write_str("environment"),
            Self::File(path) => write!(f, "config file {}", path.display()),
        }
    }
}

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

/// How messages leave (contract §9 `TIDINGS_DELIVERY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Through `TIDINGS_SMTP_RELAY`.
    Relay,
    /// Directly to each recipient's MX.
    Mx,
    /// `.eml` files in `<data>/outbox`.
    Outbox,
}

/// Settings that later issues implement; validated, not yet used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaterSettings {
    /// `TIDINGS_SMTP_RELAY` (may hold a password: never log it whole).
    pub smtp_relay: Option<Url>,
    /// `TIDINGS_DELIVERY`.
    pub delivery: Delivery,
    /// `TIDINGS_MX_PORT`.
    pub mx_port: u16,
    /// `TIDINGS_RETRY_SCHEDULE`; `None`: contract §3's.
    pub retry_schedule: Option<Vec<Duration>>,
    /// `TIDINGS_WEBHOOK_RETRY_SCHEDULE`; `None`: contract §7's.
    pub webhook_retry_schedule: Option<Vec<Duration>>,
    /// `TIDINGS_PUBLIC_URL`; `None`: `https://<listen>`.
    pub public_url: Option<Url>,
    /// `TIDINGS_INBOUND_SMTP_LISTEN`.
    pub inbound_smtp_listen: Option<SocketAddr>,
    /// `TIDINGS_RETURN_PATH_DOMAIN`.
    pub return_path_domain: Option<DomainName>,
}

/// The server's validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `TIDINGS_DATA_DIR`.
    pub data_dir: PathBuf,
    /// `TIDINGS_LISTEN`.
    pub listen: SocketAddr,
    /// `TIDINGS_TLS_CERT` + `TIDINGS_TLS_KEY`; `None`: self-signed in the data dir.
    pub tls: Option<TlsFiles>,
    /// `TIDINGS_BOOTSTRAP_KEY`.
    pub bootstrap_key: Option<ApiKeyPlaintext>,
    /// `TIDINGS_DNS_SERVER`; `None`: the system resolver.
    pub dns_server: Option<SocketAddr>,
    /// `TIDINGS_SPF_INCLUDE`: the SPF term(s) domains must publish.
    pub spf_include: String,
    /// `TIDINGS_MAX_BODY_BYTES`.
    pub max_body_bytes: usize,
    /// `TIDINGS_IDEMPOTENCY_WINDOW`.
    pub idempotency_window: Duration,
    /// `TIDINGS_WEBHOOK_ALLOW_PRIVATE` (core already enforces it when webhooks are created).
    pub webhook_allow_private: bool,
    /// `TIDINGS_LOG`: a tracing `EnvFilter` directive.
    pub log: String,
    /// Settings of later issues.
    pub later: LaterSettings,
}

/// Raw setting texts: the file's, overridden by the environment's.
#[derive(Debug, Default)]
pub struct Sources {
    values: BTreeMap<&'static str, (String, Origin)>,
}

/// Every variable the server knows (the file uses them lower-case without `TIDINGS_`).
const KEYS: &[&str] = &[
    "TIDINGS_DATA_DIR",
    "TIDINGS_DATABASE_URL",
    "TIDINGS_LISTEN",
    "TIDINGS_TLS_CERT",
    "TIDINGS_TLS_KEY",
    "TIDINGS_BOOTSTRAP_KEY",
    "TIDINGS_DNS_SERVER",
    "TIDINGS_SPF_INCLUDE",
    "TIDINGS_MAX_BODY_BYTES",
    "TIDINGS_IDEMPOTENCY_WINDOW",
    "TIDINGS_WEBHOOK_ALLOW_PRIVATE",
    "TIDINGS_LOG",
    "TIDINGS_SMTP_RELAY",
    "TIDINGS_DELIVERY",
    "TIDINGS_MX_PORT",
    "TIDINGS_RETRY_SCHEDULE",
    "TIDINGS_WEBHOOK_RETRY_SCHEDULE",
    "TIDINGS_PUBLIC_URL",
    "TIDINGS_INBOUND_SMTP_LISTEN",
    "TIDINGS_RETURN_PATH_DOMAIN",
];

/// The variable naming the config file, for its own errors.
const CONFIG_VAR: &str = "TIDINGS_CONFIG";

impl Sources {
    /// Reads the TOML file (if any) and then `env` (a lookup such as `std::env::var`).
    /// Empty values count as unset.
    pub fn load(file: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut sources = Self::default();
        if let Some(path) = file {
            sources.read_file(path)?;
        }
        for &key in KEYS {
            if let Some(value) = env(key).filter(|v| !v.trim().is_empty()) {
                sources.values.insert(key, (value, Origin::Env));
            }
        }
        Ok(sources)
    }

    fn read_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let fail = |message: String| ConfigError::new(CONFIG_VAR, Some(Origin::File(path.to_owned())), message);
        let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read the file: {e}")))?;
        let table: toml::Table = text.parse().map_err(|e| fail(format!("not valid TOML: {e}")))?;
        for (name, value) in table {
            let key = KEYS
                .iter()
                .copied()
                .find(|k| k["TIDINGS_".len()..].eq_ignore_ascii_case(&name))
                .ok_or_else(|| fail(format!("unknown key `{name}`")))?;
            let text = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Array(items) => {
                    // Retry schedules read naturally as arrays: ["1s", "2s"].
                    let parts: Option<Vec<String>> = items.into_iter().map(|v| v.as_str().map(str::to_owned)).collect();
                    parts.ok_or_else(|| fail(format!("`{name}` must be an array of strings")))?.join(",")
                }
                _ => return Err(fail(format!("`{name}` must be a string, number or boolean"))),
            };
            if !text.trim().is_empty() {
                self.values.insert(key, (text, Origin::File(path.to_owned())));
            }
        }
        Ok(())
    }

    fn get(&self, key: &'static str) -> Option<(&str, &Origin)> {
        self.values.get(key).map(|(v, o)| (v.trim(), o))
    }

    /// Parses `key` with `parse` (whose error message is the reason); `None` if unset.
    fn parse<T>(
        &self,
        key: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some((text, origin)) => parse(text).map(Some).map_err(|m| ConfigError::new(key, Some(origin.clone()), m)),
        }
    }

    fn origin(&self, key: &'static str) -> Option<Origin> {
        self.get(key).map(|(_, o)| o.clone())
    }
}

impl Config {
    /// Reads and validates the configuration: the file (if any), then the environment.
    pub fn load(file: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_sources(&Sources::load(file, env)?)
    }

    /// Validates already-read settings.
    pub fn from_sources(s: &Sources) -> Result<Self, ConfigError> {
        if let Some((_, origin)) = s.get("TIDINGS_DATABASE_URL") {
            return Err(ConfigError::new(
                "TIDINGS_DATABASE_URL",
                Some(origin.clone()),
                "PostgreSQL storage is not built yet (issue #7); unset it to use the embedded store",
            ));
        }
        let data_dir =
            s.parse("TIDINGS_DATA_DIR", |t| Ok(PathBuf::from(t)))?.unwrap_or_else(|| PathBuf::from("./data"));
        let listen = s.parse("TIDINGS_LISTEN", socket_addr)?.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8443)));
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
        let spf_include =
            s.parse("TIDINGS_SPF_INCLUDE", spf_terms)?.unwrap_or_else(|| DEFAULT_SPF_MECHANISM.to_owned());
        let max_body_bytes = s.parse("TIDINGS_MAX_BODY_BYTES", byte_size)?.unwrap_or(10 * 1024 * 1024);
        let idempotency_window =
            s.parse("TIDINGS_IDEMPOTENCY_WINDOW", duration)?.unwrap_or(Duration::from_secs(24 * 3600));
        let webhook_allow_private = s.parse("TIDINGS_WEBHOOK_ALLOW_PRIVATE", boolean)?.unwrap_or(false);
        let log = s.parse("TIDINGS_LOG", log_filter)?.unwrap_or_else(|| "info".to_owned());

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
        let later = LaterSettings {
            smtp_relay,
            delivery,
            mx_port: s.parse("TIDINGS_MX_PORT", port)?.unwrap_or(25),
            retry_schedule: s.parse("TIDINGS_RETRY_SCHEDULE", schedule)?,
            webhook_retry_schedule: s.parse("TIDINGS_WEBHOOK_RETRY_SCHEDULE", schedule)?,
            public_url: s.parse("TIDINGS_PUBLIC_URL", public_url)?,
            inbound_smtp_listen: s.parse("TIDINGS_INBOUND_SMTP_LISTEN", socket_addr)?,
            return_path_domain: s
                .parse("TIDINGS_RETURN_PATH_DOMAIN", |t| DomainName::parse(t).map_err(|e| format!("`{t}`: {e}")))?,
        };
        Ok(Self {
            data_dir,
            listen,
            tls,
            bootstrap_key,
            dns_server,
            spf_include,
            max_body_bytes,
            idempotency_window,
            webhook_allow_private,
            log,
            later,
        })
    }

    /// Where the sled store lives.
    pub fn store_dir(&self) -> PathBuf {
        self.data_dir.join("store")
    }

    /// Where a generated certificate is kept.
    pub fn generated_tls_dir(&self) -> PathBuf {
        self.data_dir.join("tls")
    }
}

fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| format!("`{text}` is not an IP address and port such as 127.0.0.1:8443 or [::1]:8443"))
}

fn port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("`{text}` is not a port number (1-65535)")),
    }
}

fn boolean(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean (true or false)")),
    }
}

/// `90s`, `500ms`, `24h`, `1h30m`, `2d`: one or more number-unit pairs, more than zero in all.
pub fn duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration such as 500ms, 90s, 15m, 24h or 1h30m");
    let mut total = Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let number: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86_400),
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        let part = unit.checked_mul(u32::try_from(number).map_err(|_| bad())?).ok_or_else(bad)?;
        total = total.checked_add(part).ok_or_else(bad)?;
    }
    if total.is_zero() {
        return Err(format!("`{text}` must be longer than zero"));
    }
    Ok(total)
}

/// Comma-separated durations, at least one.
fn schedule(text: &str) -> Result<Vec<Duration>, String> {
    text.split(',').map(|part| duration(part.trim())).collect()
}

/// A byte count, optionally with `KiB`, `MiB` or `GiB`.
fn byte_size(text: &str) -> Result<usize, String> {
    let bad = || format!("`{text}` is not a size in bytes such as 1048576, 512KiB or 10MiB");
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let number: usize = text[..split].parse().map_err(|_| bad())?;
    let unit: usize = match text[split..].trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return Err(bad()),
    };
    match number.checked_mul(unit) {
        Some(0) => Err(format!("`{text}` must be more than zero")),
        Some(n) => Ok(n),
        None => Err(bad()),
    }
}

/// SPF terms the generated record asks for. Core appends `~all`, so a qualifier-only
/// `all` here would end the record early; `v=spf1` would duplicate the version.
fn spf_terms(text: &str) -> Result<String, String> {
    const MECHANISMS: &[&str] = &["ip4", "ip6", "include", "a", "mx", "exists", "ptr"];
    for term in text.split_whitespace() {
        let bare = term.trim_start_matches(['+', '-', '~', '?']);
        let name = bare.split([':', '/']).next().unwrap_or_default();
        let known = MECHANISMS.iter().any(|m| m.eq_ignore_ascii_case(name));
        if !known || !term.chars().all(|c| c.is_ascii_graphic()) {
            return Err(format!(
                "`{term}` is not an SPF mechanism such as include:_spf.example.net, ip4:192.0.2.0/24 or ip6:2001:db8::/32"
            ));
        }
    }
    Ok(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(text)
        .map(|_| text.to_owned())
        .map_err(|e| format!("`{text}` is not a log filter such as info or info,tidings_http=debug: {e}"))
}

fn delivery(text: &str) -> Result<Delivery, String> {
    match text.to_ascii_lowercase().as_str() {
        "relay" => Ok(Delivery::Relay),
        "mx" => Ok(Delivery::Mx),
        "outbox" => Ok(Delivery::Outbox),
        _ => Err(format!("`{text}` is not one of relay, mx, outbox")),
    }
}

/// The relay URL may carry a password, so errors describe it without quoting it.
fn smtp_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("not a URL such as smtp://user:pass@host:587 ({e})"))?;
    if !matches!(url.scheme(), "smtp" | "smtps") {
        return Err(format!("scheme must be smtp or smtps, not {}", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host, as in smtp://host:587".to_owned());
    }
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err("must be only smtp[s]://[user:pass@]host[:port]".to_owned());
    }
    Ok(url)
}

fn public_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "https" | "http") || url.host_str().is_none() {
        return Err(format!("`{text}` must be an http(s) URL with a host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{text}` must not have a query or fragment"));
    }
    Ok(url)
}

#[cfg(test)]
mod tests;
