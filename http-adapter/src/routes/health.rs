//! `GET /healthz` (liveness) and `GET /readyz` (readiness) for load balancers and
//! orchestrators: no key, no rate limit, no failed-auth throttle, and the envelope like every
//! other endpoint.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa_axum::routes;

use super::table::RouteTable;
use crate::envelope::{Success, constant};
use crate::openapi::failures::Unavailable;
use crate::{ApiResult, ApiState};

/// `data` of both probes; a probe that fails answers the error envelope instead.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ProbeStatus)]
pub struct HealthResponse {
    #[schema(schema_with = ok)]
    status: &'static str,
}

fn ok() -> ObjectBuilder {
    constant(Type::String, "ok")
}

type Healthy = Success<200, HealthResponse>;

/// `GET /healthz`: the process answers. Touches nothing else, so a slow store cannot make an
/// orchestrator restart a healthy process.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    summary = "Liveness: the process answers",
    description = "Always 200 while the process serves requests; touches no storage. No authentication.",
    security(()),
    responses((status = 200, description = "the process is alive", body = inline(Healthy)))
)]
pub async fn check_liveness() -> Healthy {
    Success::new("OK", HealthResponse { status: "ok" })
}

/// `GET /readyz`: the store is reachable and the server is not shutting down; 503
/// `unavailable` otherwise.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Readiness: the store is reachable",
    description = "200 when a cheap read of the store succeeds, else 503 `unavailable`; 503 too once the server \
        has started shutting down (SIGTERM), so load balancers stop sending while in-flight requests finish. No \
        authentication.",
    security(()),
    responses(
        (status = 200, description = "ready for traffic", body = inline(Healthy)),
        (status = 503, response = Unavailable),
    )
)]
pub async fn check_readiness(State(state): State<ApiState>) -> ApiResult<Healthy> {
    if state.drain.is_draining() {
        return Err(tidings_core::Error::Unavailable("shutting down".into()).into());
    }
    state.core.check_ready().await?;
    Ok(Success::new("OK", HealthResponse { status: "ok" }))
}

/// The probes' routes.
pub fn routes() -> RouteTable {
    RouteTable::default().routes(routes!(check_liveness)).routes(routes!(check_readiness))
}
