//! `GET /metrics`: this process's [`Metrics`](crate::Metrics) in the Prometheus text format,
//! with the queue depth counted in the store (reused for a few seconds). Open like the probes
//! unless the operator set a token ([`HttpConfig::metrics_token`](crate::HttpConfig)): then
//! only a scraper presenting it as `Authorization: Bearer` reads it, and a missing or wrong
//! token is a failed authentication like a bad API key (401, throttled per client address).

use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tidings_core::usecases::{AuthOutcome, AuthRefusal};
use utoipa_axum::routes;

use super::table::RouteTable;
use crate::metrics::CONTENT_TYPE;
use crate::openapi::failures::{MetricsTokenRequired, TooManyAuthFailures};
use crate::{ApiError, ApiState};

/// `GET /metrics`. A store that cannot be counted leaves the queue gauges out rather than
/// failing the scrape: the counters are still worth having.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    summary = "Prometheus metrics of this process",
    description = "Counters and histograms of this process (messages accepted and their events by type, bounces \
        by type, delivery latency, webhook attempts by outcome, HTTP requests by route template and status) and \
        the store's queue depth, in the Prometheus text exposition format 0.0.4. Each node exports its own \
        counters. No API key: open, unless the operator set `TIDINGS_METRICS_TOKEN`, which a scraper then \
        presents as `Authorization: Bearer <token>` (401 `invalid_metrics_token` without it, counted as a failed \
        authentication); or served only on `TIDINGS_METRICS_LISTEN`. See the README for the metric names.",
    security(()),
    responses(
        (status = 200, description = "the metrics, one sample per line (the Prometheus text exposition format \
            0.0.4)", body = String, content_type = "text/plain; version=0.0.4; charset=utf-8"),
        (status = 401, response = MetricsTokenRequired),
        (status = 429, response = TooManyAuthFailures),
    )
)]
pub async fn get_metrics(State(state): State<ApiState>, parts: Parts) -> Response {
    if let Some(token) = &state.config.metrics_token {
        let client = crate::auth::client_ip(&parts);
        let presented = crate::auth::bearer(&parts.headers);
        match state.core.authenticate_metrics_scraper(&*state.limits, client, token, presented).await {
            Ok(AuthOutcome::Admitted(())) => {}
            Ok(AuthOutcome::Refused(AuthRefusal::Blocked(wait))) => {
                return ApiError::TooManyAuthFailures(wait).into_response();
            }
            Ok(AuthOutcome::Refused(AuthRefusal::Missing | AuthRefusal::Invalid)) => {
                return ApiError::MetricsTokenRequired.into_response();
            }
            Err(e) => return ApiError::from(e).into_response(),
        }
    }
    let queue = state.metrics.queue_depth(state.core.operations().pending_messages()).await;
    let mut body = state.metrics.render(queue);
    if let Some(sites) = &state.config.sites {
        let now = state.core.clock().now();
        match sites.list(now).await {
            Ok(views) => crate::metrics::render_sites(&mut body, &views, now),
            // Like the queue gauges: the counters are still worth having.
            Err(error) => tracing::warn!(%error, "cannot read the delivery sites for /metrics"),
        }
    }
    // Per workspace and domain only behind the token: an open /metrics must not list customers.
    let detailed = state.config.metrics_token.is_some();
    crate::metrics::render_reputation(&mut body, &state.core.reputation().board(), detailed);
    (StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

/// The metrics route.
pub fn routes() -> RouteTable {
    RouteTable::default().routes(routes!(get_metrics))
}
