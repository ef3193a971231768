//! Each domain's own return path (issue #33 item 6, contract §12 "Return path per domain")
//! through the built server in `mx` mode: the recipient's MX is an [`SmtpSink`] on
//! 127.0.0.2, named by a loopback DNS server that also holds the sending domain's records.
//! With `TIDINGS_INBOUND_MX_HOST` the domain's records ask for `bounces.<domain>`'s MX and
//! SPF; until they verify, mail leaves with the old envelope sender; once they do, with
//! `bounces+<id>-<signature>@bounces.<domain>`, for which pyspf (asking the same DNS server)
//! finds SPF passing for the address the sink saw, aligned with `From` as checkdmarc's
//! organisational domains say; a bounce sent to that address at the inbound listener bounces
//! the message, and a forged address on the subdomain is refused at `RCPT TO`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::common::mail::{send_ok, wait_for_status};
use crate::common::reports::{report_fixture, smtp_send};
use crate::common::{assert_ok, block_on, publish, start_with_dns};
use serde_json::{Value, json};
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_e2e::{Options, TestServer, fresh_key};
use tidings_transport_smtp::testing::{ReceivedMessage, SinkConfig, SmtpSink};

const WAIT: Duration = Duration::from_secs(30);
/// The public name of the bounce listener's host, which the MX records name.
const MX_HOST: &str = "mx.tidings.test";
/// The name the server sends with EHLO.
const EHLO: &str = "out.tidings.test";

struct Setup {
    server: TestServer,
    dns: TestDnsServer,
    sink: SmtpSink,
    inbound: SocketAddr,
    domain: Value,
}

async fn setup() -> Setup {
    let sink = SmtpSink::start_with(SinkConfig {
        bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), 0),
        ..SinkConfig::default()
    })
    .await
    .expect("the recipient's MX starts");
    let env = [
        ("TIDINGS_DELIVERY", "mx".to_owned()),
        ("TIDINGS_MX_PORT", sink.port().to_string()),
        ("TIDINGS_MX_ALLOW_PRIVATE", "true".to_owned()),
        ("TIDINGS_EHLO_NAME", EHLO.to_owned()),
        ("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:0".to_owned()),
        ("TIDINGS_INBOUND_MX_HOST", MX_HOST.to_owned()),
        ("TIDINGS_MTA_STS", "false".to_owned()),
    ];
    let env = env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    let options = Options { bootstrap_key: Some(fresh_key()), env, ..Options::default() };
    let (server, dns) = start_with_dns(options).await;
    dns.set_mx("example.org", &[(10, "mx.example-org.test")]).await;
    dns.add(TestRecord::a("mx.example-org.test", Ipv4Addr::new(127, 0, 0, 2))).await;
    let line = server.wait_for_log(&["inbound SMTP listening on "]).expect("the listener's address is logged");
    let inbound = line.rsplit(' ').next().unwrap().trim().parse().expect("an address");
    let (status, body) = server.post("/v1/domains", server.key(), json!({"domain": "shop.example"})).await;
    assert_ok(status, &body, 201, "add the domain");
    Setup { server, dns, sink, inbound, domain: body["data"].clone() }
}

impl Setup {
    /// `POST /v1/domains/{id}/verify`'s domain.
    async fn verify(&self) -> Value {
        let id = self.domain["id"].as_str().unwrap();
        let (status, body) = self.server.post(&format!("/v1/domains/{id}/verify"), self.server.key(), json!({})).await;
        assert_ok(status, &body, 200, "verify");
        body["data"].clone()
    }

    /// Sends a message to `to` and waits for it at the sink.
    async fn delivered(&self, to: &str) -> (String, ReceivedMessage) {
        let body = json!({"from": "orders@shop.example", "to": to, "subject": "Your order", "text": "Shipped."});
        let id = send_ok(&self.server, self.server.key(), body).await;
        let message = wait_for_status(&self.server, self.server.key(), &id, "Delivered", WAIT).await;
        let provider_id = message["providerMessageId"].as_str().expect("a sent message").to_owned();
        let received = self.sink.messages().into_iter().find(|m| m.text().contains(&provider_id));
        (id, received.expect("the message is at the recipient's MX"))
    }
}

/// The record of `domain` whose purpose is `purpose`.
fn record<'a>(domain: &'a Value, purpose: &str) -> &'a Value {
    let records = domain["dnsRecords"].as_array().expect("dnsRecords");
    records.iter().find(|r| r["purpose"] == purpose).unwrap_or_else(|| panic!("no {purpose} record in {domain}"))
}

/// What pyspf and checkdmarc make of the envelope (`tests/interop/check_spf.py`).
fn check_spf(dns: &TestDnsServer, received: &ReceivedMessage) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop/check_spf.py");
    let ip = received.peer.expect("the sink saw the client's address").to_string();
    let output = Command::new("python3")
        .arg(&script)
        .args(["--dns", &dns.addr().to_string(), "--ip", &ip, "--mail-from", &received.mail_from])
        .args(["--helo", &received.helo, "--from-domain", "shop.example"])
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => {}
        Some(3) => panic!("{stderr}\nrun ./test, which installs pyspf, dnspython and checkdmarc"),
        _ => panic!("check_spf.py failed ({}): {stderr}", output.status),
    }
    serde_json::from_slice(&output.stdout).expect("check_spf.py prints JSON")
}

#[test]
fn the_return_path_moves_onto_the_domain_once_its_records_verify_aligns_and_takes_bounces() {
    block_on(async {
        let s = setup().await;
        let mx = record(&s.domain, "Return-Path (MX)");
        assert_eq!(
            (&mx["type"], &mx["name"], &mx["value"]),
            (&json!("MX"), &json!("bounces.shop.example"), &json!(MX_HOST))
        );
        assert_eq!(mx["priority"], 10, "{mx}");
        let spf = record(&s.domain, "Return-Path SPF (TXT)");
        assert_eq!((&spf["type"], &spf["name"]), (&json!("TXT"), &json!("bounces.shop.example")));
        assert_eq!(s.domain["returnPathStatus"], "Pending");

        // Verified without the return path's records: sendable, with the From address as
        // envelope sender (no server-wide return path here).
        publish(&s.dns, &s.domain, &["SPF", "DKIM", "DMARC"]).await;
        let checked = s.verify().await;
        assert_eq!((&checked["overallStatus"], &checked["returnPathStatus"]), (&json!("Verified"), &json!("Failed")));
        let (_, before) = s.delivered("first@example.org").await;
        assert_eq!(before.mail_from, "orders@shop.example");

        // The return path's records published as the API gave them: its own return path.
        publish(&s.dns, &s.domain, &["Return-Path"]).await;
        let checked = s.verify().await;
        assert_eq!(checked["returnPathStatus"], "Verified", "{checked}");
        let (id, received) = s.delivered("gone@example.org").await;
        let prefix = format!("bounces+{}-", id.to_ascii_lowercase());
        assert!(
            received.mail_from.starts_with(&prefix) && received.mail_from.ends_with("@bounces.shop.example"),
            "{}",
            received.mail_from
        );
        assert_eq!(received.helo, EHLO);

        // What a receiver makes of it, by implementations of its own.
        let verdict = check_spf(&s.dns, &received);
        assert_eq!(verdict["spf"], "pass", "{verdict}");
        assert_eq!(verdict["mail_from_org"], "shop.example", "{verdict}");
        assert_eq!(verdict["aligned"], true, "{verdict}");

        // A forged address on the subdomain is refused at RCPT; the real one takes the bounce.
        let forged = received.mail_from.replace(&prefix, &format!("bounces+{}-", "01hzxq5ab3kjv7m2c9d8e6f4g0"));
        let raw = report_fixture("gmail_5_1_1.eml", "x", "gone@example.org", &forged);
        assert_eq!(smtp_send(s.inbound, &forged, &raw).await, [220, 250, 250, 550]);
        let provider_id = received.text().lines().find_map(|l| l.strip_prefix("Message-ID: <")).map(str::to_owned);
        let provider_id = provider_id.expect("a Message-ID").trim_end_matches('>').to_owned();
        let raw = report_fixture("gmail_5_1_1.eml", &provider_id, "gone@example.org", &received.mail_from);
        assert_eq!(smtp_send(s.inbound, &received.mail_from, &raw).await, [220, 250, 250, 250, 354, 250, 221]);
        let bounced = wait_for_status(&s.server, s.server.key(), &id, "Bounced", WAIT).await;
        assert_eq!(bounced["status"], "Bounced");
        let (status, body) = s.server.get("/v1/suppressions/gone@example.org", s.server.key()).await;
        assert_ok(status, &body, 200, "the bounced address is suppressed");
    });
}
