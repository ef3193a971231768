//! `GET /metrics`: this process's [`Metrics`](crate::Metrics) in the Prometheus text format,
//! with the queue depth counted in the store (reused for a few seconds). No key, like the
//! probes: scrapers carry none, and nothing in it names a workspace or an address.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::table::RouteTable;
use crate::ApiState;
use crate::metrics::CONTENT_TYPE;

/// `GET /metrics`. A store that cannot be counted leaves the queue gauges out rather than
/// failing the scrape: the counters are still worth having.
pub async fn get_metrics(State(state): State<ApiState>) -> Response {
    let queue = state.metrics.queue_depth(state.core.pending_messages()).await;
    let body = state.metrics.render(queue);
    (StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

/// The metrics route.
pub fn routes() -> RouteTable {
    RouteTable::default().get("/metrics", get_metrics)
}
