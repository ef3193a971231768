//! Operations against the real binary: `GET /metrics` after a message went through
//! a relay (an [`SmtpSink`]) to Delivered; `/readyz` answering 503 from SIGTERM on while the
//! server still serves (`TIDINGS_SHUTDOWN_DELAY`); and retention purging a delivered
//! message's timeline while its status stays and sends go on (`TIDINGS_RETENTION`).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{assert_ok, server_relaying_to, server_with_dns, verified_domain};
use reqwest::Method;
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::SmtpSink;

/// How long a test waits for a state it polls for.
const WAIT: Duration = Duration::from_secs(20);
/// How often it asks.
const POLL: Duration = Duration::from_millis(100);
const DOMAIN: &str = "ops.example";

/// A server delivering through a relay (the returned sink) with `env` added, and the
/// verified sending domain [`DOMAIN`].
async fn relay_server(env: &[(&str, &str)]) -> (TestServer, TestDnsServer, SmtpSink) {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let (server, dns) = server_relaying_to(&sink, env).await;
    verified_domain(&server, &dns, server.key(), DOMAIN).await;
    (server, dns, sink)
}

/// Sends a plain message to `to`; its id.
async fn send(server: &TestServer, to: &str) -> String {
    let body = json!({"to": to, "from": format!("hello@{DOMAIN}"), "subject": "Your receipt", "text": "Thanks!"});
    let (status, reply) = server.post("/v1/messages", server.key(), body).await;
    assert_ok(status, &reply, 201, "send");
    reply["data"]["id"].as_str().expect("an id").to_owned()
}

async fn message(server: &TestServer, id: &str) -> Value {
    let (status, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
    assert_ok(status, &body, 200, "GET message");
    body["data"].clone()
}

async fn events(server: &TestServer, id: &str) -> Vec<Value> {
    let (status, body) = server.get(&format!("/v1/messages/{id}/events"), server.key()).await;
    assert_ok(status, &body, 200, "GET events");
    body["data"].as_array().expect("an array").clone()
}

/// Polls until `check` holds for the message, for at most [`WAIT`]; the message.
async fn wait_until(server: &TestServer, id: &str, what: &str, check: impl AsyncFn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let m = message(server, id).await;
        if check(&m).await {
            return m;
        }
        assert!(Instant::now() < deadline, "message {id}: {what} not seen within {WAIT:?}: {m}");
        tokio::time::sleep(POLL).await;
    }
}

async fn delivered(server: &TestServer, id: &str) -> Value {
    wait_until(server, id, "Delivered", async |m| m["status"] == "Delivered").await
}

/// `GET /metrics` without a key: every sample, keyed `name{labels}` as written.
async fn scrape(server: &TestServer) -> BTreeMap<String, f64> {
    let response = server.request(Method::GET, "/metrics").send().await.expect("a response");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    let text = response.text().await.expect("a body");
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("a sample line: {line:?}"));
            (series.to_owned(), value.parse().unwrap_or_else(|_| panic!("a number in {line:?}")))
        })
        .collect()
}

#[track_caller]
fn sample(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
    *samples.get(series).unwrap_or_else(|| panic!("no {series} in {samples:#?}"))
}

#[tokio::test]
async fn a_delivered_message_is_counted_with_its_latency_and_requests_by_route() {
    let (server, _dns, sink) = relay_server(&[]).await;
    let id = send(&server, "metrics@example.net").await;
    delivered(&server, &id).await;
    assert_eq!(sink.messages().len(), 1, "the relay got it");

    let samples = scrape(&server).await;

    assert_eq!(sample(&samples, "tidings_messages_accepted_total"), 1.0);
    for (event, n) in [("Queued", 1.0), ("Sent", 1.0), ("Delivered", 1.0), ("Bounced", 0.0)] {
        assert_eq!(sample(&samples, &format!("tidings_message_events_total{{type=\"{event}\"}}")), n, "{event}");
    }
    assert_eq!(sample(&samples, "tidings_delivery_latency_seconds_count"), 1.0);
    assert_eq!(sample(&samples, "tidings_delivery_latency_seconds_bucket{le=\"+Inf\"}"), 1.0);
    let sent = "tidings_http_requests_total{method=\"POST\",route=\"/v1/messages\",status=\"201\"}";
    assert_eq!(sample(&samples, sent), 1.0);
    let polled = "tidings_http_requests_total{method=\"GET\",route=\"/v1/messages/{id}\",status=\"200\"}";
    assert!(sample(&samples, polled) >= 1.0, "the polls, by route template");
    assert!(!samples.keys().any(|k| k.contains(&id)), "no raw path with the message id");
    assert_eq!(sample(&samples, "tidings_queue_depth"), 0.0, "nothing left to deliver");
}

#[tokio::test]
async fn readyz_answers_503_from_sigterm_on_while_requests_are_still_served() {
    let (server, _dns) = server_with_dns(&[("TIDINGS_SHUTDOWN_DELAY", "3s")]).await;
    let (status, _) = server.get("/readyz", "").await;
    assert_eq!(status, 200, "ready before the signal");

    let kill = Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().expect("run kill");
    assert!(kill.success());

    let deadline = Instant::now() + WAIT;
    let body = loop {
        let (status, body) = server.get("/readyz", "").await;
        if status == 503 {
            break body;
        }
        assert!(Instant::now() < deadline, "/readyz still answers {status} after SIGTERM");
        tokio::time::sleep(POLL).await;
    };
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    let (status, _) = server.get("/healthz", "").await;
    assert_eq!(status, 200, "alive while draining");
    let (status, body) = server.get("/v1/keys", server.key()).await;
    assert_ok(status, &body, 200, "an API request while draining");
    let (exit, _) = server.stop().await;
    assert!(exit.success(), "a clean exit after the delay: {exit}");
}

#[tokio::test]
async fn retention_purges_a_delivered_messages_timeline_and_keeps_its_status_while_sends_go_on() {
    let env = [("TIDINGS_RETENTION", "2s"), ("TIDINGS_RETENTION_INTERVAL", "200ms")];
    let (server, _dns, _sink) = relay_server(&env).await;
    let id = send(&server, "old@example.net").await;
    let before = delivered(&server, &id).await;
    assert!(!events(&server, &id).await.is_empty(), "a timeline while young");

    let deadline = Instant::now() + WAIT;
    while !events(&server, &id).await.is_empty() {
        assert!(Instant::now() < deadline, "the timeline was not purged within {WAIT:?}");
        tokio::time::sleep(POLL).await;
    }

    let after = message(&server, &id).await;
    assert_eq!(after, before, "the message reads as before: status, addresses, subject, times");
    assert_eq!(after["status"], "Delivered");
    let fresh = send(&server, "new@example.net").await;
    delivered(&server, &fresh).await;
    assert!(!events(&server, &fresh).await.is_empty(), "a new message has its timeline");
}
