//! Sending and watching messages through the API, for test files without helpers of their own
//! (delivery.rs keeps its own, bound to its shared relay).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tidings_e2e::TestServer;

use crate::common::assert_ok;

/// Statuses a message does not leave.
const FINAL: [&str; 5] = ["Delivered", "Bounced", "Failed", "Suppressed", "Canceled"];

/// A plain text message to `to` from `hello@<domain>`.
pub fn plain_mail(domain: &str, to: &str) -> Value {
    json!({"to": to, "from": format!("hello@{domain}"), "subject": "Your receipt", "text": "Thanks!"})
}

/// `POST /v1/messages` with `key`, expecting 201; the message's id.
pub async fn send_ok(server: &TestServer, key: &str, body: Value) -> String {
    let (status, reply) = server.post("/v1/messages", key, body.clone()).await;
    assert_ok(status, &reply, 201, &format!("send {body}"));
    reply["data"]["id"].as_str().expect("the message's id").to_owned()
}

/// `GET /v1/messages/{id}`'s `data`.
pub async fn message(server: &TestServer, key: &str, id: &str) -> Value {
    let (status, body) = server.get(&format!("/v1/messages/{id}"), key).await;
    assert_ok(status, &body, 200, &format!("GET /v1/messages/{id}"));
    body["data"].clone()
}

/// The message's timeline, in the order things happened.
pub async fn timeline(server: &TestServer, key: &str, id: &str) -> Vec<Value> {
    let path = format!("/v1/messages/{id}/events?limit=200");
    let (status, body) = server.get(&path, key).await;
    assert_ok(status, &body, 200, &format!("GET {path}"));
    body["data"].as_array().expect("events are an array").clone()
}

/// The `type` of each event.
pub fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().expect("an event type")).collect()
}

/// Polls the message until its status is `status`, for at most `wait`; returns it. Fails at
/// once, with the timeline, if it ends in another final status.
pub async fn wait_for_status(server: &TestServer, key: &str, id: &str, status: &str, wait: Duration) -> Value {
    let deadline = Instant::now() + wait;
    loop {
        let message = message(server, key, id).await;
        let now = message["status"].as_str().expect("a status").to_owned();
        if now == status {
            return message;
        }
        let ended_elsewhere = FINAL.contains(&now.as_str());
        if ended_elsewhere || Instant::now() >= deadline {
            let events = timeline(server, key, id).await;
            let why = if ended_elsewhere { "ended".to_owned() } else { format!("is still, after {wait:?},") };
            panic!("message {id} {why} {now}, not {status}: {message}\ntimeline: {events:#?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
