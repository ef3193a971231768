//! [`MxMailer`]: direct delivery to the recipient domain's mail exchangers, and the
//! [`MxLookup`] port it resolves routes with.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use lettre::transport::smtp::client::{Certificate, CertificateStore, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use tidings_core::domain_name::DomainName;
use tidings_core::ports::{DnsError, Mailer, OutboundEmail, SendError, SendReceipt};
use tidings_core::shaping::{ShapingTable, SiteKey, SiteLimits, TlsRequirement};
use tidings_dns::HickoryDns;

use rustls_pki_types::CertificateDer;
use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::crypto::aws_lc_rs;

use crate::attempt::{self, AttemptError, Delivered, Opportunistic};
use crate::broken_tls::{BROKEN_TLS_LIFETIME, BrokenTls, MAX_BROKEN_TLS_HOSTS};
use crate::config::{ConfigError, MxConfig, PoolSettings, client_id, human};
use crate::mta_sts::{ActivePolicy, Mode, MtaSts, TrustRoots};
use crate::mx_cache::{MAX_CACHED_DOMAINS, MX_ANSWER_LIFETIME, MxCache, MxRecords};
use crate::mx_guard;
use crate::pool::{Destinations, HostPool};
use crate::session::{Connector, Target, TlsAudit, TlsOutcome, TlsPlan};

/// The DNS lookups direct delivery needs; implemented for [`HickoryDns`], and by fakes in
/// unit tests.
#[async_trait]
pub trait MxLookup: Send + Sync {
    /// MX records as (preference, host), host without trailing dot; empty when the domain
    /// has none; a null MX as `(0, "")`.
    async fn mx_hosts(&self, domain: &DomainName) -> Result<Vec<(u16, String)>, DnsError>;
    /// The host's IPv4 and IPv6 addresses; empty when it has none.
    async fn host_addrs(&self, host: &str) -> Result<Vec<IpAddr>, DnsError>;
}

#[async_trait]
impl MxLookup for HickoryDns {
    async fn mx_hosts(&self, domain: &DomainName) -> Result<Vec<(u16, String)>, DnsError> {
        HickoryDns::mx_hosts(self, domain).await
    }

    async fn host_addrs(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        HickoryDns::host_addrs(self, host).await
    }
}

/// Delivers each message to its recipient's MX hosts, reusing connections per host and
/// opening at most [`PoolSettings::max_connections`] to any one host (with shaping, the
/// limits are per site instead: **Sites** below).
///
/// **Routing** follows RFC 5321 §5.1: the MX records in preference order (hosts of equal
/// preference rotated per message, to spread load), or the domain itself when it has none.
/// A null MX (RFC 7505) or a domain that does not exist is
/// [`SendError::NoMailServer`]. Each host's addresses are resolved here and the connection
/// goes to the address, the host name being kept for TLS SNI, receipts and logs
/// (`mx1.example.net[192.0.2.1]:25`).
///
/// **Only public addresses** unless [`MxConfig::allow_private`]: an address that is loopback,
/// private, link-local or otherwise not globally routable is never dialled, and the connected
/// socket's peer is checked again (`mx_guard`). When every address of every MX host is
/// refused, the delivery fails with [`SendError::NoMailServer`] naming them.
///
/// **Next host** when one cannot take the message at all: no address, connection refused
/// or timed out, a TLS failure, any non-2xx greeting or EHLO reply; at most
/// [`MxConfig::max_addresses`] addresses per message. Once a transaction has started
/// (MAIL), the host's answer is final for this delivery, 4xx included: core schedules the
/// retry. When every host failed, the error lists why each did.
///
/// **TLS is opportunistic and unverified** unless a policy (MTA-STS, or the site's shaping)
/// says otherwise: STARTTLS
/// whenever offered, any certificate accepted, and a host whose STARTTLS fails is tried
/// again in plaintext. Between MTAs a certificate proves nothing without a policy saying
/// which name to expect (MTA-STS, RFC 8461, below; DANE, RFC 7672, is not implemented),
/// and an attacker able to intercept can strip STARTTLS from the EHLO reply anyway. Refusing plaintext would lose
/// mail to the many servers with self-signed or mismatched certificates and gain nothing
/// against an active attacker; encryption still defeats passive eavesdropping. Postfix's
/// `smtp_tls_security_level = may` behaves the same way. A host whose TLS handshake failed
/// is remembered for an hour (at most 10,000 hosts, the oldest failure forgotten first), and
/// opportunistic deliveries to it go straight to plaintext meanwhile, without STARTTLS;
/// never one that requires TLS.
///
/// **Receipts say how the connection was secured** ([`SendReceipt::tls`]): plaintext, or
/// TLS with the certificate verified (required TLS), judged (with MTA-STS on, as `enforce`
/// would: verified or invalid) or not verified (opportunistic TLS otherwise).
///
/// **MTA-STS** ([`MxMailer::with_mta_sts`]): when the recipient domain's policy is in mode
/// `enforce`, only the MX hosts it lists are tried, each over STARTTLS with a certificate
/// valid for the host's name, without the plaintext retry; a host that cannot is skipped
/// like an unreachable one, and when none took the message the delivery fails with
/// [`SendError::Unreachable`] (a retry, as RFC 8461 §5.1 asks) naming the policy. Those
/// connections have pools of their own, so a connection opened opportunistically never
/// carries mail the policy covers. Mode `testing`: delivered as without a policy, and when
/// the host that took the message would have failed `enforce` (not listed by the policy, no
/// STARTTLS, or a certificate not valid for its name) a warning names the policy and what
/// failed. Mode `none` or no policy: as above.
///
/// **Sites** ([`MxMailer::with_shaping`]; docs/decisions.md, "Direct delivery by site"):
/// each recipient domain belongs to the site its MX hosts roll up to in the
/// [`ShapingTable`] ([`Mailer::site`] names it for the delivery worker, which admits
/// deliveries by site across nodes), and on this node the site's limits replace the pool
/// settings for its hosts: connections open to all its hosts together, idle ones and the
/// MTA-STS `enforce` ones included, never exceed its `connection_limit` (a new connection
/// needed at the cap closes an idle one to another of its hosts rather than wait), and a
/// connection carries at most its `max_deliveries_per_connection` messages. A site whose TLS
/// is `required` gets STARTTLS with a certificate valid for the host's name (the roots given
/// to [`MxMailer::with_mta_sts`], else the system's), without the plaintext retry; a host
/// that cannot is skipped like an unreachable one, and when none took the message the error
/// names the site's shaping. The MX answer is kept 5 minutes (for at most 10,000 domains),
/// so that naming the site and routing the delivery look it up once. Without shaping,
/// every MX host is its own destination under [`PoolSettings`], and MX records are looked
/// up on every delivery.
///
/// [`PoolSettings::max_connections`]: crate::PoolSettings::max_connections
pub struct MxMailer {
    dns: Arc<dyn MxLookup>,
    config: MxConfig,
    hello: ClientId,
    destinations: Destinations,
    sts: Option<Sts>,
    shaping: Option<Shaping>,
    /// The system's CA certificates, read on the first verified connection that is not
    /// under MTA-STS (whose roots are [`Sts::roots`]).
    system_roots: OnceLock<Vec<Certificate>>,
    /// Hosts whose TLS handshake failed lately: opportunistic deliveries skip STARTTLS.
    broken_tls: BrokenTls,
}

/// Delivery by site as the mailer applies it.
struct Shaping {
    table: Arc<ShapingTable>,
    /// The MX answers both [`Mailer::site`] and the delivery read.
    mx: MxCache,
}

/// The site a delivery goes to, with shaping.
struct Site<'a> {
    key: SiteKey,
    limits: &'a SiteLimits,
}

/// A delivery that must use TLS with a verified certificate, and what requires it.
struct TlsRequired {
    /// "the MTA-STS policy of example.com (id 1)", "the shaping of site .google.com".
    by: String,
    /// The requirement's own words for the final error.
    terms: &'static str,
}

/// MTA-STS as the mailer applies it.
struct Sts {
    policies: Arc<MtaSts>,
    /// The roots an MX host's certificate must chain to under an `enforce` policy: the
    /// system's store read once here, not at each connection (lettre's `Default` store would
    /// read every CA file again for each one), or the roots given.
    roots: Vec<Certificate>,
    /// The same roots, judging certificates under a `testing` policy; `None` when there
    /// are none.
    verifier: Option<Arc<WebPkiServerVerifier>>,
}

/// The system's CA certificates; unreadable or unusable ones are logged and left out (as
/// lettre's own `Default` store does).
fn system_roots() -> Vec<CertificateDer<'static>> {
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::warn!(%error, "cannot read some of the system's CA certificates");
    }
    if native.certs.is_empty() {
        tracing::warn!("no trusted CA certificates: mail under an MTA-STS enforce policy cannot be delivered");
    }
    native.certs
}

/// A verifier trusting `roots` (those rustls can use), or `None` when none is usable.
fn verifier(roots: &[CertificateDer<'static>]) -> Option<Arc<WebPkiServerVerifier>> {
    let mut store = RootCertStore::empty();
    let (_added, _unusable) = store.add_parsable_certificates(roots.iter().cloned());
    WebPkiServerVerifier::builder_with_provider(Arc::new(store), Arc::new(aws_lc_rs::default_provider())).build().ok()
}

/// The `enforce` policy a delivery is under.
struct Enforced<'a> {
    active: &'a ActivePolicy,
    /// "the MTA-STS policy of example.com (id 1)".
    name: String,
}

impl std::fmt::Debug for MxMailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MxMailer").field("config", &self.config).finish_non_exhaustive()
    }
}

impl MxMailer {
    /// A mailer asking `dns` for routes.
    pub fn new(dns: Arc<dyn MxLookup>, config: MxConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let hello = client_id(config.ehlo_name.as_deref())?;
        let destinations = Destinations::new(config.pool, config.max_destinations);
        Ok(Self {
            dns,
            config,
            hello,
            destinations,
            sts: None,
            shaping: None,
            system_roots: OnceLock::new(),
            broken_tls: BrokenTls::new(BROKEN_TLS_LIFETIME, MAX_BROKEN_TLS_HOSTS),
        })
    }

    /// The same mailer, delivering by site under `table` (see the type's docs): it answers
    /// [`Mailer::site`], and caps connections and messages per connection by site on this
    /// node, and requires TLS where the site does.
    pub fn with_shaping(mut self, table: Arc<ShapingTable>) -> Self {
        self.shaping = Some(Shaping { table, mx: MxCache::new(MX_ANSWER_LIFETIME, MAX_CACHED_DOMAINS) });
        self
    }

    /// The same mailer, applying the MTA-STS policies `policies` finds (see the type's
    /// docs); MX certificates under an `enforce` policy must chain to `roots`.
    pub fn with_mta_sts(mut self, policies: Arc<MtaSts>, roots: &TrustRoots) -> Result<Self, ConfigError> {
        let (roots, verifier) = match roots {
            TrustRoots::System => {
                let system = system_roots();
                let verifier = verifier(&system);
                let roots = system.into_iter().filter_map(|der| Certificate::from_der(der.to_vec()).ok()).collect();
                (roots, verifier)
            }
            TrustRoots::Only(certificates) => {
                let roots = certificates
                    .iter()
                    .map(|der| Certificate::from_der(der.to_vec()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|error| ConfigError::CaCertificate(error.into()))?;
                (roots, verifier(certificates))
            }
        };
        self.sts = Some(Sts { policies, roots, verifier });
        Ok(self)
    }

    /// The policy of `domain` that asks something of this delivery (mode `enforce` or
    /// `testing`), if it has one.
    async fn policy(&self, domain: &DomainName) -> Option<ActivePolicy> {
        let active = self.sts.as_ref()?.policies.policy_for(domain).await?;
        match active.policy.mode {
            Mode::Enforce | Mode::Testing => Some(active),
            Mode::None => None,
        }
    }

    /// `domain`'s MX records: through the cache with shaping, else asked each time.
    async fn mx_records(&self, domain: &DomainName) -> Result<MxRecords, DnsError> {
        match &self.shaping {
            Some(shaping) => shaping.mx.mx_hosts(self.dns.as_ref(), domain, Instant::now()).await,
            None => self.dns.mx_hosts(domain).await,
        }
    }

    async fn deliver(&self, email: &OutboundEmail, failures: &Mutex<Vec<String>>) -> Result<SendReceipt, SendError> {
        let domain = email.envelope_to.domain();
        let records = self.mx_records(domain).await;
        let site = match (&self.shaping, &records) {
            (Some(shaping), Ok(records)) => {
                let (key, limits) = shaping.table.site_for(records, domain);
                Some(Site { key, limits })
            }
            _ => None,
        };
        let route = route_from(records, domain, email.message_id.ulid().random())?;
        let note = |text: String| failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(text);
        let active = self.policy(domain).await;
        let (enforced, testing) = match &active {
            Some(active) if active.policy.mode == Mode::Enforce => {
                (Some(Enforced { active, name: format!("the MTA-STS policy of {domain} (id {})", active.id) }), None)
            }
            Some(active) => (None, Some(active)),
            None => (None, None),
        };
        // MTA-STS names itself first: its terms are the stricter (listed hosts only).
        let tls_required = match (&enforced, &site) {
            (Some(enforced), _) => Some(TlsRequired {
                by: enforced.name.clone(),
                terms: "mode enforce: TLS with a valid certificate required",
            }),
            (None, Some(site)) if site.limits.tls == TlsRequirement::Required => Some(TlsRequired {
                by: format!("the shaping of site {}", site.key),
                terms: "TLS required: STARTTLS with a valid certificate",
            }),
            (None, _) => None,
        };
        let hosts: Vec<&String> = match &enforced {
            None => route.hosts.iter().collect(),
            Some(enforced) => {
                let (listed, unlisted): (Vec<&String>, Vec<&String>) =
                    route.hosts.iter().partition(|host| enforced.active.policy.allows(host));
                if listed.is_empty() {
                    let unlisted = unlisted.iter().map(|host| host.as_str()).collect::<Vec<_>>().join(", ");
                    return Err(SendError::Unreachable {
                        reason: format!(
                            "{} (mode enforce) lists none of the mail servers of {domain} ({unlisted}), so none was tried",
                            enforced.name
                        ),
                    });
                }
                for host in unlisted {
                    note(format!("{host}: not listed by {}, not tried", enforced.name));
                }
                listed
            }
        };
        let mut budget = self.config.max_addresses;
        let mut addressed = false;
        // Whether the guard refused an address: when it refused every one and every host's
        // lookup answered, no retry can help (short of the operator's setting), so the
        // recipient fails.
        let mut guarded = false;
        let mut lookup_failed = false;
        // When every server tried answered (a 4xx/5xx greeting or EHLO), their reply is the
        // outcome; if any could not be reached, the delivery is worth retrying.
        let mut last_rejection = None;
        let mut all_rejected = true;
        for host in hosts {
            let addrs = match self.dns.host_addrs(host).await {
                Ok(addrs) => addrs,
                Err(error) => {
                    note(format!("{host}: {error}"));
                    lookup_failed = true;
                    continue;
                }
            };
            if addrs.is_empty() {
                note(format!("{host}: no A or AAAA records"));
                continue;
            }
            let addrs: Vec<IpAddr> = addrs
                .into_iter()
                .filter(|&ip| match mx_guard::check(ip, self.config.allow_private) {
                    Ok(()) => true,
                    Err(refused) => {
                        note(format!("{host}: {refused}"));
                        guarded = true;
                        false
                    }
                })
                .collect();
            if addrs.is_empty() {
                continue;
            }
            addressed = true;
            let pool = self.pool(host, enforced.is_some(), site.as_ref());
            for ip in addrs {
                if budget == 0 {
                    break;
                }
                budget -= 1;
                let addr = SocketAddr::new(ip, self.config.port);
                let connector = match &tls_required {
                    None => self.connector(host, addr)?,
                    Some(required) => self.enforcing_connector(host, addr, &required.by)?,
                };
                // Required TLS never falls back to plaintext, nor asks the broken-TLS memory.
                let opportunistic = Opportunistic { host, broken: &self.broken_tls };
                let opportunistic = tls_required.is_none().then_some(&opportunistic);
                match attempt::deliver(&pool, &connector, opportunistic, email).await {
                    Ok(delivered) => {
                        if let Some(testing) = testing {
                            report_testing(domain, testing, host, &delivered);
                        }
                        return Ok(delivered.receipt);
                    }
                    Err(AttemptError::Transaction(error)) => return Err(error),
                    Err(AttemptError::Session(error)) => {
                        note(error.to_string());
                        if matches!(error, SendError::Rejected { .. }) {
                            last_rejection = Some(error);
                        } else {
                            all_rejected = false;
                        }
                    }
                }
            }
        }
        if !addressed && guarded && !lookup_failed {
            let failures = failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("; ");
            return Err(SendError::NoMailServer {
                reason: format!(
                    "no mail server of {domain} has a public address, so none was connected to: {failures}"
                ),
            });
        }
        if !addressed && route.implicit {
            return Err(SendError::NoMailServer {
                reason: format!("{domain} has no MX records and no A or AAAA records, so it cannot receive mail"),
            });
        }
        match last_rejection {
            Some(rejection) if all_rejected => Err(rejection),
            _ => {
                let failures = failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("; ");
                let under = match &tls_required {
                    None => String::new(),
                    Some(required) => format!(" under {} ({})", required.by, required.terms),
                };
                Err(SendError::Unreachable {
                    reason: format!("no mail server of {domain} took the message{under}: {failures}"),
                })
            }
        }
    }

    /// The pool of connections to `host`: those that met an MTA-STS policy (`sts`) apart
    /// from opportunistic ones, and with a site, among the site's pools under its limits.
    fn pool(&self, host: &str, sts: bool, site: Option<&Site<'_>>) -> Arc<HostPool> {
        let name = if sts { format!("{host} (MTA-STS)") } else { host.to_owned() };
        match site {
            None => self.destinations.get(&name),
            Some(site) => {
                let settings = PoolSettings {
                    max_connections: usize::try_from(site.limits.connection_limit).unwrap_or(usize::MAX),
                    max_messages_per_connection: site.limits.max_deliveries_per_connection,
                    idle_timeout: self.config.pool.idle_timeout,
                };
                self.destinations.get_in_site(&name, &site.key, settings)
            }
        }
    }

    /// The roots a verified MX certificate must chain to: MTA-STS's when given, else the
    /// system's.
    fn verified_roots(&self) -> &[Certificate] {
        match &self.sts {
            Some(sts) => &sts.roots,
            None => self.system_roots.get_or_init(|| {
                system_roots().into_iter().filter_map(|der| Certificate::from_der(der.to_vec()).ok()).collect()
            }),
        }
    }

    /// How to reach `host` at `addr`: opportunistic STARTTLS, any certificate, SNI `host`.
    /// With MTA-STS on, each new session's TLS is judged as `enforce` would (for a
    /// `testing` policy's report); every such session is, so that one pooled for a domain
    /// without a policy still has its outcome when it carries mail under one.
    fn connector(&self, host: &str, addr: SocketAddr) -> Result<Connector, SendError> {
        let parameters = TlsParameters::builder(host.to_owned())
            .certificate_store(CertificateStore::None)
            .dangerous_accept_invalid_certs(true)
            .dangerous_accept_invalid_hostnames(true)
            .build_rustls()
            .map_err(|error| SendError::Local { reason: format!("cannot set up TLS for {host}: {error}") })?;
        let mut connector = self.connector_with(host, addr, TlsPlan::StartTls { parameters, verifies: false });
        if let Some(sts) = &self.sts {
            connector.audit = Some(TlsAudit { name: host.to_owned(), verifier: sts.verifier.clone() });
        }
        Ok(connector)
    }

    /// How to reach `host` at `addr` under an `enforce` policy or a site requiring TLS
    /// (`required_by` names it): STARTTLS required, the certificate verified for `host`.
    fn enforcing_connector(&self, host: &str, addr: SocketAddr, required_by: &str) -> Result<Connector, SendError> {
        let mut builder = TlsParameters::builder(host.to_owned()).certificate_store(CertificateStore::None);
        for root in self.verified_roots() {
            builder = builder.add_root_certificate(root.clone());
        }
        let parameters = builder
            .build_rustls()
            .map_err(|error| SendError::Local { reason: format!("cannot set up TLS for {host}: {error}") })?;
        let plan = TlsPlan::RequireStartTls { parameters, required_by: required_by.to_owned() };
        Ok(self.connector_with(host, addr, plan))
    }

    fn connector_with(&self, host: &str, addr: SocketAddr, tls: TlsPlan) -> Connector {
        Connector {
            target: Target::Addr(addr),
            remote: format!("{host}[{}]:{}", addr.ip(), addr.port()),
            tls,
            credentials: None,
            plaintext_auth_allowed: false,
            hello: self.hello.clone(),
            timeouts: self.config.timeouts,
            public_peer_only: !self.config.allow_private,
            audit: None,
        }
    }
}

#[async_trait]
impl Mailer for MxMailer {
    async fn send(&self, email: &OutboundEmail) -> Result<SendReceipt, SendError> {
        let total = self.config.timeouts.total;
        // What failed so far survives the timeout, so the error can say why it took so long.
        let failures = Mutex::new(Vec::new());
        match tokio::time::timeout(total, self.deliver(email, &failures)).await {
            Ok(result) => result,
            Err(_elapsed) => {
                let failures = failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let before =
                    if failures.is_empty() { String::new() } else { format!(" after {}", failures.join("; ")) };
                Err(SendError::Unreachable {
                    reason: format!(
                        "gave up after {} (the time allowed for one delivery) delivering to {}{before}",
                        human(total),
                        email.envelope_to.domain()
                    ),
                })
            }
        }
    }

    /// The site `domain`'s MX hosts roll up to, with shaping; `None` without shaping or when
    /// the MX lookup fails (the delivery then finds out, and is retried as any other). The
    /// answer is kept for the delivery that follows.
    async fn site(&self, domain: &DomainName) -> Option<SiteKey> {
        let shaping = self.shaping.as_ref()?;
        let records = shaping.mx.mx_hosts(self.dns.as_ref(), domain, Instant::now()).await.ok()?;
        Some(shaping.table.site_for(&records, domain).0)
    }

    /// The pools' idle timeout. An idle connection is closed by the reaper, which runs once
    /// per idle timeout, so it may stay open up to twice that: the worker keeps the lease
    /// that long.
    fn idle_connection_lifetime(&self) -> Duration {
        self.config.pool.idle_timeout
    }
}

/// Logs what of a delivery under a `testing` policy (`active`) to `host` would have failed
/// in mode `enforce`: a warning naming the policy and each failure, or a debug line when
/// nothing would have (RFC 8461 §5: in mode `testing` the outcome is reported, the mail
/// delivered all the same).
fn report_testing(domain: &DomainName, active: &ActivePolicy, host: &str, delivered: &Delivered) {
    let remote = &delivered.receipt.remote;
    let mut failures = Vec::new();
    if !active.policy.allows(host) {
        failures.push(format!("{host} is not among the MX hosts the policy lists"));
    }
    match &delivered.tls_outcome {
        Some(TlsOutcome::Verified) | None => {}
        Some(TlsOutcome::InvalidCertificate(why)) => {
            failures.push(format!("the certificate of {remote} is not valid for {host}: {why}"));
        }
        Some(TlsOutcome::NoStartTls) => failures.push(format!("{remote} does not offer STARTTLS")),
        Some(TlsOutcome::StartTlsFailed(why)) => failures.push(format!("STARTTLS with {remote} failed: {why}")),
    }
    let id = &active.id;
    if failures.is_empty() {
        tracing::debug!(%domain, policy_id = %id, %remote, "delivered as the MTA-STS policy in mode testing asks");
    } else {
        let failed = failures.join("; ");
        tracing::warn!(
            %domain, policy_id = %id, %remote,
            "delivered under the MTA-STS policy of {domain} (id {id}) in mode testing, which mode enforce would have refused: {failed}"
        );
    }
}

/// The hosts to try for one domain.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Route {
    /// In the order to try them.
    pub(crate) hosts: Vec<String>,
    /// No MX records: the domain itself is the only host (RFC 5321 §5.1).
    pub(crate) implicit: bool,
}

/// Asks `dns` for `domain`'s route; `seed` rotates hosts of equal preference.
#[cfg(test)]
pub(crate) async fn route(dns: &dyn MxLookup, domain: &DomainName, seed: u128) -> Result<Route, SendError> {
    route_from(dns.mx_hosts(domain).await, domain, seed)
}

/// `domain`'s route from its MX answer; `seed` rotates hosts of equal preference.
fn route_from(answer: Result<MxRecords, DnsError>, domain: &DomainName, seed: u128) -> Result<Route, SendError> {
    let records = match answer {
        Ok(records) => records,
        Err(DnsError::NxDomain(_)) => {
            return Err(SendError::NoMailServer {
                reason: format!("the recipient domain {domain} does not exist (NXDOMAIN)"),
            });
        }
        Err(error) => {
            return Err(SendError::Unreachable {
                reason: format!("cannot look up the mail servers of {domain}: {error}"),
            });
        }
    };
    if records.iter().any(|(_, host)| host.is_empty()) {
        return Err(SendError::NoMailServer {
            reason: format!("{domain} publishes a null MX record (RFC 7505): it accepts no mail"),
        });
    }
    if records.is_empty() {
        return Ok(Route { hosts: vec![domain.as_str().to_owned()], implicit: true });
    }
    Ok(Route { hosts: in_preference_order(records, seed), implicit: false })
}

/// Hosts by ascending preference, each group of equal preference rotated by `seed`, each
/// host once.
fn in_preference_order(mut records: Vec<(u16, String)>, seed: u128) -> Vec<String> {
    records.sort();
    let mut seen = std::collections::HashSet::new();
    records.retain(|(_, host)| seen.insert(host.clone()));
    let mut hosts = Vec::with_capacity(records.len());
    for group in records.chunk_by(|a, b| a.0 == b.0) {
        let shift = usize::try_from(seed % group.len() as u128).unwrap_or(0);
        hosts.extend(group[shift..].iter().chain(&group[..shift]).map(|(_, host)| host.clone()));
    }
    hosts
}

#[cfg(test)]
mod tests;
