//! `POST /v1/messages/batch`: up to 500 sends in one request, a JSON array of what
//! `POST /v1/messages` takes, answered with one result per item at its index. The header
//! `x-batch-validation` picks `strict` (default, all or nothing) or `permissive`.
//!
//! The rate limit counts messages (core's [`Messages::send_batch_rate_limited`]): one token per
//! item at once, or 429 for the whole batch; a batch larger than the key's whole bucket is a
//! 422.
//!
//! [`Messages::send_batch_rate_limited`]: tidings_core::usecases::Messages::send_batch_rate_limited

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tidings_core::usecases::{Admission, BatchItem, BatchOutcome, BatchValidation, RateLimitState};
use utoipa::openapi::Required;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::{IntoParams, ToSchema};

use super::messages::{IdempotencyKeyHeader, MessageResponse, idempotency_key};
use super::send_request::SendMessageRequest;
use crate::auth::Authed;
use crate::envelope::{ErrorObject, Success};
use crate::json::ApiJsonArray;
use crate::openapi::failures::{IdempotencyKeyReused, SendBadRequest, SendTooManyRequests, SendUnprocessable};
use crate::{ApiError, ApiResult, ApiState};

/// body of POST /v1/messages/batch: 1 to 500 sends, each what POST /v1/messages takes
// Only documents the body: the handler reads it as `ApiJsonArray<SendMessageRequest>`, which
// names a wrong field with its index.
#[derive(ToSchema)]
#[schema(min_items = 1, max_items = 500)]
pub struct SendBatchRequest(#[allow(dead_code)] Vec<SendMessageRequest>);

/// every item queued, each with its message
#[derive(Serialize, ToSchema)]
#[serde(transparent)]
#[schema(min_items = 1, max_items = 500)]
struct BatchQueued(Vec<QueuedItem>);

/// one result per item at its index: a message where it was queued, an error where it was refused
#[derive(Serialize, ToSchema)]
#[serde(transparent)]
#[schema(min_items = 1, max_items = 500)]
struct BatchResults(Vec<BatchItemResult>);

/// the result of one batch item: `message` when it was queued, `error` when it was refused
/// (permissive batches only)
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
enum BatchItemResult {
    Queued(QueuedItem),
    Refused(RefusedItem),
}

/// a batch item that was queued
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = BatchItemQueued)]
struct QueuedItem {
    /// the item's index in the request
    index: usize,
    // Boxed: a message with its recipients is far larger than a refusal.
    message: Box<MessageResponse>,
}

/// a batch item that was refused, with the error a single send would have got
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = BatchItemRefused)]
struct RefusedItem {
    /// the item's index in the request
    index: usize,
    error: ErrorObject,
}

type BatchCreated = Success<201, BatchQueued>;
type BatchPartial = Success<200, BatchResults>;

/// The `x-batch-validation` header, which core parses.
struct BatchValidationHeader;

impl IntoParams for BatchValidationHeader {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let modes = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["strict", "permissive"]));
        let header = ParameterBuilder::new()
            .name("x-batch-validation")
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some("`strict` (default): all or nothing; `permissive`: valid items queued, errors per index"))
            .schema(Some(modes));
        vec![header.build()]
    }
}

/// `POST /v1/messages/batch`.
#[utoipa::path(
    post,
    path = "/v1/messages/batch",
    tag = "messages",
    summary = "Send up to 500 emails in one request",
    description = "A JSON array of what POST /v1/messages takes; `data` holds one result per item at its index. \
        `x-batch-validation: strict` (default) is all or nothing: one bad item is a 422 whose details name \
        `[i].field`, and nothing is queued. `permissive` queues the valid items and answers the others' errors at \
        their index, with 200, also when every item is refused: the request was taken, item by item. 201 when \
        every item was queued. Takes one rate-limit token per item at once (429 if fewer are available; a batch \
        larger than the key's `rateLimitPerSec` is a 422); refused items give theirs back, except items whose \
        template was rendered (or failed to render), which keep theirs. The Idempotency-Key covers the whole \
        batch: a replay answers the same results.",
    params(IdempotencyKeyHeader, BatchValidationHeader),
    request_body = SendBatchRequest,
    responses(
        (status = 201, description = "every item queued (or, for a replay, the original results)",
            body = inline(BatchCreated),
            links(
                ("get_message" = (operation_id = "get_message", parameters(("id" = "$response.body#/data/0/message/id")))),
                ("update_message" = (operation_id = "update_message", parameters(("id" = "$response.body#/data/0/message/id")))),
                ("cancel_message" = (operation_id = "cancel_message", parameters(("id" = "$response.body#/data/0/message/id")))),
                ("list_message_events" = (operation_id = "list_message_events", parameters(("id" = "$response.body#/data/0/message/id")))),
            )),
        (status = 200, description = "a permissive batch with refused items (all of them, perhaps): each result is a \
            message or an error", body = inline(BatchPartial)),
        (status = 400, response = SendBadRequest),
        (status = 409, response = IdempotencyKeyReused),
        (status = 422, response = SendUnprocessable),
        (status = 429, response = SendTooManyRequests),
    )
)]
pub async fn send_batch(
    State(state): State<ApiState>,
    Authed(who): Authed,
    headers: HeaderMap,
    ApiJsonArray(reqs): ApiJsonArray<SendMessageRequest>,
) -> ApiResult<Response> {
    let key = idempotency_key(&headers)?;
    let mode = BatchValidation::parse(headers.get("x-batch-validation").and_then(|v| v.to_str().ok()))?;
    let reqs = reqs.into_iter().map(Into::into).collect();
    match state.core.messages().send_batch_rate_limited(&*state.limits, &who, reqs, mode, key).await? {
        Admission::Allowed((outcome, limit)) => Ok(batch_response(outcome, limit.as_ref())),
        Admission::Limited { retry_after } => {
            Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() })
        }
    }
}

/// 201 when every item was queued, 200 when a permissive batch refused some (or all).
fn batch_response(outcome: BatchOutcome, limit: Option<&RateLimitState>) -> Response {
    let refused = outcome.refused();
    let total = outcome.items.len();
    let replay = if outcome.replayed { "batch already accepted (idempotent replay)" } else { "" };
    let results = outcome.items.into_iter().enumerate().map(|(index, item)| match item {
        BatchItem::Queued(m) => {
            BatchItemResult::Queued(QueuedItem { index, message: Box::new(MessageResponse::from(*m)) })
        }
        BatchItem::Refused(e) => {
            BatchItemResult::Refused(RefusedItem { index, error: ErrorObject::new(e.code, e.message, &e.fields) })
        }
    });
    let mut response = if refused == 0 {
        let queued = results.filter_map(|r| match r {
            BatchItemResult::Queued(item) => Some(item),
            BatchItemResult::Refused(_) => None,
        });
        let message = if outcome.replayed { replay } else { "batch queued" };
        BatchCreated::new(message, BatchQueued(queued.collect())).into_response()
    } else {
        let message = if outcome.replayed {
            format!("{replay}: {refused} of {total} refused")
        } else {
            format!("batch partly queued: {refused} of {total} refused")
        };
        BatchPartial::new(message, BatchResults(results.collect())).into_response()
    };
    if let Some(limit) = limit {
        crate::rate_limit::insert_headers(response.headers_mut(), limit);
    }
    if outcome.replayed {
        response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}
