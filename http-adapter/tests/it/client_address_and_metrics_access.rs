//! Who the client is behind a trusted proxy (`X-Forwarded-For` read only from one), and who
//! may read `/metrics` when the operator set a token or moved it to a listener of its own.

use std::net::SocketAddr;

use crate::support::{Reply, TestApi};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use tidings_core::usecases::MetricsToken;
use tidings_http::{HttpConfig, TrustedProxies};
use tower::ServiceExt;

const TOKEN: &str = "scrape-token-0123456789abcdef";

/// `GET path` from the TCP peer `peer`, with `X-Forwarded-For: forwarded` if given and
/// `Authorization: Bearer bearer` if given.
fn request(path: &str, peer: &str, forwarded: Option<&str>, bearer: Option<&str>) -> Request<Body> {
    let mut req = Request::get(path);
    if let Some(list) = forwarded {
        req = req.header("x-forwarded-for", list);
    }
    if let Some(token) = bearer {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let mut req = req.body(Body::empty()).unwrap();
    let peer: SocketAddr = format!("{peer}:40000").parse().unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    req
}

async fn status_of(api: &TestApi, req: Request<Body>) -> StatusCode {
    api.send_raw(req).await.status
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_forwarded_client_is_throttled_on_its_own() {
    let config = HttpConfig { trusted_proxies: TrustedProxies::parse("10.0.0.0/8").unwrap(), ..Default::default() };
    let api = TestApi::with_config(config).await;
    let from = |client: &str, key: &str| {
        // The client forged the left entry; the proxy appended the real address.
        let list = format!("6.6.6.6, {client}");
        request("/v1/keys", "10.0.0.7", Some(&list), Some(key))
    };
    for _ in 0..20 {
        assert_eq!(status_of(&api, from("198.51.100.1", "tid_bad")).await, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(status_of(&api, from("198.51.100.1", &api.key)).await, StatusCode::TOO_MANY_REQUESTS);
    // Another client behind the same proxy is not locked out, nor is the forged address.
    assert_eq!(status_of(&api, from("198.51.100.2", &api.key)).await, StatusCode::OK);
    assert_eq!(status_of(&api, from("6.6.6.6", &api.key)).await, StatusCode::OK);
    assert_eq!(status_of(&api, from("198.51.100.2", "tid_bad")).await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn an_untrusted_peer_cannot_pick_its_throttle_bucket_with_the_header() {
    for proxies in ["", "10.0.0.0/8"] {
        let config = HttpConfig { trusted_proxies: TrustedProxies::parse(proxies).unwrap(), ..Default::default() };
        let api = TestApi::with_config(config).await;
        for n in 0..20 {
            let list = format!("198.51.100.{n}");
            let req = request("/v1/keys", "203.0.113.5", Some(&list), Some("tid_bad"));
            assert_eq!(status_of(&api, req).await, StatusCode::UNAUTHORIZED);
        }
        let req = request("/v1/keys", "203.0.113.5", Some("198.51.100.99"), Some(&api.key));
        assert_eq!(status_of(&api, req).await, StatusCode::TOO_MANY_REQUESTS, "trusted: {proxies:?}");
    }
}

#[tokio::test]
async fn with_a_token_metrics_answer_only_a_scraper_presenting_it() {
    let config = HttpConfig {
        metrics_token: Some(MetricsToken::parse(TOKEN).unwrap()),
        serve_metrics: true,
        ..Default::default()
    };
    let api = TestApi::with_config(config).await;
    for bearer in [None, Some("wrong-token-0123456789abcdef"), Some(&api.key.clone())] {
        let r = api.send(request("/metrics", "192.0.2.1", None, bearer)).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::UNAUTHORIZED, "invalid_metrics_token"), "{bearer:?}");
        assert_eq!(r.headers["www-authenticate"], "Bearer realm=\"metrics\"");
        assert!(!r.body.to_string().contains("tidings_"), "no metric in a refusal");
    }
    let ok = api.send_raw(request("/metrics", "192.0.2.1", None, Some(TOKEN))).await;
    assert_eq!(ok.status, StatusCode::OK);
    assert!(String::from_utf8(ok.bytes).unwrap().contains("tidings_http_requests_total"));

    // Guessing is a failed authentication like a bad key: 20 a minute, then 429 even for
    // the right token.
    for _ in 0..17 {
        assert_eq!(
            status_of(&api, request("/metrics", "192.0.2.1", None, Some("guess-0123456789abcdef"))).await,
            StatusCode::UNAUTHORIZED
        );
    }
    let r = api.send(request("/metrics", "192.0.2.1", None, Some(TOKEN))).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::TOO_MANY_REQUESTS, "too_many_auth_failures"));
    assert_eq!(status_of(&api, request("/metrics", "192.0.2.2", None, Some(TOKEN))).await, StatusCode::OK);
}

#[tokio::test]
async fn without_a_token_metrics_stay_open() {
    let api = TestApi::new().await;
    assert_eq!(status_of(&api, request("/metrics", "192.0.2.1", None, None)).await, StatusCode::OK);
}

#[tokio::test]
async fn metrics_moved_to_their_own_listener_are_not_served_by_the_api_router() {
    let config = HttpConfig { serve_metrics: false, ..Default::default() };
    let api = TestApi::with_config(config.clone()).await;
    let r: Reply = api.send(request("/metrics", "127.0.0.1", None, None)).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));

    let metrics = tidings_http::metrics_router(tidings_http::ApiState::new(api.core.clone(), config));
    let scrape = metrics.clone().oneshot(request("/metrics", "127.0.0.1", None, None)).await.unwrap();
    assert_eq!(scrape.status(), StatusCode::OK);
    let other = metrics.oneshot(request("/v1/keys", "127.0.0.1", None, None)).await.unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_router_with_the_default_settings_serves_no_metrics() {
    // What an application nesting the API in its own router gets unless it opts in: the
    // counters are not exported to whoever reaches that application.
    let api = TestApi::with_config(HttpConfig::default()).await;
    let r: Reply = api.send(request("/metrics", "127.0.0.1", None, None)).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
    let opted_in = TestApi::with_config(HttpConfig { serve_metrics: true, ..Default::default() }).await;
    assert_eq!(status_of(&opted_in, request("/metrics", "127.0.0.1", None, None)).await, StatusCode::OK);
}
