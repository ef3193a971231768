//! The route table: one module per resource, each with its DTOs and handlers, added through
//! [`table::RouteTable`] so that the served routes can be listed.

mod batch;
mod domains;
mod health;
mod keys;
mod messages;
mod metrics;
mod openapi;
mod suppressions;
mod table;
mod templates;
mod tracking;
mod webhooks;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::response::{IntoResponse, Response};

use crate::{ApiError, ApiState};

pub use tracking::loggable_path;

/// Every route of the API; `send_body_limit` is the body limit of `POST /v1/messages`.
fn table(send_body_limit: usize) -> table::RouteTable {
    table::RouteTable::default()
        .merge(keys::routes())
        .merge(messages::routes(send_body_limit))
        .merge(domains::routes())
        .merge(templates::routes())
        .merge(suppressions::routes())
        .merge(webhooks::routes())
        .merge(openapi::routes())
        .merge(tracking::routes())
        .merge(health::routes())
        .merge(metrics::routes())
}

/// The `(method, path)` pairs [`router`] serves, paths in axum's `{name}` template syntax
/// (which is OpenAPI's too). A GET route also answers HEAD; that is not listed.
pub fn served_routes() -> Vec<(Method, &'static str)> {
    table(0).into_parts().1
}

/// The whole API under `/v1`, the public tracking endpoints under `/t`, the probes
/// `/healthz` and `/readyz` and the Prometheus metrics at `/metrics`, with requests counted
/// by route, with the envelope on unknown routes (404) and wrong methods (405), the body
/// limits (413; a larger one for sends, which may carry attachments), the request timeout
/// (503) and an `X-Request-Id` on every
/// response.
pub fn router(state: ApiState) -> Router {
    let limit = state.config.max_body_bytes;
    let timeout = state.config.request_timeout;
    let (routes, _) = table(state.config.max_send_body_bytes.max(limit)).into_parts();
    routes
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn(move |req, next| time_limited(timeout, req, next)))
        // A panic is a bug, but it must cost one request, not the connection or the process,
        // and the client still gets the envelope.
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_response))
        // Outside the time limit and the panic catcher, so their 503 and 500 are counted.
        .layer(axum::middleware::from_fn_with_state(state.metrics.clone(), crate::metrics::track_requests))
        // Outermost, so timeouts and panics are answered with the id and logged in its span.
        .layer(axum::middleware::from_fn(crate::request_id::with_request_id))
        .with_state(state)
}

/// Answers 503 `unavailable` in the envelope when a request takes longer than `limit`
/// (tower-http's timeout layer would answer with an empty body).
async fn time_limited(
    limit: std::time::Duration,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::Core(tidings_core::Error::Unavailable("request timed out".into())).into_response(),
    }
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError::Core(tidings_core::Error::Internal("handler panicked".into())).into_response()
}

async fn unknown_route() -> Response {
    ApiError::UnknownRoute.into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::MethodNotAllowed.into_response()
}
