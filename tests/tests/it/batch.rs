//! Batch sends against the real binary: a batch of 50 reaches the SMTP sink with
//! one result per index; a permissive batch queues its valid items and answers the others'
//! errors; a strict batch with one bad item queues nothing; a replay answers the same ids and
//! sends nothing twice.

use crate::common;
use std::time::Duration;

use crate::common::{assert_invalid, assert_ok, create_key, server_relaying_to, verified_domain};
use reqwest::Method;
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::SmtpSink;

const DOMAIN: &str = "bulk.example";
const WAIT: Duration = Duration::from_secs(30);

struct Scene {
    server: TestServer,
    _dns: TestDnsServer,
    sink: SmtpSink,
    /// A key whose bucket holds 100 messages.
    key: String,
}

async fn scene() -> Scene {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let (server, dns) = server_relaying_to(&sink, &[]).await;
    verified_domain(&server, &dns, server.key(), DOMAIN).await;
    let (_, key) = create_key(&server, server.key(), json!({"name": "bulk", "rateLimitPerSec": 100})).await;
    Scene { server, _dns: dns, sink, key }
}

fn mail(to: &str) -> Value {
    json!({"to": to, "from": format!("news@{DOMAIN}"), "subject": "News", "text": "Hello"})
}

impl Scene {
    /// `POST /v1/messages/batch`: status, `Idempotent-Replayed`, envelope.
    async fn batch(&self, body: &Value, headers: &[(&str, &str)]) -> (u16, Option<String>, Value) {
        let mut req = self.server.request(Method::POST, "/v1/messages/batch").bearer_auth(&self.key).json(body);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let response = req.send().await.expect("an HTTPS response");
        let replayed = response.headers().get("idempotent-replayed").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (status, body) = tidings_e2e::into_parts(response).await;
        (status, replayed, body)
    }

    async fn count(&self) -> usize {
        let (status, body) = self.server.get("/v1/messages?limit=200", &self.key).await;
        assert_ok(status, &body, 200, "list");
        body["data"].as_array().expect("messages").len()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_fifty_reaches_the_sink_with_one_result_per_index_and_replays_without_resending() {
    let s = scene().await;
    let body: Value = (0..50).map(|i| mail(&format!("r{i}@example.net"))).collect();
    let key = [("idempotency-key", "newsletter-1")];
    let (status, replayed, reply) = s.batch(&body, &key).await;
    assert_ok(status, &reply, 201, "batch of 50");
    assert_eq!(replayed, None);
    let results = reply["data"].as_array().expect("results").clone();
    assert_eq!(results.len(), 50);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i);
        assert_eq!(result["message"]["to"], format!("r{i}@example.net"), "result {i} is item {i}");
    }
    let received = s.sink.wait_for(50, WAIT).await.expect("50 messages at the sink");
    let mut recipients: Vec<String> = received.iter().flat_map(|m| m.recipients.clone()).collect();
    recipients.sort();
    let mut expected: Vec<String> = (0..50).map(|i| format!("r{i}@example.net")).collect();
    expected.sort();
    assert_eq!(recipients, expected, "each item delivered once");

    let (status, replayed, again) = s.batch(&body, &key).await;
    assert_ok(status, &again, 201, "replay");
    assert_eq!(replayed.as_deref(), Some("true"));
    let ids = |r: &Value| -> Vec<Value> {
        r["data"].as_array().unwrap().iter().map(|x| x["message"]["id"].clone()).collect()
    };
    assert_eq!(ids(&again), ids(&reply), "the same message ids");
    assert_eq!(s.count().await, 50, "the replay queued nothing");
    let mut other = body.clone();
    other.as_array_mut().unwrap().pop();
    let (status, _, reused) = s.batch(&other, &key).await;
    common::assert_error(status, &reused, 409, "idempotency_key_reused", "another body under the key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permissive_batch_sends_its_valid_items_and_a_strict_one_with_a_bad_item_sends_nothing() {
    let s = scene().await;
    let strict =
        json!([mail("s0@example.net"), {"to": "s1@example.net", "text": "no subject"}, mail("s2@example.net")]);
    let (status, _, reply) = s.batch(&strict, &[]).await;
    assert_invalid(status, &reply, &["[1].subject"], "strict batch with a bad item");
    assert_eq!(s.count().await, 0, "nothing queued");

    let mixed = json!([mail("p0@example.net"), {"to": "nope", "subject": "s", "text": "t"}, mail("p2@example.net")]);
    let (status, _, reply) = s.batch(&mixed, &[("x-batch-validation", "permissive")]).await;
    assert_ok(status, &reply, 200, "permissive batch with a bad item");
    let results = reply["data"].as_array().unwrap();
    assert_eq!(results[0]["message"]["to"], "p0@example.net");
    assert_eq!(results[1]["error"]["code"], "validation_error");
    assert_eq!(results[1]["error"]["details"][0]["field"], "to");
    assert_eq!(results[2]["message"]["to"], "p2@example.net");
    let received = s.sink.wait_for(2, WAIT).await.expect("the two valid items at the sink");
    let mut recipients: Vec<String> = received.iter().flat_map(|m| m.recipients.clone()).collect();
    recipients.sort();
    assert_eq!(recipients, ["p0@example.net", "p2@example.net"]);
    assert_eq!(s.count().await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_idempotency_key_is_shared_by_full_keys_and_each_send_key_has_its_own() {
    let s = scene().await;
    let admin = s.server.key().to_owned();
    let (_, sender) = create_key(&s.server, &admin, json!({"scope": "send", "rateLimitPerSec": 100})).await;
    let (_, other_sender) = create_key(&s.server, &admin, json!({"scope": "send", "rateLimitPerSec": 100})).await;
    let body = json!([mail("k0@example.net"), mail("k1@example.net")]);
    let batch = |key: &str, body: &Value, idem: &str| {
        let mut req = s.server.request(Method::POST, "/v1/messages/batch").bearer_auth(key).json(body);
        req = req.header("idempotency-key", idem);
        async move {
            let response = req.send().await.expect("an HTTPS response");
            let replayed = response.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
            let (status, body) = tidings_e2e::into_parts(response).await;
            (status, replayed, body)
        }
    };
    let ids = |r: &Value| -> Vec<Value> {
        r["data"].as_array().unwrap().iter().map(|x| x["message"]["id"].clone()).collect()
    };

    // The scene's full key sends; the bootstrap key (another full key) gets the same results.
    let (status, replayed, first) = batch(&s.key, &body, "shared-batch").await;
    assert_ok(status, &first, 201, "the first full key");
    assert!(!replayed);
    let (status, replayed, again) = batch(&admin, &body, "shared-batch").await;
    assert_ok(status, &again, 201, "another full key");
    assert!(replayed, "Idempotent-Replayed: {again}");
    assert_eq!(ids(&again), ids(&first));
    // A send key's Idempotency-Keys are its own: the full keys' key is a new batch for it,
    // replayed to itself only; another send key sends anew too.
    let (status, replayed, mine) = batch(&sender, &body, "shared-batch").await;
    assert_ok(status, &mine, 201, "the send key's batch");
    assert!(!replayed && ids(&mine) != ids(&first), "{mine}");
    let (status, replayed, again) = batch(&sender, &body, "shared-batch").await;
    assert_ok(status, &again, 201, "the send key repeats");
    assert!(replayed && ids(&again) == ids(&mine), "{again}");
    let (status, replayed, theirs) = batch(&other_sender, &body, "shared-batch").await;
    assert_ok(status, &theirs, 201, "another send key");
    assert!(!replayed && ids(&theirs) != ids(&mine), "{theirs}");
    assert_eq!(s.count().await, 6, "one set of messages per full-key space and per send key");
}
