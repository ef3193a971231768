//! `MxMailer` under MTA-STS: a real DNS server on loopback publishes the MX, the `_mta-sts`
//! record and the policy host; a `PolicyServer` serves the policy; an `SmtpSink` on
//! 127.0.0.1 is the MX host `mx1.acme.test`, with a certificate for that name from its own
//! CA, which the mailer is told to trust.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{WAIT, email_to, quick_timeouts};
use tidings_core::model::{CertificateCheck, ConnectionTls, TlsVersion};
use tidings_core::ports::{Mailer, SendError, SystemClock};
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_dns::{HickoryDns, Settings, Upstream};
use tidings_transport_smtp::mta_sts::{CacheSettings, FetchSettings, HttpsPolicyFetcher, MtaSts, TrustRoots};
use tidings_transport_smtp::testing::{PolicyReply, PolicyServer, SinkConfig, SinkTls, SmtpSink};
use tidings_transport_smtp::{MxConfig, MxMailer};

const TO: &str = "to@acme.test";
const MX: &str = "mx1.acme.test";

fn policy(mode: &str, mx: &str) -> String {
    format!("version: STSv1\r\nmode: {mode}\r\nmx: {mx}\r\nmax_age: 86400\r\n")
}

struct World {
    _dns: TestDnsServer,
    _policy: PolicyServer,
    sink: SmtpSink,
    mailer: MxMailer,
}

/// The world with `policy_text` served, a sink speaking `tls`, and the mailer trusting
/// `mx_roots` (the sink's CA when `None`).
async fn world(policy_text: &str, tls: SinkTls, mx_roots: Option<TrustRoots>) -> World {
    let sink =
        SmtpSink::start_with(SinkConfig { tls, hostname: MX.to_owned(), ..SinkConfig::default() }).await.unwrap();
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 10, MX),
        TestRecord::a(MX, Ipv4Addr::LOCALHOST),
        TestRecord::a("mta-sts.acme.test", Ipv4Addr::LOCALHOST),
        TestRecord::txt("_mta-sts.acme.test", "v=STSv1; id=1"),
        // A domain without a policy sharing the MX host.
        TestRecord::mx("other.test", 10, MX),
    ])
    .await
    .unwrap();
    let policy = PolicyServer::start(&["mta-sts.acme.test"], PolicyReply::policy(policy_text)).await.unwrap();
    let settings = Settings { timeout: Duration::from_millis(500), attempts: 2 };
    let resolver = Arc::new(HickoryDns::new(Upstream::Server(dns.addr()), settings).unwrap());
    let fetch = FetchSettings {
        roots: TrustRoots::Only(vec![policy.ca_der()]),
        port: policy.addr().port(),
        allow_private: true,
        ..FetchSettings::default()
    };
    let fetcher = Arc::new(HttpsPolicyFetcher::new(resolver.clone(), fetch).unwrap());
    let sts = Arc::new(MtaSts::new(resolver.clone(), fetcher, Arc::new(SystemClock), CacheSettings::default()));
    let roots = mx_roots.unwrap_or_else(|| TrustRoots::Only(sink.ca_der().into_iter().collect()));
    let config = MxConfig { port: sink.port(), timeouts: quick_timeouts(), allow_private: true, ..MxConfig::default() };
    let mailer = MxMailer::new(resolver, config).unwrap().with_mta_sts(sts, &roots).unwrap();
    World { _dns: dns, _policy: policy, sink, mailer }
}

#[tokio::test]
async fn enforce_delivers_over_verified_tls_to_a_listed_mx() {
    let world = world(&policy("enforce", "*.acme.test"), SinkTls::StartTls, None).await;
    let receipt = world.mailer.send(&email_to(1, TO)).await.unwrap();
    assert_eq!(receipt.reply.code, 250);
    assert!(world.sink.wait_for(1, WAIT).await.unwrap()[0].tls);
    assert_eq!(
        receipt.tls,
        Some(ConnectionTls::Tls { certificate: CertificateCheck::Verified, version: Some(TlsVersion::Tls1_3) })
    );
}

#[tokio::test]
async fn without_a_policy_the_certificate_is_judged_and_said_so() {
    // other.test has no policy; its MX host is the sink, whose certificate MTA-STS's roots
    // (the sink's CA) verify, or do not (another CA).
    let trusting = world(&policy("enforce", "*.acme.test"), SinkTls::StartTls, None).await;
    let receipt = trusting.mailer.send(&email_to(1, "to@other.test")).await.unwrap();
    assert_eq!(
        receipt.tls,
        Some(ConnectionTls::Tls { certificate: CertificateCheck::Verified, version: Some(TlsVersion::Tls1_3) })
    );

    let other_ca = PolicyServer::start(&[MX], PolicyReply::Hang).await.unwrap().ca_der();
    let distrusting =
        world(&policy("enforce", "*.acme.test"), SinkTls::StartTls, Some(TrustRoots::Only(vec![other_ca]))).await;
    let receipt = distrusting.mailer.send(&email_to(1, "to@other.test")).await.unwrap();
    let Some(ConnectionTls::Tls { certificate: CertificateCheck::Invalid(why), .. }) = &receipt.tls else {
        panic!("{receipt:?}")
    };
    assert!(!why.is_empty());
}

#[tokio::test]
async fn a_host_remembered_for_its_broken_tls_is_still_refused_under_enforce() {
    let world = world(&policy("enforce", "*.acme.test"), SinkTls::BrokenStartTls, None).await;
    // other.test has no policy: opportunistic, so the host is remembered and mail goes in plaintext.
    let receipt = world.mailer.send(&email_to(1, "to@other.test")).await.unwrap();
    assert_eq!(receipt.tls, Some(ConnectionTls::Plaintext));
    assert_eq!(world.sink.connection_count(), 2);

    let error = world.mailer.send(&email_to(2, TO)).await.unwrap_err();

    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    assert!(reason.contains("MTA-STS policy of acme.test"), "{reason}");
    assert_eq!(world.sink.connection_count(), 3, "TLS was tried again, and only TLS");
    assert_eq!(world.sink.message_count(), 1, "nothing in plaintext under enforce");
}

#[tokio::test]
async fn enforce_refuses_an_mx_without_starttls_and_says_why() {
    let world = world(&policy("enforce", "*.acme.test"), SinkTls::None, None).await;
    let error = world.mailer.send(&email_to(1, TO)).await.unwrap_err();
    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    assert!(reason.contains("does not offer STARTTLS"), "{reason}");
    assert!(reason.contains("the MTA-STS policy of acme.test (id 1)"), "{reason}");
    assert!(world.sink.messages().is_empty());
}

#[tokio::test]
async fn enforce_refuses_a_certificate_it_cannot_verify_without_falling_back_to_plaintext() {
    let other_ca = PolicyServer::start(&[MX], PolicyReply::Hang).await.unwrap().ca_der();
    let world =
        world(&policy("enforce", "*.acme.test"), SinkTls::StartTls, Some(TrustRoots::Only(vec![other_ca]))).await;
    let error = world.mailer.send(&email_to(1, TO)).await.unwrap_err();
    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    assert!(reason.contains("TLS"), "{reason}");
    assert!(reason.contains("MTA-STS policy of acme.test"), "{reason}");
    assert!(world.sink.messages().is_empty(), "no plaintext retry");
}

#[tokio::test]
async fn enforce_tries_no_mx_the_policy_does_not_list() {
    let world = world(&policy("enforce", "mx.elsewhere.test"), SinkTls::StartTls, None).await;
    let error = world.mailer.send(&email_to(1, TO)).await.unwrap_err();
    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    assert!(reason.contains("lists none of the mail servers of acme.test (mx1.acme.test)"), "{reason}");
    assert_eq!(world.sink.messages().len(), 0);
}

#[tokio::test]
async fn testing_mode_delivers_as_without_a_policy() {
    let world = world(&policy("testing", "mx.elsewhere.test"), SinkTls::None, None).await;
    world.mailer.send(&email_to(1, TO)).await.unwrap();
    assert!(!world.sink.wait_for(1, WAIT).await.unwrap()[0].tls);
}
