//! One email to several people against the real binary (docs/api.md#recipients, contract
//! §10): sends with `to` lists, `cc` and `bcc` go through a relay (an SMTP sink on
//! loopback), and what arrives is parsed back: one envelope per recipient, each from the
//! return path signed for it, every copy with the same `To:` and `Cc:` and no `Bcc:`, the
//! same bytes for all (signed once) unless tracked. Each recipient's status, the message's
//! aggregate, per-recipient events and webhooks, suppression of one recipient, a bounce
//! report about one, opens attributed to the recipient whose copy was opened, and the `to`
//! filter are read back through the API and a webhook receiver.
//!
//! Every test runs on one runtime ([`block_on`]): the sink, the DNS server and the receiver
//! are tasks that a test's own runtime would take down when that test ends.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::dkim::assert_signed_by;
use crate::common::receiver::Receiver;
use crate::common::reports::{report_fixture, smtp_send};
use crate::common::{
    assert_error, assert_invalid, assert_ok, block_on, dashboard_page, dashboard_session, server_relaying_to,
    verified_domain,
};
use mail_parser::MessageParser;
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::{ReceivedMessage, Rule, SmtpSink, Stage};

/// How long a test waits for something it polls for.
const WAIT: Duration = Duration::from_secs(20);
/// The verified sending domain.
const DOMAIN: &str = "shop.example";
/// The return-path domain, the only one the inbound listener accepts.
const BOUNCE_DOMAIN: &str = "bounces.example";

/// A server relaying to a sink, with the inbound listener, the return path, a verified
/// domain and private webhook targets allowed.
struct Setup {
    // Dropped in this order: the server goes before the sink and DNS server it uses.
    server: TestServer,
    dns: TestDnsServer,
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
            ("TIDINGS_RETRY_SCHEDULE", "1s"),
        ],
    )
    .await;
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, DOMAIN).await;
    let line = server.wait_for_log(&["inbound SMTP listening on "]).expect("the listener's address is logged");
    let inbound = line.rsplit(' ').next().unwrap().trim().parse().expect("an address");
    Setup { server, dns, sink, inbound }
}

/// `POST /v1/messages` with the bootstrap key, expecting 201; the message.
async fn send(server: &TestServer, body: Value) -> Value {
    let (status, reply) = server.post("/v1/messages", server.key(), body.clone()).await;
    assert_ok(status, &reply, 201, &format!("send {body}"));
    reply["data"].clone()
}

async fn get(server: &TestServer, id: &str) -> Value {
    let (status, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
    assert_ok(status, &body, 200, "get the message");
    body["data"].clone()
}

/// Polls the message until its status is `status`.
async fn wait_status(server: &TestServer, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let message = get(server, id).await;
        if message["status"] == status {
            return message;
        }
        assert!(Instant::now() < deadline, "message {id} never became {status}: {message}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn timeline(server: &TestServer, id: &str) -> Vec<Value> {
    let (status, body) = server.get(&format!("/v1/messages/{id}/events?limit=200"), server.key()).await;
    assert_ok(status, &body, 200, "the timeline");
    body["data"].as_array().unwrap().clone()
}

/// `(type, recipient)` of each event; the recipient `-` when the event has none.
fn typed(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| (e["type"].as_str().unwrap().to_owned(), e["recipient"].as_str().unwrap_or("-").to_owned()))
        .collect()
}

/// `(email, type, status)` of each recipient of a message.
fn recipients(message: &Value) -> Vec<(String, String, String)> {
    message["recipients"]
        .as_array()
        .unwrap_or_else(|| panic!("recipients: {message}"))
        .iter()
        .map(|r| {
            (
                r["email"].as_str().unwrap().to_owned(),
                r["type"].as_str().unwrap().to_owned(),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The copies of the message with this `providerMessageId` that the sink received.
fn copies(sink: &SmtpSink, provider_id: &str) -> Vec<ReceivedMessage> {
    sink.messages().into_iter().filter(|m| m.text().contains(provider_id)).collect()
}

/// The ids of `GET /v1/messages?to=...`.
async fn listed_to(server: &TestServer, to: &str) -> Vec<String> {
    let (status, body) = server.get(&format!("/v1/messages?to={to}"), server.key()).await;
    assert_ok(status, &body, 200, "list by recipient");
    body["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_send_to_to_cc_and_bcc_is_one_message_with_an_envelope_per_recipient_and_the_same_signed_bytes() {
    block_on(async {
        let s = setup().await;
        let receiver = Receiver::start().await;
        let hook = json!({"url": receiver.url("/events"), "eventTypes": ["Queued", "Delivered"]});
        let (status, body) = s.server.post("/v1/webhooks", s.server.key(), hook).await;
        assert_ok(status, &body, 201, "webhook");
        let body = json!({
            "from": "Shop <orders@shop.example>",
            "to": ["Ann Example <ann@x.example>", "bob@y.example"],
            "cc": "Carol <carol@z.example>",
            "bcc": ["dan@w.example", "ANN@x.example"],
            "subject": "Your receipt",
            "text": "Thanks for your order.",
        });
        let request = |server: &TestServer| {
            server
                .request(reqwest::Method::POST, "/v1/messages")
                .bearer_auth(server.key())
                .header("Idempotency-Key", "receipt-42")
                .json(&body)
        };
        let response = request(&s.server).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 201);
        let sent: Value = response.json().await.unwrap();
        let m = &sent["data"];
        assert_eq!(m["to"], "\"Ann Example\" <ann@x.example>, bob@y.example", "{m}");
        assert_eq!(m["cc"], json!(["\"Carol\" <carol@z.example>"]), "{m}");
        assert_eq!(m["bcc"], json!(["dan@w.example"]), "the repeated address receives once, as to: {m}");
        let named: Vec<(String, String)> = m["recipients"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["email"].as_str().unwrap().to_owned(), r["name"].as_str().unwrap_or("").to_owned()))
            .collect();
        assert_eq!(
            named,
            [
                ("ann@x.example".to_owned(), "Ann Example".to_owned()),
                ("bob@y.example".to_owned(), String::new()),
                ("carol@z.example".to_owned(), "Carol".to_owned()),
                ("dan@w.example".to_owned(), String::new()),
            ]
        );
        let id = m["id"].as_str().unwrap().to_owned();

        let delivered = wait_status(&s.server, &id, "Delivered").await;
        for (email, _, status) in recipients(&delivered) {
            assert_eq!(status, "Delivered", "{email}: {delivered}");
        }
        assert!(delivered["recipients"].as_array().unwrap().iter().all(|r| r["attempts"] == 1), "{delivered}");

        // One copy per recipient, each in its own envelope from the return path signed for
        // it, all the same bytes (signed once; DKIM's t= included).
        let provider_id = delivered["providerMessageId"].as_str().unwrap();
        let got = copies(&s.sink, provider_id);
        let rcpts: BTreeSet<String> = got.iter().flat_map(|c| c.recipients.clone()).collect();
        assert_eq!(
            rcpts,
            ["ann@x.example", "bob@y.example", "carol@z.example", "dan@w.example"].map(String::from).into()
        );
        assert!(got.iter().all(|c| c.recipients.len() == 1), "one RCPT per envelope");
        let prefix = format!("bounces+{}-", id.to_ascii_lowercase());
        let paths: BTreeSet<&str> = got.iter().map(|c| c.mail_from.as_str()).collect();
        assert_eq!(paths.len(), 4, "a return path per recipient: {paths:?}");
        assert!(paths.iter().all(|p| p.starts_with(&prefix) && p.ends_with(BOUNCE_DOMAIN)), "{paths:?}");
        assert!(got.iter().all(|c| c.data == got[0].data), "every copy is the same signed bytes");
        assert_signed_by(&got[0].data, s.dns.addr(), DOMAIN).await;
        let parsed = MessageParser::default().parse(&got[0].data).unwrap();
        let to: Vec<(Option<&str>, Option<&str>)> =
            parsed.to().unwrap().iter().map(|a| (a.name(), a.address())).collect();
        assert_eq!(to, [(Some("Ann Example"), Some("ann@x.example")), (None, Some("bob@y.example"))]);
        let cc: Vec<(Option<&str>, Option<&str>)> =
            parsed.cc().unwrap().iter().map(|a| (a.name(), a.address())).collect();
        assert_eq!(cc, [(Some("Carol"), Some("carol@z.example"))]);
        assert!(parsed.header("Bcc").is_none() && !got[0].text().contains("dan@w.example"), "no Bcc anywhere");
        assert_eq!(parsed.message_id(), Some(provider_id));

        // The timeline: Queued for all, then Sent and Delivered per recipient.
        let events = timeline(&s.server, &id).await;
        let kinds = typed(&events);
        assert_eq!(kinds[0], ("Queued".to_owned(), "-".to_owned()), "{events:#?}");
        for who in ["ann@x.example", "bob@y.example", "carol@z.example", "dan@w.example"] {
            for kind in ["Sent", "Delivered"] {
                assert_eq!(
                    kinds.iter().filter(|(k, r)| k == kind && r == who).count(),
                    1,
                    "{kind} for {who}: {kinds:?}"
                );
            }
        }
        // Webhooks: the Queued one with the message's to, one Delivered per recipient whose
        // `to` is that recipient.
        let hits = receiver.wait_for("/events", 5, WAIT).await;
        let mut delivered_to: Vec<String> = Vec::new();
        for hit in &hits {
            let payload = hit.json();
            match payload["type"].as_str().unwrap() {
                "Queued" => assert_eq!(payload["data"]["to"], m["to"], "{payload}"),
                "Delivered" => {
                    assert_eq!(payload["data"]["to"], payload["data"]["recipient"], "{payload}");
                    delivered_to.push(payload["data"]["to"].as_str().unwrap().to_owned());
                }
                other => panic!("unexpected {other}"),
            }
        }
        delivered_to.sort();
        assert_eq!(delivered_to, ["ann@x.example", "bob@y.example", "carol@z.example", "dan@w.example"]);

        // The same Idempotency-Key answers the same message; nothing more is sent.
        let replay = request(&s.server).send().await.unwrap();
        assert_eq!(replay.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));
        let replayed: Value = replay.json().await.unwrap();
        assert_eq!(replayed["data"]["id"], id.as_str());
        // Found by any recipient, cc and bcc included, whatever the case.
        for who in ["bob@y.example", "Carol@Z.example", "dan@w.example"] {
            assert_eq!(listed_to(&s.server, who).await, std::slice::from_ref(&id), "?to={who}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(copies(&s.sink, provider_id).len(), 4, "the replay sent nothing");
    });
}

#[test]
fn one_refused_recipient_bounces_and_is_suppressed_alone_and_the_message_is_partially_delivered() {
    block_on(async {
        let s = setup().await;
        s.sink.add_rule(Rule::reply(Stage::Rcpt, 550, "5.1.1 user unknown").for_recipient("gone@x.example"));
        let m = send(
            &s.server,
            json!({"from": "orders@shop.example", "to": ["ok@x.example", "gone@x.example"], "subject": "Hi", "text": "x"}),
        )
        .await;
        let id = m["id"].as_str().unwrap();

        let done = wait_status(&s.server, id, "PartiallyDelivered").await;
        assert_eq!(
            recipients(&done),
            [
                ("ok@x.example".to_owned(), "to".to_owned(), "Delivered".to_owned()),
                ("gone@x.example".to_owned(), "to".to_owned(), "Bounced".to_owned()),
            ]
        );
        let (status, body) = s.server.get("/v1/suppressions/gone@x.example", s.server.key()).await;
        assert_ok(status, &body, 200, "the refused address is suppressed");
        assert_eq!(body["data"]["reason"], "HardBounce");
        let (status, body) = s.server.get("/v1/suppressions/ok@x.example", s.server.key()).await;
        assert_error(status, &body, 404, "not_found", "the delivered one is not");

        // Next time the suppressed one is skipped at once, with an event, and the other goes.
        let again = send(
            &s.server,
            json!({"from": "orders@shop.example", "to": "ok@x.example", "cc": "gone@x.example", "subject": "Hi", "text": "x"}),
        )
        .await;
        let again_id = again["id"].as_str().unwrap();
        assert_eq!(recipients(&again)[1].2, "Suppressed", "{again}");
        let events = timeline(&s.server, again_id).await;
        assert_eq!(
            typed(&events)[..2],
            [("Queued".to_owned(), "-".to_owned()), ("Suppressed".to_owned(), "gone@x.example".to_owned())]
        );
        let after = wait_status(&s.server, again_id, "PartiallyDelivered").await;
        assert_eq!(recipients(&after)[0].2, "Delivered", "{after}");
        assert_eq!(copies(&s.sink, after["providerMessageId"].as_str().unwrap()).len(), 1, "only ok@ received it");

        // Every recipient suppressed: a 422 naming each, and nothing queued.
        let (status, body) =
            s.server.post("/v1/suppressions", s.server.key(), json!({"email": "also-gone@x.example"})).await;
        assert_ok(status, &body, 201, "suppress another");
        let (status, body) = s
            .server
            .post(
                "/v1/messages",
                s.server.key(),
                json!({"from": "orders@shop.example", "to": "gone@x.example", "bcc": ["also-gone@x.example"], "subject": "Hi", "text": "x"}),
            )
            .await;
        assert_error(status, &body, 422, "recipient_suppressed", "every recipient suppressed");
        let details: Vec<(String, String)> = body["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["field"].as_str().unwrap().to_owned(), d["message"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(details.len(), 2, "{body}");
        assert_eq!(details[0].0, "to");
        assert!(details[0].1.contains("gone@x.example") && details[1].1.contains("also-gone@x.example"), "{body}");
    });
}

#[test]
fn lists_over_fifty_bad_entries_and_an_empty_to_are_refused_naming_the_field() {
    block_on(async {
        let s = setup().await;
        let send = |body: Value| {
            let server = &s.server;
            async move { server.post("/v1/messages", server.key(), body).await }
        };
        let base = |to: Value| json!({"from": "orders@shop.example", "to": to, "subject": "Hi", "text": "x"});
        let to: Vec<String> = (0..30).map(|i| format!("t{i}@x.example")).collect();
        let cc: Vec<String> = (0..20).map(|i| format!("c{i}@x.example")).collect();
        let mut fifty = base(json!(to));
        fifty["cc"] = json!(cc);
        fifty["bcc"] = json!(["T0@x.example"]);
        let (status, body) = send(fifty.clone()).await;
        assert_ok(status, &body, 201, "fifty distinct recipients, one repeated");
        assert_eq!(body["data"]["recipients"].as_array().unwrap().len(), 50);
        fifty["bcc"] = json!(["new@x.example"]);
        let (status, body) = send(fifty).await;
        assert_invalid(status, &body, &["bcc"], "the 51st recipient");
        let (status, body) = send(base(json!([]))).await;
        assert_invalid(status, &body, &["to"], "an empty to");
        let mut bad = base(json!("ok@x.example"));
        bad["cc"] = json!(["fine@x.example", "not an address"]);
        let (status, body) = send(bad).await;
        assert_invalid(status, &body, &["cc[1]"], "a bad cc entry");
        let (status, body) = send(base(json!(42))).await;
        assert_invalid(status, &body, &["to"], "a number");
    });
}

#[test]
fn a_bounce_report_about_one_recipient_bounces_and_suppresses_that_one_only() {
    block_on(async {
        let s = setup().await;
        let m = send(
            &s.server,
            json!({"from": "orders@shop.example", "to": "stays@x.example", "cc": ["leaves@x.example"], "subject": "Hi", "text": "x"}),
        )
        .await;
        let id = m["id"].as_str().unwrap();
        let delivered = wait_status(&s.server, id, "Delivered").await;
        let provider_id = delivered["providerMessageId"].as_str().unwrap();
        let copy = copies(&s.sink, provider_id).into_iter().find(|c| c.recipients == ["leaves@x.example"]).unwrap();

        // The return path of leaves@'s copy proves the report is about leaves@.
        let codes = smtp_send(
            s.inbound,
            &copy.mail_from,
            &report_fixture("gmail_5_1_1.eml", provider_id, "leaves@x.example", &copy.mail_from),
        )
        .await;
        assert_eq!(codes, [220, 250, 250, 250, 354, 250, 221], "the report is accepted");

        let after = wait_status(&s.server, id, "PartiallyDelivered").await;
        assert_eq!(
            recipients(&after),
            [
                ("stays@x.example".to_owned(), "to".to_owned(), "Delivered".to_owned()),
                ("leaves@x.example".to_owned(), "cc".to_owned(), "Bounced".to_owned()),
            ]
        );
        let (status, _) = s.server.get("/v1/suppressions/leaves@x.example", s.server.key()).await;
        assert_eq!(status, 200, "the bounced recipient is suppressed");
        let (status, _) = s.server.get("/v1/suppressions/stays@x.example", s.server.key()).await;
        assert_eq!(status, 404, "the other is not");
        let events = timeline(&s.server, id).await;
        let bounced: Vec<_> = typed(&events).into_iter().filter(|(k, _)| k == "Bounced").collect();
        assert_eq!(bounced, [("Bounced".to_owned(), "leaves@x.example".to_owned())]);

        // The message's page links the suppression it caused, and only that one.
        let session = dashboard_session(&s.server, s.server.key()).await;
        let (status, page) = dashboard_page(&s.server, &session, &format!("/messages/{id}")).await;
        assert_eq!(status, 200);
        let caused = page.split(r#"<ul id="caused-suppressions">"#).nth(1).and_then(|rest| rest.split("</ul>").next());
        let caused = caused.unwrap_or_else(|| panic!("no suppressions section on the page:\n{page}"));
        assert!(caused.contains(r#"href="/suppressions?email=leaves%40x.example""#), "{caused}");
        assert!(!caused.contains("stays@"), "{caused}");
    });
}

#[test]
fn opens_are_attributed_to_the_recipient_whose_copy_was_opened() {
    block_on(async {
        let s = setup().await;
        let m = send(
            &s.server,
            json!({
                "from": "orders@shop.example", "to": ["first@x.example", "second@x.example"],
                "subject": "Tracked", "html": "<html><body><p>Hello</p></body></html>", "tracking": {"opens": true},
            }),
        )
        .await;
        let id = m["id"].as_str().unwrap();
        let delivered = wait_status(&s.server, id, "Delivered").await;
        let got = copies(&s.sink, delivered["providerMessageId"].as_str().unwrap());
        assert_eq!(got.len(), 2);
        assert_ne!(got[0].data, got[1].data, "each copy carries its own tokens (and signature)");
        for copy in &got {
            assert_signed_by(&copy.data, s.dns.addr(), DOMAIN).await;
        }
        let second = got.iter().find(|c| c.recipients == ["second@x.example"]).unwrap();
        let html = MessageParser::default().parse(&second.data).unwrap().body_html(0).unwrap().into_owned();
        let prefix = s.server.url("/t/o/");
        let at = html.find(&prefix).expect("a pixel");
        let pixel = html[at..].split(['"', '\'', ' ', '>']).next().unwrap().to_owned();
        let path = pixel.strip_prefix(&s.server.url("")).unwrap().to_owned();
        let response = s.server.request(reqwest::Method::GET, &path).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "the pixel");

        let deadline = Instant::now() + WAIT;
        loop {
            let opened: Vec<_> =
                typed(&timeline(&s.server, id).await).into_iter().filter(|(k, _)| k == "Opened").collect();
            if !opened.is_empty() {
                assert_eq!(opened, [("Opened".to_owned(), "second@x.example".to_owned())]);
                break;
            }
            assert!(Instant::now() < deadline, "no Opened event");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

#[test]
fn a_deferred_recipient_is_retried_alone_and_the_message_waits_for_it() {
    block_on(async {
        let s = setup().await;
        s.sink.add_rule(Rule::reply(Stage::Rcpt, 451, "4.2.1 mailbox busy").times(1).for_recipient("busy@x.example"));
        let m = send(
            &s.server,
            json!({"from": "orders@shop.example", "to": ["quick@x.example", "busy@x.example"], "subject": "Hi", "text": "x"}),
        )
        .await;
        let id = m["id"].as_str().unwrap();

        let done = wait_status(&s.server, id, "Delivered").await;
        let attempts: Vec<(String, u64)> = done["recipients"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["email"].as_str().unwrap().to_owned(), r["attempts"].as_u64().unwrap()))
            .collect();
        assert_eq!(attempts, [("quick@x.example".to_owned(), 1), ("busy@x.example".to_owned(), 2)], "{done}");
        assert_eq!(done["attempts"], 2, "the message's attempts are its most tried recipient's: {done}");
        let events = typed(&timeline(&s.server, id).await);
        let busy: Vec<&str> = events.iter().filter(|(_, r)| r == "busy@x.example").map(|(k, _)| k.as_str()).collect();
        assert_eq!(busy, ["Sent", "Deferred", "Sent", "Delivered"], "{events:?}");
        let quick: Vec<&str> = events.iter().filter(|(_, r)| r == "quick@x.example").map(|(k, _)| k.as_str()).collect();
        assert_eq!(quick, ["Sent", "Delivered"], "the delivered one is not sent again: {events:?}");
        let got = copies(&s.sink, done["providerMessageId"].as_str().unwrap());
        assert_eq!(got.iter().filter(|c| c.recipients == ["quick@x.example"]).count(), 1);
        assert_eq!(
            got.iter().filter(|c| c.recipients == ["busy@x.example"]).count(),
            1,
            "the refused try is not at the sink"
        );
    });
}
