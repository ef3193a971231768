//! Delivery against the real binary (docs/api.md#messages, #suppressions and #tracking): mail goes through a relay or straight to the
//! recipient's MX (an [`SmtpSink`] on loopback, found through a [`TestDnsServer`]), or into the
//! outbox. What arrives is parsed back, and its two DKIM signatures are verified by mail-auth's
//! verifier asking the test DNS for the keys, as a receiver would. Deferrals, bounces,
//! suppressions, a crash in the middle of delivery and domain re-checks are observed through
//! the API, polling with a bounded wait.
//!
//! Tests that only need their own recipients share one relay server ([`Relay::shared`]);
//! those that need other settings, or kill the server, start their own. Every test runs on
//! one runtime ([`block_on`]): the shared server's sink and DNS server are tasks, which a
//! test's own runtime would take down when that test ends.

use std::net::Ipv4Addr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::common::dkim::assert_signed_by;
use crate::common::{
    assert_error, assert_ok, block_on, publish, server_relaying_to, server_with_dns, start_with_dns, verified_domain,
};
use chrono::{DateTime, Utc};
use mail_parser::{MessageParser, MimeHeaders};
use serde_json::{Value, json};
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_e2e::{Options, TestServer, fresh_key};
use tidings_transport_smtp::testing::{ReceivedMessage, Rule, SmtpSink, Stage};

/// How long a test waits for a state it polls for.
const WAIT: Duration = Duration::from_secs(15);
/// How often it asks.
const POLL: Duration = Duration::from_millis(100);
/// The shared relay server's sending domain.
const RELAY_DOMAIN: &str = "relay.example";
/// The shared relay server's return-path domain (docs/api.md#tracking).
const RETURN_PATH_DOMAIN: &str = "bounces.example";

/// A server delivering through a relay (its sink) with the retry schedule `1s,1s` (three
/// attempts), the return-path domain [`RETURN_PATH_DOMAIN`], domain re-checks every second,
/// and the verified sending domain [`RELAY_DOMAIN`]. Tests sharing it keep out of each
/// other's way by using recipients of their own, which is also what their sink rules name.
struct Relay {
    // Dropped in this order: the server goes before the sink and DNS server it uses.
    server: TestServer,
    dns: TestDnsServer,
    sink: SmtpSink,
}

impl Relay {
    /// The shared one: started by the first test that asks, stopped when no running test
    /// holds it any more.
    async fn shared() -> Arc<Self> {
        static SHARED: tokio::sync::Mutex<Weak<Relay>> = tokio::sync::Mutex::const_new(Weak::new());
        let mut shared = SHARED.lock().await;
        if let Some(relay) = shared.upgrade() {
            return relay;
        }
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let (server, dns) = server_relaying_to(
            &sink,
            &[
                ("TIDINGS_RETRY_SCHEDULE", "1s,1s"),
                ("TIDINGS_RETURN_PATH_DOMAIN", RETURN_PATH_DOMAIN),
                ("TIDINGS_DOMAIN_RECHECK_INTERVAL", "1s"),
            ],
        )
        .await;
        verified_domain(&server, &dns, server.key(), RELAY_DOMAIN).await;
        let relay = Arc::new(Self { server, dns, sink });
        *shared = Arc::downgrade(&relay);
        relay
    }
}

/// `POST /v1/messages` with the bootstrap key; the new message's id after checking for 201.
async fn send(server: &TestServer, body: Value) -> String {
    let (status, reply) = server.post("/v1/messages", server.key(), body.clone()).await;
    assert_ok(status, &reply, 201, &format!("send {body}"));
    reply["data"]["id"].as_str().expect("the message's id").to_owned()
}

/// A plain message to `to` from `hello@<domain>`.
fn plain_mail(domain: &str, to: &str) -> Value {
    json!({"to": to, "from": format!("hello@{domain}"), "subject": "Your receipt", "text": "Thanks!"})
}

/// `GET /v1/messages/{id}`'s `data`.
async fn message(server: &TestServer, id: &str) -> Value {
    let (status, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
    assert_ok(status, &body, 200, &format!("GET /v1/messages/{id}"));
    body["data"].clone()
}

/// The message's timeline, in the order things happened.
async fn timeline(server: &TestServer, id: &str) -> Vec<Value> {
    let path = format!("/v1/messages/{id}/events?limit=200");
    let (status, body) = server.get(&path, server.key()).await;
    assert_ok(status, &body, 200, &format!("GET {path}"));
    body["data"].as_array().expect("events are an array").clone()
}

/// The `type` of each event.
fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().expect("an event type")).collect()
}

/// Polls the message every [`POLL`] until its status is `status`, for at most [`WAIT`];
/// returns it. Fails at once if it ends in another final status.
async fn wait_for_status(server: &TestServer, id: &str, status: &str) -> Value {
    const FINAL: [&str; 4] = ["Delivered", "Bounced", "Failed", "Suppressed"];
    let deadline = Instant::now() + WAIT;
    loop {
        let message = message(server, id).await;
        let now = message["status"].as_str().expect("a status").to_owned();
        if now == status {
            return message;
        }
        let ended_elsewhere = FINAL.contains(&now.as_str());
        if ended_elsewhere || Instant::now() >= deadline {
            let events = timeline(server, id).await;
            let why = if ended_elsewhere { "ended".to_owned() } else { format!("is still, after {WAIT:?},") };
            panic!("message {id} {why} {now}, not {status}: {message}\ntimeline: {events:#?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What the sink accepted for `address`.
fn received_by(sink: &SmtpSink, address: &str) -> Vec<ReceivedMessage> {
    sink.messages().into_iter().filter(|m| m.recipients.iter().any(|r| r.eq_ignore_ascii_case(address))).collect()
}

/// The one message the sink accepted for `address`.
#[track_caller]
fn received_once(sink: &SmtpSink, address: &str) -> ReceivedMessage {
    let mut received = received_by(sink, address);
    assert_eq!(received.len(), 1, "the sink accepted exactly one message for {address}: {received:#?}");
    received.remove(0)
}

/// Asserts that `mail_from` is message `id`'s return path on the shared relay server:
/// `bounces+<id>-<20 hex digits of signature>@<domain>`, in lower case (docs/decisions.md,
/// "Bounce and complaint reports": some systems fold local parts).
#[track_caller]
fn assert_return_path(mail_from: &str, id: &str) {
    let local = mail_from.strip_suffix(&format!("@{RETURN_PATH_DOMAIN}")).unwrap_or_else(|| panic!("{mail_from}"));
    let tag =
        local.strip_prefix(&format!("bounces+{}-", id.to_ascii_lowercase())).unwrap_or_else(|| panic!("{mail_from}"));
    assert!(tag.len() == 20 && tag.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{mail_from}");
}

/// An RFC 3339 time from an API field.
#[track_caller]
fn time(value: &Value) -> DateTime<Utc> {
    let text = value.as_str().unwrap_or_else(|| panic!("a time, not {value}"));
    DateTime::parse_from_rfc3339(text).unwrap_or_else(|e| panic!("{text}: {e}")).with_timezone(&Utc)
}

/// The header section of `raw`, up to the empty line.
fn header_section(raw: &[u8]) -> &[u8] {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a header section ending in an empty line");
    &raw[..end]
}

/// Line ends as `\n`, trailing line ends removed: bodies compare as written.
fn normalized(text: &str) -> String {
    text.replace("\r\n", "\n").trim_end_matches('\n').to_owned()
}

#[test]
fn relayed_mail_arrives_once_as_written_and_signed_with_both_keys() {
    block_on(async {
        let relay = Relay::shared().await;
        let server = &relay.server;
        let to = "ann@inbox.example";
        let subject = "Grüße aus Köln ✓ 日本語";
        let id = send(
            server,
            json!({
                "to": to,
                "from": format!("Zoë Sender <hello@{RELAY_DOMAIN}>"),
                "subject": subject,
                "text": "Hallo Ann,\nbis bald.",
                "html": "<p>Hallo <b>Ann</b></p>",
            }),
        )
        .await;

        let message = wait_for_status(server, &id, "Delivered").await;
        let provider_id =
            message["providerMessageId"].as_str().unwrap_or_else(|| panic!("providerMessageId: {message}"));
        assert!(provider_id.ends_with(&format!("@{RELAY_DOMAIN}")), "<ulid@sending-domain>: {message}");
        assert_eq!(message["attempts"], 1, "{message}");

        let events = timeline(server, &id).await;
        assert_eq!(types(&events), ["Queued", "Sent", "Delivered"], "{events:#?}");
        assert_eq!(events[1]["details"]["attempt"], 1, "{events:#?}");
        assert_eq!(events[2]["details"]["smtpCode"], 250, "the relay's reply: {events:#?}");
        assert!(events[2]["details"]["response"].is_string(), "the relay's reply text: {events:#?}");
        for event in &events[1..] {
            assert_eq!(event["providerMessageId"], provider_id, "on every event from Sent on: {events:#?}");
        }

        let mail = received_once(&relay.sink, to);
        assert_eq!(mail.recipients, [to], "RCPT TO");
        assert_return_path(&mail.mail_from, &id);
        assert!(
            header_section(&mail.data).is_ascii(),
            "non-ASCII subject and display name are encoded, not raw 8-bit:\n{}",
            mail.text()
        );
        let parsed = MessageParser::default().parse(&mail.data).expect("mail-parser parses the message");
        let from = parsed.from().and_then(|f| f.first()).expect("a From header");
        assert_eq!((from.name(), from.address()), (Some("Zoë Sender"), Some(&*format!("hello@{RELAY_DOMAIN}"))));
        assert_eq!(parsed.to().and_then(|t| t.first()).and_then(|t| t.address()), Some(to));
        assert_eq!(parsed.subject(), Some(subject));
        assert_eq!(parsed.message_id(), Some(provider_id), "Message-ID is <providerMessageId>");
        assert!(parsed.date().is_some(), "a Date header");
        assert_eq!(parsed.header_raw("MIME-Version").map(str::trim), Some("1.0"));
        let content_type = parsed.content_type().expect("a Content-Type");
        assert_eq!((content_type.ctype(), content_type.subtype()), ("multipart", Some("alternative")));
        assert_eq!((parsed.text_body_count(), parsed.html_body_count()), (1, 1), "a text and an html part");
        assert_eq!(parsed.body_text(0).as_deref().map(normalized).as_deref(), Some("Hallo Ann,\nbis bald."));
        assert_eq!(parsed.body_html(0).as_deref().map(normalized).as_deref(), Some("<p>Hallo <b>Ann</b></p>"));

        assert_signed_by(&mail.data, relay.dns.addr(), RELAY_DOMAIN).await;
    });
}

#[test]
fn each_message_leaves_with_its_own_return_path_on_the_return_path_domain() {
    block_on(async {
        let relay = Relay::shared().await;
        let server = &relay.server;
        let recipients = ["ret1@inbox.example", "ret2@inbox.example"];
        let mut ids = Vec::new();
        for to in recipients {
            ids.push(send(server, plain_mail(RELAY_DOMAIN, to)).await);
        }
        for (id, to) in ids.iter().zip(recipients) {
            wait_for_status(server, id, "Delivered").await;
            let mail = received_once(&relay.sink, to);
            assert_return_path(&mail.mail_from, id);
            let parsed = MessageParser::default().parse(&mail.data).expect("mail-parser parses the message");
            let from = parsed.from().and_then(|f| f.first()).and_then(|f| f.address());
            assert_eq!(from, Some(&*format!("hello@{RELAY_DOMAIN}")), "the From header is unchanged");
        }
    });
}

#[test]
fn a_deferred_message_is_retried_on_the_schedule_and_delivered() {
    block_on(async {
        let relay = Relay::shared().await;
        let server = &relay.server;
        let to = "later@inbox.example";
        relay.sink.add_rule(Rule::reply(Stage::Rcpt, 451, "4.7.1 try again later").times(1).for_recipient(to));
        let id = send(server, plain_mail(RELAY_DOMAIN, to)).await;

        let message = wait_for_status(server, &id, "Delivered").await;
        assert_eq!(message["attempts"], 2, "{message}");
        let events = timeline(server, &id).await;
        assert_eq!(types(&events), ["Queued", "Sent", "Deferred", "Sent", "Delivered"], "{events:#?}");
        let deferred = &events[2]["details"];
        assert_eq!(deferred["smtpCode"], 451, "{events:#?}");
        assert_eq!(deferred["enhancedCode"], "4.7.1", "{events:#?}");
        assert!(deferred["response"].as_str().is_some_and(|r| r.contains("try again later")), "{events:#?}");
        assert_eq!(deferred["attempt"], 1, "{events:#?}");
        // The schedule's first delay, 1 s, from when the deferral was recorded.
        let next_attempt_at = time(&deferred["nextAttemptAt"]);
        let delay = (next_attempt_at - time(&events[2]["occurredAt"])).to_std().unwrap_or_default();
        assert!((Duration::from_millis(900)..=Duration::from_millis(1100)).contains(&delay), "delay {delay:?}");
        assert!(time(&events[3]["occurredAt"]) >= next_attempt_at, "not retried early: {events:#?}");
        assert_eq!(events[3]["details"]["attempt"], 2, "{events:#?}");
        assert_eq!(events[4]["details"]["smtpCode"], 250, "{events:#?}");
        assert_eq!(
            events[1]["providerMessageId"], events[3]["providerMessageId"],
            "the same Message-ID on every attempt"
        );
        received_once(&relay.sink, to);
    });
}

#[test]
fn a_refused_address_bounces_hard_is_suppressed_and_further_sends_to_it_are_refused() {
    block_on(async {
        let relay = Relay::shared().await;
        let server = &relay.server;
        let to = "gone@inbox.example";
        relay.sink.add_rule(Rule::reply(Stage::Rcpt, 550, "5.1.1 user unknown").for_recipient(to));
        let id = send(server, plain_mail(RELAY_DOMAIN, to)).await;

        wait_for_status(server, &id, "Bounced").await;
        let events = timeline(server, &id).await;
        assert_eq!(types(&events), ["Queued", "Sent", "Bounced"], "{events:#?}");
        let bounced = &events[2]["details"];
        assert_eq!(bounced["bounceType"], "Hard", "{events:#?}");
        assert_eq!(bounced["smtpCode"], 550, "{events:#?}");
        assert_eq!(bounced["enhancedCode"], "5.1.1", "{events:#?}");

        let (status, body) = server.get("/v1/suppressions?reason=HardBounce&limit=200", server.key()).await;
        assert_ok(status, &body, 200, "list hard-bounce suppressions");
        let entry = body["data"]
            .as_array()
            .expect("a list")
            .iter()
            .find(|s| s["email"] == to)
            .unwrap_or_else(|| panic!("{to} is suppressed: {body}"));
        assert_eq!(entry["reason"], "HardBounce", "{entry}");
        assert_eq!(entry["source"], "bounce", "{entry}");
        assert_eq!(entry["messageId"], id.as_str(), "the message that bounced: {entry}");

        let (status, body) = server.post("/v1/messages", server.key(), plain_mail(RELAY_DOMAIN, to)).await;
        assert_error(status, &body, 422, "recipient_suppressed", "a send to the bounced address");
        assert!(received_by(&relay.sink, to).is_empty(), "nothing reached {to}");
    });
}

#[test]
fn a_message_deferred_on_every_attempt_bounces_soft_and_the_address_stays_usable() {
    block_on(async {
        let relay = Relay::shared().await;
        let server = &relay.server;
        let to = "busy@inbox.example";
        // Exactly the three attempts `1s,1s` allows; the send after them gets through.
        relay.sink.add_rule(Rule::reply(Stage::Rcpt, 451, "4.2.1 mailbox busy").times(3).for_recipient(to));
        let id = send(server, plain_mail(RELAY_DOMAIN, to)).await;

        let message = wait_for_status(server, &id, "Bounced").await;
        assert_eq!(message["attempts"], 3, "{message}");
        let events = timeline(server, &id).await;
        assert_eq!(
            types(&events),
            ["Queued", "Sent", "Deferred", "Sent", "Deferred", "Sent", "Bounced"],
            "two retries, then a soft bounce: {events:#?}"
        );
        let bounced = &events[6]["details"];
        assert_eq!(bounced["bounceType"], "Soft", "{events:#?}");
        assert_eq!(bounced["smtpCode"], 451, "the last reply: {events:#?}");
        assert_eq!(bounced["attempt"], 3, "{events:#?}");

        let (status, body) = server.get(&format!("/v1/suppressions/{to}"), server.key()).await;
        assert_error(status, &body, 404, "not_found", "a soft bounce suppresses nothing");
        let again = send(server, plain_mail(RELAY_DOMAIN, to)).await;
        wait_for_status(server, &again, "Delivered").await;
        received_once(&relay.sink, to);
    });
}

#[test]
fn a_policy_refusal_bounces_the_message_without_suppressing_the_address() {
    block_on(async {
        let relay = Relay::shared().await;
        let server = &relay.server;
        let to = "strict@inbox.example";
        let refusal = Rule::reply(Stage::Message, 550, "5.7.1 message refused by local policy");
        relay.sink.add_rule(refusal.times(1).for_recipient(to));
        let id = send(server, plain_mail(RELAY_DOMAIN, to)).await;

        wait_for_status(server, &id, "Bounced").await;
        let events = timeline(server, &id).await;
        assert_eq!(types(&events), ["Queued", "Sent", "Bounced"], "a 5xx is not retried: {events:#?}");
        let bounced = &events[2]["details"];
        assert_eq!(bounced["bounceType"], "Soft", "5.7.x says nothing about the address: {events:#?}");
        assert_eq!(bounced["smtpCode"], 550, "{events:#?}");
        assert_eq!(bounced["enhancedCode"], "5.7.1", "{events:#?}");

        let (status, body) = server.get(&format!("/v1/suppressions/{to}"), server.key()).await;
        assert_error(status, &body, 404, "not_found", "a policy refusal suppresses nothing");
        let again = send(server, plain_mail(RELAY_DOMAIN, to)).await;
        wait_for_status(server, &again, "Delivered").await;
        received_once(&relay.sink, to);
    });
}

#[test]
fn an_added_domain_becomes_verified_once_its_records_appear_without_a_verify_call() {
    block_on(async {
        let relay = Relay::shared().await;
        let server = &relay.server;
        let (status, body) = server.post("/v1/domains", server.key(), json!({"domain": "later.example"})).await;
        assert_ok(status, &body, 201, "add later.example");
        assert_eq!(body["data"]["overallStatus"], "Pending", "{body}");
        let id = body["data"]["id"].as_str().expect("the domain's id").to_owned();
        publish(&relay.dns, &body["data"], &["SPF", "DKIM", "DMARC"]).await;

        let deadline = Instant::now() + WAIT;
        let domain = loop {
            let (status, body) = server.get(&format!("/v1/domains/{id}"), server.key()).await;
            assert_ok(status, &body, 200, "GET the domain");
            if body["data"]["overallStatus"] == "Verified" {
                break body["data"].clone();
            }
            assert!(Instant::now() < deadline, "not re-checked into Verified within {WAIT:?}: {body}");
            tokio::time::sleep(POLL).await;
        };
        assert!(domain["verifiedAt"].is_string(), "{domain}");
        for field in ["spfStatus", "dkimStatus", "dkim2Status"] {
            assert_eq!(domain[field], "Verified", "{field}: {domain}");
        }
    });
}

#[test]
fn mail_for_a_domain_goes_straight_to_its_mx_host() {
    block_on(async {
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let port = sink.port().to_string();
        let (server, dns) = server_with_dns(&[
            ("TIDINGS_DELIVERY", "mx"),
            ("TIDINGS_MX_PORT", &port),
            ("TIDINGS_MX_ALLOW_PRIVATE", "true"),
        ])
        .await;
        dns.set_mx("inbox.example", &[(10, "mx1.inbox.example")]).await;
        dns.add(TestRecord::a("mx1.inbox.example", Ipv4Addr::LOCALHOST)).await;
        verified_domain(&server, &dns, server.key(), "direct.example").await;
        let to = "carol@inbox.example";
        let id = send(&server, plain_mail("direct.example", to)).await;

        let message = wait_for_status(&server, &id, "Delivered").await;
        let events = timeline(&server, &id).await;
        assert_eq!(types(&events), ["Queued", "Sent", "Delivered"], "{events:#?}");
        assert_eq!(events[2]["details"]["smtpCode"], 250, "{events:#?}");
        assert_eq!(events[2]["details"]["tls"], json!({"plaintext": true}), "the sink offers no STARTTLS");

        let mail = received_once(&sink, to);
        assert_eq!(mail.recipients, [to], "RCPT TO");
        assert_eq!(
            mail.mail_from, "hello@direct.example",
            "without a return-path domain, MAIL FROM is the From address"
        );
        let parsed = MessageParser::default().parse(&mail.data).expect("mail-parser parses the message");
        assert_eq!(parsed.message_id(), message["providerMessageId"].as_str(), "{message}");
        assert_signed_by(&mail.data, dns.addr(), "direct.example").await;
    });
}

#[test]
fn without_delivery_settings_messages_are_written_to_the_outbox() {
    block_on(async {
        let (server, dns) = server_with_dns(&[]).await;
        verified_domain(&server, &dns, server.key(), "outbox.example").await;
        let to = "dave@inbox.example";
        let id = send(&server, plain_mail("outbox.example", to)).await;

        // Written is as far as the outbox goes; the code records that as Delivered, 250.
        let message = wait_for_status(&server, &id, "Delivered").await;
        let provider_id =
            message["providerMessageId"].as_str().unwrap_or_else(|| panic!("providerMessageId: {message}"));
        let events = timeline(&server, &id).await;
        assert_eq!(types(&events), ["Queued", "Sent", "Delivered"], "{events:#?}");
        assert_eq!(events[2]["details"]["smtpCode"], 250, "{events:#?}");

        let outbox = server.data_dir().path().join("outbox");
        let files: Vec<String> = std::fs::read_dir(&outbox)
            .unwrap_or_else(|e| panic!("{}: {e}", outbox.display()))
            .map(|entry| entry.expect("a directory entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files, [format!("{provider_id}.eml")], "one file, named for the Message-ID, no temporary files");
        let raw = std::fs::read(outbox.join(&files[0])).expect("the .eml file");
        let parsed = MessageParser::default().parse(&raw).expect("mail-parser parses the file");
        assert_eq!(parsed.message_id(), Some(provider_id));
        assert_eq!(parsed.to().and_then(|t| t.first()).and_then(|t| t.address()), Some(to));
        assert_signed_by(&raw, dns.addr(), "outbox.example").await;
    });
}

#[test]
fn a_server_killed_during_delivery_delivers_every_message_after_the_restart() {
    block_on(async {
        const DOMAIN: &str = "crash.example";
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let key = fresh_key();
        let mut env = vec![
            ("TIDINGS_DELIVERY".to_owned(), "relay".to_owned()),
            ("TIDINGS_SMTP_RELAY".to_owned(), format!("smtp://{}", sink.addr())),
        ];
        let options = Options { bootstrap_key: Some(key.clone()), env: env.clone(), ..Options::default() };
        let (server, dns) = start_with_dns(options).await;
        verified_domain(&server, &dns, &key, DOMAIN).await;

        // In flight: the sink reads each whole message and holds back its 250.
        sink.hold(Stage::Message);
        let early: Vec<String> = (0..3).map(|n| format!("early{n}@inbox.example")).collect();
        let early_ids = futures::future::join_all(early.iter().map(|to| send(&server, plain_mail(DOMAIN, to)))).await;
        sink.wait_for_held(1, WAIT).await.expect("a delivery reaches the sink");
        // The worker now waits inside the step that claimed (some of) them, so these stay
        // queued, unclaimed, until the kill.
        let late: Vec<String> = (0..3).map(|n| format!("late{n}@inbox.example")).collect();
        let mut late_ids = Vec::new();
        for to in &late {
            late_ids.push(send(&server, plain_mail(DOMAIN, to)).await);
        }
        let data_dir = server.kill();
        // The receiver keeps what it was holding, as a real one would: it has those messages,
        // and Tidings never heard the 250 (the duplicate window).
        sink.release();

        env.push(("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()));
        let options = Options { data_dir: Some(data_dir), bootstrap_key: Some(key), env, ..Options::default() };
        let server = TestServer::start_with(options).await;
        for (id, to) in late_ids.iter().zip(&late) {
            wait_for_status(&server, id, "Delivered").await;
            let events = timeline(&server, id).await;
            assert_eq!(types(&events), ["Queued", "Sent", "Delivered"], "never claimed before the kill: {events:#?}");
            received_once(&sink, to);
        }
        if tidings_e2e::skip_on_postgres(
            "messages claimed before the kill are not redone at once after the restart: on a shared \
             database a starting node releases no leases, they run out (minutes); checked instead that \
             they stay Sent, leased, and the unclaimed ones are delivered once",
        ) {
            let mut leased = 0;
            for (id, to) in early_ids.iter().zip(&early) {
                let mut message = message(&server, id).await;
                if message["status"] == "Queued" {
                    message = wait_for_status(&server, id, "Delivered").await;
                }
                let events = timeline(&server, id).await;
                match message["status"].as_str() {
                    // Claimed before the kill: one attempt, cut off, and the lease still on.
                    Some("Sent") => {
                        assert_eq!(types(&events), ["Queued", "Sent"], "{events:#?}");
                        assert_eq!(message["attempts"], 1, "{message}");
                        assert!(received_by(&sink, to).len() <= 1, "{to} arrived more than once");
                        leased += 1;
                    }
                    // Not claimed before the kill: delivered like the late ones.
                    Some("Delivered") => {
                        assert_eq!(types(&events), ["Queued", "Sent", "Delivered"], "{events:#?}");
                        received_once(&sink, to);
                    }
                    _ => panic!("{id} neither leased nor delivered: {message}\n{events:#?}"),
                }
            }
            assert!(leased >= 1, "the held message was claimed before the kill");
            return;
        }
        for (id, to) in early_ids.iter().zip(&early) {
            let message = wait_for_status(&server, id, "Delivered").await;
            let events = timeline(&server, id).await;
            let types = types(&events);
            let attempts = types.iter().filter(|t| **t == "Sent").count();
            assert!(
                types.first() == Some(&"Queued")
                    && types.ends_with(&["Sent", "Delivered"])
                    && attempts == types.len() - 2
                    && (1..=2).contains(&attempts),
                "Queued, Sent (cut off by the kill), Sent, Delivered; or, if not yet claimed, Queued, Sent, Delivered: \
                 {events:#?}"
            );
            assert_eq!(message["attempts"], attempts, "{message}");
            let copies = received_by(&sink, to);
            assert!(
                (1..=attempts).contains(&copies.len()),
                "{to} arrived {} times in {attempts} attempts",
                copies.len()
            );
            for copy in &copies {
                let parsed = MessageParser::default().parse(&copy.data).expect("mail-parser parses the message");
                assert_eq!(parsed.message_id(), message["providerMessageId"].as_str(), "one Message-ID on every copy");
            }
        }
    });
}
