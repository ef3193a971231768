//! Resend's API under `/resend` (docs/api.md#switching-from-resend-or-postmark): the emails
//! endpoints, answered in Resend's shapes and with Resend's error body
//! (`{"statusCode","name","message"}`), so that Resend's SDKs work unchanged.
//!
//! `auth` and `error` translate who the caller is and what went wrong, `emails` holds the
//! request and response shapes, `handlers` the routes. Resend's domains and API keys, and
//! Postmark's API, go beside this as modules of their own.

mod auth;
mod emails;
mod error;
mod handlers;

use axum::Router;
use axum::response::{IntoResponse, Response};

use crate::ApiState;
use crate::body::BodyLimit;

pub(crate) use error::ResendError;

/// The routes under `/resend`; the send route's body may be up to `send_body_limit` bytes
/// (attachments), like `POST /v1/messages`. Unknown paths and wrong methods answer in
/// Resend's shape, not the envelope. The router these are nested in adds the limits, the
/// timeout and the request id.
pub(crate) fn routes(send_body_limit: usize) -> Router<ApiState> {
    use axum::routing::{get, post};
    let send_limit = axum::Extension(BodyLimit(send_body_limit));
    Router::new()
        .route("/emails", post(handlers::send_email).layer(send_limit).get(handlers::list_emails))
        .route("/emails/batch", post(handlers::send_batch))
        .route("/emails/{id}", get(handlers::get_email).patch(handlers::update_email))
        .route("/emails/{id}/cancel", post(handlers::cancel_email))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
}

/// Whether a request path (as the API router sees it) is under `/resend`, for the answers
/// made outside this router (the request timeout).
pub(crate) fn owns(path: &str) -> bool {
    path == "/resend" || path.starts_with("/resend/")
}

async fn unknown_route() -> Response {
    ResendError::UnknownRoute.into_response()
}

async fn method_not_allowed() -> Response {
    ResendError::MethodNotAllowed.into_response()
}
