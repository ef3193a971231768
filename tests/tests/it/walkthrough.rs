//! The README's walkthrough against the real binary: a domain verified through a real DNS
//! server on loopback, a sender, a template, a send with an Idempotency-Key (replayed and
//! raced), the timeline, and the per-key rate limit.

use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options, TestServer, fresh_key};

async fn server_with_dns() -> (TestServer, TestDnsServer) {
    let dns = TestDnsServer::start([]).await.expect("DNS server starts");
    // Delivery on hold: the walkthrough reads messages right after queueing them, and a
    // running delivery loop would race it (tests/tests/it/delivery.rs covers delivery).
    let env = vec![
        ("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()),
        ("TIDINGS_DELIVERY".to_owned(), "hold".to_owned()),
    ];
    let server = TestServer::start_with(Options { bootstrap_key: Some(fresh_key()), env, ..Options::default() }).await;
    (server, dns)
}

/// Adds `name`, publishes its records in the DNS, verifies it; returns its id.
async fn verified_domain(server: &TestServer, dns: &TestDnsServer, name: &str) -> String {
    let (status, body) = server.post("/v1/domains", server.key(), json!({"domain": name})).await;
    assert_eq!(status, 201, "{body}");
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    let records = body["data"]["dnsRecords"].as_array().unwrap().clone();
    assert_eq!(records.len(), 4);
    for record in &records {
        dns.set_txt(record["name"].as_str().unwrap(), &[record["value"].as_str().unwrap()]).await;
    }
    let (status, body) = server.post(&format!("/v1/domains/{id}/verify"), server.key(), json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["overallStatus"], "Verified", "{body}");
    assert!(body["data"]["verifiedAt"].is_string());
    id
}

#[tokio::test]
async fn from_domain_to_timeline() {
    let (server, dns) = server_with_dns().await;

    // Before the records are published, verification fails record by record (no 500).
    let (_, body) = server.post("/v1/domains", server.key(), json!({"domain": "early.example"})).await;
    let early = body["data"]["id"].as_str().unwrap().to_owned();
    let (status, body) = server.post(&format!("/v1/domains/{early}/verify"), server.key(), json!({})).await;
    assert_eq!((status, body["data"]["overallStatus"].as_str()), (200, Some("Failed")), "{body}");

    let domain = verified_domain(&server, &dns, "acme.example").await;
    let (status, body) = server
        .post(
            &format!("/v1/domains/{domain}/senders"),
            server.key(),
            json!({"username": "billing", "displayName": "Acme Billing"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["data"]["address"], "billing@acme.example");

    let (status, body) = server
        .post(
            "/v1/templates",
            server.key(),
            json!({"name": "receipt", "subject": "Receipt {{order}}", "html": "<p>Thanks {{name}}</p>", "text": "Thanks {{name}}"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let template = body["data"]["id"].as_str().unwrap().to_owned();
    let version = body["data"]["currentVersionId"].as_str().unwrap().to_owned();

    let send = json!({"to": "ann@example.com", "from": "billing@acme.example", "templateId": template,
                      "variables": {"order": "1234", "name": "Ann"}});
    let first = server.send_with_key(&send, "order-1234").await;
    assert_eq!(first.0, 201, "{}", first.2);
    assert_eq!(first.1, None, "a first send is not a replay");
    let message = first.2["data"].clone();
    assert_eq!(message["status"], "Queued");
    assert_eq!(message["attempts"], 0);
    assert_eq!(message["subject"], "Receipt 1234");
    assert_eq!(message["fromAddress"], "billing@acme.example");
    assert_eq!(message["templateVersionId"], version.as_str());
    assert!(message["providerMessageId"].is_null());

    let again = server.send_with_key(&send, "order-1234").await;
    assert_eq!((again.0, again.1.as_deref()), (201, Some("true")));
    assert_eq!(again.2["data"]["id"], message["id"]);
    let other = server
        .send_with_key(
            &json!({"to": "bob@example.com", "from": "billing@acme.example", "text": "x", "subject": "y"}),
            "order-1234",
        )
        .await;
    assert_eq!((other.0, other.2["error"]["code"].as_str()), (409, Some("idempotency_key_reused")));

    let id = message["id"].as_str().unwrap();
    let (status, body) = server.get(&format!("/v1/messages/{id}/events"), server.key()).await;
    assert_eq!(status, 200, "{body}");
    let types: Vec<&Value> = body["data"].as_array().unwrap().iter().map(|e| &e["type"]).collect();
    assert_eq!(types, [&json!("Queued")]);
    let (_, body) = server.get("/v1/messages?status=Queued&to=ann@example.com", server.key()).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 1, "{body}");

    // Suppressed recipients are refused and nothing is queued.
    let (status, _) = server.post("/v1/suppressions", server.key(), json!({"email": "gone@example.com"})).await;
    assert_eq!(status, 201);
    let (status, body) = server
        .post(
            "/v1/messages",
            server.key(),
            json!({"to": "Gone@example.com", "from": "billing@acme.example", "subject": "s", "text": "t"}),
        )
        .await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("recipient_suppressed")));
}

#[tokio::test]
async fn racing_duplicates_create_one_message() {
    let (server, dns) = server_with_dns().await;
    verified_domain(&server, &dns, "race.example").await;
    let send = json!({"to": "ann@example.com", "subject": "s", "text": "t"});

    let replies = futures_join(&server, &send, 16).await;
    assert!(replies.iter().all(|r| r.0 == 201), "{:?}", replies.iter().map(|r| r.0).collect::<Vec<_>>());
    assert_eq!(replies.iter().filter(|r| r.1.is_none()).count(), 1, "exactly one original");
    assert!(replies.iter().all(|r| r.2["data"]["id"] == replies[0].2["data"]["id"]));
    let (_, body) = server.get("/v1/messages", server.key()).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 1);
}

async fn futures_join(server: &TestServer, send: &Value, n: usize) -> Vec<(u16, Option<String>, Value)> {
    let calls = (0..n).map(|_| server.send_with_key(send, "race-1"));
    let mut out = Vec::new();
    // Drive them concurrently on one task: the requests are in flight together.
    let mut pending: Vec<_> = calls.map(Box::pin).collect();
    while !pending.is_empty() {
        let (reply, _, rest) = futures_select_all(pending).await;
        out.push(reply);
        pending = rest;
    }
    out
}

use futures::future::select_all as futures_select_all;

#[tokio::test]
async fn the_rate_limit_answers_429_then_lets_sends_through_after_the_reset() {
    let (server, dns) = server_with_dns().await;
    verified_domain(&server, &dns, "limited.example").await;
    let (_, body) = server.post("/v1/keys", server.key(), json!({"scope": "send", "rateLimitPerSec": 2})).await;
    let key = body["data"]["plaintextKey"].as_str().unwrap().to_owned();
    let send = json!({"to": "ann@example.com", "subject": "s", "text": "t"});

    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..3 {
        let response = server.call(reqwest::Method::POST, "/v1/messages", &key, Some(send.clone())).await;
        statuses.push(response.status().as_u16());
        if response.status() == 429 {
            retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "rate_limit_exceeded");
        } else {
            assert!(response.headers().get("ratelimit-remaining").is_some());
        }
    }
    assert_eq!(statuses, [201, 201, 429]);
    let wait: u64 = retry_after.expect("Retry-After on 429").parse().unwrap();
    assert!(wait >= 1);
    tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    let (status, _) = server.post("/v1/messages", &key, send).await;
    assert_eq!(status, 201);
}
