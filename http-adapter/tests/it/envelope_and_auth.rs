//! The envelope on every answer, authentication and its throttle, body handling, and keys.

use crate::support::TestApi;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_in_the_envelope() {
    let api = TestApi::new().await;
    let r = api.get("/v1/nothing-here").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
    let r = api.call("PUT", "/v1/keys", Some(&api.key), None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"));
}

#[tokio::test]
async fn missing_malformed_and_unknown_keys_are_401() {
    let api = TestApi::new().await;
    let r = api.call("GET", "/v1/keys", None, None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNAUTHORIZED, "missing_api_key"));
    for key in ["nope", "tid_0000000000000000000000000000000000000000"] {
        let r = api.call("GET", "/v1/keys", Some(key), None).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::UNAUTHORIZED, "invalid_api_key"), "{key}");
    }
    let req = Request::get("/v1/keys").header("x-api-key", &api.key).body(Body::empty()).unwrap();
    assert_eq!(api.send(req).await.status, StatusCode::OK);
}

#[tokio::test]
async fn repeated_auth_failures_are_throttled_with_retry_after() {
    let api = TestApi::new().await;
    for _ in 0..20 {
        assert_eq!(api.call("GET", "/v1/keys", Some("bad"), None).await.status, StatusCode::UNAUTHORIZED);
    }
    let r = api.call("GET", "/v1/keys", Some(&api.key), None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::TOO_MANY_REQUESTS, "too_many_auth_failures"));
    assert!(r.headers.get("retry-after").is_some());
}

#[tokio::test]
async fn bodies_must_be_json_objects_of_the_right_shape() {
    let api = TestApi::new().await;
    let raw = |body: &'static str, content_type: &'static str| {
        Request::post("/v1/keys")
            .header("authorization", format!("Bearer {}", api.key))
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap()
    };
    for (body, ct) in [("{", "application/json"), ("[1]", "application/json"), ("{}", "text/plain")] {
        let r = api.send(raw(body, ct)).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::BAD_REQUEST, "invalid_json"), "{body} {ct}");
    }
    let r = api.post("/v1/keys", json!({"name": 5})).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    assert_eq!(r.body["error"]["details"][0]["field"], "name");
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let config = tidings_http::HttpConfig { max_body_bytes: 1024, ..Default::default() };
    let api = TestApi::with_config(config).await;
    let r = api.post("/v1/keys", json!({"name": "x".repeat(4096)})).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"));
}

#[tokio::test]
async fn keys_are_created_shown_once_listed_and_revoked_at_once() {
    let api = TestApi::new().await;
    let r = api.post("/v1/keys", json!({"name": "ci", "scope": "send"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let created = r.data().clone();
    let plaintext = created["plaintextKey"].as_str().unwrap().to_owned();
    assert!(plaintext.starts_with("tid_"));
    assert_eq!(created["prefix"], plaintext[..12]);
    assert_eq!(created["scope"], "send");

    let one = api.get(&format!("/v1/keys/{}", created["id"].as_str().unwrap())).await;
    assert!(one.data().get("plaintextKey").is_none());
    let listed = api.get("/v1/keys?limit=1").await;
    assert_eq!(listed.data().as_array().unwrap().len(), 1);
    assert_eq!(listed.body["pagination"]["hasMore"], true);
    assert!(listed.body["pagination"]["nextCursor"].is_string());

    // The send key may not manage keys.
    let r = api.call("GET", "/v1/keys", Some(&plaintext), None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::FORBIDDEN, "insufficient_scope"));

    let r = api.call("DELETE", &format!("/v1/keys/{}", created["id"].as_str().unwrap()), Some(&api.key), None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.data().is_null());
    let r = api.call("GET", "/v1/messages", Some(&plaintext), None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNAUTHORIZED, "invalid_api_key"));

    let r = api.get("/v1/keys?limit=0").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    let r = api.get("/v1/keys?limit=abc").await;
    assert_eq!(r.body["error"]["details"][0]["field"], "limit");
}

#[tokio::test]
async fn a_send_without_a_verified_domain_is_refused_and_takes_no_token() {
    let api = TestApi::new().await;
    let r = api.post("/v1/keys", json!({"rateLimitPerSec": 1})).await;
    let key = r.data()["plaintextKey"].as_str().unwrap().to_owned();
    for _ in 0..3 {
        let r = api
            .call("POST", "/v1/messages", Some(&key), Some(json!({"to": "u@example.com", "subject": "s", "text": "t"})))
            .await;
        assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
        assert_eq!(r.body["error"]["details"][0]["field"], "from");
    }
    let r = api.call("POST", "/v1/messages", Some(&key), Some(json!({"to": ["a@b.com"], "text": "t"}))).await;
    assert_eq!(r.body["error"]["details"][0]["field"], "to");
}

#[tokio::test]
async fn a_path_segment_that_is_not_utf8_is_a_404_in_the_envelope() {
    let api = TestApi::new().await;
    let r = api.get("/v1/suppressions/%FF").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
}
