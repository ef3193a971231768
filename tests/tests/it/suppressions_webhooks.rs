//! `/v1/suppressions` and `/v1/webhooks` against the real binary (docs/api.md#suppressions and
//! #webhooks).
//!
//! The webhook delivery worker is not built yet, so these tests check what the API records
//! (deliveries queued `Pending`), not what a receiver gets.

use crate::common::{
    assert_error, assert_invalid, assert_ok, field_of_items, ids, server_with_dns, verified_domain, walk_pages,
};
use reqwest::Method;
use serde_json::{Value, json};
use tidings_e2e::{Options, TestServer, fresh_key, into_parts};

/// A ULID that names nothing in any store.
const UNKNOWN_ID: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

#[tokio::test]
async fn suppressions_are_added_once_listed_read_and_removed() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();

    let (status, body) = server.post("/v1/suppressions", &key, json!({"email": "Ann@Example.com"})).await;
    assert_ok(status, &body, 201, "suppress an address");
    let ann = body["data"].clone();
    // Domains are case-insensitive everywhere; the local part is kept as given.
    assert_eq!(ann["email"], "Ann@example.com", "{ann}");
    assert_eq!((&ann["reason"], &ann["source"]), (&json!("Manual"), &json!("api")), "{ann}");
    assert!(ann["messageId"].is_null(), "{ann}");
    assert!(ann["createdAt"].is_string() && ann["id"].as_str().is_some_and(|id| id.len() == 26), "{ann}");

    let (status, body) = server.post("/v1/suppressions", &key, json!({"email": "ann@example.COM"})).await;
    assert_ok(status, &body, 200, "the same address again, other case");
    assert_eq!(body["data"], ann, "the existing entry");
    for request in [json!({}), json!({"email": "nope"}), json!({"email": 5}), json!({"email": "a@b.example\r\nX: y"})] {
        let (status, body) = server.post("/v1/suppressions", &key, request.clone()).await;
        assert_invalid(status, &body, &["email"], &format!("POST /v1/suppressions {request}"));
    }

    let mut newest_first = vec![ann["id"].as_str().unwrap().to_owned()];
    for email in ["bob@example.com", "a+tag@example.com", "cy@example.com"] {
        let (status, body) = server.post("/v1/suppressions", &key, json!({"email": email})).await;
        assert_ok(status, &body, 201, &format!("suppress {email}"));
        newest_first.insert(0, body["data"]["id"].as_str().unwrap().to_owned());
    }
    let (status, body) = server.get("/v1/suppressions", &key).await;
    assert_ok(status, &body, 200, "list suppressions");
    assert_eq!(ids(&body), newest_first, "newest first: {body}");
    assert!(body["data"].as_array().unwrap().iter().all(|s| s["source"] == "api"), "{body}");
    assert_eq!(walk_pages(&server, &key, "/v1/suppressions", 3).await, newest_first, "pages of 3");
    assert_eq!(walk_pages(&server, &key, "/v1/suppressions?reason=Manual", 2).await, newest_first, "all Manual");
    for reason in ["HardBounce", "Complaint"] {
        let listed = walk_pages(&server, &key, &format!("/v1/suppressions?reason={reason}"), 50).await;
        assert!(listed.is_empty(), "none with reason {reason}");
    }
    for (query, field) in [("reason=Bounced", "reason"), ("limit=0", "limit"), ("cursor=zzz", "cursor")] {
        let (status, body) = server.get(&format!("/v1/suppressions?{query}"), &key).await;
        assert_invalid(status, &body, &[field], &format!("GET /v1/suppressions?{query}"));
    }

    // One entry by address: case-insensitive, URL-decoded.
    let (status, body) = server.get("/v1/suppressions/ANN@example.com", &key).await;
    assert_ok(status, &body, 200, "get by address, other case");
    assert_eq!(body["data"], ann, "{body}");
    let (status, body) = server.get("/v1/suppressions/a%2Btag@example.com", &key).await;
    assert_ok(status, &body, 200, "get an address with an encoded +");
    assert_eq!(body["data"]["email"], "a+tag@example.com", "{body}");
    for missing in ["nobody@example.com", "not-an-address"] {
        let (status, body) = server.get(&format!("/v1/suppressions/{missing}"), &key).await;
        assert_error(status, &body, 404, "not_found", &format!("GET /v1/suppressions/{missing}"));
    }

    // Remove: 200 with null data, then 404.
    let (status, body) = server.delete("/v1/suppressions/ANN@EXAMPLE.COM", &key).await;
    assert_ok(status, &body, 200, "remove, other case");
    assert!(body["data"].is_null(), "{body}");
    let (status, body) = server.delete("/v1/suppressions/ann@example.com", &key).await;
    assert_error(status, &body, 404, "not_found", "remove it again");
    let (status, body) = server.delete("/v1/suppressions/a%2Btag@example.com", &key).await;
    assert_ok(status, &body, 200, "remove an address with an encoded +");
    let (status, body) = server.delete("/v1/suppressions/nobody@example.com", &key).await;
    assert_error(status, &body, 404, "not_found", "remove an absent address");
    let (_, body) = server.get("/v1/suppressions", &key).await;
    assert_eq!(field_of_items(&body, "email"), ["cy@example.com", "bob@example.com"], "{body}");
    let (status, body) = server.post("/v1/suppressions", &key, json!({"email": "ann@example.com"})).await;
    assert_ok(status, &body, 201, "a removed address can be suppressed anew");
}

/// Checks a `whsec_` secret: base64 of 32 bytes.
#[track_caller]
fn assert_secret(secret: &Value) {
    let text = secret.as_str().unwrap_or_else(|| panic!("a secret: {secret}"));
    let b64 = text.strip_prefix("whsec_").unwrap_or_else(|| panic!("whsec_ prefix: {text}"));
    // Standard base64 of 32 bytes: 43 characters of the alphabet and one `=`.
    assert_eq!(b64.len(), 44, "{text}");
    assert!(b64.ends_with('=') && !b64[..43].contains('='), "{text}");
    assert!(b64[..43].chars().all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/'), "{text}");
}

#[tokio::test]
async fn webhooks_are_managed_tested_rotated_and_deleted() {
    let (server, dns) = server_with_dns(&[]).await;
    let key = server.key().to_owned();

    let create = json!({"url": "https://hooks.example.com/tidings", "eventTypes": ["Delivered", "Bounced"]});
    let (status, body) = server.post("/v1/webhooks", &key, create).await;
    assert_ok(status, &body, 201, "create a webhook");
    let created = body["data"].clone();
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["url"], "https://hooks.example.com/tidings", "{created}");
    assert_eq!(created["eventTypes"], json!(["Delivered", "Bounced"]), "{created}");
    assert_eq!(created["enabled"], true, "enabled by default: {created}");
    assert!(created["createdAt"].is_string(), "{created}");
    assert_secret(&created["secret"]);

    for (request, fields) in [
        (json!({}), &["url", "eventTypes"][..]),
        (json!({"url": "http://hooks.example.com/x", "eventTypes": ["Sent"]}), &["url"]),
        (json!({"url": "https://127.0.0.1/x", "eventTypes": ["Sent"]}), &["url"]),
        (json!({"url": "https://10.1.2.3/x", "eventTypes": ["Sent"]}), &["url"]),
        (json!({"url": "https://192.168.1.1/x", "eventTypes": ["Sent"]}), &["url"]),
        (json!({"url": "https://169.254.169.254/latest", "eventTypes": ["Sent"]}), &["url"]),
        (json!({"url": "https://[::1]/x", "eventTypes": ["Sent"]}), &["url"]),
        (json!({"url": "https://localhost/x", "eventTypes": ["Sent"]}), &["url"]),
        (json!({"url": "https://user:pw@hooks.example.com/x", "eventTypes": ["Sent"]}), &["url"]),
        (json!({"url": "not a url", "eventTypes": ["Sent"]}), &["url"]),
        (json!({"url": "https://hooks.example.com/x", "eventTypes": []}), &["eventTypes"]),
        (json!({"url": "https://hooks.example.com/x", "eventTypes": ["Nope"]}), &["eventTypes"]),
        (json!({"url": "https://hooks.example.com/x", "eventTypes": "Sent"}), &["eventTypes"]),
        (json!({"url": "http://10.0.0.1/x", "eventTypes": []}), &["url", "eventTypes"]),
    ] {
        let (status, body) = server.post("/v1/webhooks", &key, request.clone()).await;
        assert_invalid(status, &body, fields, &format!("POST /v1/webhooks {request}"));
    }

    // Read: never the secret again.
    let path = format!("/v1/webhooks/{id}");
    let (status, body) = server.get(&path, &key).await;
    assert_ok(status, &body, 200, "get the webhook");
    assert!(body["data"].get("secret").is_none(), "no secret on GET: {body}");
    let mut without_secret = created.clone();
    without_secret.as_object_mut().unwrap().remove("secret");
    assert_eq!(body["data"], without_secret, "GET shows what creation returned, minus the secret");

    // Update.
    let (status, body) = server.patch(&path, &key, json!({"enabled": false})).await;
    assert_ok(status, &body, 200, "disable");
    assert_eq!(body["data"]["enabled"], false, "{body}");
    let (status, body) = server
        .patch(&path, &key, json!({"url": "https://new.example.com/h", "eventTypes": ["Opened"], "enabled": true}))
        .await;
    assert_ok(status, &body, 200, "change url, types, enable");
    assert_eq!(body["data"]["url"], "https://new.example.com/h", "{body}");
    assert_eq!((&body["data"]["eventTypes"], &body["data"]["enabled"]), (&json!(["Opened"]), &json!(true)), "{body}");
    assert!(body["data"].get("secret").is_none(), "no secret on PATCH: {body}");
    for (request, field) in [
        (json!({"url": "http://new.example.com/h"}), "url"),
        (json!({"url": "https://10.0.0.1/h"}), "url"),
        (json!({"eventTypes": []}), "eventTypes"),
        (json!({"enabled": "no"}), "enabled"),
    ] {
        let (status, body) = server.patch(&path, &key, request.clone()).await;
        assert_invalid(status, &body, &[field], &format!("PATCH webhook {request}"));
    }
    let (_, body) = server.get(&path, &key).await;
    assert_eq!(body["data"]["url"], "https://new.example.com/h", "refused updates change nothing: {body}");

    // Rotate: a new secret, shown this once.
    let (status, body) = server.post(&format!("{path}/rotate-secret"), &key, json!({})).await;
    assert_ok(status, &body, 200, "rotate the secret");
    assert_secret(&body["data"]["secret"]);
    assert_ne!(body["data"]["secret"], created["secret"], "a new secret");
    let (_, body) = server.get(&path, &key).await;
    assert!(body["data"].get("secret").is_none(), "{body}");

    // Test events: a Pending delivery each, in the log at once; retry makes one due again.
    let deliveries = format!("{path}/deliveries");
    let (status, body) =
        into_parts(server.request(Method::POST, &format!("{path}/test")).bearer_auth(&key).send().await.unwrap()).await;
    assert_ok(status, &body, 201, "queue a test event (no body)");
    let first = body["data"].clone();
    assert_eq!(
        (&first["eventType"], &first["status"], &first["attempts"]),
        (&json!("Test"), &json!("Pending"), &json!(0))
    );
    assert!(first["responseCode"].is_null() && first["lastError"].is_null(), "{first}");
    assert!(first["eventId"].is_string() && first["createdAt"].is_string(), "{first}");
    let (status, body) = server.post(&format!("{path}/test"), &key, json!({})).await;
    assert_ok(status, &body, 201, "queue another");
    let second = body["data"]["id"].as_str().unwrap().to_owned();
    let first_id = first["id"].as_str().unwrap().to_owned();
    let (status, body) = server.get(&deliveries, &key).await;
    assert_ok(status, &body, 200, "list deliveries");
    assert_eq!(ids(&body), [second.clone(), first_id.clone()], "newest first: {body}");
    // The server is already trying to deliver it (to a host that does not resolve), so only
    // what an attempt does not change is compared.
    for field in ["id", "eventId", "eventType", "createdAt"] {
        assert_eq!(body["data"][1][field], first[field], "the log shows the queued delivery: {body}");
    }
    assert_eq!(walk_pages(&server, &key, &deliveries, 1).await, [second, first_id.clone()]);
    let (status, body) = server.get(&format!("{deliveries}?limit=0"), &key).await;
    assert_invalid(status, &body, &["limit"], "deliveries?limit=0");
    let (status, body) = server.post(&format!("{deliveries}/{first_id}/retry"), &key, json!({})).await;
    assert_ok(status, &body, 200, "retry a delivery");
    // Due again now: `Pending` if the server has not tried it yet, else `Retrying` (it is
    // being delivered to a host that does not resolve meanwhile).
    let retried = &body["data"];
    let expected = if retried["attempts"] == 0 { "Pending" } else { "Retrying" };
    assert_eq!((&retried["id"], &retried["status"]), (&json!(first_id), &json!(expected)), "{body}");
    assert!(retried["nextAttemptAt"].is_string(), "due again: {body}");

    // Sends fan out to the enabled endpoints that subscribe to the event's type.
    verified_domain(&server, &dns, &key, "hooks.example").await;
    let mut endpoints = Vec::new();
    for request in [
        json!({"url": "https://a.example.com/h", "eventTypes": ["Queued", "Delivered"]}),
        json!({"url": "https://b.example.com/h", "eventTypes": ["Delivered"]}),
        json!({"url": "https://c.example.com/h", "eventTypes": ["Queued"], "enabled": false}),
    ] {
        let (status, body) = server.post("/v1/webhooks", &key, request.clone()).await;
        assert_ok(status, &body, 201, &format!("create {request}"));
        endpoints.push(body["data"]["id"].as_str().unwrap().to_owned());
    }
    let (status, body) =
        server.post("/v1/messages", &key, json!({"to": "ann@example.com", "subject": "s", "text": "t"})).await;
    assert_ok(status, &body, 201, "send");
    // The message is being delivered meanwhile (to the outbox), so Delivered deliveries may
    // be there too; Queued ones only where subscribed. tests/webhooks.rs checks what arrives.
    let event_types = |body: &Value| -> Vec<String> {
        body["data"].as_array().unwrap().iter().map(|d| d["eventType"].as_str().unwrap().to_owned()).collect()
    };
    let (_, body) = server.get(&format!("/v1/webhooks/{}/deliveries", endpoints[0]), &key).await;
    assert_eq!(
        event_types(&body).iter().filter(|t| *t == "Queued").count(),
        1,
        "one Queued delivery for the subscriber to Queued: {body}"
    );
    let (_, body) = server.get(&format!("/v1/webhooks/{}/deliveries", endpoints[1]), &key).await;
    assert!(event_types(&body).iter().all(|t| t == "Delivered"), "only Delivered for its subscriber: {body}");
    let (_, body) = server.get(&format!("/v1/webhooks/{}/deliveries", endpoints[2]), &key).await;
    assert_eq!(body["data"], json!([]), "none for the disabled endpoint: {body}");

    let (status, body) = server.get("/v1/webhooks", &key).await;
    assert_ok(status, &body, 200, "list webhooks");
    let newest_first: Vec<String> = endpoints.iter().rev().cloned().chain([id.clone()]).collect();
    assert_eq!(ids(&body), newest_first, "newest first: {body}");
    assert!(body["data"].as_array().unwrap().iter().all(|w| w.get("secret").is_none()), "no secrets: {body}");
    assert_eq!(walk_pages(&server, &key, "/v1/webhooks", 3).await, newest_first, "pages of 3");

    // A delivery is retried only under its own endpoint.
    let other_deliveries = format!("/v1/webhooks/{}/deliveries", endpoints[0]);
    for (what, retry) in [
        ("another endpoint's delivery", format!("{other_deliveries}/{first_id}/retry")),
        ("an unknown delivery", format!("{deliveries}/{UNKNOWN_ID}/retry")),
        ("a malformed delivery id", format!("{deliveries}/nope/retry")),
    ] {
        let (status, body) = server.post(&retry, &key, json!({})).await;
        assert_error(status, &body, 404, "not_found", what);
    }

    // Delete: the endpoint and its log are gone.
    let (status, body) = server.delete(&path, &key).await;
    assert_ok(status, &body, 200, "delete the webhook");
    assert!(body["data"].is_null(), "{body}");
    for missing in [id.as_str(), UNKNOWN_ID, "not-a-ulid"] {
        for (method, path, body) in [
            (Method::GET, format!("/v1/webhooks/{missing}"), None),
            (Method::PATCH, format!("/v1/webhooks/{missing}"), Some(json!({"enabled": true}))),
            (Method::DELETE, format!("/v1/webhooks/{missing}"), None),
            (Method::POST, format!("/v1/webhooks/{missing}/test"), None),
            (Method::POST, format!("/v1/webhooks/{missing}/rotate-secret"), None),
            (Method::GET, format!("/v1/webhooks/{missing}/deliveries"), None),
            (Method::POST, format!("/v1/webhooks/{missing}/deliveries/{first_id}/retry"), None),
        ] {
            let what = format!("{method} {path}");
            let (status, body) = into_parts(server.call(method, &path, &key, body).await).await;
            assert_error(status, &body, 404, "not_found", &what);
        }
    }
}

#[tokio::test]
async fn private_and_plain_http_webhook_urls_need_the_operator_setting() {
    let env = vec![("TIDINGS_WEBHOOK_ALLOW_PRIVATE".to_owned(), "true".to_owned())];
    let server = TestServer::start_with(Options { bootstrap_key: Some(fresh_key()), env, ..Options::default() }).await;
    let key = server.key().to_owned();

    let mut created = Vec::new();
    for url in ["http://127.0.0.1:9/hook", "https://10.0.0.1/hook", "http://localhost:8080/hook"] {
        let (status, body) = server.post("/v1/webhooks", &key, json!({"url": url, "eventTypes": ["Sent"]})).await;
        assert_ok(status, &body, 201, &format!("create {url} with private targets allowed"));
        assert_eq!(body["data"]["url"], url, "{body}");
        created.push(body["data"]["id"].as_str().unwrap().to_owned());
    }
    let path = format!("/v1/webhooks/{}", created[0]);
    let (status, body) = server.patch(&path, &key, json!({"url": "http://192.168.1.10/hook"})).await;
    assert_ok(status, &body, 200, "update to a private address");
    let (status, body) =
        server.post("/v1/webhooks", &key, json!({"url": "ftp://10.0.0.1/x", "eventTypes": ["Sent"]})).await;
    assert_invalid(status, &body, &["url"], "only http and https");
}
