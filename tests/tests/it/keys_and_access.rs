//! API keys (`/v1/keys`), authentication, scopes and workspace isolation against the real
//! binary (docs/api.md#errors and #authentication).

use crate::common::{
    assert_error, assert_invalid, assert_ok, create_key, ids, server_with_dns, two_workspaces, verified_domain,
    walk_pages,
};
use reqwest::Method;
use serde_json::{Value, json};
use tidings_e2e::{TestServer, fresh_key, into_parts};

/// A ULID that names nothing in any store.
const UNKNOWN_ID: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

#[tokio::test]
async fn keys_are_created_listed_read_and_revoked() {
    let server = TestServer::start().await;
    let admin = server.key().to_owned();

    // Defaults: a full key named `default`, 10/s, not restricted, shown with its plaintext once.
    let (status, body) = server.post("/v1/keys", &admin, json!({})).await;
    assert_ok(status, &body, 201, "create a key with defaults");
    let key = &body["data"];
    assert_eq!(key["name"], "default", "{body}");
    assert_eq!(key["scope"], "full", "{body}");
    assert_eq!(key["rateLimitPerSec"], 10, "{body}");
    assert!(key["sendingDomainId"].is_null(), "{body}");
    assert!(key["lastUsedAt"].is_null(), "{body}");
    assert!(key["createdAt"].is_string(), "{body}");
    assert_eq!(key["id"].as_str().unwrap().len(), 26, "a ULID: {body}");
    let plaintext = key["plaintextKey"].as_str().unwrap();
    assert!(plaintext.starts_with("tid_") && plaintext.len() == 44, "tid_ + 40 characters: {plaintext}");
    assert!(plaintext[4..].chars().all(|c| c.is_ascii_alphanumeric()), "base62: {plaintext}");
    assert_eq!(key["prefix"], &plaintext[..12], "prefix is the first 12 characters: {body}");
    assert_eq!(server.get("/v1/keys", plaintext).await.0, 200, "the new key works at once");

    let (status, body) =
        server.post("/v1/keys", &admin, json!({"name": "ci", "scope": "send", "rateLimitPerSec": 5})).await;
    assert_ok(status, &body, 201, "create a send key");
    assert_eq!((&body["data"]["name"], &body["data"]["scope"]), (&json!("ci"), &json!("send")), "{body}");
    assert_eq!(body["data"]["rateLimitPerSec"], 5, "{body}");
    let ci_id = body["data"]["id"].as_str().unwrap().to_owned();
    let ci_key = body["data"]["plaintextKey"].as_str().unwrap().to_owned();

    // A domain-scoped key may name a domain that is not verified yet (verification is
    // checked at send time).
    let (status, domain) = server.post("/v1/domains", &admin, json!({"domain": "scoped.example"})).await;
    assert_ok(status, &domain, 201, "add a domain");
    let domain_id = domain["data"]["id"].as_str().unwrap();
    let (status, body) = server.post("/v1/keys", &admin, json!({"scope": "send", "sendingDomainId": domain_id})).await;
    assert_ok(status, &body, 201, "create a domain-scoped key");
    assert_eq!(body["data"]["sendingDomainId"], domain_id, "{body}");
    let (status, body) = server.post("/v1/keys", &admin, json!({"rateLimitPerSec": 10_000})).await;
    assert_ok(status, &body, 201, "the highest rate limit");

    // Validation: every field at fault is named, all at once.
    for (request, fields) in [
        (json!({"scope": "admin"}), &["scope"][..]),
        (json!({"rateLimitPerSec": 0}), &["rateLimitPerSec"]),
        (json!({"rateLimitPerSec": 10_001}), &["rateLimitPerSec"]),
        (json!({"rateLimitPerSec": "ten"}), &["rateLimitPerSec"]),
        (json!({"name": ""}), &["name"]),
        (json!({"name": 5}), &["name"]),
        (json!({"sendingDomainId": UNKNOWN_ID}), &["sendingDomainId"]),
        (json!({"sendingDomainId": "not-an-id"}), &["sendingDomainId"]),
        (json!({"scope": "admin", "rateLimitPerSec": 0}), &["scope", "rateLimitPerSec"]),
    ] {
        let (status, body) = server.post("/v1/keys", &admin, request.clone()).await;
        assert_invalid(status, &body, fields, &format!("POST /v1/keys {request}"));
    }

    // Get: the key without its plaintext; `lastUsedAt` once it was used.
    assert_eq!(server.get("/v1/messages", &ci_key).await.0, 200);
    let (status, body) = server.get(&format!("/v1/keys/{ci_id}"), &admin).await;
    assert_ok(status, &body, 200, "get a key");
    assert_eq!(body["data"]["id"], ci_id.as_str(), "{body}");
    assert_eq!(body["data"]["prefix"], &ci_key[..12], "{body}");
    assert!(body["data"].get("plaintextKey").is_none(), "the plaintext is never shown again: {body}");
    assert!(body["data"]["lastUsedAt"].is_string(), "lastUsedAt after a request: {body}");
    for missing in [UNKNOWN_ID, "not-a-ulid"] {
        let (status, body) = server.get(&format!("/v1/keys/{missing}"), &admin).await;
        assert_error(status, &body, 404, "not_found", &format!("GET /v1/keys/{missing}"));
    }

    // List: newest first, no plaintext, paged by `limit` and `cursor`.
    let (status, body) = server.get("/v1/keys", &admin).await;
    assert_ok(status, &body, 200, "list keys");
    assert_eq!(body["pagination"], json!({"limit": 50, "hasMore": false, "nextCursor": null}), "{body}");
    let all = ids(&body);
    assert_eq!(all.len(), 5, "bootstrap + four created: {body}");
    let mut sorted = all.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(all, sorted, "newest first");
    assert!(body["data"].as_array().unwrap().iter().all(|k| k.get("plaintextKey").is_none()), "{body}");
    assert_eq!(walk_pages(&server, &admin, "/v1/keys", 2).await, all, "pages of 2 add up to the list");
    assert_eq!(walk_pages(&server, &admin, "/v1/keys", 5).await, all, "pages of 5 add up to the list");
    for query in ["limit=0", "limit=201", "limit=-1", "limit=ten"] {
        let (status, body) = server.get(&format!("/v1/keys?{query}"), &admin).await;
        assert_invalid(status, &body, &["limit"], &format!("GET /v1/keys?{query}"));
    }
    let (status, body) = server.get("/v1/keys?cursor=garbage", &admin).await;
    assert_invalid(status, &body, &["cursor"], "GET /v1/keys?cursor=garbage");
    let (status, body) = server.get("/v1/keys?limit=200", &admin).await;
    assert_ok(status, &body, 200, "limit=200 is allowed");

    // Revoke: 200 with null data; the key fails on its very next request and is gone.
    let (status, body) = server.delete(&format!("/v1/keys/{ci_id}"), &admin).await;
    assert_ok(status, &body, 200, "revoke a key");
    assert!(body["data"].is_null(), "{body}");
    let (status, body) = server.get("/v1/messages", &ci_key).await;
    assert_error(status, &body, 401, "invalid_api_key", "a revoked key");
    let (status, body) = server.get(&format!("/v1/keys/{ci_id}"), &admin).await;
    assert_error(status, &body, 404, "not_found", "get a revoked key");
    let (status, body) = server.delete(&format!("/v1/keys/{ci_id}"), &admin).await;
    assert_error(status, &body, 404, "not_found", "revoke twice");
    let (status, body) = server.delete(&format!("/v1/keys/{UNKNOWN_ID}"), &admin).await;
    assert_error(status, &body, 404, "not_found", "revoke an unknown key");
    let (_, body) = server.get("/v1/keys", &admin).await;
    assert!(!ids(&body).contains(&ci_id), "a revoked key is not listed: {body}");

    // A key may revoke itself; that request still completes, the next one fails.
    let (self_id, self_key) = create_key(&server, &admin, json!({"name": "self"})).await;
    let (status, body) = server.delete(&format!("/v1/keys/{self_id}"), &self_key).await;
    assert_ok(status, &body, 200, "a key revoking itself");
    let (status, body) = server.get("/v1/keys", &self_key).await;
    assert_error(status, &body, 401, "invalid_api_key", "the self-revoked key");
}

/// `GET /v1/keys` with the given headers.
async fn get_keys_with(server: &TestServer, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = server.request(Method::GET, "/v1/keys");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    into_parts(request.send().await.expect("an HTTPS response")).await
}

#[tokio::test]
async fn a_missing_or_invalid_key_is_401_with_its_code() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();

    let (status, body) = get_keys_with(&server, &[]).await;
    assert_error(status, &body, 401, "missing_api_key", "no key at all");
    let (status, body) = into_parts(
        server.request(Method::POST, "/v1/messages").json(&json!({"to": "a@example.com"})).send().await.unwrap(),
    )
    .await;
    assert_error(status, &body, 401, "missing_api_key", "a send without a key");

    let malformed = format!("Bearer {}", "tid_short");
    let unknown = format!("Bearer {}", fresh_key());
    let x_unknown = fresh_key();
    for (what, headers) in [
        ("a malformed bearer key", [("authorization", malformed.as_str())]),
        ("garbage", [("authorization", "Bearer not a key at all")]),
        ("a well-formed unknown key", [("authorization", unknown.as_str())]),
        ("an unknown X-Api-Key", [("x-api-key", x_unknown.as_str())]),
    ] {
        let (status, body) = get_keys_with(&server, &headers).await;
        assert_error(status, &body, 401, "invalid_api_key", what);
    }

    let (status, body) = get_keys_with(&server, &[("x-api-key", &key)]).await;
    assert_ok(status, &body, 200, "the key in X-Api-Key");
    let lower = format!("bearer {key}");
    let (status, body) = get_keys_with(&server, &[("authorization", &lower)]).await;
    assert_ok(status, &body, 200, "the auth scheme is case-insensitive");
}

#[tokio::test]
async fn an_authorization_header_without_bearer_is_a_missing_key() {
    let server = TestServer::start().await;

    // docs/api.md#errors: `missing_api_key` is "no `Authorization: Bearer` and no `X-Api-Key`".
    for value in ["Basic YXBpOmtleQ==", "Token abc"] {
        let (status, body) = get_keys_with(&server, &[("authorization", value)]).await;
        assert_error(status, &body, 401, "missing_api_key", &format!("Authorization: {value}"));
    }
}

#[tokio::test]
async fn repeated_auth_failures_throttle_the_client_address() {
    let server = TestServer::start().await;
    let unknown = fresh_key();

    // Missing and invalid keys both count.
    for attempt in 1..=20 {
        let what = format!("failure {attempt} of 20");
        if attempt % 2 == 0 {
            let (status, body) = server.get("/v1/keys", &unknown).await;
            assert_error(status, &body, 401, "invalid_api_key", &what);
        } else {
            let (status, body) = get_keys_with(&server, &[]).await;
            assert_error(status, &body, 401, "missing_api_key", &what);
        }
    }
    let response = server.call(Method::GET, "/v1/keys", &unknown, None).await;
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    let (status, body) = into_parts(response).await;
    assert_error(status, &body, 429, "too_many_auth_failures", "the 21st failure within a minute");
    let seconds: u64 = retry_after.expect("Retry-After on 429").parse().expect("whole seconds");
    assert!((1..=60).contains(&seconds), "Retry-After within the minute: {seconds}");
    let (status, body) = server.get("/v1/keys", server.key()).await;
    assert_error(status, &body, 429, "too_many_auth_failures", "the address is throttled, whatever key it sends");
}

#[tokio::test]
async fn send_keys_may_send_and_read_only_their_own_messages() {
    let (server, dns) = server_with_dns(&[]).await;
    let admin = server.key().to_owned();
    let domain = verified_domain(&server, &dns, &admin, "scope.example").await;
    let (status, body) =
        server.post(&format!("/v1/domains/{domain}/senders"), &admin, json!({"username": "billing"})).await;
    assert_ok(status, &body, 201, "add a sender");
    let (status, body) = server.post("/v1/templates", &admin, json!({"name": "t", "subject": "s", "text": "t"})).await;
    assert_ok(status, &body, 201, "create a template");
    let template = body["data"]["id"].as_str().unwrap().to_owned();
    let hook = json!({"url": "https://hooks.example.com/tidings", "eventTypes": ["Delivered"]});
    let (status, body) = server.post("/v1/webhooks", &admin, hook.clone()).await;
    assert_ok(status, &body, 201, "create a webhook");
    let webhook = body["data"]["id"].as_str().unwrap().to_owned();
    let (status, body) = server.post(&format!("/v1/webhooks/{webhook}/test"), &admin, json!({})).await;
    assert_ok(status, &body, 201, "queue a test delivery");
    let delivery = body["data"]["id"].as_str().unwrap().to_owned();
    let (status, body) = server.post("/v1/suppressions", &admin, json!({"email": "kept@example.com"})).await;
    assert_ok(status, &body, 201, "suppress an address");
    let (send_id, send_key) = create_key(&server, &admin, json!({"name": "sender", "scope": "send"})).await;

    let management: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, "/v1/keys".into(), None),
        (Method::POST, "/v1/keys".into(), Some(json!({}))),
        (Method::GET, format!("/v1/keys/{send_id}"), None),
        (Method::DELETE, format!("/v1/keys/{send_id}"), None),
        (Method::GET, "/v1/domains".into(), None),
        (Method::POST, "/v1/domains".into(), Some(json!({"domain": "other.example"}))),
        (Method::GET, format!("/v1/domains/{domain}"), None),
        (Method::PATCH, format!("/v1/domains/{domain}"), Some(json!({"openTracking": true}))),
        (Method::POST, format!("/v1/domains/{domain}/verify"), None),
        (Method::DELETE, format!("/v1/domains/{domain}"), None),
        (Method::GET, format!("/v1/domains/{domain}/senders"), None),
        (Method::POST, format!("/v1/domains/{domain}/senders"), Some(json!({"username": "sales"}))),
        (Method::DELETE, format!("/v1/domains/{domain}/senders/billing"), None),
        (Method::GET, "/v1/templates".into(), None),
        (Method::POST, "/v1/templates".into(), Some(json!({"name": "n", "subject": "s"}))),
        (Method::GET, format!("/v1/templates/{template}"), None),
        (Method::PATCH, format!("/v1/templates/{template}"), Some(json!({"name": "renamed"}))),
        (Method::DELETE, format!("/v1/templates/{template}"), None),
        (Method::POST, format!("/v1/templates/{template}/versions"), Some(json!({"subject": "v2"}))),
        (Method::POST, format!("/v1/templates/{template}/render"), Some(json!({}))),
        (Method::GET, "/v1/suppressions".into(), None),
        (Method::POST, "/v1/suppressions".into(), Some(json!({"email": "new@example.com"}))),
        (Method::GET, "/v1/suppressions/kept@example.com".into(), None),
        (Method::DELETE, "/v1/suppressions/kept@example.com".into(), None),
        (Method::GET, "/v1/webhooks".into(), None),
        (Method::POST, "/v1/webhooks".into(), Some(hook.clone())),
        (Method::GET, format!("/v1/webhooks/{webhook}"), None),
        (Method::PATCH, format!("/v1/webhooks/{webhook}"), Some(json!({"enabled": false}))),
        (Method::DELETE, format!("/v1/webhooks/{webhook}"), None),
        (Method::POST, format!("/v1/webhooks/{webhook}/test"), None),
        (Method::POST, format!("/v1/webhooks/{webhook}/rotate-secret"), None),
        (Method::GET, format!("/v1/webhooks/{webhook}/deliveries"), None),
        (Method::POST, format!("/v1/webhooks/{webhook}/deliveries/{delivery}/retry"), None),
    ];
    for (method, path, body) in management {
        let what = format!("{method} {path} with a send key");
        let (status, body) = into_parts(server.call(method, &path, &send_key, body).await).await;
        assert_error(status, &body, 403, "insufficient_scope", &what);
    }
    // Nothing the refused calls asked for happened.
    for path in [
        format!("/v1/keys/{send_id}"),
        format!("/v1/domains/{domain}"),
        format!("/v1/templates/{template}"),
        format!("/v1/webhooks/{webhook}"),
        "/v1/suppressions/kept@example.com".to_owned(),
    ] {
        let (status, body) = server.get(&path, &admin).await;
        assert_ok(status, &body, 200, &format!("{path} is still there"));
    }
    let (_, body) = server.get(&format!("/v1/domains/{domain}"), &admin).await;
    assert_eq!(body["data"]["openTracking"], false, "{body}");
    let (_, body) = server.get(&format!("/v1/domains/{domain}/senders"), &admin).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 1, "{body}");
    let (_, body) = server.get(&format!("/v1/webhooks/{webhook}/deliveries"), &admin).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 1, "no second test delivery: {body}");

    // A send key sends, and reads what it sent; the rest of the workspace's mail is not found.
    let send = json!({"to": "ann@example.com", "subject": "s", "text": "t"});
    let (status, body) = server.post("/v1/messages", &send_key, send.clone()).await;
    assert_ok(status, &body, 201, "a send key sends");
    let own = body["data"]["id"].as_str().unwrap().to_owned();
    let (status, body) = server.post("/v1/messages", &admin, send).await;
    assert_ok(status, &body, 201, "the full key sends");
    let other = body["data"]["id"].as_str().unwrap().to_owned();
    let (status, body) = server.get("/v1/messages", &send_key).await;
    assert_ok(status, &body, 200, "a send key lists messages");
    assert_eq!(ids(&body), std::slice::from_ref(&own), "only its own: {body}");
    let (status, body) = server.get(&format!("/v1/messages/{own}"), &send_key).await;
    assert_ok(status, &body, 200, "a send key reads its own message");
    let (status, body) = server.get(&format!("/v1/messages/{own}/events"), &send_key).await;
    assert_ok(status, &body, 200, "a send key reads its own message's events");
    let (status, body) = server.get(&format!("/v1/messages/{other}"), &send_key).await;
    assert_error(status, &body, 404, "not_found", "a send key reading another key's message");
    let (status, body) = server.get(&format!("/v1/messages/{other}/events"), &send_key).await;
    assert_error(status, &body, 404, "not_found", "a send key reading another key's events");
    let (_, body) = server.get("/v1/messages", &admin).await;
    assert_eq!(ids(&body), [other, own], "a full key sees every message, newest first: {body}");
}

#[tokio::test]
async fn a_domain_scoped_key_sends_only_from_its_domain() {
    let (server, dns) = server_with_dns(&[]).await;
    let admin = server.key().to_owned();
    let allowed = verified_domain(&server, &dns, &admin, "allowed.example").await;
    verified_domain(&server, &dns, &admin, "other.example").await;
    let (_, scoped) = create_key(&server, &admin, json!({"scope": "send", "sendingDomainId": allowed})).await;
    let (_, scoped_full) = create_key(&server, &admin, json!({"scope": "full", "sendingDomainId": allowed})).await;
    let send = |from: Option<&str>| {
        let mut body = json!({"to": "ann@example.com", "subject": "s", "text": "t"});
        if let Some(from) = from {
            body["from"] = json!(from);
        }
        body
    };

    for key in [&scoped, &scoped_full] {
        let (status, body) = server.post("/v1/messages", key, send(Some("billing@other.example"))).await;
        assert_error(status, &body, 403, "domain_not_allowed", "a domain-scoped key sending from another domain");
        let (status, body) = server.post("/v1/messages", key, send(Some("Billing <billing@allowed.example>"))).await;
        assert_ok(status, &body, 201, "a domain-scoped key sending from its domain");
        assert_eq!(body["data"]["fromAddress"], "billing@allowed.example", "{body}");
        let (status, body) = server.post("/v1/messages", key, send(None)).await;
        assert_ok(status, &body, 201, "a domain-scoped key without `from`");
        assert_eq!(body["data"]["fromAddress"], "noreply@allowed.example", "the key's domain: {body}");
    }
    let (_, body) = server.get("/v1/messages", &admin).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 4, "the refused sends queued nothing: {body}");

    let (status, body) = server.post("/v1/messages", &admin, send(Some("billing@other.example"))).await;
    assert_ok(status, &body, 201, "an unrestricted key sends from either domain");
    let (status, body) = server.post("/v1/messages", &admin, send(None)).await;
    assert_invalid(status, &body, &["from"], "no `from` with two verified domains and an unrestricted key");
}

#[tokio::test]
async fn workspaces_see_none_of_each_others_resources() {
    let (server, dns, (_, alpha), (_, beta)) = two_workspaces().await;

    // Alpha: one of everything.
    let domain = verified_domain(&server, &dns, &alpha, "alpha.example").await;
    let (status, body) =
        server.post(&format!("/v1/domains/{domain}/senders"), &alpha, json!({"username": "billing"})).await;
    assert_ok(status, &body, 201, "alpha adds a sender");
    let (status, body) =
        server.post("/v1/templates", &alpha, json!({"name": "t", "subject": "Hi {{name}}", "text": "t"})).await;
    assert_ok(status, &body, 201, "alpha creates a template");
    let template = body["data"]["id"].as_str().unwrap().to_owned();
    let version = body["data"]["currentVersionId"].as_str().unwrap().to_owned();
    let (key_id, _) = create_key(&server, &alpha, json!({"name": "alpha-ci"})).await;
    let hook = json!({"url": "https://hooks.example.com/alpha", "eventTypes": ["Queued"]});
    let (status, body) = server.post("/v1/webhooks", &alpha, hook).await;
    assert_ok(status, &body, 201, "alpha creates a webhook");
    let webhook = body["data"]["id"].as_str().unwrap().to_owned();
    let send = json!({"to": "ann@example.com", "subject": "s", "text": "t"});
    let response = server
        .request(Method::POST, "/v1/messages")
        .bearer_auth(&alpha)
        .header("idempotency-key", "shared-key")
        .json(&send)
        .send()
        .await
        .unwrap();
    let (status, body) = into_parts(response).await;
    assert_ok(status, &body, 201, "alpha sends");
    let message = body["data"]["id"].as_str().unwrap().to_owned();
    let (_, body) = server.get(&format!("/v1/webhooks/{webhook}/deliveries"), &alpha).await;
    let delivery = ids(&body).first().cloned().expect("the send queued a delivery for the Queued event");
    let (status, body) = server.post("/v1/suppressions", &alpha, json!({"email": "gone@example.com"})).await;
    assert_ok(status, &body, 201, "alpha suppresses an address");

    // Beta: every one of alpha's ids is 404, whatever the method.
    let probes: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, format!("/v1/keys/{key_id}"), None),
        (Method::DELETE, format!("/v1/keys/{key_id}"), None),
        (Method::GET, format!("/v1/messages/{message}"), None),
        (Method::GET, format!("/v1/messages/{message}/events"), None),
        (Method::GET, format!("/v1/domains/{domain}"), None),
        (Method::PATCH, format!("/v1/domains/{domain}"), Some(json!({"clickTracking": true}))),
        (Method::POST, format!("/v1/domains/{domain}/verify"), None),
        (Method::GET, format!("/v1/domains/{domain}/senders"), None),
        (Method::POST, format!("/v1/domains/{domain}/senders"), Some(json!({"username": "sales"}))),
        (Method::DELETE, format!("/v1/domains/{domain}/senders/billing"), None),
        (Method::DELETE, format!("/v1/domains/{domain}"), None),
        (Method::GET, format!("/v1/templates/{template}"), None),
        (Method::PATCH, format!("/v1/templates/{template}"), Some(json!({"name": "stolen"}))),
        (Method::POST, format!("/v1/templates/{template}/versions"), Some(json!({"subject": "v2"}))),
        (Method::POST, format!("/v1/templates/{template}/render"), Some(json!({"variables": {"name": "x"}}))),
        (Method::DELETE, format!("/v1/templates/{template}"), None),
        (Method::GET, format!("/v1/webhooks/{webhook}"), None),
        (Method::PATCH, format!("/v1/webhooks/{webhook}"), Some(json!({"enabled": false}))),
        (Method::POST, format!("/v1/webhooks/{webhook}/test"), None),
        (Method::POST, format!("/v1/webhooks/{webhook}/rotate-secret"), None),
        (Method::GET, format!("/v1/webhooks/{webhook}/deliveries"), None),
        (Method::POST, format!("/v1/webhooks/{webhook}/deliveries/{delivery}/retry"), None),
        (Method::DELETE, format!("/v1/webhooks/{webhook}"), None),
        (Method::GET, "/v1/suppressions/gone@example.com".into(), None),
        (Method::DELETE, "/v1/suppressions/gone@example.com".into(), None),
    ];
    for (method, path, body) in probes {
        let what = format!("{method} {path} with another workspace's key");
        let (status, body) = into_parts(server.call(method, &path, &beta, body).await).await;
        assert_error(status, &body, 404, "not_found", &what);
    }
    let (_, body) = server.get("/v1/keys", &beta).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 1, "only beta's own key: {body}");
    for list in ["/v1/messages", "/v1/domains", "/v1/templates", "/v1/suppressions", "/v1/webhooks"] {
        let (status, body) = server.get(list, &beta).await;
        assert_ok(status, &body, 200, &format!("beta lists {list}"));
        // With the default outbox beta has a sandbox sending domain of its own, no other.
        let others: Vec<&Value> = body["data"].as_array().unwrap().iter().filter(|d| d["sandbox"] != true).collect();
        assert!(others.is_empty(), "{list} shows nothing of alpha's: {body}");
    }

    // Alpha's domain, templates and idempotency keys mean nothing to beta.
    let from_alpha = json!({"to": "ann@example.com", "from": "billing@alpha.example", "subject": "s", "text": "t"});
    let (status, body) = server.post("/v1/messages", &beta, from_alpha).await;
    assert_error(status, &body, 422, "domain_not_verified", "beta sending from alpha's domain");
    let (status, body) = server.post("/v1/keys", &beta, json!({"sendingDomainId": domain})).await;
    assert_invalid(status, &body, &["sendingDomainId"], "beta restricting a key to alpha's domain");
    verified_domain(&server, &dns, &beta, "beta.example").await;
    let (status, body) =
        server.post("/v1/messages", &beta, json!({"to": "ann@example.com", "templateId": template})).await;
    assert_invalid(status, &body, &["templateId"], "beta sending with alpha's template");
    let pinned = json!({"to": "ann@example.com", "templateVersionId": version});
    let (status, body) = server.post("/v1/messages", &beta, pinned).await;
    assert_invalid(status, &body, &["templateVersionId"], "beta sending with alpha's template version");
    let other_body = json!({"to": "bob@example.com", "subject": "other", "text": "t"});
    let response = server
        .request(Method::POST, "/v1/messages")
        .bearer_auth(&beta)
        .header("idempotency-key", "shared-key")
        .json(&other_body)
        .send()
        .await
        .unwrap();
    assert!(response.headers().get("idempotent-replayed").is_none(), "not a replay of alpha's send");
    let (status, body) = into_parts(response).await;
    assert_ok(status, &body, 201, "Idempotency-Keys are per workspace");
    assert_ne!(body["data"]["id"], message.as_str(), "{body}");
    let (status, body) = server.post("/v1/suppressions", &beta, json!({"email": "gone@example.com"})).await;
    assert_ok(status, &body, 201, "beta's suppression list is its own");
    let (status, body) = server.post("/v1/domains", &beta, json!({"domain": "alpha.example"})).await;
    assert_ok(status, &body, 201, "a domain name may be added in two workspaces");

    // None of beta's attempts changed anything of alpha's.
    for path in [
        format!("/v1/keys/{key_id}"),
        format!("/v1/messages/{message}"),
        format!("/v1/domains/{domain}"),
        format!("/v1/templates/{template}"),
        format!("/v1/webhooks/{webhook}"),
        "/v1/suppressions/gone@example.com".to_owned(),
    ] {
        let (status, body) = server.get(&path, &alpha).await;
        assert_ok(status, &body, 200, &format!("alpha still has {path}"));
    }
    let (_, body) = server.get(&format!("/v1/templates/{template}"), &alpha).await;
    assert_eq!((&body["data"]["name"], body["data"]["versions"].as_array().unwrap().len()), (&json!("t"), 1));
    let (_, body) = server.get(&format!("/v1/webhooks/{webhook}"), &alpha).await;
    assert_eq!(body["data"]["enabled"], true, "{body}");
}

#[tokio::test]
async fn a_keys_rate_is_raised_over_the_api_and_a_batch_over_the_old_rate_then_fits() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let item = json!({"to": "ann@example.com", "subject": "December", "text": "..."});
    let batch = Value::Array(vec![item; 11]);

    // The first key sends 10 a second, and holds at most 10 tokens: 11 at once never fit.
    let (status, body) = server.post("/v1/messages/batch", &key, batch.clone()).await;
    assert_error(status, &body, 422, "validation_error", "a batch of 11 at 10/s");
    assert_eq!(body["error"]["details"][0]["field"], "batch", "{body}");
    let (status, keys) = server.get("/v1/keys", &key).await;
    assert_ok(status, &keys, 200, "list keys");
    let own = keys["data"][0]["id"].as_str().unwrap().to_owned();

    let (status, body) = server.patch(&format!("/v1/keys/{own}"), &key, json!({"rateLimitPerSec": 20})).await;
    assert_ok(status, &body, 200, "raise the rate");
    assert_eq!(body["data"]["rateLimitPerSec"], 20, "{body}");
    // The bucket refills at the new rate: within a second it holds 11.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, body) = server.post("/v1/messages/batch", &key, batch).await;
    assert_ok(status, &body, 201, "the batch of 11 at 20/s");
    let (status, body) = server.patch(&format!("/v1/keys/{own}"), &key, json!({"rateLimitPerSec": 0})).await;
    assert_error(status, &body, 422, "validation_error", "a rate of 0");
}
