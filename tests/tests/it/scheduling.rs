//! Scheduled sending against the real binary: a message scheduled a few seconds
//! ahead reaches the SMTP sink only after its time, a canceled one never does, a rescheduled
//! one goes at its new time. "Not yet" is shown by the API (still `Scheduled`) and an empty
//! sink while a marker message, scheduled in between, has already arrived: no timed
//! assertions, only the order of events and the server's own timestamps.

use std::time::{Duration, Instant};

use crate::common::{assert_error, assert_ok, server_relaying_to, verified_domain};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::SmtpSink;

const DOMAIN: &str = "later.example";
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);

/// A server relaying to its own sink, with a verified [`DOMAIN`].
struct Scene {
    server: TestServer,
    _dns: TestDnsServer,
    sink: SmtpSink,
}

async fn scene() -> Scene {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let (server, dns) = server_relaying_to(&sink, &[]).await;
    verified_domain(&server, &dns, server.key(), DOMAIN).await;
    Scene { server, _dns: dns, sink }
}

fn in_secs(secs: i64) -> String {
    (Utc::now() + chrono::Duration::seconds(secs)).to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn time(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().expect("a time")).expect("RFC 3339").with_timezone(&Utc)
}

impl Scene {
    async fn schedule(&self, to: &str, at: &str) -> Value {
        let body =
            json!({"to": to, "from": format!("hi@{DOMAIN}"), "subject": "Later", "text": "Hello", "scheduledAt": at});
        let (status, reply) = self.server.post("/v1/messages", self.server.key(), body).await;
        assert_ok(status, &reply, 201, "scheduled send");
        reply["data"].clone()
    }

    async fn message(&self, id: &str) -> Value {
        let (status, body) = self.server.get(&format!("/v1/messages/{id}"), self.server.key()).await;
        assert_ok(status, &body, 200, "GET message");
        body["data"].clone()
    }

    async fn events(&self, id: &str) -> Vec<Value> {
        let (status, body) = self.server.get(&format!("/v1/messages/{id}/events"), self.server.key()).await;
        assert_ok(status, &body, 200, "GET events");
        body["data"].as_array().expect("events").clone()
    }

    async fn wait_for_status(&self, id: &str, status: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let m = self.message(id).await;
            if m["status"] == status {
                return m;
            }
            assert!(Instant::now() < deadline, "message {id} is still {} after {WAIT:?}, not {status}", m["status"]);
            tokio::time::sleep(POLL).await;
        }
    }

    fn received(&self, to: &str) -> usize {
        self.sink.messages().iter().filter(|m| m.recipients.iter().any(|r| r == to)).count()
    }

    /// When the message's first attempt started, by the server's clock.
    async fn sent_at(&self, id: &str) -> DateTime<Utc> {
        let events = self.events(id).await;
        let sent = events.iter().find(|e| e["type"] == "Sent").expect("a Sent event");
        time(&sent["occurredAt"])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_message_arrives_only_after_its_time() {
    let s = scene().await;
    let at = in_secs(4);
    let m = s.schedule("reader@example.net", &at).await;
    let id = m["id"].as_str().unwrap();
    assert_eq!(m["status"], "Scheduled");
    assert_eq!(time(&m["scheduledAt"]), time(&json!(at)));
    assert_eq!(s.received("reader@example.net"), 0, "nothing at the sink before its time");
    assert_eq!(s.message(id).await["status"], "Scheduled");

    s.wait_for_status(id, "Delivered").await;
    assert_eq!(s.received("reader@example.net"), 1);
    assert!(s.sent_at(id).await >= time(&json!(at)), "the attempt started at or after scheduledAt");
    let types: Vec<String> = s.events(id).await.iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect();
    assert_eq!(types, ["Scheduled", "Sent", "Delivered"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canceled_message_never_reaches_the_sink() {
    let s = scene().await;
    let doomed = s.schedule("doomed@example.net", &in_secs(2)).await;
    let marker = s.schedule("marker@example.net", &in_secs(3)).await;
    let doomed_id = doomed["id"].as_str().unwrap();
    let (status, body) = s.server.post(&format!("/v1/messages/{doomed_id}/cancel"), s.server.key(), json!({})).await;
    assert_ok(status, &body, 200, "cancel");
    assert_eq!(body["data"]["status"], "Canceled");

    // The marker, due a second after the canceled one, arrives: the canceled one had its turn.
    s.wait_for_status(marker["id"].as_str().unwrap(), "Delivered").await;
    assert_eq!(s.received("doomed@example.net"), 0, "the canceled message was not sent");
    assert_eq!(s.message(doomed_id).await["status"], "Canceled");
    let (status, body) = s.server.post(&format!("/v1/messages/{doomed_id}/cancel"), s.server.key(), json!({})).await;
    assert_error(status, &body, 409, "conflict", "cancel twice");
    let marker_id = marker["id"].as_str().unwrap();
    let (status, body) = s.server.post(&format!("/v1/messages/{marker_id}/cancel"), s.server.key(), json!({})).await;
    assert_error(status, &body, 409, "conflict", "cancel a delivered message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescheduled_message_goes_at_its_new_time() {
    let s = scene().await;
    let moved = s.schedule("moved@example.net", &in_secs(2)).await;
    let id = moved["id"].as_str().unwrap();
    let new_time = in_secs(6);
    let (status, body) =
        s.server.patch(&format!("/v1/messages/{id}"), s.server.key(), json!({"scheduledAt": new_time})).await;
    assert_ok(status, &body, 200, "reschedule");
    assert_eq!(time(&body["data"]["scheduledAt"]), time(&json!(new_time)));
    let marker = s.schedule("marker@example.net", &in_secs(3)).await;

    // The marker (between the old and the new time) arrives while the moved one waits.
    s.wait_for_status(marker["id"].as_str().unwrap(), "Delivered").await;
    assert_eq!(s.message(id).await["status"], "Scheduled", "the old time no longer applies");
    assert_eq!(s.received("moved@example.net"), 0);

    s.wait_for_status(id, "Delivered").await;
    assert_eq!(s.received("moved@example.net"), 1);
    assert!(s.sent_at(id).await >= time(&json!(new_time)), "sent at or after the new time");
    let events = s.events(id).await;
    assert_eq!(time(&events[1]["details"]["scheduledAt"]), time(&json!(new_time)), "the reschedule's event");
}
