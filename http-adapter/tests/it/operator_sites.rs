//! The operator's API over the delivery sites (`/v1/operator/sites`; contract §12, "Visible
//! and operable"): only with the operator's token, never with an API key; suspend and resume
//! change what the limits admit; the sites' gauges in `/metrics`.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::Duration as Span;
use serde_json::json;
use tidings_core::delivery::{Shaping, SiteControl};
use tidings_core::ids::SiteLeaseId;
use tidings_core::ports::{Limits, SiteLease, SiteQuota};
use tidings_core::shaping::{ShapingTable, SiteKey};
use tidings_core::usecases::{LocalLimits, MetricsToken};
use tidings_http::HttpConfig;

use crate::support::TestApi;

const TOKEN: &str = "operator-token-0123456789abcdef";

async fn api(with_sites: bool) -> (TestApi, Arc<LocalLimits>) {
    let limits = Arc::new(LocalLimits::default());
    let shaping = Shaping::new(Arc::new(ShapingTable::default()), Arc::clone(&limits) as Arc<dyn Limits>);
    let config = HttpConfig {
        operator_token: Some(MetricsToken::parse(TOKEN).unwrap()),
        sites: with_sites.then(|| SiteControl::new(shaping, Arc::new(tidings_testing::MemoryStore::new()))),
        serve_metrics: true,
        ..HttpConfig::default()
    };
    (TestApi::with_config(config).await, limits)
}

fn google() -> SiteKey {
    SiteKey::parse(".google.com").unwrap()
}

#[tokio::test]
async fn only_the_operator_token_reaches_the_sites() {
    let (api, _) = api(true).await;
    for bearer in [None, Some(api.key.clone()), Some("wrong-token-0123456789abcdef".to_owned())] {
        let r = api.call("GET", "/v1/operator/sites", bearer.as_deref(), None).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::UNAUTHORIZED, "invalid_operator_token"), "{bearer:?}");
        assert_eq!(r.headers["www-authenticate"], "Bearer realm=\"operator\"");
        let r = api.call("POST", "/v1/operator/sites/.google.com/resume", bearer.as_deref(), None).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{bearer:?}");
    }
    let r = api.call("GET", "/v1/operator/sites", Some(TOKEN), None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.data(), &json!({ "sites": [], "shaping": true }));
    let r = api.call("GET", "/v1/operator/nothing", Some(TOKEN), None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
}

#[tokio::test]
async fn without_a_token_the_operator_api_is_not_served() {
    let api = TestApi::new().await;
    let r = api.call("GET", "/v1/operator/sites", Some(TOKEN), None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
    let r = api.get("/v1/operator/sites").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"), "an API key does not open it");
}

#[tokio::test]
async fn suspend_and_resume_change_what_the_site_admits() {
    let (api, limits) = api(true).await;
    let now = api.core.clock().now();
    let body = json!({ "duration": "2h", "reason": "Gmail complained" });
    let r = api.call("POST", "/v1/operator/sites/.google.com/suspend", Some(TOKEN), Some(body)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.data()["site"], ".google.com");

    let quota = SiteQuota { connections: 5, rate: ShapingTable::default().limits(&google()).max_message_rate };
    let lease =
        SiteLease { id: SiteLeaseId::new_at(now, &tidings_core::ports::SystemRandom), until: now + Span::minutes(5) };
    let refused = limits.admit_delivery(&google(), quota, lease, now + Span::seconds(1)).await.unwrap();
    assert!(!refused.is_admitted(), "suspended: {refused:?}");

    let r = api.call("GET", "/v1/operator/sites", Some(TOKEN), None).await;
    let sites = r.data()["sites"].as_array().unwrap().clone();
    assert_eq!(sites.len(), 1, "{sites:?}");
    assert_eq!(sites[0]["site"], ".google.com");
    assert_eq!(sites[0]["suspendReason"], "Gmail complained");
    assert_eq!(sites[0]["limits"]["connectionLimit"], 5);
    assert_eq!(sites[0]["limits"]["enableTls"], "required");
    assert!(sites[0]["suspendedUntil"].is_string());

    let metrics = api.send_raw(Request::get("/metrics").body(Body::empty()).unwrap()).await;
    let text = String::from_utf8(metrics.bytes).unwrap();
    let line = text.lines().find(|l| l.starts_with("tidings_site_suspended_seconds{site=\".google.com\"}")).unwrap();
    let seconds: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((7_000.0..=7_200.0).contains(&seconds), "{line}");

    let r = api.call("POST", "/v1/operator/sites/.google.com/resume", Some(TOKEN), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(limits.admit_delivery(&google(), quota, lease, now + Span::seconds(2)).await.unwrap().is_admitted());
}

#[tokio::test]
async fn bad_requests_are_refused_and_change_nothing() {
    let (api, limits) = api(true).await;
    for (path, body, field) in [
        ("/v1/operator/sites/Not%20A%20Site/suspend", json!({ "duration": "1h" }), "site"),
        ("/v1/operator/sites/.google.com/suspend", json!({}), "duration"),
        ("/v1/operator/sites/.google.com/suspend", json!({ "duration": "8d" }), "duration"),
        ("/v1/operator/sites/.google.com/suspend", json!({ "duration": "soon" }), "duration"),
        ("/v1/operator/sites/.google.com/suspend", json!({ "duration": "1h", "reason": "x".repeat(501) }), "reason"),
    ] {
        let r = api.call("POST", path, Some(TOKEN), Some(body)).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"), "{path}");
        assert_eq!(r.body["error"]["details"][0]["field"], field, "{}", r.body);
    }
    let r =
        api.call("POST", "/v1/operator/sites/.google.com/suspend", Some(TOKEN), Some(json!({ "until": "x" }))).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "unknown fields are refused: {}", r.body);
    assert!(limits.site_states(api.core.clock().now()).await.unwrap().is_empty(), "nothing changed");

    let (api, _) = api_without_sites().await;
    let r = api
        .call("POST", "/v1/operator/sites/.google.com/suspend", Some(TOKEN), Some(json!({ "duration": "1h" })))
        .await;
    assert_eq!((r.status, r.error_code()), (StatusCode::CONFLICT, "conflict"), "a relay has no sites");
    let r = api.call("GET", "/v1/operator/sites", Some(TOKEN), None).await;
    assert_eq!(r.data(), &json!({ "sites": [], "shaping": false }));
}

async fn api_without_sites() -> (TestApi, Arc<LocalLimits>) {
    api(false).await
}
