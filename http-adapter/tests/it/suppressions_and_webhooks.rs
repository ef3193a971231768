//! Suppressions and webhooks over the API: status codes, envelopes, secrets shown only when
//! they should be, scope and workspace isolation.

use crate::support::{Reply, TestApi};
use axum::http::StatusCode;
use serde_json::{Value, json};

const HOOK_URL: &str = "https://hooks.example.com/tidings";

impl TestApi {
    async fn delete(&self, path: &str) -> Reply {
        self.call("DELETE", path, Some(&self.key.clone()), None).await
    }

    async fn patch(&self, path: &str, body: Value) -> Reply {
        self.call("PATCH", path, Some(&self.key.clone()), Some(body)).await
    }

    /// Creates an endpoint for `Delivered` and returns its creation `data`.
    async fn create_webhook(&self) -> Value {
        let r = self.post("/v1/webhooks", json!({"url": HOOK_URL, "eventTypes": ["Delivered"]})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.data().clone()
    }

    /// A new `send`-scoped key in the default workspace.
    async fn send_key(&self) -> String {
        let r = self.post("/v1/keys", json!({"scope": "send"})).await;
        r.data()["plaintextKey"].as_str().unwrap().to_owned()
    }
}

fn id_of(data: &Value) -> String {
    data["id"].as_str().unwrap().to_owned()
}

// --- suppressions ---

#[tokio::test]
async fn adding_a_suppression_is_201_and_adding_it_again_in_another_case_is_200() {
    let api = TestApi::new().await;
    let r = api.post("/v1/suppressions", json!({"email": "Ann@example.com"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let first = r.data().clone();
    assert_eq!(first["email"], "Ann@example.com");
    assert_eq!(first["reason"], "Manual");
    assert_eq!(first["source"], "api");
    assert!(first["messageId"].is_null());
    assert!(first["createdAt"].is_string());

    let r = api.post("/v1/suppressions", json!({"email": "ann@EXAMPLE.com"})).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.data(), &first);
}

#[tokio::test]
async fn adding_a_suppression_without_a_valid_address_is_422() {
    let api = TestApi::new().await;
    for body in [json!({}), json!({"email": "not an address"})] {
        let r = api.post("/v1/suppressions", body.clone()).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"), "{body}");
        assert_eq!(r.body["error"]["details"][0]["field"], "email");
    }
}

#[tokio::test]
async fn suppressions_are_listed_page_by_page_and_filtered_by_reason() {
    let api = TestApi::new().await;
    for email in ["one@example.com", "two@example.com"] {
        assert_eq!(api.post("/v1/suppressions", json!({ "email": email })).await.status, StatusCode::CREATED);
    }
    // Both entries may share a millisecond, and ULIDs order within one only at random, so
    // the test checks the pages together rather than which entry comes first.
    let r = api.get("/v1/suppressions?reason=Manual&limit=1").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.data().as_array().unwrap().len(), 1);
    assert_eq!(r.body["pagination"]["hasMore"], true);
    let first = r.data()[0]["email"].clone();
    let cursor = r.body["pagination"]["nextCursor"].as_str().unwrap().to_owned();
    let r = api.get(&format!("/v1/suppressions?reason=Manual&cursor={cursor}")).await;
    assert_eq!(r.body["pagination"]["hasMore"], false);
    let mut seen = vec![first, r.data()[0]["email"].clone()];
    seen.sort_by_key(|v| v.to_string());
    assert_eq!(seen, [json!("one@example.com"), json!("two@example.com")]);

    let r = api.get("/v1/suppressions?reason=HardBounce").await;
    assert_eq!(r.data(), &json!([]));
    let r = api.get("/v1/suppressions?reason=Bogus").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    assert_eq!(r.body["error"]["details"][0]["field"], "reason");
}

#[tokio::test]
async fn deleting_a_suppression_is_200_with_null_data_then_404() {
    let api = TestApi::new().await;
    api.post("/v1/suppressions", json!({"email": "gone@example.com"})).await;
    let r = api.delete("/v1/suppressions/GONE@example.com").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.data().is_null());
    let r = api.delete("/v1/suppressions/gone@example.com").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
    let r = api.get("/v1/suppressions/gone@example.com").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
}

#[tokio::test]
async fn the_address_in_the_path_is_url_decoded() {
    let api = TestApi::new().await;
    api.post("/v1/suppressions", json!({"email": "a+b@example.com"})).await;
    let r = api.get("/v1/suppressions/a%2Bb@example.com").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.data()["email"], "a+b@example.com");
    let r = api.delete("/v1/suppressions/a%2Bb%40example.com").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(api.get("/v1/suppressions").await.data(), &json!([]));
}

#[tokio::test]
async fn a_send_key_cannot_manage_suppressions() {
    let api = TestApi::new().await;
    let key = api.send_key().await;
    let r = api.call("POST", "/v1/suppressions", Some(&key), Some(json!({"email": "x@example.com"}))).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::FORBIDDEN, "insufficient_scope"));
    let r = api.call("GET", "/v1/suppressions", Some(&key), None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::FORBIDDEN, "insufficient_scope"));
}

// --- webhooks ---

#[tokio::test]
async fn creating_a_webhook_is_201_with_a_whsec_secret_that_list_and_get_hide() {
    let api = TestApi::new().await;
    let created = api.create_webhook().await;
    assert!(created["secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(created["url"], HOOK_URL);
    assert_eq!(created["enabled"], true);
    assert_eq!(created["eventTypes"], json!(["Delivered"]));
    assert!(created["disabledReason"].is_null());
    assert!(created["failingSince"].is_null(), "a new endpoint is not failing");
    assert_eq!(created["format"], "tidings", "the default format");
    let id = id_of(&created);

    let r = api.get("/v1/webhooks").await;
    let listed = &r.data()[0];
    assert_eq!(listed["id"], id.as_str());
    assert!(listed.get("secret").is_none(), "{listed}");
    assert_eq!(r.body["pagination"]["hasMore"], false);

    let r = api.get(&format!("/v1/webhooks/{id}")).await;
    assert_eq!(r.data()["url"], HOOK_URL);
    assert!(r.data().get("secret").is_none(), "{}", r.body);
}

#[tokio::test]
async fn plain_http_private_addresses_and_empty_event_types_are_422_naming_the_field() {
    let api = TestApi::new().await;
    let cases = [
        (json!({"url": "http://hooks.example.com/", "eventTypes": ["Delivered"]}), "url"),
        (json!({"url": "https://127.0.0.1/", "eventTypes": ["Delivered"]}), "url"),
        (json!({"url": HOOK_URL, "eventTypes": []}), "eventTypes"),
        (json!({"url": HOOK_URL, "eventTypes": ["Delivered"], "format": "svix"}), "format"),
    ];
    for (body, field) in cases {
        let r = api.post("/v1/webhooks", body.clone()).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"), "{body}");
        assert_eq!(r.body["error"]["details"][0]["field"], field, "{body}");
    }
    assert_eq!(api.get("/v1/webhooks").await.data(), &json!([]));
}

#[tokio::test]
async fn patch_disables_a_webhook_and_keeps_the_rest() {
    let api = TestApi::new().await;
    let id = id_of(&api.create_webhook().await);
    let r = api.patch(&format!("/v1/webhooks/{id}"), json!({"enabled": false})).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.data()["enabled"], false);
    assert_eq!(r.data()["url"], HOOK_URL);
    assert!(r.data().get("secret").is_none());
    assert_eq!(api.get(&format!("/v1/webhooks/{id}")).await.data()["enabled"], false);

    let r = api.patch(&format!("/v1/webhooks/{id}"), json!({"url": "http://hooks.example.com/"})).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
}

#[tokio::test]
async fn the_format_is_set_on_create_changed_by_patch_and_an_unknown_one_changes_nothing() {
    let api = TestApi::new().await;
    let body = json!({"url": HOOK_URL, "eventTypes": ["Delivered"], "format": "resend"});
    let r = api.post("/v1/webhooks", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.data()["format"], "resend");
    let id = id_of(r.data());
    let r = api.patch(&format!("/v1/webhooks/{id}"), json!({"format": "postmark"})).await;
    assert_eq!((r.status, &r.data()["format"]), (StatusCode::OK, &json!("postmark")), "{}", r.body);
    let r = api.patch(&format!("/v1/webhooks/{id}"), json!({"format": "mailgun", "enabled": false})).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    assert_eq!(r.body["error"]["details"][0]["field"], "format", "{}", r.body);
    let kept = api.get(&format!("/v1/webhooks/{id}")).await;
    assert_eq!((&kept.data()["format"], &kept.data()["enabled"]), (&json!("postmark"), &json!(true)));
}

#[tokio::test]
async fn rotating_the_secret_returns_a_different_one() {
    let api = TestApi::new().await;
    let created = api.create_webhook().await;
    let r = api.post(&format!("/v1/webhooks/{}/rotate-secret", id_of(&created)), json!({})).await;
    assert_eq!(r.status, StatusCode::OK);
    let secret = r.data()["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"));
    assert_ne!(secret, created["secret"].as_str().unwrap());
}

#[tokio::test]
async fn a_test_event_is_a_pending_delivery_in_the_log_that_can_be_retried() {
    let api = TestApi::new().await;
    let id = id_of(&api.create_webhook().await);
    let r = api.post(&format!("/v1/webhooks/{id}/test"), json!({})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let delivery = r.data().clone();
    assert_eq!(delivery["eventType"], "Test");
    assert_eq!(delivery["status"], "Pending");
    assert_eq!(delivery["attempts"], 0);
    assert!(delivery["responseCode"].is_null() && delivery["lastError"].is_null());
    assert!(delivery["nextAttemptAt"].is_string() && delivery["eventId"].is_string());

    let r = api.get(&format!("/v1/webhooks/{id}/deliveries")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.data(), &json!([delivery.clone()]));

    let delivery_id = id_of(&delivery);
    let r = api.post(&format!("/v1/webhooks/{id}/deliveries/{delivery_id}/retry"), json!({})).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!((r.data()["id"].as_str(), r.data()["status"].as_str()), (Some(delivery_id.as_str()), Some("Pending")));

    let r = api.post(&format!("/v1/webhooks/{id}/deliveries/01ARZ3NDEKTSV4RRFFQ69G5FAV/retry"), json!({})).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
}

#[tokio::test]
async fn a_send_key_cannot_manage_webhooks() {
    let api = TestApi::new().await;
    let id = id_of(&api.create_webhook().await);
    let key = api.send_key().await;
    let body = json!({"url": HOOK_URL, "eventTypes": ["Delivered"]});
    let r = api.call("POST", "/v1/webhooks", Some(&key), Some(body)).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::FORBIDDEN, "insufficient_scope"));
    let r = api.call("GET", &format!("/v1/webhooks/{id}"), Some(&key), None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::FORBIDDEN, "insufficient_scope"));
}

#[tokio::test]
async fn another_workspaces_webhook_is_404() {
    let api = TestApi::new().await;
    let id = id_of(&api.create_webhook().await);
    let (_, other) = api.core.workspaces().create("other", None).await.unwrap();
    let other_key = other.plaintext.expose().to_owned();
    for (method, path) in [
        ("GET", format!("/v1/webhooks/{id}")),
        ("DELETE", format!("/v1/webhooks/{id}")),
        ("POST", format!("/v1/webhooks/{id}/rotate-secret")),
        ("GET", format!("/v1/webhooks/{id}/deliveries")),
    ] {
        let r = api.call(method, &path, Some(&other_key), None).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"), "{method} {path}");
    }
    let r = api.call("GET", "/v1/webhooks", Some(&other_key), None).await;
    assert_eq!(r.data(), &json!([]));
    assert_eq!(api.get(&format!("/v1/webhooks/{id}")).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_deleted_webhook_is_gone() {
    let api = TestApi::new().await;
    let id = id_of(&api.create_webhook().await);
    let r = api.delete(&format!("/v1/webhooks/{id}")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.data().is_null());
    for path in [format!("/v1/webhooks/{id}"), format!("/v1/webhooks/{id}/deliveries")] {
        let r = api.get(&path).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"), "{path}");
    }
    let r = api.delete(&format!("/v1/webhooks/{id}")).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
}
