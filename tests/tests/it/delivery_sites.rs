//! Direct delivery by site (issue #33, contract §12) through the built server in `mx` mode,
//! with fake providers on loopback: each an [`SmtpSink`] on its own 127.0.0.x address (all
//! on one port, which `TIDINGS_MX_PORT` names), named by MX records on a loopback DNS server.
//! - `.slow.test` (two MX hosts, one connection tally): 2 connections, 3 messages per
//!   connection, 5 messages a second. Twenty messages all arrive; the sinks never saw more
//!   than 2 connections open or more than 3 messages on one; every message was attempted
//!   once (the waiting was no attempt and no retry).
//! - `.fast.test`, with an operator rule that suspends it for an hour on `4.7.28`: its MX
//!   answers the first RCPT with Gmail's `421 4.7.28`; mail to it then waits, unattempted,
//!   while mail to another site flows; the operator API and the `sites` command show the
//!   suspension and its reason, and resuming lets the mail go.
//! - One message to both `.fast.test`, suspended by the operator, and another site: the
//!   other site's copy goes at once, the suspended site's copies wait unattempted and go
//!   when it is resumed.
//! - Two nodes on one PostgreSQL database share one site's connection limit.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::common::database::Database;
use crate::common::mail::{plain_mail, send_ok, timeline, types, wait_for_status};

use crate::common::{assert_ok, block_on, start_with_dns, verified_domain};
use serde_json::{Value, json};
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_e2e::{DataDir, Options, TestServer, fresh_key, server_binary};
use tidings_transport_smtp::testing::{ConnectionTally, Rule, SinkConfig, SmtpSink, Stage};

/// The operator's token.
const OPERATOR_TOKEN: &str = "operator-0123456789abcdef0123";
/// How long a message may take to arrive.
const WAIT: Duration = Duration::from_secs(60);

const SHAPING: &str = r#"
[".slow.test"]
connection_limit = 2
max_deliveries_per_connection = 3
max_message_rate = "5/s"

[".fast.test"]
automation = [{ regex = "4\\.7\\.28", action = "suspend", duration = "1h" }]
"#;

/// The fake providers, all on one port.
struct Providers {
    slow: [SmtpSink; 2],
    tally: ConnectionTally,
    fast: SmtpSink,
    /// other.example's MX.
    other: SmtpSink,
    port: u16,
}

impl Providers {
    async fn start() -> Self {
        // Every sink on one port (the server dials every MX host on TIDINGS_MX_PORT): the
        // first picks a free one, the others bind it on their own addresses.
        for _ in 0..10 {
            let tally = ConnectionTally::default();
            let first = sink(Ipv4Addr::new(127, 0, 0, 2), 0, Some(tally.clone())).await.expect("a sink starts");
            let port = first.port();
            let rest = async {
                Some((
                    sink(Ipv4Addr::new(127, 0, 0, 3), port, Some(tally.clone())).await.ok()?,
                    sink(Ipv4Addr::new(127, 0, 0, 4), port, None).await.ok()?,
                    sink(Ipv4Addr::new(127, 0, 0, 5), port, None).await.ok()?,
                ))
            };
            if let Some((second, fast, other)) = rest.await {
                return Self { slow: [first, second], tally, fast, other, port };
            }
        }
        panic!("no port free on 127.0.0.2-5 after 10 tries");
    }

    /// MX records: slow.example on two hosts of `.slow.test`, fast.example on `.fast.test`,
    /// other.example on a host of its own.
    async fn publish(&self, dns: &TestDnsServer) {
        dns.set_mx("slow.example", &[(10, "mx1.slow.test"), (10, "mx2.slow.test")]).await;
        dns.add(TestRecord::a("mx1.slow.test", Ipv4Addr::new(127, 0, 0, 2))).await;
        dns.add(TestRecord::a("mx2.slow.test", Ipv4Addr::new(127, 0, 0, 3))).await;
        dns.set_mx("fast.example", &[(10, "mx.fast.test")]).await;
        dns.add(TestRecord::a("mx.fast.test", Ipv4Addr::new(127, 0, 0, 4))).await;
        dns.set_mx("other.example", &[(10, "mx.other.test")]).await;
        dns.add(TestRecord::a("mx.other.test", Ipv4Addr::new(127, 0, 0, 5))).await;
    }

    /// The server's settings for these providers, with the shaping file in `dir`.
    fn env(&self, dir: &DataDir) -> Vec<(String, String)> {
        let file = dir.path().join("shaping.toml");
        std::fs::write(&file, SHAPING).expect("write the shaping file");
        [
            ("TIDINGS_DELIVERY", "mx".to_owned()),
            ("TIDINGS_MX_PORT", self.port.to_string()),
            ("TIDINGS_MX_ALLOW_PRIVATE", "true".to_owned()),
            ("TIDINGS_SHAPING_FILE", file.display().to_string()),
            ("TIDINGS_OPERATOR_TOKEN", OPERATOR_TOKEN.to_owned()),
            ("TIDINGS_RETRY_SCHEDULE", "1m,1m,1m".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

async fn sink(ip: Ipv4Addr, port: u16, tally: Option<ConnectionTally>) -> std::io::Result<SmtpSink> {
    let bind = SocketAddr::new(IpAddr::V4(ip), port);
    SmtpSink::start_with(SinkConfig { bind, tally, ..SinkConfig::default() }).await
}

/// A server in mx mode over `providers`, with a verified sending domain.
async fn server(providers: &Providers) -> (TestServer, TestDnsServer) {
    let dir = DataDir::new();
    let env = providers.env(&dir);
    let options = Options { data_dir: Some(dir), bootstrap_key: Some(fresh_key()), env, ..Options::default() };
    let (server, dns) = start_with_dns(options).await;
    providers.publish(&dns).await;
    verified_domain(&server, &dns, server.key(), "shop.example").await;
    (server, dns)
}

/// `POST /v1/messages` of a plain mail to `to`, waiting out the key's send rate (10 a second)
/// as a client honouring `Retry-After` does; the message's id.
async fn send(server: &TestServer, key: &str, to: &str) -> String {
    loop {
        let (status, body) = server.post("/v1/messages", key, plain_mail("shop.example", to)).await;
        if status == 429 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        assert_ok(status, &body, 201, &format!("send to {to}"));
        return body["data"]["id"].as_str().expect("the message's id").to_owned();
    }
}

/// `GET /v1/operator/sites`'s sites.
async fn sites(server: &TestServer) -> Vec<Value> {
    let (status, body) = server.get("/v1/operator/sites", OPERATOR_TOKEN).await;
    assert_ok(status, &body, 200, "GET /v1/operator/sites");
    body["data"]["sites"].as_array().expect("sites").clone()
}

fn site<'a>(sites: &'a [Value], name: &str) -> Option<&'a Value> {
    sites.iter().find(|s| s["site"] == name)
}

#[test]
fn a_sites_limits_hold_and_waiting_is_no_attempt() {
    block_on(async {
        let providers = Providers::start().await;
        let (server, _dns) = server(&providers).await;
        let key = server.key().to_owned();
        let mut ids = Vec::new();
        let started = std::time::Instant::now();
        for n in 0..20 {
            ids.push(send(&server, &key, &format!("user{n}@slow.example")).await);
        }
        for id in &ids {
            wait_for_status(&server, &key, id, "Delivered", WAIT).await;
        }
        // A limit, not a speed: 5 a second with a burst of 5 cannot start the 20th delivery
        // sooner than 3 s after the first, which came after the first send.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(2_900), "20 messages at 5/s went in {took:?}");
        let received: Vec<_> = providers.slow.iter().flat_map(SmtpSink::messages).collect();
        assert_eq!(received.len(), 20, "each message once");
        assert!(
            providers.tally.max_open() <= 2,
            "at most 2 connections open to the site: {}",
            providers.tally.max_open()
        );
        for sink in &providers.slow {
            let mut per_connection = std::collections::BTreeMap::<u64, usize>::new();
            for message in sink.messages() {
                *per_connection.entry(message.connection).or_default() += 1;
            }
            assert!(per_connection.values().all(|&n| n <= 3), "at most 3 messages a connection: {per_connection:?}");
        }
        for id in &ids {
            let events = timeline(&server, &key, id).await;
            assert_eq!(types(&events), ["Queued", "Sent", "Delivered"], "one attempt, no deferral: {events:#?}");
        }
    });
}

#[test]
fn a_throttling_reply_suspends_its_site_while_others_flow() {
    block_on(async {
        let providers = Providers::start().await;
        providers.fast.add_rule(
            Rule::reply(Stage::Rcpt, 421, "4.7.28 Our system has detected an unusual rate of unsolicited mail")
                .times(1),
        );
        let (server, _dns) = server(&providers).await;
        let key = server.key().to_owned();
        let first = send_ok(&server, &key, plain_mail("shop.example", "a@fast.example")).await;
        wait_for_status(&server, &key, &first, "Deferred", WAIT).await;

        let held: Vec<String> = futures::future::join_all(
            ["b", "c"].map(|u| send_ok(&server, &key, plain_mail("shop.example", &format!("{u}@fast.example")))),
        )
        .await;
        let flowing = send_ok(&server, &key, plain_mail("shop.example", "d@other.example")).await;
        wait_for_status(&server, &key, &flowing, "Delivered", WAIT).await;
        // The held mail was claimed and put back (it is due within the suspension), never sent.
        for id in &held {
            let events = timeline(&server, &key, id).await;
            assert_eq!(types(&events), ["Queued"], "waiting records nothing: {events:#?}");
        }
        assert_eq!(providers.fast.message_count(), 0, "the suspended site got nothing");

        let listed = sites(&server).await;
        let fast = site(&listed, ".fast.test").unwrap_or_else(|| panic!("no .fast.test in {listed:#?}"));
        assert!(fast["suspendedUntil"].is_string(), "{fast}");
        assert!(fast["suspendReason"].as_str().is_some_and(|r| r.contains("4.7.28")), "{fast}");
        assert!(fast["waiting"].as_u64().is_some_and(|n| n >= 2), "{fast}");

        // The operator's command sees the same, against the running server.
        let output = std::process::Command::new(server_binary())
            .args(["sites", "list"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TIDINGS_DATA_DIR", server.data_dir().path())
            .env("TIDINGS_LISTEN", server.addr().to_string())
            .env("TIDINGS_OPERATOR_TOKEN", OPERATOR_TOKEN)
            .output()
            .expect("run tidings-server sites list");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "sites list: {}", String::from_utf8_lossy(&output.stderr));
        let line = stdout.lines().find(|l| l.starts_with(".fast.test\t")).unwrap_or_else(|| panic!("{stdout}"));
        assert!(line.contains("suspended until") && line.contains("4.7.28"), "{line}");

        // Resumed, the held mail goes.
        let (status, body) = server.post("/v1/operator/sites/.fast.test/resume", OPERATOR_TOKEN, json!({})).await;
        assert_ok(status, &body, 200, "resume .fast.test");
        for id in &held {
            wait_for_status(&server, &key, id, "Delivered", WAIT).await;
            let events = timeline(&server, &key, id).await;
            assert_eq!(types(&events), ["Queued", "Sent", "Delivered"], "{events:#?}");
        }
        // An API key does not reach the operator's API.
        let (status, body) = server.get("/v1/operator/sites", &key).await;
        assert_eq!((status, body["error"]["code"].as_str()), (401, Some("invalid_operator_token")), "{body}");
    });
}

#[test]
fn a_message_to_several_sites_waits_only_for_the_copies_whose_site_is_suspended() {
    block_on(async {
        let providers = Providers::start().await;
        let (server, _dns) = server(&providers).await;
        let key = server.key().to_owned();
        let suspend = json!({"duration": "1h", "reason": "warming up"});
        let (status, body) = server.post("/v1/operator/sites/.fast.test/suspend", OPERATOR_TOKEN, suspend).await;
        assert_ok(status, &body, 200, "suspend .fast.test");
        let mail = json!({
            "to": "a@fast.example", "cc": ["d@other.example"], "bcc": "b@fast.example",
            "from": "hello@shop.example", "subject": "Your receipt", "text": "Thanks!",
        });
        let id = send_ok(&server, &key, mail).await;

        // The other site's copy goes at once; the claim that sent it held the others back.
        let delivered =
            |events: &[Value], to: &str| events.iter().any(|e| e["type"] == "Delivered" && e["recipient"] == to);
        let deadline = std::time::Instant::now() + WAIT;
        let events = loop {
            let events = timeline(&server, &key, &id).await;
            if delivered(&events, "d@other.example") {
                break events;
            }
            assert!(std::time::Instant::now() < deadline, "no Delivered for d: {events:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let about_fast =
            events.iter().filter(|e| e["recipient"].as_str().is_some_and(|r| r.ends_with("@fast.example")));
        assert_eq!(about_fast.count(), 0, "the held copies record nothing: {events:#?}");
        assert_eq!(providers.other.message_count(), 1);
        assert_eq!(providers.fast.message_count(), 0, "the suspended site got nothing");

        let (status, body) = server.post("/v1/operator/sites/.fast.test/resume", OPERATOR_TOKEN, json!({})).await;
        assert_ok(status, &body, 200, "resume .fast.test");
        let message = wait_for_status(&server, &key, &id, "Delivered", WAIT).await;
        assert!(message["recipients"].as_array().is_some_and(|r| r.iter().all(|r| r["attempts"] == 1)), "{message}");
        let events = timeline(&server, &key, &id).await;
        for to in ["a@fast.example", "b@fast.example"] {
            let about: Vec<&str> =
                events.iter().filter(|e| e["recipient"] == to).map(|e| e["type"].as_str().unwrap_or("?")).collect();
            assert_eq!(about, ["Sent", "Delivered"], "{to}: {events:#?}");
        }
        assert_eq!(providers.fast.message_count(), 2, "one copy each, once");
    });
}

#[test]
fn two_nodes_on_one_database_share_a_sites_connection_limit() {
    block_on(async {
        let Some(db) = Database::create().await else { return };
        let providers = Providers::start().await;
        let admin = fresh_key();
        let dns = TestDnsServer::start([]).await.expect("DNS server starts");
        providers.publish(&dns).await;
        let mut nodes = Vec::new();
        for _ in 0..2 {
            let dir = DataDir::new();
            let mut env = providers.env(&dir);
            env.push(("TIDINGS_DATABASE_URL".to_owned(), db.url()));
            env.push(("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()));
            let options =
                Options { data_dir: Some(dir), bootstrap_key: Some(admin.clone()), env, ..Options::default() };
            nodes.push(TestServer::start_with(options).await);
        }
        verified_domain(&nodes[0], &dns, &admin, "shop.example").await;
        let mut ids = Vec::new();
        for n in 0..16 {
            let node = &nodes[n % 2];
            ids.push(send(node, &admin, &format!("user{n}@slow.example")).await);
        }
        for id in &ids {
            wait_for_status(&nodes[0], &admin, id, "Delivered", WAIT).await;
        }
        let received: usize = providers.slow.iter().map(SmtpSink::message_count).sum();
        assert_eq!(received, 16);
        assert!(
            providers.tally.max_open() <= 2,
            "two nodes together kept at most the site's 2 connections open: {}",
            providers.tally.max_open()
        );
    });
}
