//! `POST /v1/messages/batch`: up to 500 sends in one request (issue #8), a JSON array of what
//! `POST /v1/messages` takes, answered with one result per item at its index. The header
//! `x-batch-validation` picks `strict` (default, all or nothing) or `permissive`.
//!
//! The rate limit counts messages (core's [`Tidings::send_batch_rate_limited`]): one token per
//! item at once, or 429 for the whole batch; a batch larger than the key's whole bucket is a
//! 422.
//!
//! [`Tidings::send_batch_rate_limited`]: tidings_core::usecases::Tidings::send_batch_rate_limited

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde::Serialize;
use serde_json::{Value, json};
use tidings_core::usecases::{BatchItem, BatchOutcome, BatchValidation, RateLimitState, SendRequest};

use super::messages::{MessageResponse, idempotency_key};
use crate::auth::Authed;
use crate::json::ApiJsonArray;
use crate::{ApiError, ApiResult, ApiState, envelope};

/// One item's result: `message` when it was queued, `error` (the contract's error object)
/// when it was refused.
#[derive(Serialize)]
struct BatchItemResponse {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<MessageResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

/// `POST /v1/messages/batch`.
pub async fn send_batch(
    State(state): State<ApiState>,
    Authed(who): Authed,
    headers: HeaderMap,
    ApiJsonArray(reqs): ApiJsonArray<SendRequest>,
) -> ApiResult<Response> {
    let key = idempotency_key(&headers)?;
    let mode = BatchValidation::parse(headers.get("x-batch-validation").and_then(|v| v.to_str().ok()))?;
    match state.core.send_batch_rate_limited(&*state.limits, &who, reqs, mode, key).await? {
        Ok((outcome, limit)) => Ok(batch_response(outcome, limit.as_ref())),
        Err(retry_after) => Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() }),
    }
}

/// 201 when every item was queued, 200 when a permissive batch refused some (or all).
fn batch_response(outcome: BatchOutcome, limit: Option<&RateLimitState>) -> Response {
    let refused = outcome.refused();
    let (status, message) = match (refused, outcome.replayed) {
        (0, false) => (StatusCode::CREATED, "batch queued".to_owned()),
        (0, true) => (StatusCode::CREATED, "batch already accepted (idempotent replay)".to_owned()),
        (n, false) => (StatusCode::OK, format!("batch partly queued: {n} of {} refused", outcome.items.len())),
        (n, true) => (
            StatusCode::OK,
            format!("batch already accepted (idempotent replay): {n} of {} refused", outcome.items.len()),
        ),
    };
    let items: Vec<BatchItemResponse> = outcome
        .items
        .into_iter()
        .enumerate()
        .map(|(index, item)| match item {
            BatchItem::Queued(m) => BatchItemResponse { index, message: Some(MessageResponse::from(*m)), error: None },
            BatchItem::Refused(e) => {
                let mut error = json!({"code": e.code, "message": e.message});
                if !e.fields.is_empty() {
                    let details: Vec<Value> =
                        e.fields.iter().map(|(field, message)| json!({"field": field, "message": message})).collect();
                    error["details"] = Value::Array(details);
                }
                BatchItemResponse { index, message: None, error: Some(error) }
            }
        })
        .collect();
    let mut response = envelope::success(status, &message, items);
    if let Some(limit) = limit {
        crate::rate_limit::insert_headers(response.headers_mut(), limit);
    }
    if outcome.replayed {
        response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}
