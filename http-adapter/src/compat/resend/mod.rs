//! Resend's API under `/resend` (docs/api.md#switching-from-resend-or-postmark): emails,
//! domains and API keys, answered in Resend's shapes and with Resend's error body
//! (`{"statusCode","name","message"}`), so that Resend's SDKs work unchanged.
//!
//! `auth` and `error` translate who the caller is and what went wrong; `emails` holds the
//! email request and response shapes and `handlers` their routes; `attachment_paths`
//! fetches the attachments given by URL; `domains` and `api_keys` are those resources, and
//! `paging` their list parameters.

mod api_keys;
mod attachment_paths;
mod auth;
mod domains;
mod emails;
mod error;
mod handlers;
mod paging;

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
        .route("/domains", post(domains::create_domain).get(domains::list_domains))
        .route("/domains/{id}", get(domains::get_domain).delete(domains::remove_domain))
        .route("/domains/{id}/verify", post(domains::verify_domain))
        .route("/api-keys", post(api_keys::create_api_key).get(api_keys::list_api_keys))
        .route("/api-keys/{id}", axum::routing::delete(api_keys::remove_api_key))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
}

/// Whether a request path (as the API router sees it) is under `/resend`, for the answers
/// made outside this router (the request timeout).
pub(crate) fn owns(path: &str) -> bool {
    path == "/resend" || path.starts_with("/resend/")
}

/// An answer made outside this router (the head's limits, a caught panic, the API router's
/// own fallback) for a request under `/resend`: Resend's body instead of the envelope, so an
/// SDK raises its own error type.
pub(crate) fn outer_answer(e: crate::ApiError) -> Response {
    ResendError::from(e).into_response()
}

pub(crate) async fn unknown_route() -> Response {
    ResendError::UnknownRoute.into_response()
}

async fn method_not_allowed() -> Response {
    ResendError::MethodNotAllowed.into_response()
}
