//! [`HickoryDns`]: a stub resolver that asks one upstream (the system's resolvers or one
//! `ip:port`) and never caches, so a record published a moment ago is seen on the next check.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use async_trait::async_trait;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{Name, RData, RecordType};
use hickory_resolver::{ResolverBuilder, TokioResolver};
use tidings_core::domain_name::{DnsName, DomainName};
use tidings_core::ports::{DnsCheck, DnsError};

use crate::classify::{Outcome, classify};

/// Where lookups go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upstream {
    /// The system's resolvers (`/etc/resolv.conf` on Unix); its `timeout`/`attempts`
    /// options are replaced by [`Settings`], and its search list is never used (lookups are
    /// of fully qualified names).
    System,
    /// One recursive resolver (or, in tests, an authoritative server) at `ip:port`
    /// (`TIDINGS_DNS_SERVER`). Queried over UDP, falling back to TCP on the same port for
    /// truncated answers and when UDP fails.
    Server(SocketAddr),
}

impl std::fmt::Display for Upstream {
    /// `system` or `ip:port`, as logs name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::System => f.write_str("system"),
            Self::Server(addr) => addr.fmt(f),
        }
    }
}

/// How long to wait for the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// How long one try may take, UDP and any TCP fallback together. Default 5 s, as
    /// `resolv.conf`.
    pub timeout: Duration,
    /// How many times a query is tried in all before giving up (at least 1). Default 2.
    /// Answers (NXDOMAIN and NODATA included) are never retried; timeouts and failures are.
    pub attempts: usize,
}

impl Settings {
    /// The longest one lookup can take before it fails with `Timeout`: every try, plus one
    /// timeout of slack for hickory's own retry logic.
    pub fn deadline(&self) -> Duration {
        let tries = u32::try_from(self.attempts).unwrap_or(u32::MAX).saturating_add(1);
        self.timeout.saturating_mul(tries)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self { timeout: Duration::from_secs(5), attempts: 2 }
    }
}

/// Why a [`HickoryDns`] or a [`MailAuthChecker`](crate::MailAuthChecker) could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `timeout` is zero or `attempts` is zero: every lookup would fail at once.
    #[error("invalid DNS settings: {0}")]
    InvalidSettings(&'static str),
    /// The system's resolver configuration (`/etc/resolv.conf`) could not be read or has no
    /// name server; set an explicit server instead.
    #[error("cannot read the system's DNS resolver configuration: {0}")]
    SystemConfig(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// hickory rejected the configuration.
    #[error("cannot build the DNS resolver: {0}")]
    Build(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The [`DnsCheck`] adapter, and the MX/address lookups direct delivery needs. Cheap to
/// clone (the resolver is shared).
///
/// **No cache.** hickory's response cache is disabled (size 0, every TTL clamped to 0),
/// positive answers included: a user who has just published or corrected a record and clicks
/// verify must see DNS as it is now, not as it was at the previous check (a cached NXDOMAIN
/// or an old DKIM key could otherwise stick for the record's TTL, an hour by default). The
/// lookups are rare (one per check, one per destination domain per delivery) and the
/// upstream recursive resolver caches anyway; that cache is outside our control, which is
/// why the operator may point `TIDINGS_DNS_SERVER` at a resolver of their choice.
#[derive(Clone)]
pub struct HickoryDns {
    resolver: TokioResolver,
    /// Where lookups go, for logs.
    upstream: Upstream,
    /// An outer bound on one lookup: hickory bounds each attempt, this makes "never hang" a
    /// property of this crate rather than of hickory's retry logic.
    deadline: Duration,
}

impl fmt::Debug for HickoryDns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HickoryDns").field("upstream", &self.upstream).field("deadline", &self.deadline).finish()
    }
}

impl HickoryDns {
    /// The system's resolvers with default [`Settings`].
    pub fn system() -> crate::Result<Self> {
        Self::new(Upstream::System, Settings::default())
    }

    /// One server at `addr` (`TIDINGS_DNS_SERVER`) with default [`Settings`].
    pub fn with_server(addr: SocketAddr) -> crate::Result<Self> {
        Self::new(Upstream::Server(addr), Settings::default())
    }

    /// A resolver asking `upstream`, waiting as `settings` say.
    pub fn new(upstream: Upstream, settings: Settings) -> crate::Result<Self> {
        let resolver = build_resolver(upstream, settings)?;
        Ok(Self { resolver, upstream, deadline: settings.deadline() })
    }

    /// The mail exchangers of `domain` as (preference, host), host without the trailing dot,
    /// sorted by preference (ties by host, so the order is stable). Empty when the domain
    /// exists but has no MX records: the caller then delivers to its A/AAAA (RFC 5321 §5.1).
    /// A null MX (`0 .`, RFC 7505: "this domain accepts no mail") comes back as `(0, "")`,
    /// which the caller must treat as "do not deliver", not as "no MX".
    pub async fn mx_hosts(&self, domain: &DomainName) -> Result<Vec<(u16, String)>, DnsError> {
        let name = domain.as_str();
        let answers = self.lookup(name, RecordType::MX).await?;
        Ok(mx_answers(&answers))
    }

    /// The IPv4 and IPv6 addresses of `host` (an MX host or a domain without MX), IPv4
    /// first. Empty when the name exists without addresses. An IP literal comes back as is.
    /// The A and AAAA queries run concurrently, so this takes no longer than one lookup.
    pub async fn host_addrs(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let (v4, v6) = tokio::join!(self.lookup(host, RecordType::A), self.lookup(host, RecordType::AAAA));
        // A name with A records but no AAAA answers NODATA for AAAA, an empty list here; only
        // a failure of either query fails the whole lookup.
        let v4 = v4?.into_iter().filter_map(|data| match data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        });
        let v6 = v6?.into_iter().filter_map(|data| match data {
            RData::AAAA(aaaa) => Some(IpAddr::V6(aaaa.0)),
            _ => None,
        });
        Ok(v4.chain(v6).collect())
    }

    /// The answer records of type `record_type` at `name` (CNAMEs followed by hickory),
    /// with NODATA as an empty list and every failure classified for the port.
    async fn lookup(&self, name: &str, record_type: RecordType) -> Result<Vec<RData>, DnsError> {
        // Fully qualified, so the search list of resolv.conf never turns `example.com` into
        // `example.com.corp.internal`.
        let fqdn = match Name::from_ascii(format!("{}.", name.trim_end_matches('.'))) {
            Ok(fqdn) => fqdn,
            Err(error) => {
                return Err(DnsError::Failed {
                    name: name.to_owned(),
                    reason: format!("Tidings cannot look up this name: {error}"),
                });
            }
        };
        let result = match tokio::time::timeout(self.deadline, self.resolver.lookup(fqdn, record_type)).await {
            Ok(result) => result,
            Err(_elapsed) => {
                tracing::warn!(name, %record_type, upstream = %self.upstream, "DNS lookup exceeded its deadline");
                return Err(DnsError::Timeout(name.to_owned()));
            }
        };
        match result {
            Ok(lookup) => Ok(lookup
                .answers()
                .iter()
                .filter(|record| record.record_type() == record_type)
                .map(|record| record.data.clone())
                .collect()),
            Err(error) => match classify(name, &error) {
                Outcome::NoData => Ok(Vec::new()),
                Outcome::Error(dns_error) => {
                    if !matches!(dns_error, DnsError::NxDomain(_)) {
                        tracing::warn!(name, %record_type, upstream = %self.upstream, %error, "DNS lookup failed");
                    }
                    Err(dns_error)
                }
            },
        }
    }
}

/// The resolver every adapter of this crate uses ([`HickoryDns`], and mail-auth's inside
/// [`MailAuthChecker`](crate::MailAuthChecker)): asking `upstream`, waiting as `settings`
/// say, caching nothing.
pub(crate) fn build_resolver(upstream: Upstream, settings: Settings) -> crate::Result<TokioResolver> {
    if settings.timeout.is_zero() {
        return Err(ConfigError::InvalidSettings("the timeout must be more than zero"));
    }
    if settings.attempts == 0 {
        return Err(ConfigError::InvalidSettings("there must be at least one attempt"));
    }
    let mut builder = match upstream {
        Upstream::System => TokioResolver::builder_tokio().map_err(|error| ConfigError::SystemConfig(error.into()))?,
        Upstream::Server(addr) => {
            let mut udp = ConnectionConfig::udp();
            udp.port = addr.port();
            let mut tcp = ConnectionConfig::tcp();
            tcp.port = addr.port();
            let server = NameServerConfig::new(addr.ip(), true, vec![udp, tcp]);
            TokioResolver::builder_with_config(
                ResolverConfig::from_name_servers(vec![server]),
                TokioRuntimeProvider::default(),
            )
        }
    };
    configure(&mut builder, settings);
    builder.build().map_err(|error| ConfigError::Build(error.into()))
}

/// The resolver options every [`HickoryDns`] uses, whatever the upstream.
fn configure(builder: &mut ResolverBuilder<TokioRuntimeProvider>, settings: Settings) {
    let options: &mut ResolverOpts = builder.options_mut();
    // hickory bounds each try (UDP and TCP fallback together) by `timeout`, and its
    // `attempts` counts retries after the first try, not tries.
    options.timeout = settings.timeout;
    options.attempts = settings.attempts.saturating_sub(1);
    // No cache at all: see the type's docs. The size alone would do; the TTL clamps make it
    // hold even if a later hickory treats size 0 differently.
    options.cache_size = 0;
    options.positive_max_ttl = Some(Duration::ZERO);
    options.negative_max_ttl = Some(Duration::ZERO);
    // DNS only: a stray /etc/hosts entry must not decide where mail goes or whether a
    // domain verifies.
    options.use_hosts_file = ResolveHosts::Never;
    // A server that answers UDP badly (not only with truncation) gets a second chance on TCP.
    options.try_tcp_on_error = true;
}

/// A name as the port speaks it: ASCII, lower case, no trailing dot (the root is "").
fn host_text(name: &Name) -> String {
    let text = name.to_ascii().to_ascii_lowercase();
    text.strip_suffix('.').map(str::to_owned).unwrap_or(text)
}

/// Each TXT record's character-strings joined into one value.
///
/// The bytes are joined before decoding, so a UTF-8 character split across two 255-byte
/// strings survives; invalid UTF-8 is decoded lossily (U+FFFD), which is fine because every
/// record Tidings checks (SPF, DKIM, DMARC) is ASCII and a mangled foreign record still
/// reads as "not ours".
fn joined_txt(answers: &[RData]) -> Vec<String> {
    answers
        .iter()
        .filter_map(|data| match data {
            RData::TXT(txt) => {
                let bytes: Vec<u8> = txt.txt_data.iter().flat_map(|chunk| chunk.iter().copied()).collect();
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => None,
        })
        .collect()
}

/// The MX answers as (preference, exchange), sorted by preference.
fn mx_answers(answers: &[RData]) -> Vec<(u16, String)> {
    let mut hosts: Vec<(u16, String)> = answers
        .iter()
        .filter_map(|data| match data {
            RData::MX(mx) => Some((mx.preference, host_text(&mx.exchange))),
            _ => None,
        })
        .collect();
    hosts.sort();
    hosts
}

#[async_trait]
impl DnsCheck for HickoryDns {
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError> {
        let answers = self.lookup(name.as_str(), RecordType::TXT).await?;
        Ok(joined_txt(&answers))
    }

    async fn mx_records(&self, name: &DnsName) -> Result<Vec<(u16, String)>, DnsError> {
        let answers = self.lookup(name.as_str(), RecordType::MX).await?;
        Ok(mx_answers(&answers))
    }
}

#[cfg(test)]
mod tests {
    use hickory_resolver::proto::rr::rdata::TXT;

    use super::*;

    #[test]
    fn txt_strings_are_joined_per_record_before_decoding() {
        // "é" is two bytes, split across the string boundary.
        let split = TXT::from_bytes(vec![b"v=DKIM1; n=caf\xc3", b"\xa9; p=abc"]);
        let broken = TXT::from_bytes(vec![b"bad \xff byte"]);
        let texts = joined_txt(&[RData::TXT(split), RData::TXT(broken)]);
        assert_eq!(texts, ["v=DKIM1; n=café; p=abc", "bad \u{fffd} byte"]);
    }

    #[test]
    fn host_text_drops_the_trailing_dot_and_case() {
        assert_eq!(host_text(&Name::from_ascii("MX1.Example.com.").unwrap()), "mx1.example.com");
        assert_eq!(host_text(&Name::root()), "");
    }

    #[test]
    fn a_resolver_can_be_built_outside_a_runtime() {
        let addr: SocketAddr = "127.0.0.1:53".parse().unwrap();
        assert!(HickoryDns::with_server(addr).is_ok());
    }

    #[test]
    fn the_deadline_covers_every_try_and_some_slack() {
        let settings = Settings { timeout: Duration::from_millis(500), attempts: 2 };
        assert_eq!(settings.deadline(), Duration::from_millis(1_500));
        assert_eq!(Settings::default().deadline(), Duration::from_secs(15));
    }

    #[test]
    fn settings_that_would_fail_every_lookup_are_refused() {
        let addr: SocketAddr = "127.0.0.1:53".parse().unwrap();
        let zero_timeout = Settings { timeout: Duration::ZERO, attempts: 2 };
        assert!(matches!(HickoryDns::new(Upstream::Server(addr), zero_timeout), Err(ConfigError::InvalidSettings(_))));
        let zero_attempts = Settings { timeout: Duration::from_secs(1), attempts: 0 };
        assert!(matches!(HickoryDns::new(Upstream::Server(addr), zero_attempts), Err(ConfigError::InvalidSettings(_))));
    }
}
