//! The probes (`/healthz`, `/readyz`) and request ids (`X-Request-Id`, and the `request` span
//! around every request's log lines).

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use crate::support::{Reply, TestApi};
use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode};
use serde_json::json;
use tidings_core::usecases::AuthThrottleConfig;
use tidings_http::HttpConfig;

/// `GET path` with `X-Request-Id: id` (raw bytes, so malformed ones can be sent).
async fn get_with_id(api: &TestApi, path: &str, id: &[u8]) -> Reply {
    let req = Request::get(path).header("x-request-id", HeaderValue::from_bytes(id).unwrap());
    api.send(req.body(Body::empty()).unwrap()).await
}

fn request_id(reply: &Reply) -> &str {
    reply.headers.get("x-request-id").expect("X-Request-Id").to_str().expect("ASCII")
}

#[tokio::test]
async fn healthz_answers_ok_without_a_key() {
    let api = TestApi::new().await;

    let r = api.call("GET", "/healthz", None, None).await;

    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.data(), &json!({ "status": "ok" }));
}

#[tokio::test]
async fn healthz_answers_ok_even_when_the_store_is_down() {
    let api = TestApi::without_store();

    let r = api.call("GET", "/healthz", None, None).await;

    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
}

#[tokio::test]
async fn readyz_answers_ok_without_a_key_when_the_store_is_reachable() {
    let api = TestApi::new().await;

    let r = api.call("GET", "/readyz", None, None).await;

    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.data(), &json!({ "status": "ok" }));
}

#[tokio::test]
async fn readyz_answers_503_unavailable_when_the_store_is_down() {
    let api = TestApi::without_store();

    let r = api.call("GET", "/readyz", None, None).await;

    assert_eq!((r.status, r.error_code()), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"));
    assert!(!r.body.to_string().contains("test store is down"), "the cause is not shown: {}", r.body);
}

#[tokio::test]
async fn probes_do_not_count_as_failed_authentications() {
    let throttle = AuthThrottleConfig { max_failures: 1, ..Default::default() };
    let api = TestApi::with_config(HttpConfig { auth_throttle: throttle, ..Default::default() }).await;

    for _ in 0..5 {
        assert_eq!(api.call("GET", "/healthz", None, None).await.status, StatusCode::OK);
        assert_eq!(api.call("GET", "/readyz", None, None).await.status, StatusCode::OK);
    }
    let r = api.call("GET", "/v1/keys", None, None).await;

    assert_eq!((r.status, r.error_code()), (StatusCode::UNAUTHORIZED, "missing_api_key"));
}

#[tokio::test]
async fn a_well_formed_request_id_is_echoed() {
    let api = TestApi::new().await;
    let long = "x".repeat(128);

    for id in ["abc-123", "trace 7/42:span=9", long.as_str()] {
        let r = get_with_id(&api, "/healthz", id.as_bytes()).await;
        assert_eq!(request_id(&r), id);
    }
}

#[tokio::test]
async fn a_request_without_an_id_gets_a_fresh_ulid() {
    let api = TestApi::new().await;

    let first = api.call("GET", "/healthz", None, None).await;
    let second = api.call("GET", "/healthz", None, None).await;

    let (a, b) = (request_id(&first), request_id(&second));
    assert!(a.parse::<ulid::Ulid>().is_ok(), "{a}");
    assert_ne!(a, b, "each request has its own id");
}

#[tokio::test]
async fn a_malformed_request_id_is_replaced_not_refused() {
    let api = TestApi::new().await;
    let too_long = "x".repeat(129);

    for id in [too_long.as_bytes(), b"caf\xe9", b"tab\there", b""] {
        let r = get_with_id(&api, "/healthz", id).await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(request_id(&r).parse::<ulid::Ulid>().is_ok(), "{id:?} -> {}", request_id(&r));
    }
}

#[tokio::test]
async fn error_responses_carry_the_request_id_too() {
    let api = TestApi::new().await;

    let unauthorized = get_with_id(&api, "/v1/keys", b"req-401").await;
    let unknown = get_with_id(&api, "/v1/nothing-here", b"req-404").await;
    let unrouted = api.call("DELETE", "/healthz", None, None).await;

    assert_eq!((unauthorized.status, request_id(&unauthorized)), (StatusCode::UNAUTHORIZED, "req-401"));
    assert_eq!((unknown.status, request_id(&unknown)), (StatusCode::NOT_FOUND, "req-404"));
    assert_eq!(unrouted.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(request_id(&unrouted).parse::<ulid::Ulid>().is_ok());
}

/// Log output kept in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every log line of this test binary, from the first call on. A global subscriber, not a
/// scoped one: tracing caches per call site whether anyone listens, and a test running on
/// another thread would make a scoped subscriber miss spans.
fn captured_logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber =
            tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).without_time().finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        captured
    })
}

#[tokio::test]
async fn the_error_log_of_a_request_names_its_id() {
    let logs = captured_logs();
    let api = TestApi::without_store();

    let r = get_with_id(&api, "/readyz", b"probe-42").await;

    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let line = logs
        .lines()
        .find(|l| l.contains("request failed") && l.contains("request_id=probe-42"))
        .unwrap_or_else(|| panic!("no error log in the request's span:\n{logs}"));
    assert!(line.contains("test store is down"), "the cause is logged: {line}");
}
