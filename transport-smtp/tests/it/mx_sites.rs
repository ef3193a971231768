//! `MxMailer` with shaping: the MX hosts `mx1.site.test` (127.0.0.1) and `mx2.site.test`
//! (127.0.0.2) of a real DNS server on loopback roll up to the site `.site.test` of the
//! operator's shaping file; an `SmtpSink` on each address, on one port, counts in a
//! `ConnectionTally` the connections open to the site in all.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tidings_core::domain_name::DomainName;
use tidings_core::model::{CertificateCheck, ConnectionTls, TlsVersion};
use tidings_core::ports::{DnsError, Mailer, SendError, SystemClock};
use tidings_core::shaping::{ShapingTable, SiteKey};
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_dns::{HickoryDns, Settings, Upstream};
use tidings_transport_smtp::mta_sts::{CacheSettings, FetchSettings, HttpsPolicyFetcher, MtaSts, TrustRoots};
use tidings_transport_smtp::testing::{
    ConnectionTally, PolicyReply, PolicyServer, SinkConfig, SinkTls, SmtpSink, Stage,
};
use tidings_transport_smtp::{MxConfig, MxLookup, MxMailer};

use crate::common::{WAIT, email_to, quick_timeouts};

const MX1: &str = "mx1.site.test";
const MX2: &str = "mx2.site.test";

/// The resolver, counting the MX questions it is asked.
struct CountingLookup {
    inner: HickoryDns,
    mx_asked: AtomicUsize,
}

#[async_trait]
impl MxLookup for CountingLookup {
    async fn mx_hosts(&self, domain: &DomainName) -> Result<Vec<(u16, String)>, DnsError> {
        self.mx_asked.fetch_add(1, Ordering::SeqCst);
        self.inner.mx_hosts(domain).await
    }

    async fn host_addrs(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        self.inner.host_addrs(host).await
    }
}

/// `.site.test` with these fields (TOML), over the built-in default.
fn table(fields: &str) -> Arc<ShapingTable> {
    Arc::new(ShapingTable::from_toml(&format!("[\".site.test\"]\n{fields}\n")).unwrap())
}

fn loopback(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, last)
}

/// Sinks on 127.0.0.1 and 127.0.0.2, one port, one tally; each named for its MX host (so
/// that its certificate is valid for it).
async fn two_sinks(tls: SinkTls) -> (SmtpSink, SmtpSink, ConnectionTally) {
    let tally = ConnectionTally::default();
    let config = |ip: Ipv4Addr, port: u16, host: &str| SinkConfig {
        bind: SocketAddr::from((ip, port)),
        tls,
        hostname: host.to_owned(),
        tally: Some(tally.clone()),
        ..SinkConfig::default()
    };
    for _ in 0..20 {
        let first = SmtpSink::start_with(config(loopback(1), 0, MX1)).await.unwrap();
        if let Ok(second) = SmtpSink::start_with(config(loopback(2), first.port(), MX2)).await {
            return (first, second, tally);
        }
    }
    panic!("no port free on both 127.0.0.1 and 127.0.0.2");
}

/// DNS for the site: `acme.test` on both hosts at one preference, `one.test` on mx1 only,
/// `two.test` on mx2 only.
async fn site_dns() -> TestDnsServer {
    TestDnsServer::start([
        TestRecord::mx("acme.test", 10, MX1),
        TestRecord::mx("acme.test", 10, MX2),
        TestRecord::mx("one.test", 10, MX1),
        TestRecord::mx("two.test", 10, MX2),
        TestRecord::a(MX1, loopback(1)),
        TestRecord::a(MX2, loopback(2)),
    ])
    .await
    .unwrap()
}

fn lookup(dns: &TestDnsServer) -> Arc<CountingLookup> {
    let settings = Settings { timeout: Duration::from_millis(500), attempts: 2 };
    let inner = HickoryDns::new(Upstream::Server(dns.addr()), settings).unwrap();
    Arc::new(CountingLookup { inner, mx_asked: AtomicUsize::new(0) })
}

fn config(port: u16) -> MxConfig {
    MxConfig { port, timeouts: quick_timeouts(), allow_private: true, ..MxConfig::default() }
}

/// Messages per connection, over both sinks.
fn per_connection(sinks: &[&SmtpSink]) -> Vec<usize> {
    let mut counts: HashMap<(usize, u64), usize> = HashMap::new();
    for (n, sink) in sinks.iter().enumerate() {
        for message in sink.messages() {
            *counts.entry((n, message.connection)).or_default() += 1;
        }
    }
    let mut counts: Vec<usize> = counts.into_values().collect();
    counts.sort_unstable();
    counts
}

/// Sends messages 1..=`n` to `to` at once; returns who accepted each.
async fn send_at_once(mailer: &Arc<MxMailer>, n: u8, to: &str) -> Vec<String> {
    let sends: Vec<_> = (1..=n)
        .map(|i| {
            let mailer = Arc::clone(mailer);
            let email = email_to(i, to);
            tokio::spawn(async move { mailer.send(&email).await })
        })
        .collect();
    let mut remotes = Vec::new();
    for send in sends {
        remotes.push(send.await.unwrap().unwrap().remote);
    }
    remotes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_never_has_more_connections_open_than_its_limit_over_all_its_hosts() {
    let (sink1, sink2, tally) = two_sinks(SinkTls::None).await;
    let dns = site_dns().await;
    let shaping = table("connection_limit = 2\nmax_deliveries_per_connection = 3");
    let mailer = Arc::new(MxMailer::new(lookup(&dns), config(sink1.port())).unwrap().with_shaping(shaping));

    let remotes = send_at_once(&mailer, 20, "to@acme.test").await;

    assert!(tally.max_open() <= 2, "{} connections were open at once to a site allowing 2", tally.max_open());
    assert!(remotes.iter().any(|r| r.starts_with(MX1)) && remotes.iter().any(|r| r.starts_with(MX2)), "{remotes:?}");
    let counts = per_connection(&[&sink1, &sink2]);
    assert_eq!(counts.iter().sum::<usize>(), 20);
    assert!(counts.iter().all(|&n| n <= 3), "a connection carried more than 3 messages: {counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_shaping_the_same_sends_open_more_connections_than_the_site_would_allow() {
    let (sink1, sink2, tally) = two_sinks(SinkTls::None).await;
    let dns = site_dns().await;
    let mailer = Arc::new(MxMailer::new(lookup(&dns), config(sink1.port())).unwrap());
    sink1.hold(Stage::Message);
    sink2.hold(Stage::Message);

    let sending = {
        let mailer = Arc::clone(&mailer);
        tokio::spawn(async move { send_at_once(&mailer, 6, "to@acme.test").await })
    };
    // Three sessions held at once need three connections open at once.
    sink1.wait_for_held(2, WAIT).await.unwrap();
    sink2.wait_for_held(1, WAIT).await.unwrap();
    sink1.release();
    sink2.release();
    sending.await.unwrap();

    assert!(tally.max_open() >= 3, "{}", tally.max_open());
}

#[tokio::test]
async fn a_connection_carries_at_most_the_sites_deliveries_per_connection() {
    let (sink1, _sink2, _tally) = two_sinks(SinkTls::None).await;
    let dns = site_dns().await;
    let shaping = table("max_deliveries_per_connection = 3");
    let mailer = MxMailer::new(lookup(&dns), config(sink1.port())).unwrap().with_shaping(shaping);

    for n in 1..=7 {
        mailer.send(&email_to(n, "to@one.test")).await.unwrap();
    }

    assert_eq!(per_connection(&[&sink1]), [1, 3, 3]);
}

#[tokio::test]
async fn at_the_cap_an_idle_connection_to_another_host_of_the_site_is_closed_instead_of_waited_for() {
    let (sink1, sink2, tally) = two_sinks(SinkTls::None).await;
    let dns = site_dns().await;
    let shaping = table("connection_limit = 1");
    let mailer = MxMailer::new(lookup(&dns), config(sink1.port())).unwrap().with_shaping(shaping);
    mailer.send(&email_to(1, "to@one.test")).await.unwrap();
    assert_eq!(sink1.open_connections(), 1, "kept idle for reuse");

    // The idle connection would stay 30 s; the send's whole budget is 20 s.
    let receipt = mailer.send(&email_to(2, "to@two.test")).await.unwrap();

    assert!(receipt.remote.starts_with(MX2), "{}", receipt.remote);
    assert_eq!((sink1.open_connections(), sink2.open_connections(), tally.max_open()), (0, 1, 1));
}

#[tokio::test]
async fn the_site_is_the_mx_rollup_and_a_delivery_looks_its_mx_up_once() {
    let (sink1, _sink2, _tally) = two_sinks(SinkTls::None).await;
    let dns = site_dns().await;
    let lookup = lookup(&dns);
    let mailer = MxMailer::new(lookup.clone(), config(sink1.port())).unwrap().with_shaping(table(""));
    let acme = DomainName::parse("acme.test").unwrap();

    // As the delivery worker does: the site to admit the delivery by, then the send.
    assert_eq!(mailer.site(&acme).await, SiteKey::parse(".site.test"));
    mailer.send(&email_to(1, "to@acme.test")).await.unwrap();
    assert_eq!(lookup.mx_asked.load(Ordering::SeqCst), 1);

    // Another site: the MX hosts' names when no suffix of the table matches.
    let plain = MxMailer::new(lookup.clone(), config(sink1.port())).unwrap().with_shaping(Arc::default());
    assert_eq!(plain.site(&acme).await, SiteKey::parse("mx1.site.test,mx2.site.test"));
    assert_eq!(plain.idle_connection_lifetime(), MxConfig::default().pool.idle_timeout);
}

#[tokio::test]
async fn without_shaping_there_is_no_site_and_no_mx_lookup_for_it() {
    let dns = site_dns().await;
    let lookup = lookup(&dns);
    let mailer = MxMailer::new(lookup.clone(), config(25)).unwrap();
    assert_eq!(mailer.site(&DomainName::parse("acme.test").unwrap()).await, None);
    assert_eq!(lookup.mx_asked.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_failed_mx_lookup_names_no_site() {
    let dns = site_dns().await;
    let lookup = lookup(&dns);
    let mailer = MxMailer::new(lookup, config(25)).unwrap().with_shaping(table(""));
    assert_eq!(mailer.site(&DomainName::parse("missing.test").unwrap()).await, None);
}

/// A mailer for the `.site.test` site requiring TLS, trusting `roots` for MX certificates
/// (given, as in production, with MTA-STS; the domains publish no MTA-STS policy).
fn tls_required_mailer(dns: &TestDnsServer, port: u16, roots: TrustRoots) -> MxMailer {
    let lookup = lookup(dns);
    let resolver = Arc::new(lookup.inner.clone());
    let fetcher = Arc::new(HttpsPolicyFetcher::new(resolver.clone(), FetchSettings::default()).unwrap());
    let sts =
        Arc::new(MtaSts::new(resolver, fetcher, Arc::new(tidings_core::ports::SystemClock), CacheSettings::default()));
    MxMailer::new(lookup, config(port))
        .unwrap()
        .with_shaping(table("enable_tls = \"required\""))
        .with_mta_sts(sts, &roots)
        .unwrap()
}

#[tokio::test]
async fn a_site_requiring_tls_refuses_a_host_without_starttls_and_says_why() {
    let (sink1, _sink2, _tally) = two_sinks(SinkTls::None).await;
    let dns = site_dns().await;
    let mailer = tls_required_mailer(&dns, sink1.port(), TrustRoots::Only(Vec::new()));

    let error = mailer.send(&email_to(1, "to@one.test")).await.unwrap_err();

    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    assert!(reason.contains("does not offer STARTTLS, which the shaping of site .site.test requires"), "{reason}");
    assert!(reason.contains("under the shaping of site .site.test (TLS required"), "{reason}");
    assert!(sink1.messages().is_empty());
}

#[tokio::test]
async fn a_site_requiring_tls_delivers_over_a_verified_certificate_and_never_in_plaintext() {
    let (sink1, _sink2, _tally) = two_sinks(SinkTls::StartTls).await;
    let dns = site_dns().await;
    let trusted = TrustRoots::Only(sink1.ca_der().into_iter().collect());

    let receipt = tls_required_mailer(&dns, sink1.port(), trusted).send(&email_to(1, "to@one.test")).await.unwrap();
    assert!(receipt.remote.starts_with(MX1));
    assert_eq!(
        receipt.tls,
        Some(ConnectionTls::Tls { certificate: CertificateCheck::Verified, version: Some(TlsVersion::Tls1_3) })
    );
    assert!(sink1.wait_for(1, WAIT).await.unwrap()[0].tls);

    // A certificate from an unknown CA: no delivery, not even in plaintext.
    let error = tls_required_mailer(&dns, sink1.port(), TrustRoots::Only(Vec::new()))
        .send(&email_to(2, "to@one.test"))
        .await
        .unwrap_err();
    assert!(matches!(&error, SendError::Unreachable { reason } if reason.contains(".site.test")), "{error:?}");
    assert_eq!(sink1.message_count(), 1);
}

#[tokio::test]
async fn connections_under_an_mta_sts_policy_count_in_their_sites_cap() {
    let (sink1, _sink2, tally) = two_sinks(SinkTls::StartTls).await;
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 10, MX1),
        TestRecord::mx("plain.test", 10, MX1),
        TestRecord::a(MX1, loopback(1)),
        TestRecord::a("mta-sts.acme.test", loopback(1)),
        TestRecord::txt("_mta-sts.acme.test", "v=STSv1; id=1"),
    ])
    .await
    .unwrap();
    let policy_text = "version: STSv1\r\nmode: enforce\r\nmx: *.site.test\r\nmax_age: 86400\r\n";
    let policy = PolicyServer::start(&["mta-sts.acme.test"], PolicyReply::policy(policy_text)).await.unwrap();
    let lookup = lookup(&dns);
    let resolver = Arc::new(lookup.inner.clone());
    let fetch = FetchSettings {
        roots: TrustRoots::Only(vec![policy.ca_der()]),
        port: policy.addr().port(),
        allow_private: true,
        ..FetchSettings::default()
    };
    let fetcher = Arc::new(HttpsPolicyFetcher::new(resolver.clone(), fetch).unwrap());
    let sts = Arc::new(MtaSts::new(resolver, fetcher, Arc::new(SystemClock), CacheSettings::default()));
    let mailer = MxMailer::new(lookup, config(sink1.port()))
        .unwrap()
        .with_shaping(table("connection_limit = 1"))
        .with_mta_sts(sts, &TrustRoots::Only(sink1.ca_der().into_iter().collect()))
        .unwrap();

    // Under the policy: a verified connection, pooled apart and left idle.
    mailer.send(&email_to(1, "to@acme.test")).await.unwrap();
    assert_eq!(sink1.open_connections(), 1);
    // Without one, to the same host of the same site: the idle one is closed first.
    mailer.send(&email_to(2, "to@plain.test")).await.unwrap();

    assert_eq!((sink1.message_count(), tally.max_open(), sink1.connection_count()), (2, 1, 2));
}
