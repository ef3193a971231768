//! Bounce and complaint reports against the real binary
//! (docs/api.md#bounce-and-complaint-reports): a message is delivered through a relay (an SMTP sink on
//! loopback), then a report shaped like those Gmail, Outlook, Yahoo or Postfix send (the
//! fixtures of core's tests) is sent over SMTP to the server's inbound listener, and what it
//! changed is read through the API and a webhook receiver.
//!
//! Every test runs on one runtime ([`block_on`]): the sink, the DNS server and the receiver
//! are tasks that a test's own runtime would take down when that test ends.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::receiver::Receiver;
use crate::common::reports::{report_fixture, smtp_send};
use crate::common::{assert_error, assert_ok, block_on, server_relaying_to, verified_domain};
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::SmtpSink;

/// How long a test waits for something it polls for.
const WAIT: Duration = Duration::from_secs(15);
/// The return-path domain, the only one the listener accepts.
const BOUNCE_DOMAIN: &str = "bounces.example";

/// A server delivering through a sink, with the inbound listener on a free port, a verified
/// domain `shop.example`, and private webhook targets allowed.
struct Setup {
    server: TestServer,
    _dns: TestDnsServer,
    sink: SmtpSink,
    inbound: SocketAddr,
}

async fn setup() -> Setup {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let (server, dns) = server_relaying_to(
        &sink,
        &[
            ("TIDINGS_RETURN_PATH_DOMAIN", BOUNCE_DOMAIN),
            ("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:0"),
            ("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true"),
            // The flood below comes from one address: what it checks is the bound on events,
            // not the listener's per-client rate (inbound.rs checks that).
            ("TIDINGS_INBOUND_MESSAGES_PER_MINUTE", "100000"),
        ],
    )
    .await;
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "shop.example").await;
    let line = server.wait_for_log(&["inbound SMTP listening on "]).expect("the listener's address is logged");
    let addr = line.rsplit(' ').next().unwrap().trim().parse().expect("an address");
    Setup { server, _dns: dns, sink, inbound: addr }
}

/// Sends a message to `to` and waits until it is Delivered; returns it.
async fn delivered(server: &TestServer, to: &str) -> Value {
    let body = json!({"from": "orders@shop.example", "to": to, "subject": "Your order", "text": "Shipped."});
    let (status, body) = server.post("/v1/messages", server.key(), body).await;
    assert_ok(status, &body, 201, "send");
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    wait_status(server, &id, "Delivered").await
}

/// Polls the message until its status is `status`.
async fn wait_status(server: &TestServer, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
        if body["data"]["status"] == status {
            return body["data"].clone();
        }
        assert!(Instant::now() < deadline, "message {id} never became {status}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The envelope sender `message` left with, as the sink received it: its signed return path.
fn return_path_of(sink: &SmtpSink, message: &Value) -> String {
    let provider_id = message["providerMessageId"].as_str().expect("a sent message");
    let received = sink.messages().into_iter().find(|m| m.text().contains(provider_id));
    received.unwrap_or_else(|| panic!("{provider_id} is not at the sink")).mail_from
}

/// A report fixture from core's tests about `message` (sent to `recipient` from
/// `return_path`).
fn fixture(name: &str, message: &Value, recipient: &str, return_path: &str) -> Vec<u8> {
    report_fixture(name, message["providerMessageId"].as_str().unwrap(), recipient, return_path)
}

#[test]
fn a_hard_bounce_report_bounces_suppresses_and_fires_the_webhook() {
    block_on(async {
        let s = setup().await;
        let receiver = Receiver::start().await;
        let hook = json!({"url": receiver.url("/bounces"), "eventTypes": ["Bounced", "Complained"]});
        let (status, body) = s.server.post("/v1/webhooks", s.server.key(), hook).await;
        assert_ok(status, &body, 201, "webhook");

        let message = delivered(&s.server, "gone@example.com").await;
        let return_path = return_path_of(&s.sink, &message);
        let prefix = format!("bounces+{}-", message["id"].as_str().unwrap().to_ascii_lowercase());
        assert!(return_path.starts_with(&prefix) && return_path.ends_with(BOUNCE_DOMAIN), "{return_path}");
        let codes = smtp_send(
            s.inbound,
            &return_path.to_ascii_uppercase(),
            &fixture("gmail_5_1_1.eml", &message, "gone@example.com", &return_path),
        )
        .await;
        assert_eq!(codes, [220, 250, 250, 250, 354, 250, 221], "the report is accepted");

        let id = message["id"].as_str().unwrap();
        wait_status(&s.server, id, "Bounced").await;
        let (_, events) = s.server.get(&format!("/v1/messages/{id}/events"), s.server.key()).await;
        let event = events["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "Bounced")
            .expect("a Bounced event")
            .clone();
        assert_eq!(event["details"]["smtpCode"], 550, "{event}");
        assert_eq!(event["details"]["enhancedCode"], "5.1.1", "{event}");
        assert_eq!(event["details"]["bounceType"], "Hard", "{event}");

        let (status, body) = s.server.get("/v1/suppressions/gone@example.com", s.server.key()).await;
        assert_ok(status, &body, 200, "the address is suppressed");
        assert_eq!(body["data"]["reason"], "HardBounce", "{body}");
        assert_eq!(body["data"]["messageId"], id, "{body}");

        let hit = receiver.wait_for("/bounces", 1, WAIT).await.remove(0);
        assert_eq!(hit.json()["type"], "Bounced");
        assert_eq!(hit.json()["data"]["messageId"], id);

        let body = json!({"from": "orders@shop.example", "to": "gone@example.com", "subject": "Again", "text": "x"});
        let (status, body) = s.server.post("/v1/messages", s.server.key(), body).await;
        assert_error(status, &body, 422, "recipient_suppressed", "the next send to the bounced address");

        // The same report again changes nothing and is still accepted.
        let codes =
            smtp_send(s.inbound, &return_path, &fixture("gmail_5_1_1.eml", &message, "gone@example.com", &return_path))
                .await;
        assert_eq!(codes.last(), Some(&221));
        assert_eq!(codes[5], 250, "a duplicate is accepted");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (_, events) = s.server.get(&format!("/v1/messages/{id}/events"), s.server.key()).await;
        assert_eq!(events["data"].as_array().unwrap().iter().filter(|e| e["type"] == "Bounced").count(), 1);
    });
}

#[test]
fn a_complaint_report_marks_the_message_complained_and_suppresses() {
    block_on(async {
        let s = setup().await;
        let message = delivered(&s.server, "angry@example.com").await;
        let id = message["id"].as_str().unwrap();
        // Sent to the abuse desk's own address at our domain: matched by the signed return
        // path the report quotes as Original-Mail-From.
        let return_path = return_path_of(&s.sink, &message);
        let codes = smtp_send(
            s.inbound,
            &format!("fbl@{BOUNCE_DOMAIN}"),
            &fixture("yahoo_arf_abuse.eml", &message, "angry@example.com", &return_path),
        )
        .await;
        assert_eq!(codes, [220, 250, 250, 250, 354, 250, 221]);
        wait_status(&s.server, id, "Complained").await;
        let (status, body) = s.server.get("/v1/suppressions/angry@example.com", s.server.key()).await;
        assert_ok(status, &body, 200, "suppressed");
        assert_eq!(body["data"]["reason"], "Complaint", "{body}");
        // The operator's log names both, by id.
        let line = s.server.wait_for_log(&["tidings::ops", "complaint received", &format!("message_id={id}")]);
        assert!(line.is_some_and(|l| l.contains(" WARN ")), "{:?}", s.server.stderr_lines());
        let line = s.server.wait_for_log(&["address suppressed", &format!("message_id={id}"), "Complaint"]);
        assert!(line.is_some(), "{:?}", s.server.stderr_lines());
    });
}

#[test]
fn unmatched_malformed_and_misaddressed_reports_change_nothing() {
    block_on(async {
        let s = setup().await;
        let message = delivered(&s.server, "fine@example.com").await;
        let id = message["id"].as_str().unwrap();

        // About a message that does not exist: accepted, nothing happens.
        let mut stranger = message.clone();
        stranger["id"] = json!("01JZZZZZZZZZZZZZZZZZZZZZZZ");
        stranger["providerMessageId"] = json!("01JZZZZZZZZZZZZZZZZZZZZZZZ@shop.example");
        let return_path = return_path_of(&s.sink, &message);
        let forged = return_path.replace(&id.to_ascii_lowercase(), "01jzzzzzzzzzzzzzzzzzzzzzzz");
        let codes =
            smtp_send(s.inbound, &forged, &fixture("gmail_5_1_1.eml", &stranger, "fine@example.com", &forged)).await;
        assert_eq!(codes[5], 250, "an unmatched report is accepted: {codes:?}");
        // Malformed ones likewise, and the listener goes on serving. (A truncated report
        // still says what arrived of it, so it goes to the unknown message.)
        for (name, about) in
            [("garbage.bin", &message), ("missing_boundary.eml", &message), ("truncated_multipart.eml", &stranger)]
        {
            let rcpt = format!("bounces+{}@{BOUNCE_DOMAIN}", about["id"].as_str().unwrap().to_ascii_lowercase());
            let codes = smtp_send(s.inbound, &rcpt, &fixture(name, about, "fine@example.com", &rcpt)).await;
            assert_eq!(codes, [220, 250, 250, 250, 354, 250, 221], "{name}");
        }
        // Mail for any other domain is refused: the listener is not a relay.
        let codes = smtp_send(s.inbound, "someone@elsewhere.example", b"Subject: hi\r\n\r\nhello\r\n").await;
        assert_eq!(codes.last(), Some(&550), "{codes:?}");

        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = wait_status(&s.server, id, "Delivered").await;
        assert_eq!(now["status"], "Delivered");
        let (status, body) = s.server.get("/v1/suppressions/fine@example.com", s.server.key()).await;
        assert_error(status, &body, 404, "not_found", "no suppression from unmatched or malformed reports");
        let log = s.server.stderr_lines().join("\n");
        assert!(log.contains("report: unmatched"), "unmatched reports are counted in the log");
    });
}

/// The id's 128 bits, for comparing ids as numbers.
fn id_bits(message: &Value) -> u128 {
    let id = message["id"].as_str().expect("an id");
    tidings_core::ids::MessageId::parse(id).expect("a ULID").ulid().0
}

/// Polls the message until it is `Delivered`; `messages` is every message of the batch.
async fn all_delivered(server: &TestServer, key: &str, ids: &[String]) -> Vec<Value> {
    let mut delivered = Vec::new();
    for id in ids {
        let deadline = Instant::now() + WAIT;
        loop {
            let (_, body) = server.get(&format!("/v1/messages/{id}"), key).await;
            if body["data"]["status"] == "Delivered" {
                delivered.push(body["data"].clone());
                break;
            }
            assert!(Instant::now() < deadline, "message {id} never became Delivered: {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    delivered
}

/// Issue #28, item 1: the recipient of one message of a batch reports on the others. Before,
/// 239 forged reports over one session bounced 19 of 50 messages and suppressed 19 addresses
/// the attacker never saw; reports are now matched only by a return path signed for the
/// message and its recipient.
#[test]
fn forged_reports_about_the_other_messages_of_a_batch_change_nothing() {
    block_on(async {
        let s = setup().await;
        let receiver = Receiver::start().await;
        let hook = json!({"url": receiver.url("/events"), "eventTypes": ["Bounced", "Complained", "Deferred"]});
        let (status, body) = s.server.post("/v1/webhooks", s.server.key(), hook).await;
        assert_ok(status, &body, 201, "webhook");
        let (_, key) = crate::common::create_key(&s.server, s.server.key(), json!({"rateLimitPerSec": 100})).await;
        let batch: Value = (0..20)
            .map(|i| json!({"from": "orders@shop.example", "to": format!("r{i}@example.net"), "subject": "Receipt", "text": "Thanks."}))
            .collect();
        let (status, body) = s.server.post("/v1/messages/batch", &key, batch).await;
        assert_ok(status, &body, 201, "batch");
        let ids: Vec<String> =
            body["data"].as_array().unwrap().iter().map(|r| r["message"]["id"].as_str().unwrap().to_owned()).collect();
        let messages = all_delivered(&s.server, &key, &ids).await;

        // Ids made together are not one another plus a small step.
        let mut bits: Vec<u128> = messages.iter().map(id_bits).collect();
        bits.sort_unstable();
        let closest = bits.windows(2).map(|w| w[1] - w[0]).min().unwrap();
        println!("closest ids of a batch of 20 differ by {closest} (2^{:.1})", (closest as f64).log2());
        assert!(closest > 1 << 20, "neighbouring ids differ by only {closest}");

        let (mine, others) = messages.split_first().unwrap();
        let my_return_path = return_path_of(&s.sink, mine);
        let my_id = mine["id"].as_str().unwrap().to_ascii_lowercase();
        let mut sent = 0;
        for other in others {
            let to = other["to"].as_str().unwrap();
            let other_id = other["id"].as_str().unwrap().to_ascii_lowercase();
            let unsigned = format!("bounces+{other_id}@{BOUNCE_DOMAIN}");
            let my_tag = my_return_path.replace(&my_id, &other_id);
            let attempts = [
                (unsigned.clone(), fixture("gmail_5_1_1.eml", other, to, &unsigned)),
                (my_tag.clone(), fixture("gmail_5_1_1.eml", other, to, &my_tag)),
                (format!("fbl@{BOUNCE_DOMAIN}"), fixture("yahoo_arf_abuse.eml", other, to, &my_tag)),
                // Matched only by the Message-ID it quotes (the attacker read it somewhere).
                (format!("fbl@{BOUNCE_DOMAIN}"), fixture("yahoo_arf_abuse.eml", other, to, "x@attacker.example")),
            ];
            for (rcpt, raw) in attempts {
                let codes = smtp_send(s.inbound, &rcpt, &raw).await;
                assert_eq!(codes, [220, 250, 250, 250, 354, 250, 221], "accepted and dropped: {rcpt}");
                sent += 1;
            }
        }

        // The genuine report on the attacker's own message still works, and its webhook
        // arrives after anything the forgeries could have queued.
        let codes =
            smtp_send(s.inbound, &my_return_path, &fixture("gmail_5_1_1.eml", mine, "r0@example.net", &my_return_path))
                .await;
        assert_eq!(codes[5], 250);
        wait_status(&s.server, mine["id"].as_str().unwrap(), "Bounced").await;
        let hits = receiver.wait_for("/events", 1, WAIT).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let hits = receiver.hits("/events").len().max(hits.len());

        let mut changed = 0;
        for other in others {
            let id = other["id"].as_str().unwrap();
            let (_, events) = s.server.get(&format!("/v1/messages/{id}/events"), &key).await;
            let types: Vec<&str> =
                events["data"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
            if types != ["Queued", "Sent", "Delivered"] {
                changed += 1;
                println!("message {id} changed: {types:?}");
            }
        }
        let (_, suppressions) = s.server.get("/v1/suppressions", s.server.key()).await;
        let suppressed: Vec<&str> =
            suppressions["data"].as_array().unwrap().iter().map(|e| e["email"].as_str().unwrap()).collect();
        let unmatched = s.server.stderr_lines().iter().filter(|l| l.contains("report: unmatched")).count();
        println!(
            "forged reports: {sent} sent, other messages changed {changed} of {}, suppressed {suppressed:?}, \
             webhooks {hits}, logged unmatched {unmatched}",
            others.len()
        );
        assert_eq!(changed, 0, "no other message changed");
        assert_eq!(suppressed, ["r0@example.net"], "only the genuine bounce suppressed its own address");
        assert_eq!(hits, 1, "only the genuine bounce fired a webhook");
        assert_eq!(unmatched, sent, "every forgery is counted as unmatched");
    });
}

/// Issue #28, item 2: before, 10,000 delay reports in 26 s made 10,000 `Deferred` events and
/// 10,000 webhooks. A message now keeps 5 reported delays, however many arrive.
#[test]
fn a_flood_of_delay_reports_keeps_a_bounded_number_of_events_and_webhooks() {
    block_on(async {
        let s = setup().await;
        let receiver = Receiver::start().await;
        let hook = json!({"url": receiver.url("/delays"), "eventTypes": ["Deferred"]});
        let (status, body) = s.server.post("/v1/webhooks", s.server.key(), hook).await;
        assert_ok(status, &body, 201, "webhook");
        let message = delivered(&s.server, "slow@example.com").await;
        let return_path = return_path_of(&s.sink, &message);
        let base = String::from_utf8(fixture("postfix_delayed_4_7_0.eml", &message, "slow@example.com", &return_path))
            .expect("a text fixture");

        const CONNECTIONS: usize = 4;
        const PER_CONNECTION: usize = 100;
        let started = Instant::now();
        let senders = (0..CONNECTIONS).map(|c| {
            let (base, return_path, inbound) = (base.clone(), return_path.clone(), s.inbound);
            tokio::spawn(async move {
                let mut codes = Vec::new();
                for n in 0..PER_CONNECTION {
                    // Each report different, so none is a mere repeat of another.
                    let raw = base.replace("in 300 seconds", &format!("in {} seconds", c * PER_CONNECTION + n));
                    codes.push(smtp_send(inbound, &return_path, raw.as_bytes()).await[5]);
                }
                codes
            })
        });
        let codes: Vec<u16> = futures::future::join_all(senders).await.into_iter().flat_map(|r| r.unwrap()).collect();
        let took = started.elapsed();
        let accepted = codes.iter().filter(|c| **c == 250).count();
        assert!(codes.iter().all(|c| *c == 250 || *c == 451), "every report answered 250 or 451: {codes:?}");

        receiver.wait_for("/delays", 5, WAIT).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let hooks = receiver.hits("/delays").len();
        let id = message["id"].as_str().unwrap();
        let (_, events) = s.server.get(&format!("/v1/messages/{id}/events?limit=200"), s.server.key()).await;
        let deferred = events["data"].as_array().unwrap().iter().filter(|e| e["type"] == "Deferred").count();
        println!(
            "delay flood: {} reports in {took:.1?} over {CONNECTIONS} connections, {accepted} answered 250; \
             Deferred events {deferred}, webhooks {hooks}",
            codes.len()
        );
        assert_eq!(deferred, 5, "a message keeps 5 reported delays");
        assert_eq!(hooks, 5, "one webhook per kept delay");
        assert_eq!(wait_status(&s.server, id, "Delivered").await["status"], "Delivered");
    });
}
