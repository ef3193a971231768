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
    let r = api.call("POST", "/v1/messages", Some(&key), Some(json!({"to": [5], "text": "t"}))).await;
    assert_eq!(r.body["error"]["details"][0]["field"], "to[0]");
}

#[tokio::test]
async fn a_path_segment_that_is_not_utf8_is_a_404_in_the_envelope() {
    let api = TestApi::new().await;
    let r = api.get("/v1/suppressions/%FF").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
}

/// A path segment that is not an id (or not an address, or not a username) names nothing:
/// the answer is the one a well-formed id that names nothing gets, byte for byte: the same
/// 404 `not_found` with the same message, and for a `send` key on a management route the
/// same 403, since the scope is judged before the id.
#[tokio::test]
async fn a_malformed_path_id_is_answered_exactly_as_an_unknown_one() {
    const UNKNOWN: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    let api = TestApi::new().await;
    let send_key =
        api.post("/v1/keys", json!({ "scope": "send" })).await.data()["plaintextKey"].as_str().unwrap().to_owned();
    let routes = [
        ("GET", "/v1/messages/{id}", None),
        ("GET", "/v1/messages/{id}/events", None),
        ("POST", "/v1/messages/{id}/cancel", None),
        ("PATCH", "/v1/messages/{id}", Some(json!({ "scheduledAt": null }))),
        ("GET", "/v1/domains/{id}", None),
        ("PATCH", "/v1/domains/{id}", Some(json!({ "openTracking": true }))),
        ("POST", "/v1/domains/{id}/verify", None),
        ("DELETE", "/v1/domains/{id}", None),
        ("POST", "/v1/domains/{id}/senders", Some(json!({ "username": "x" }))),
        ("GET", "/v1/domains/{id}/senders", None),
        ("DELETE", "/v1/domains/{id}/senders/x", None),
        ("GET", "/v1/templates/{id}", None),
        ("PATCH", "/v1/templates/{id}", Some(json!({ "name": "n" }))),
        ("DELETE", "/v1/templates/{id}", None),
        ("POST", "/v1/templates/{id}/versions", Some(json!({ "subject": "s" }))),
        ("POST", "/v1/templates/{id}/render", Some(json!({}))),
        ("GET", "/v1/webhooks/{id}", None),
        ("PATCH", "/v1/webhooks/{id}", Some(json!({ "enabled": false }))),
        ("DELETE", "/v1/webhooks/{id}", None),
        ("POST", "/v1/webhooks/{id}/test", None),
        ("POST", "/v1/webhooks/{id}/rotate-secret", None),
        ("GET", "/v1/webhooks/{id}/deliveries", None),
        ("POST", "/v1/webhooks/{id}/deliveries/{id}/retry", None),
        ("GET", "/v1/keys/{id}", None),
        ("PATCH", "/v1/keys/{id}", Some(json!({ "rateLimitPerSec": 20 }))),
        ("DELETE", "/v1/keys/{id}", None),
    ];
    for (method, route, body) in routes {
        for key in [api.key.as_str(), send_key.as_str()] {
            let unknown = api.call(method, &route.replace("{id}", UNKNOWN), Some(key), body.clone()).await;
            let malformed = api.call(method, &route.replace("{id}", "not-an-id"), Some(key), body.clone()).await;
            let expected = if key == api.key || route.starts_with("/v1/messages") {
                (StatusCode::NOT_FOUND, "not_found")
            } else {
                (StatusCode::FORBIDDEN, "insufficient_scope")
            };
            assert_eq!((unknown.status, unknown.error_code()), expected, "{method} {route}");
            assert_eq!((malformed.status, &malformed.body), (unknown.status, &unknown.body), "{method} {route}");
        }
    }
    // Names: an address or a username that cannot be one is on no list.
    let domain =
        api.post("/v1/domains", json!({ "domain": "example.com" })).await.data()["id"].as_str().unwrap().to_owned();
    for (method, unknown, malformed) in [
        ("GET", "/v1/suppressions/nobody@example.com".to_owned(), "/v1/suppressions/not-an-address".to_owned()),
        ("DELETE", "/v1/suppressions/nobody@example.com".to_owned(), "/v1/suppressions/not-an-address".to_owned()),
        ("DELETE", format!("/v1/domains/{domain}/senders/nobody"), format!("/v1/domains/{domain}/senders/no%20body")),
    ] {
        let unknown = api.call(method, &unknown, Some(&api.key), None).await;
        let malformed = api.call(method, &malformed, Some(&api.key), None).await;
        assert_eq!((unknown.status, unknown.error_code()), (StatusCode::NOT_FOUND, "not_found"), "{method}");
        assert_eq!((malformed.status, &malformed.body), (unknown.status, &unknown.body), "{method}");
    }
}
