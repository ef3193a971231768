//! MTA-STS policy fetching over real sockets: a `PolicyServer` (HTTPS on loopback, its own
//! CA) as `mta-sts.acme.test`, found through a real DNS server on loopback
//! (`TestDnsServer`) by `HickoryDns`.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tidings_core::domain_name::DomainName;
use tidings_core::ports::SystemClock;
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_dns::{HickoryDns, Settings, Upstream};
use tidings_transport_smtp::mta_sts::{
    CacheSettings, FetchError, FetchSettings, HttpsPolicyFetcher, Mode, MtaSts, PolicyError, PolicySource, TrustRoots,
};
use tidings_transport_smtp::testing::{PolicyReply, PolicyServer};

const HOST: &str = "mta-sts.acme.test";
const POLICY: &str = "version: STSv1\r\nmode: enforce\r\nmx: *.acme.test\r\nmax_age: 86400\r\n";

fn acme() -> DomainName {
    DomainName::parse("acme.test").unwrap()
}

async fn dns() -> (TestDnsServer, Arc<HickoryDns>) {
    let server = TestDnsServer::start([TestRecord::a(HOST, Ipv4Addr::LOCALHOST)]).await.unwrap();
    let settings = Settings { timeout: Duration::from_millis(500), attempts: 2 };
    let resolver = HickoryDns::new(Upstream::Server(server.addr()), settings).unwrap();
    (server, Arc::new(resolver))
}

/// A fetcher trusting only `server`'s CA, pointed at its port, with `timeout`.
fn fetcher(resolver: Arc<HickoryDns>, server: &PolicyServer, timeout: Duration) -> HttpsPolicyFetcher {
    let settings = FetchSettings {
        timeout,
        roots: TrustRoots::Only(vec![server.ca_der()]),
        port: server.addr().port(),
        allow_private: true,
        ..FetchSettings::default()
    };
    HttpsPolicyFetcher::new(resolver, settings).unwrap()
}

/// The fetch's outcome for a server answering `reply`, and the server's requests.
async fn fetch_with(reply: PolicyReply) -> (Result<Mode, FetchError>, Vec<String>) {
    let (_dns, resolver) = dns().await;
    let server = PolicyServer::start(&[HOST], reply).await.unwrap();
    let outcome = fetcher(resolver, &server, Duration::from_secs(10)).fetch(&acme()).await;
    (outcome.map(|policy| policy.mode), server.requests())
}

#[tokio::test]
async fn a_200_text_plain_policy_is_fetched_from_the_well_known_path() {
    let (outcome, requests) = fetch_with(PolicyReply::policy(POLICY)).await;
    assert_eq!(outcome, Ok(Mode::Enforce));
    assert_eq!(requests.len(), 1);
    let head = requests[0].to_ascii_lowercase();
    assert!(head.starts_with("get /.well-known/mta-sts.txt http/1.1\r\n"), "{head}");
    assert!(head.contains("\r\nhost: mta-sts.acme.test\r\n"), "{head}");
}

#[tokio::test]
async fn text_plain_with_parameters_and_a_body_without_length_are_accepted() {
    let reply = PolicyReply::Respond {
        status: 200,
        content_type: Some("Text/Plain; charset=utf-8".to_owned()),
        headers: Vec::new(),
        body: POLICY.replace("\r\n", "\n").into_bytes(),
        declare_length: false,
    };
    assert_eq!(fetch_with(reply).await.0, Ok(Mode::Enforce));
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let reply = PolicyReply::Respond {
        status: 301,
        content_type: Some("text/plain".to_owned()),
        headers: vec!["Location: https://mta-sts.acme.test/elsewhere.txt".to_owned()],
        body: Vec::new(),
        declare_length: true,
    };
    let (outcome, requests) = fetch_with(reply).await;
    assert_eq!(outcome, Err(FetchError::Status { host: HOST.to_owned(), status: 301 }));
    assert_eq!(requests.len(), 1, "no second request");
}

#[tokio::test]
async fn a_404_is_refused() {
    let (outcome, _) = fetch_with(PolicyReply::status(404, Some("text/plain"), b"not found")).await;
    assert_eq!(outcome, Err(FetchError::Status { host: HOST.to_owned(), status: 404 }));
}

#[tokio::test]
async fn another_content_type_or_none_is_refused() {
    let (outcome, _) = fetch_with(PolicyReply::status(200, Some("text/html"), POLICY.as_bytes())).await;
    assert!(
        matches!(&outcome, Err(FetchError::ContentType { content_type, .. }) if content_type.contains("text/html")),
        "{outcome:?}"
    );
    let (outcome, _) = fetch_with(PolicyReply::status(200, None, POLICY.as_bytes())).await;
    assert!(
        matches!(&outcome, Err(FetchError::ContentType { content_type, .. }) if content_type == "none"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn an_oversized_body_is_refused_declared_or_not() {
    let mut big = POLICY.as_bytes().to_vec();
    big.extend(std::iter::repeat_n(b'#', 64 * 1024));
    let (outcome, _) = fetch_with(PolicyReply::status(200, Some("text/plain"), &big)).await;
    assert_eq!(outcome, Err(FetchError::TooLarge { host: HOST.to_owned(), limit: 64 * 1024 }));
    let undeclared = PolicyReply::Respond {
        status: 200,
        content_type: Some("text/plain".to_owned()),
        headers: Vec::new(),
        body: big,
        declare_length: false,
    };
    let (outcome, _) = fetch_with(undeclared).await;
    assert_eq!(outcome, Err(FetchError::TooLarge { host: HOST.to_owned(), limit: 64 * 1024 }));
}

#[tokio::test]
async fn an_invalid_policy_is_refused() {
    let (outcome, _) = fetch_with(PolicyReply::policy("version: STSv1\nmode: enforce\nmax_age: 60\n")).await;
    assert_eq!(outcome, Err(FetchError::Invalid { host: HOST.to_owned(), error: PolicyError::Missing("mx") }));
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let (_dns, resolver) = dns().await;
    let server = PolicyServer::start(&[HOST], PolicyReply::Hang).await.unwrap();
    let started = Instant::now();
    let outcome = fetcher(resolver, &server, Duration::from_millis(500)).fetch(&acme()).await;
    assert_eq!(outcome, Err(FetchError::TimedOut { host: HOST.to_owned(), after: "500ms".to_owned() }));
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(server.requests().len(), 1, "it hung after reading the request");
}

#[tokio::test]
async fn a_certificate_from_an_untrusted_ca_is_refused() {
    let (_dns, resolver) = dns().await;
    let server = PolicyServer::start(&[HOST], PolicyReply::policy(POLICY)).await.unwrap();
    let other = PolicyServer::start(&[HOST], PolicyReply::policy(POLICY)).await.unwrap();
    // Trusting the other server's CA only.
    let settings = FetchSettings {
        roots: TrustRoots::Only(vec![other.ca_der()]),
        port: server.addr().port(),
        allow_private: true,
        ..FetchSettings::default()
    };
    let outcome = HttpsPolicyFetcher::new(resolver, settings).unwrap().fetch(&acme()).await;
    assert!(
        matches!(&outcome, Err(FetchError::Connect { reason, .. }) if reason.contains("certificate")),
        "{outcome:?}"
    );
    assert!(server.requests().is_empty(), "nothing was sent to it");
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    let (_dns, resolver) = dns().await;
    let server = PolicyServer::start(&["mta-sts.other.test"], PolicyReply::policy(POLICY)).await.unwrap();
    let outcome = fetcher(resolver, &server, Duration::from_secs(10)).fetch(&acme()).await;
    assert!(
        matches!(&outcome, Err(FetchError::Connect { reason, .. }) if reason.contains("certificate")),
        "{outcome:?}"
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn private_addresses_are_refused_unless_allowed() {
    let (_dns, resolver) = dns().await;
    let server = PolicyServer::start(&[HOST], PolicyReply::policy(POLICY)).await.unwrap();
    let settings = FetchSettings {
        roots: TrustRoots::Only(vec![server.ca_der()]),
        port: server.addr().port(),
        ..FetchSettings::default()
    };
    let outcome = HttpsPolicyFetcher::new(resolver, settings).unwrap().fetch(&acme()).await;
    assert!(matches!(&outcome, Err(FetchError::NotPublic { refused, .. }) if refused == "127.0.0.1"), "{outcome:?}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn the_policy_of_a_domain_comes_from_its_record_and_is_cached_by_id() {
    let (dns, resolver) = dns().await;
    dns.set_txt("_mta-sts.acme.test", &["v=STSv1; id=20261205"]).await;
    let server = PolicyServer::start(&[HOST], PolicyReply::policy(POLICY)).await.unwrap();
    let fetcher = Arc::new(fetcher(resolver.clone(), &server, Duration::from_secs(10)));
    let sts = MtaSts::new(resolver, fetcher, Arc::new(SystemClock), CacheSettings::default());
    let active = sts.policy_for(&acme()).await.unwrap();
    assert_eq!((active.id.as_str(), active.policy.mode), ("20261205", Mode::Enforce));
    assert!(active.policy.allows("mx1.acme.test"));
    assert_eq!(sts.policy_for(&acme()).await, Some(active));
    assert_eq!(server.requests().len(), 1);
    dns.remove_name("_mta-sts.acme.test").await;
    let other = DomainName::parse("other.test").unwrap();
    assert_eq!(sts.policy_for(&other).await, None);
}
