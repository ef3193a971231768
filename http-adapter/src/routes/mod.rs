//! The route table: one module per resource, each with its DTOs and handlers.

mod domains;
mod keys;
mod messages;
mod suppressions;
mod templates;
mod webhooks;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::{ApiError, ApiState};

/// The whole API under `/v1`, with the envelope on unknown routes (404) and wrong methods
/// (405), the body limit (413) and the request timeout (503).
pub fn router(state: ApiState) -> Router {
    let limit = state.config.max_body_bytes;
    let timeout = state.config.request_timeout;
    Router::new()
        .merge(keys::routes())
        .merge(messages::routes())
        .merge(domains::routes())
        .merge(templates::routes())
        .merge(suppressions::routes())
        .merge(webhooks::routes())
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, timeout))
        .with_state(state)
}

async fn unknown_route() -> Response {
    ApiError::UnknownRoute.into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::MethodNotAllowed.into_response()
}
