//! Requests the API cannot take as they are: bodies that are not JSON objects or too large,
//! unknown routes and wrong methods, all answered in the envelope (docs/api.md#errors).

use crate::common::{assert_error, assert_invalid, assert_ok};
use reqwest::Method;
use serde_json::json;
use tidings_e2e::{Options, TestServer, fresh_key, into_parts};

/// The body limit the server under test is given (the default is 10 MiB).
const LIMIT: usize = 4096;

async fn small_limit_server() -> TestServer {
    // The send route has its own, larger limit (attachments); give it the same one here.
    let env = vec![
        ("TIDINGS_MAX_BODY_BYTES".to_owned(), LIMIT.to_string()),
        ("TIDINGS_MAX_SEND_BODY_BYTES".to_owned(), LIMIT.to_string()),
    ];
    TestServer::start_with(Options { bootstrap_key: Some(fresh_key()), env, ..Options::default() }).await
}

#[tokio::test]
async fn bodies_must_be_json_objects_within_the_limit() {
    let server = small_limit_server().await;
    let key = server.key().to_owned();
    let raw = |method: Method, path: &str, content_type: Option<&str>, body: Vec<u8>| {
        let mut request = server.request(method, path).bearer_auth(&key).body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        async move { into_parts(request.send().await.expect("an HTTPS response")).await }
    };
    let json_type = Some("application/json");
    let routes = [(Method::POST, "/v1/messages"), (Method::POST, "/v1/keys"), (Method::PATCH, "/v1/webhooks/x")];

    for (method, path) in &routes {
        for (what, content_type, body) in [
            ("truncated JSON", json_type, &b"{\"to\":"[..]),
            ("an empty body", json_type, b""),
            ("an array", json_type, b"[]"),
            ("a string", json_type, b"\"to\""),
            ("null", json_type, b"null"),
            ("trailing garbage", json_type, b"{\"name\": \"x\"} and more"),
            ("bytes that are not UTF-8", json_type, b"{\"name\": \"\xff\xfe\"}"),
            ("a JSON object sent as text/plain", Some("text/plain"), b"{\"name\": \"x\"}"),
            ("a JSON object sent as a form", Some("application/x-www-form-urlencoded"), b"{\"name\": \"x\"}"),
            ("a JSON object without Content-Type", None, b"{\"name\": \"x\"}"),
        ] {
            let (status, reply) = raw(method.clone(), path, content_type, body.to_vec()).await;
            assert_error(status, &reply, 400, "invalid_json", &format!("{method} {path}: {what}"));
        }
    }

    // Content types are matched as media types: parameters and case do not matter.
    for content_type in ["application/json; charset=utf-8", "Application/JSON"] {
        let (status, reply) = raw(Method::POST, "/v1/keys", Some(content_type), br#"{"name": "ct"}"#.to_vec()).await;
        assert_ok(status, &reply, 201, &format!("Content-Type: {content_type}"));
    }

    // The limit: a body of exactly the limit is read, one byte more is 413.
    let padded = |len: usize| {
        let mut body = br#"{"name": "padded"}"#.to_vec();
        body.resize(len, b' ');
        body
    };
    let (status, reply) = raw(Method::POST, "/v1/keys", json_type, padded(LIMIT)).await;
    assert_ok(status, &reply, 201, "a body of exactly the limit");
    for (method, path) in &routes {
        let (status, reply) = raw(method.clone(), path, json_type, padded(LIMIT + 1)).await;
        assert_error(status, &reply, 413, "payload_too_large", &format!("{method} {path}: one byte over the limit"));
    }
    let big_text = json!({"to": "ann@example.com", "subject": "s", "text": "x".repeat(LIMIT * 4)});
    let (status, reply) = server.post("/v1/messages", &key, big_text).await;
    assert_error(status, &reply, 413, "payload_too_large", "a send whose text is over the limit");

    // A well-formed object with a field of the wrong type is a 422 naming the field.
    let (status, reply) = server.post("/v1/keys", &key, json!({"scope": ["full"]})).await;
    assert_invalid(status, &reply, &["scope"], "a field of the wrong type");
    let (_, reply) = server.get("/v1/keys", &key).await;
    let names: Vec<&str> = reply["data"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 4, "only the accepted bodies created keys: {names:?}");
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_get_the_envelope() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    let send = |method: Method, path: &str, authed: bool| {
        let mut request = server.request(method, path);
        if authed {
            request = request.bearer_auth(&key);
        }
        async move {
            let response = request.send().await.expect("an HTTPS response");
            let headers = response.headers().clone();
            let (status, body) = into_parts(response).await;
            (status, headers, body)
        }
    };

    // `/` is the dashboard's sign-in page (docs/dashboard.md); other unknown paths are the API's.
    for path in
        ["/no-such-page", "/v1", "/v2/keys", "/v1/key", "/v1/messages/x/y/z", "/v1/domains/%FF", "/v1/suppressions/%FF"]
    {
        for authed in [true, false] {
            let what = format!("GET {path} (authenticated: {authed})");
            let (status, headers, body) = send(Method::GET, path, authed).await;
            if path.ends_with("%FF") && !authed {
                // A real route: the key is checked before the path parameter.
                assert_error(status, &body, 401, "missing_api_key", &what);
                continue;
            }
            assert_error(status, &body, 404, "not_found", &what);
            assert_json(&headers, &what);
        }
    }

    let id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    for (method, path, allowed) in [
        (Method::PUT, "/v1/keys".to_owned(), "GET,HEAD,POST"),
        (Method::PUT, format!("/v1/keys/{id}"), "DELETE,GET,HEAD,PATCH"),
        (Method::DELETE, "/v1/messages".to_owned(), "GET,HEAD,POST"),
        (Method::POST, format!("/v1/messages/{id}"), "GET,HEAD,PATCH"),
        (Method::DELETE, format!("/v1/messages/{id}/events"), "GET,HEAD"),
        (Method::GET, format!("/v1/domains/{id}/verify"), "POST"),
        (Method::PUT, format!("/v1/domains/{id}"), "DELETE,GET,HEAD,PATCH"),
        (Method::GET, format!("/v1/templates/{id}/render"), "POST"),
        (Method::PUT, "/v1/suppressions/ann@example.com".to_owned(), "DELETE,GET,HEAD"),
        (Method::GET, format!("/v1/webhooks/{id}/test"), "POST"),
        (Method::DELETE, format!("/v1/webhooks/{id}/deliveries"), "GET,HEAD"),
    ] {
        for authed in [true, false] {
            let what = format!("{method} {path} (authenticated: {authed})");
            let (status, headers, body) = send(method.clone(), &path, authed).await;
            assert_error(status, &body, 405, "method_not_allowed", &what);
            assert_json(&headers, &what);
            // RFC 9110 §15.5.6: a 405 lists the methods the resource has.
            let allow = headers.get("allow").map(|v| v.to_str().unwrap()).unwrap_or_default();
            let mut methods: Vec<&str> = allow.split(',').map(str::trim).collect();
            methods.sort_unstable();
            assert_eq!(methods.join(","), allowed, "{what}: Allow");
        }
    }
}

/// The response says it is JSON.
#[track_caller]
fn assert_json(headers: &reqwest::header::HeaderMap, what: &str) {
    let content_type = headers.get("content-type").map(|v| v.to_str().unwrap()).unwrap_or_default();
    assert!(content_type.starts_with("application/json"), "{what}: Content-Type {content_type:?}");
}

#[tokio::test]
async fn every_list_validates_limit_and_cursor() {
    let server = TestServer::start().await;
    let key = server.key().to_owned();
    for list in ["/v1/keys", "/v1/messages", "/v1/domains", "/v1/templates", "/v1/suppressions", "/v1/webhooks"] {
        for (query, field) in
            [("limit=0", "limit"), ("limit=201", "limit"), ("limit=1.5", "limit"), ("cursor=not-a-cursor", "cursor")]
        {
            let (status, body) = server.get(&format!("{list}?{query}"), &key).await;
            assert_invalid(status, &body, &[field], &format!("GET {list}?{query}"));
        }
        for limit in [1, 200] {
            let (status, body) = server.get(&format!("{list}?limit={limit}"), &key).await;
            assert_ok(status, &body, 200, &format!("GET {list}?limit={limit}"));
            let mut pagination = json!({"limit": limit, "hasMore": false, "nextCursor": null});
            if list == "/v1/messages" {
                // The one list that pages back too (`endingBefore`).
                pagination["prevCursor"] = serde_json::Value::Null;
            }
            assert_eq!(body["pagination"], pagination, "{list}");
        }
    }
}
