//! Postmark's email API under `/postmark` (docs/api.md#switching-from-resend-or-postmark):
//! `POST /email`, `/email/batch`, `/email/withTemplate` and `/email/batchWithTemplates`,
//! answered in Postmark's shapes (`{To, SubmittedAt, MessageID, ErrorCode, Message}`) and with
//! Postmark's error body and codes, so that postmark.js works unchanged with
//! `requestHost: "<host>/postmark"`.
//!
//! `auth` reads the `X-Postmark-Server-Token` and puts every refusal in Postmark's body,
//! `error` is the one mapping to Postmark's statuses and `ErrorCode`s, `message` holds the
//! request shapes and their translation to core's `SendRequest`, `handlers` the routes.

mod auth;
mod error;
mod handlers;
mod message;

use axum::Router;
use axum::response::IntoResponse;

use crate::ApiState;
use crate::body::BodyLimit;
use crate::json::{ApiJson, ApiJsonArray};

pub(crate) use error::PostmarkError;

/// The routes under `/postmark`; a single send's body may be up to `send_body_limit` bytes
/// (attachments), like `POST /v1/messages`, a batch's the API's limit, like
/// `POST /v1/messages/batch`. Unknown paths and wrong methods answer in Postmark's shape.
pub(crate) fn routes(send_body_limit: usize) -> Router<ApiState> {
    use axum::routing::post;
    use handlers::{send, send_batch};
    let send_limit = axum::Extension(BodyLimit(send_body_limit));
    Router::new()
        .route("/email", post(send::<false>).layer(send_limit))
        .route("/email/withTemplate", post(send::<true>).layer(send_limit))
        .route("/email/batch", post(send_batch::<ApiJsonArray<message::PostmarkMessage>>))
        .route("/email/batchWithTemplates", post(send_batch::<ApiJson<message::TemplatedBatch>>))
        .fallback(|| async { PostmarkError::UnknownRoute.into_response() })
        .method_not_allowed_fallback(|| async { PostmarkError::MethodNotAllowed.into_response() })
}

/// Whether a request path (as the API router sees it) is under `/postmark`, for the answers
/// made outside this router (the request timeout).
pub(crate) fn owns(path: &str) -> bool {
    path.strip_prefix("/postmark").is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}
