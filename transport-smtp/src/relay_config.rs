//! [`RelayConfig`]: where the relay is (`TIDINGS_SMTP_RELAY`), how to secure the
//! connection to it, and the credentials, parsed from `smtp[s]://[user:pass@]host[:port]`.

use std::fmt;
use std::net::IpAddr;

use percent_encoding::percent_decode_str;
use tidings_core::secret::Secret;
use url::{Host, Url};

use crate::config::{ConfigError, PoolSettings, Timeouts};

/// How the connection to the relay is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelaySecurity {
    /// `smtp://`: plain TCP, upgraded with STARTTLS when the relay offers it. The relay's
    /// certificate is verified; a failed handshake fails the delivery (no plaintext
    /// fallback, which would make verification pointless). Default port 587.
    StartTls,
    /// `smtps://`: TLS from the first byte (RFC 8314), certificate verified. Default port 465.
    ImplicitTls,
}

/// User name and password for AUTH PLAIN or LOGIN, percent-decoded from the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayCredentials {
    /// The user name.
    pub username: String,
    /// The password; `Debug` hides it.
    pub password: Secret<String>,
}

/// A parsed relay URL. `Display` shows it without the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayEndpoint {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// Port.
    pub port: u16,
    /// STARTTLS or implicit TLS.
    pub security: RelaySecurity,
    /// Credentials, when the URL has them.
    pub credentials: Option<RelayCredentials>,
}

impl RelayEndpoint {
    /// Parses `smtp://[user:pass@]host[:port]` or `smtps://…`. User and password are
    /// percent-decoded (write `@` as `%40`, `:` as `%3A`). No path, query or fragment.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        // url's own message never quotes the input, so it cannot leak the password.
        let url = Url::parse(text)
            .map_err(|error| ConfigError::RelayUrl(format!("not a URL such as smtp://user:pass@host:587 ({error})")))?;
        Self::from_url(&url)
    }

    /// The endpoint a parsed URL names (the server's config keeps the `Url`).
    pub fn from_url(url: &Url) -> Result<Self, ConfigError> {
        let bad = |reason: &str| ConfigError::RelayUrl(reason.to_owned());
        let (security, default_port) = match url.scheme() {
            "smtp" => (RelaySecurity::StartTls, 587),
            "smtps" => (RelaySecurity::ImplicitTls, 465),
            _ => return Err(bad("the scheme must be smtp or smtps")),
        };
        let host = match url.host() {
            Some(Host::Domain(name)) if !name.is_empty() => name.to_owned(),
            Some(Host::Ipv4(ip)) => ip.to_string(),
            Some(Host::Ipv6(ip)) => ip.to_string(),
            _ => return Err(bad("it must name a host, as in smtp://relay.example.com:587")),
        };
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(bad("it must be only smtp[s]://[user:pass@]host[:port], without a path or query"));
        }
        let username = decode(url.username(), "user name")?;
        let password = url.password().map(|p| decode(p, "password")).transpose()?;
        let credentials = match (username.is_empty(), password) {
            (true, None) => None,
            (false, Some(password)) => Some(RelayCredentials { username, password: Secret::new(password) }),
            (true, Some(_)) => return Err(bad("it has a password but no user name")),
            (false, None) => return Err(bad("it has a user name but no password (write user:password@host)")),
        };
        Ok(Self { host, port: url.port().unwrap_or(default_port), security, credentials })
    }

    /// `host:port`, `[v6]:port`: how receipts and errors name the relay.
    pub fn remote(&self) -> String {
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]:{}", self.port),
            _ => format!("{}:{}", self.host, self.port),
        }
    }

    /// Whether the relay is on this machine, where a password in clear text stays local.
    pub(crate) fn is_loopback(&self) -> bool {
        match self.host.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback(),
            Err(_) => self.host.eq_ignore_ascii_case("localhost"),
        }
    }
}

impl fmt::Display for RelayEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.security {
            RelaySecurity::StartTls => "smtp",
            RelaySecurity::ImplicitTls => "smtps",
        };
        match &self.credentials {
            Some(credentials) => write!(f, "{scheme}://{}:***@{}", credentials.username, self.remote()),
            None => write!(f, "{scheme}://{}", self.remote()),
        }
    }
}

fn decode(text: &str, what: &str) -> Result<String, ConfigError> {
    percent_decode_str(text)
        .decode_utf8()
        .map(|decoded| decoded.into_owned())
        .map_err(|_| ConfigError::RelayUrl(format!("the {what} is not UTF-8 once percent-decoded")))
}

/// Settings of [`RelayMailer`](crate::RelayMailer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayConfig {
    /// Where and how to connect.
    pub endpoint: RelayEndpoint,
    /// PEM certificates to trust for the relay in addition to the system's CA store (a
    /// private CA, or a test's). `None` (default): the system's store only.
    pub trusted_ca_pem: Option<String>,
    /// Send credentials to a relay that is neither loopback nor encrypted (it did not offer
    /// STARTTLS). Default `false`: such a delivery fails with a `Local` error instead of
    /// exposing the password on the network.
    pub allow_plaintext_auth: bool,
    /// Name sent with EHLO; `None`: this machine's host name.
    pub ehlo_name: Option<String>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Reuse and concurrency of connections to the relay.
    pub pool: PoolSettings,
}

impl RelayConfig {
    /// Defaults for everything but the endpoint.
    pub fn new(endpoint: RelayEndpoint) -> Self {
        Self {
            endpoint,
            trusted_ca_pem: None,
            allow_plaintext_auth: false,
            ehlo_name: None,
            timeouts: Timeouts::default(),
            pool: PoolSettings::default(),
        }
    }

    /// Defaults for everything but the endpoint, parsed from `text`.
    pub fn from_url(text: &str) -> Result<Self, ConfigError> {
        RelayEndpoint::parse(text).map(Self::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_default_by_scheme() {
        let plain = RelayEndpoint::parse("smtp://relay.example").unwrap();
        assert_eq!((plain.port, plain.security, plain.credentials), (587, RelaySecurity::StartTls, None));
        let tls = RelayEndpoint::parse("smtps://relay.example").unwrap();
        assert_eq!((tls.port, tls.security), (465, RelaySecurity::ImplicitTls));
        assert_eq!(RelayEndpoint::parse("smtp://relay.example:2525").unwrap().port, 2525);
    }

    #[test]
    fn credentials_are_percent_decoded() {
        let endpoint = RelayEndpoint::parse("smtp://me%40acme.test:p%40ss%3Aw%2Frd@relay.example:587").unwrap();
        let credentials = endpoint.credentials.unwrap();
        assert_eq!(credentials.username, "me@acme.test");
        assert_eq!(credentials.password.expose(), "p@ss:w/rd");
    }

    #[test]
    fn ipv6_hosts_lose_their_brackets_but_keep_them_in_the_remote_name() {
        let endpoint = RelayEndpoint::parse("smtp://[::1]:2525").unwrap();
        assert_eq!(endpoint.host, "::1");
        assert_eq!(endpoint.remote(), "[::1]:2525");
        assert!(endpoint.is_loopback());
        assert!(!RelayEndpoint::parse("smtp://relay.example").unwrap().is_loopback());
        assert!(RelayEndpoint::parse("smtp://LocalHost").unwrap().is_loopback());
    }

    #[test]
    fn malformed_urls_are_refused_without_quoting_the_password() {
        for bad in [
            "http://u:hunter2@relay.example",
            "smtp://u:hunter2@relay.example/path",
            "smtp://u:hunter2@relay.example?tls=required",
            "smtp://:hunter2@relay.example",
            "smtp://u@relay.example",
            "smtp://u:hunter2@",
            "not a url hunter2",
            "smtp://u:%FF%FE@relay.example",
        ] {
            let error = RelayEndpoint::parse(bad).expect_err(bad).to_string();
            assert!(!error.contains("hunter2"), "{error}");
            assert!(error.starts_with("invalid SMTP relay URL"), "{error}");
        }
    }

    #[test]
    fn display_and_debug_hide_the_password() {
        let endpoint = RelayEndpoint::parse("smtps://me:hunter2@relay.example").unwrap();
        assert_eq!(endpoint.to_string(), "smtps://me:***@relay.example:465");
        let config = RelayConfig::new(endpoint);
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
