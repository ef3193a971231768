//! `GET /healthz` (liveness) and `GET /readyz` (readiness) for load balancers and
//! orchestrators: no key, no rate limit, no failed-auth throttle, and the envelope like every
//! other endpoint.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;

use super::table::RouteTable;
use crate::{ApiResult, ApiState, envelope};

/// `data` of both probes.
#[derive(Serialize)]
pub struct HealthResponse {
    /// Always `ok`; a probe that fails answers the error envelope instead.
    status: &'static str,
}

/// `GET /healthz`: the process answers. Touches nothing else, so a slow store cannot make an
/// orchestrator restart a healthy process.
pub async fn check_liveness() -> Response {
    envelope::success(StatusCode::OK, "OK", HealthResponse { status: "ok" })
}

/// `GET /readyz`: the store is reachable and the server is not shutting down; 503
/// `unavailable` otherwise.
pub async fn check_readiness(State(state): State<ApiState>) -> ApiResult<Response> {
    if state.drain.is_draining() {
        return Err(tidings_core::Error::Unavailable("shutting down".into()).into());
    }
    state.core.check_ready().await?;
    Ok(envelope::success(StatusCode::OK, "OK", HealthResponse { status: "ok" }))
}

/// The probes' routes.
pub fn routes() -> RouteTable {
    RouteTable::default().get("/healthz", check_liveness).get("/readyz", check_readiness)
}
