//! MTA-STS in `mx` delivery (`TIDINGS_MTA_STS`, README configuration; RFC 8461), against the
//! real binary: a DNS server on loopback publishes the recipient domains' MX hosts and
//! `_mta-sts` records, a `PolicyServer` serves their policy over HTTPS (port
//! `TIDINGS_MTA_STS_PORT`), and SMTP sinks sharing one port on 127.0.0.x are the MX hosts.
//! The server trusts only the test CAs, through `TIDINGS_MTA_STS_CA_FILE`.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_e2e::{Options, TestServer, fresh_key};
use tidings_transport_smtp::testing::{PolicyReply, PolicyServer, SinkConfig, SinkTls, SmtpSink};

use crate::common::mail::{plain_mail, send_ok, timeline, types, wait_for_status};
use crate::common::verified_domain;

const WAIT: Duration = Duration::from_secs(30);
/// The sending domain.
const SENDER: &str = "shop.example";
/// The `id` of every `_mta-sts` record here.
const POLICY_ID: &str = "20261205T1";
/// Recipient domains with a policy; `open.example` has none.
const WITH_POLICY: [&str; 4] = ["strict.example", "strict-plain.example", "trial.example", "trial-certificate.example"];
/// The MX host on 127.0.0.1 with STARTTLS and a certificate from a CA the server trusts.
const SECURE_MX: &str = "secure.mx.test";
/// The MX host on 127.0.0.2 without STARTTLS.
const PLAIN_MX: &str = "plain.mx.test";
/// The MX host on 127.0.0.3 with STARTTLS and a certificate from a CA the server does not
/// trust.
const UNTRUSTED_MX: &str = "untrusted.mx.test";

/// The policy every domain here serves, in `mode`, listing the MX hosts `mx`.
fn policy(mode: &str, mx: &str) -> String {
    format!("version: STSv1\nmode: {mode}\nmx: {mx}\nmax_age: 86400\n")
}

struct World {
    server: TestServer,
    dns: TestDnsServer,
    secure: SmtpSink,
    plain: SmtpSink,
    untrusted: SmtpSink,
    _policy: PolicyServer,
    _ca_dir: tempfile::TempDir,
}

impl World {
    /// A server in `mx` mode with `env` added, where every domain of [`WITH_POLICY`] serves
    /// `policy_text`; its MX records point as the tests below say.
    async fn start(policy_text: &str, env: &[(&str, &str)]) -> Self {
        let secure = sink(SECURE_MX, SinkTls::StartTls, Ipv4Addr::LOCALHOST, 0).await;
        let port = secure.port();
        let plain = sink(PLAIN_MX, SinkTls::None, Ipv4Addr::new(127, 0, 0, 2), port).await;
        let untrusted = sink(UNTRUSTED_MX, SinkTls::StartTls, Ipv4Addr::new(127, 0, 0, 3), port).await;
        let names: Vec<String> = WITH_POLICY.iter().map(|domain| format!("mta-sts.{domain}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let policy =
            PolicyServer::start(&names, PolicyReply::policy(policy_text)).await.expect("the policy server starts");

        let mut records = vec![
            TestRecord::a(SECURE_MX, Ipv4Addr::LOCALHOST),
            TestRecord::a(PLAIN_MX, Ipv4Addr::new(127, 0, 0, 2)),
            TestRecord::a(UNTRUSTED_MX, Ipv4Addr::new(127, 0, 0, 3)),
            TestRecord::mx("strict.example", 10, SECURE_MX),
            TestRecord::mx("strict-plain.example", 10, PLAIN_MX),
            TestRecord::mx("trial.example", 10, PLAIN_MX),
            TestRecord::mx("trial-certificate.example", 10, UNTRUSTED_MX),
            TestRecord::mx("open.example", 10, PLAIN_MX),
        ];
        for domain in WITH_POLICY {
            records.push(TestRecord::txt(&format!("_mta-sts.{domain}"), &format!("v=STSv1; id={POLICY_ID}")));
            records.push(TestRecord::a(&format!("mta-sts.{domain}"), Ipv4Addr::LOCALHOST));
        }
        let dns = TestDnsServer::start(records).await.expect("the DNS server starts");

        // The policy server's CA and the secure MX's; not the untrusted MX's.
        let ca_dir = tempfile::tempdir().expect("a temporary dir");
        let ca_file = ca_dir.path().join("test-cas.pem");
        let cas = format!("{}{}", policy.ca_pem(), secure.ca_pem().expect("the secure sink has a CA"));
        std::fs::write(&ca_file, cas).expect("the CA file is written");

        let mut all = vec![
            ("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()),
            ("TIDINGS_DELIVERY".to_owned(), "mx".to_owned()),
            ("TIDINGS_MX_PORT".to_owned(), port.to_string()),
            ("TIDINGS_MX_ALLOW_PRIVATE".to_owned(), "true".to_owned()),
            ("TIDINGS_MTA_STS_PORT".to_owned(), policy.addr().port().to_string()),
            ("TIDINGS_MTA_STS_CA_FILE".to_owned(), ca_file.display().to_string()),
            ("TIDINGS_SMTP_TIMEOUT".to_owned(), "10s".to_owned()),
        ];
        all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        let options = Options { bootstrap_key: Some(fresh_key()), env: all, ..Options::default() };
        let server = TestServer::start_with(options).await;
        verified_domain(&server, &dns, server.key(), SENDER).await;
        Self { server, dns, secure, plain, untrusted, _policy: policy, _ca_dir: ca_dir }
    }

    /// Sends to `to`; the message's id.
    async fn send(&self, to: &str) -> String {
        send_ok(&self.server, self.server.key(), plain_mail(SENDER, to)).await
    }

    async fn wait_for(&self, id: &str, status: &str) {
        wait_for_status(&self.server, self.server.key(), id, status, WAIT).await;
    }

    /// The log line with every one of `needles`; fails with the whole log if none.
    fn logged(&self, needles: &[&str]) -> String {
        self.server
            .wait_for_log(needles)
            .unwrap_or_else(|| panic!("no log line with {needles:?} in:\n{}", self.server.stderr_lines().join("\n")))
    }
}

/// An SMTP sink for the MX host `name` at `ip:port` (port 0: a free one).
async fn sink(name: &str, tls: SinkTls, ip: Ipv4Addr, port: u16) -> SmtpSink {
    let config =
        SinkConfig { bind: SocketAddr::from((ip, port)), tls, hostname: name.to_owned(), ..SinkConfig::default() };
    SmtpSink::start_with(config).await.unwrap_or_else(|e| panic!("the sink for {name} starts: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforce_policy_delivers_over_verified_tls_to_a_listed_mx() {
    let world = World::start(&policy("enforce", "*.mx.test"), &[]).await;
    let line = world.logged(&["MTA-STS: on", "TIDINGS_MTA_STS_CA_FILE"]);
    assert!(line.contains(" INFO "), "{line}");
    world.logged(&["WARN", "TIDINGS_MTA_STS_CA_FILE replaces the system's CA store"]);

    let id = world.send("ann@strict.example").await;
    world.wait_for(&id, "Delivered").await;
    let received = world.secure.wait_for(1, WAIT).await.expect("the secure MX receives the message");
    assert_eq!(received[0].recipients, ["ann@strict.example"]);
    assert!(received[0].tls, "delivered over TLS");
    let events = timeline(&world.server, world.server.key(), &id).await;
    let delivered = events.last().expect("events");
    assert_eq!(delivered["type"], "Delivered", "{events:#?}");
    assert_eq!(
        delivered["details"]["tls"],
        serde_json::json!({"plaintext": false, "certificate": "verified", "tlsVersion": "TLSv1.3"}),
        "{delivered:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforce_policy_defers_mail_to_an_mx_without_starttls_naming_the_policy_and_sends_nothing() {
    let world = World::start(&policy("enforce", "*.mx.test"), &[]).await;
    let id = world.send("bob@strict-plain.example").await;
    world.wait_for(&id, "Deferred").await;
    let events = timeline(&world.server, world.server.key(), &id).await;
    assert_eq!(types(&events), ["Queued", "Sent", "Deferred"], "{events:#?}");
    let response = events[2]["details"]["response"].as_str().unwrap_or_default();
    assert!(response.contains(&format!("the MTA-STS policy of strict-plain.example (id {POLICY_ID})")), "{response}");
    assert!(response.contains("does not offer STARTTLS"), "{response}");
    assert_eq!(world.plain.message_count(), 0, "the MX without STARTTLS received nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforce_policy_defers_mail_when_the_mx_certificate_is_from_an_unknown_ca() {
    let world = World::start(&policy("enforce", "*.mx.test"), &[]).await;
    let id = world.send("cy@trial-certificate.example").await;
    world.wait_for(&id, "Deferred").await;
    let events = timeline(&world.server, world.server.key(), &id).await;
    let response = events.last().expect("events")["details"]["response"].as_str().unwrap_or_default().to_owned();
    assert!(response.contains("the MTA-STS policy of trial-certificate.example"), "{response}");
    assert_eq!(world.untrusted.message_count(), 0, "no plaintext retry after the failed verification");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_without_a_policy_is_delivered_opportunistically_to_the_same_mx() {
    let world = World::start(&policy("enforce", "*.mx.test"), &[]).await;
    let id = world.send("dee@open.example").await;
    world.wait_for(&id, "Delivered").await;
    let received = world.plain.wait_for(1, WAIT).await.expect("the plain MX receives the message");
    assert_eq!(received[0].recipients, ["dee@open.example"]);
    assert!(!received[0].tls, "plaintext: the MX offers no STARTTLS and no policy asks for it");
    assert!(world.server.wait_for_log(&["MTA-STS policy of open.example"]).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_testing_policy_delivers_and_warns_of_what_enforce_would_have_refused() {
    // The policy lists no MX host of these domains.
    let world = World::start(&policy("testing", "mx.elsewhere.test"), &[]).await;

    let id = world.send("eve@trial.example").await;
    world.wait_for(&id, "Delivered").await;
    assert!(!world.plain.wait_for(1, WAIT).await.expect("delivered")[0].tls);
    let line = world.logged(&["WARN", "MTA-STS policy of trial.example", "mode testing"]);
    assert!(line.contains(&format!("id {POLICY_ID}")), "{line}");
    assert!(line.contains("plain.mx.test is not among the MX hosts the policy lists"), "{line}");
    assert!(line.contains("does not offer STARTTLS"), "{line}");

    let id = world.send("fay@trial-certificate.example").await;
    world.wait_for(&id, "Delivered").await;
    assert!(world.untrusted.wait_for(1, WAIT).await.expect("delivered")[0].tls, "over unverified TLS");
    let line = world.logged(&["WARN", "MTA-STS policy of trial-certificate.example", "mode testing"]);
    assert!(line.contains("the certificate of untrusted.mx.test[127.0.0.3]"), "{line}");
    assert!(line.contains("is not valid for untrusted.mx.test"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_testing_policy_met_by_the_mx_is_not_warned_about() {
    let world = World::start(&policy("testing", "*.mx.test"), &[]).await;
    world.dns.set_mx("trial.example", &[(10, SECURE_MX)]).await;
    let id = world.send("gus@trial.example").await;
    world.wait_for(&id, "Delivered").await;
    assert!(world.secure.wait_for(1, WAIT).await.expect("delivered")[0].tls);
    assert!(world.server.wait_for_log(&["WARN", "mode testing"]).is_none(), "{:#?}", world.server.stderr_lines());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mta_sts_off_an_enforce_policy_is_not_looked_up() {
    let world = World::start(&policy("enforce", "*.mx.test"), &[("TIDINGS_MTA_STS", "off")]).await;
    world.logged(&["MTA-STS: off"]);
    world.logged(&["WARN", "TIDINGS_MTA_STS is off"]);
    let id = world.send("hal@strict-plain.example").await;
    world.wait_for(&id, "Delivered").await;
    assert!(!world.plain.wait_for(1, WAIT).await.expect("delivered")[0].tls);
}
