//! Webhook endpoints in Resend's and Postmark's formats against the real binary
//! (docs/api.md#webhook-formats): `format` on create, read and update (an unknown one is a
//! 422 naming it); a `resend` endpoint's requests verified by two verifiers that are not
//! ours, the svix library and the Resend SDK's `webhooks.verify` (Node, pinned in
//! `tests/sdk/webhook-verify-node`), and carrying Resend's event names and fields; a
//! `postmark` endpoint's `Delivery` record with Postmark's field names; and the events a
//! format has no equivalent for not sent.
//!
//! Without Node the Node verification is skipped with `skipped: …` (a failure under
//! `TIDINGS_TEST_REQUIRE_ALL=1`, as `./test` runs it); the rest still runs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use standardwebhooks::Webhook;

use crate::common::receiver::{Hit, Receiver};
use crate::common::sdk::{node_sdk_ready, sdk_dir};
use crate::common::{assert_ok, block_on, server_with_dns, verified_domain};

const WAIT: Duration = Duration::from_secs(20);

/// What svix and the Resend SDK say of each `(secret, body, headers)`.
fn node_verdicts(requests: &[(String, String, Value)]) -> Vec<Value> {
    let input: Vec<Value> = requests
        .iter()
        .map(|(secret, body, headers)| json!({"secret": secret, "body": body, "headers": headers}))
        .collect();
    let mut child = Command::new("node")
        .arg("verify.mjs")
        .current_dir(sdk_dir("webhook-verify-node"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    serde_json::to_writer(child.stdin.take().expect("stdin"), &input).expect("write the requests");
    let output = child.wait_with_output().expect("node runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "verify.mjs failed: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("verify.mjs printed no JSON ({e}): {stderr}"))
}

/// The svix headers of `hit`, as a receiver would hand them to a verifier.
fn svix_headers(hit: &Hit) -> Value {
    json!({
        "svix-id": hit.header("svix-id"),
        "svix-timestamp": hit.header("svix-timestamp"),
        "svix-signature": hit.header("svix-signature"),
    })
}

async fn create(server: &tidings_e2e::TestServer, body: Value) -> Value {
    let (status, body) = server.post("/v1/webhooks", server.key(), body).await;
    assert_ok(status, &body, 201, "create an endpoint");
    body["data"].clone()
}

/// Waits until the endpoint's log has `count` delivered entries; returns their event types.
async fn delivered_types(server: &tidings_e2e::TestServer, id: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, body) = server.get(&format!("/v1/webhooks/{id}/deliveries?limit=200"), server.key()).await;
        assert_ok(status, &body, 200, "the delivery log");
        let log = body["data"].as_array().expect("a list").clone();
        if log.len() >= count && log.iter().all(|d| d["status"] == "Delivered") {
            let mut types: Vec<String> = log.iter().map(|d| d["eventType"].as_str().unwrap().to_owned()).collect();
            types.sort();
            return types;
        }
        assert!(Instant::now() < deadline, "the log of {id} is still {log:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn resend_and_postmark_endpoints_get_their_formats_and_only_their_events() {
    let test = "resend_and_postmark_endpoints_get_their_formats_and_only_their_events";
    block_on(async {
        let (server, dns) = server_with_dns(&[("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true")]).await;
        let key = server.key().to_owned();
        verified_domain(&server, &dns, &key, "formats.example").await;
        let receiver = Receiver::start().await;
        let events = ["Queued", "Sent", "Delivered"];

        // An unknown format is refused naming the field, on create and on update.
        let (status, body) = server
            .post("/v1/webhooks", &key, json!({"url": receiver.url("/x"), "eventTypes": events, "format": "svix"}))
            .await;
        assert_eq!(status, 422, "{body}");
        assert!(body.to_string().contains("\"format\""), "the error names format: {body}");

        let tidings = create(&server, json!({"url": receiver.url("/tidings"), "eventTypes": ["Delivered"]})).await;
        assert_eq!(tidings["format"], "tidings", "the default: {tidings}");
        let resend =
            create(&server, json!({"url": receiver.url("/resend"), "eventTypes": events, "format": "resend"})).await;
        assert_eq!(resend["format"], "resend", "{resend}");
        let postmark = create(&server, json!({"url": receiver.url("/postmark"), "eventTypes": events})).await;
        let postmark_id = postmark["id"].as_str().unwrap();
        let (status, body) =
            server.patch(&format!("/v1/webhooks/{postmark_id}"), &key, json!({"format": "Postmark"})).await;
        assert_eq!(status, 422, "names are lower case: {body}");
        let (status, body) =
            server.patch(&format!("/v1/webhooks/{postmark_id}"), &key, json!({"format": "postmark"})).await;
        assert_ok(status, &body, 200, "change the format");
        let (status, body) = server.get(&format!("/v1/webhooks/{postmark_id}"), &key).await;
        assert_ok(status, &body, 200, "read the endpoint");
        assert_eq!(body["data"]["format"], "postmark", "{body}");

        let sent = json!({
            "from": "Shop <app@formats.example>", "to": "ann@example.com", "subject": "Your receipt",
            "text": "Thanks.", "tags": [{"name": "kind", "value": "receipt"}], "metadata": {"order": "42"},
        });
        let (status, body) = server.post("/v1/messages", &key, sent).await;
        assert_ok(status, &body, 201, "send");
        let message = body["data"]["id"].as_str().unwrap().to_owned();

        // Resend has no `Queued`: two of the three subscribed events arrive, `Sent` and
        // `Delivered`, under Resend's names. The log is complete once both are delivered.
        let resend_id = resend["id"].as_str().unwrap();
        assert_eq!(delivered_types(&server, resend_id, 2).await, ["Delivered", "Sent"]);
        assert_eq!(delivered_types(&server, postmark_id, 1).await, ["Delivered"]);
        delivered_types(&server, tidings["id"].as_str().unwrap(), 1).await;
        let resend_hits = receiver.wait_for("/resend", 2, WAIT).await;
        let postmark_hits = receiver.wait_for("/postmark", 1, WAIT).await;
        assert_eq!(resend_hits.len(), 2, "nothing for Queued");
        assert_eq!(postmark_hits.len(), 1, "nothing for Queued or Sent");

        let mut types: Vec<String> =
            resend_hits.iter().map(|h| h.json()["type"].as_str().unwrap().to_owned()).collect();
        types.sort();
        assert_eq!(types, ["email.delivered", "email.sent"]);
        for hit in &resend_hits {
            let body = hit.json();
            let data = &body["data"];
            assert_eq!(data["email_id"], message.as_str(), "{body}");
            assert_eq!(data["from"], "\"Shop\" <app@formats.example>", "{body}");
            assert_eq!(data["to"], json!(["ann@example.com"]), "{body}");
            assert_eq!(data["subject"], "Your receipt", "{body}");
            assert_eq!(data["tags"], json!({"kind": "receipt"}), "{body}");
            assert!(data["message_id"].as_str().is_some_and(|m| m.starts_with('<') && m.ends_with('>')), "{body}");
            for at in [&body["created_at"], &data["created_at"]] {
                assert!(chrono::DateTime::parse_from_rfc3339(at.as_str().unwrap()).is_ok(), "{body}");
            }
            assert_eq!(hit.header("webhook-signature"), "", "Svix's header names only");
            assert!(hit.header("svix-signature").starts_with("v1,"));
        }

        // The verifiers: both accept every request, and both refuse a tampered one (so
        // their acceptance means something).
        if node_sdk_ready(test, "webhook-verify-node", &["svix", "resend"]) {
            let secret = resend["secret"].as_str().unwrap().to_owned();
            let mut requests: Vec<(String, String, Value)> = resend_hits
                .iter()
                .map(|h| (secret.clone(), String::from_utf8(h.body.to_vec()).unwrap(), svix_headers(h)))
                .collect();
            let tampered = requests[0].1.replace("Your receipt", "Your refund");
            requests.push((secret.clone(), tampered, requests[0].2.clone()));
            let verdicts = node_verdicts(&requests);
            for (i, hit) in resend_hits.iter().enumerate() {
                let expected = hit.json()["type"].clone();
                for verifier in ["svix", "resend"] {
                    assert_eq!(verdicts[i][verifier]["ok"], true, "{verifier}: {}", verdicts[i]);
                    assert_eq!(verdicts[i][verifier]["type"], expected, "{verifier}: {}", verdicts[i]);
                }
            }
            for verifier in ["svix", "resend"] {
                assert_eq!(verdicts[2][verifier]["ok"], false, "{verifier} refuses a tampered body: {}", verdicts[2]);
            }
        }

        // Postmark's Delivery record, with the Standard Webhooks signature besides.
        let hit = &postmark_hits[0];
        let body = hit.json();
        assert_eq!(body["RecordType"], "Delivery", "{body}");
        assert_eq!(body["MessageID"], message.as_str(), "{body}");
        assert_eq!(body["Recipient"], "ann@example.com", "{body}");
        assert_eq!(body["Tag"], "receipt", "{body}");
        assert_eq!(body["Metadata"], json!({"order": "42"}), "{body}");
        assert_eq!(body["MessageStream"], "outbound", "{body}");
        assert_eq!(body["ServerID"], 0, "{body}");
        assert!(body["Details"].is_string(), "{body}");
        assert!(chrono::DateTime::parse_from_rfc3339(body["DeliveredAt"].as_str().unwrap()).is_ok(), "{body}");
        let secret = postmark["secret"].as_str().unwrap();
        Webhook::new(secret)
            .expect("a whsec_ secret")
            .verify(&hit.body, &hit.headers)
            .unwrap_or_else(|e| panic!("the postmark-format request's signature: {e:?}"));

        // A test event in each format says what it is.
        for (id, path, key_name, expected) in
            [(resend_id, "/resend", "type", "tidings.test"), (postmark_id, "/postmark", "RecordType", "Test")]
        {
            let (status, body) = server.post(&format!("/v1/webhooks/{id}/test"), &key, json!({})).await;
            assert_ok(status, &body, 201, "queue a test event");
            let hits = receiver.wait_for(path, if path == "/resend" { 3 } else { 2 }, WAIT).await;
            let last = hits.last().expect("the test event").json();
            assert_eq!(last[key_name], expected, "{last}");
        }
    });
}
