//! The `/postmark/email*` handlers: each reads Postmark's request, calls the same use case as
//! its `/v1/messages` counterpart (`send_rate_limited`, `send_batch_rate_limited`), and
//! answers in Postmark's shape. A batch is always answered 200 with one result per item, in
//! order: `{To, SubmittedAt, MessageID, ErrorCode: 0, Message: "OK"}` or
//! `{ErrorCode, Message}`, as Postmark's batches are (core's permissive mode).
//!
//! Postmark's API takes no Idempotency-Key, and neither do these routes: a retry sends again.

use axum::Json;
use axum::extract::{FromRequest, State};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tidings_core::usecases::{
    Admission, BatchItem, BatchValidation, LimitedSend, Principal, RateLimitState, check_batch_len,
};

use super::auth::{Caller, JsonBody};
use super::error::{Code, Fault, PostmarkError, stored_fault};
use super::message::{Kind, PostmarkMessage, Sent, TemplatedBatch, Translated};
use crate::json::{ApiJson, ApiJsonArray};
use crate::{ApiError, ApiState};

type Result<T, E = PostmarkError> = std::result::Result<T, E>;

/// `POST /postmark/email` (`TEMPLATED` false) and `/email/withTemplate` (true).
pub(super) async fn send<const TEMPLATED: bool>(
    State(state): State<ApiState>,
    Caller(who): Caller,
    JsonBody(ApiJson(message)): JsonBody<ApiJson<PostmarkMessage>>,
) -> Result<Response> {
    send_one(&state, &who, message, Kind::of(TEMPLATED)).await
}

/// `POST /postmark/email/batch` (a JSON array of messages) and `/email/batchWithTemplates`
/// (`{"Messages": [...]}`).
pub(super) async fn send_batch<B: Batch>(
    State(state): State<ApiState>,
    Caller(who): Caller,
    JsonBody(batch): JsonBody<B>,
) -> Result<Response> {
    send_many(&state, &who, batch.messages(), B::KIND).await
}

/// A batch body as its endpoint takes it.
pub(super) trait Batch: FromRequest<ApiState, Rejection = ApiError> {
    /// Whether its messages name templates.
    const KIND: Kind;
    fn messages(self) -> Vec<PostmarkMessage>;
}

impl Batch for ApiJsonArray<PostmarkMessage> {
    const KIND: Kind = Kind::Plain;
    fn messages(self) -> Vec<PostmarkMessage> {
        self.0
    }
}

impl Batch for ApiJson<TemplatedBatch> {
    const KIND: Kind = Kind::Templated;
    fn messages(self) -> Vec<PostmarkMessage> {
        self.0.messages
    }
}

async fn send_one(state: &ApiState, who: &Principal, message: PostmarkMessage, kind: Kind) -> Result<Response> {
    let Translated { req, to, .. } = translate(state, who, message, kind).await?;
    match state.core.messages().send_rate_limited(&*state.limits, who, req, None).await? {
        Admission::Allowed(LimitedSend { outcome, limit }) => Ok(answer(Sent::of(&outcome.message, to), limit)),
        Admission::Limited { retry_after } => {
            Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() }.into())
        }
    }
}

/// Items Tidings cannot take as Postmark wrote them are answered at their index and the rest
/// go to core as one permissive batch, so every item gets its own result.
async fn send_many(state: &ApiState, who: &Principal, messages: Vec<PostmarkMessage>, kind: Kind) -> Result<Response> {
    check_batch_len(messages.len())?;
    let mut results: Vec<Option<Value>> = Vec::with_capacity(messages.len());
    let (mut reqs, mut sent_to) = (Vec::new(), Vec::new());
    for (index, message) in messages.into_iter().enumerate() {
        match translate(state, who, message, kind).await {
            Ok(Translated { req, to, .. }) => {
                reqs.push(req);
                sent_to.push((index, to));
                results.push(None);
            }
            Err(PostmarkError::Refused(fault)) => results.push(Some(fault.body())),
            // The store failing a template lookup fails the request, as it would the batch.
            Err(other) => return Err(other),
        }
    }
    let mut limit = None;
    if !reqs.is_empty() {
        let mode = BatchValidation::Permissive;
        let (outcome, taken) =
            match state.core.messages().send_batch_rate_limited(&*state.limits, who, reqs, mode, None).await? {
                Admission::Allowed(allowed) => allowed,
                Admission::Limited { retry_after } => {
                    return Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() }.into());
                }
            };
        limit = taken;
        for ((index, to), item) in sent_to.into_iter().zip(outcome.items) {
            results[index] = Some(match item {
                BatchItem::Queued(message) => serde_json::to_value(Sent::of(&message, to)).unwrap_or_default(),
                BatchItem::Refused(e) => stored_fault(&e).body(),
            });
        }
    }
    Ok(answer(results.into_iter().flatten().collect::<Vec<_>>(), limit))
}

/// The message in core's words, its template alias resolved to the id core takes: a name
/// that no template has is Postmark's 1101, one that several have is refused as ambiguous.
async fn translate(state: &ApiState, who: &Principal, message: PostmarkMessage, kind: Kind) -> Result<Translated> {
    let mut translated = message.translate(kind)?;
    if let Some(alias) = translated.alias.take() {
        // Two are enough to tell one template from several.
        let ids = state.core.templates().ids_named(who, &alias, 2).await?;
        match ids.as_slice() {
            [id] => translated.req.template_id = Some(id.to_string()),
            [] => {
                let message =
                    format!("Template not found: no template of this workspace is named `{alias}` (`TemplateAlias`)");
                return Err(Fault::new(Code::TemplateNotFound, message).into());
            }
            _ => {
                let why = "names several templates of this workspace; give one's id as `TemplateId`".to_owned();
                return Err(Fault::field("TemplateAlias", why).into());
            }
        }
    }
    Ok(translated)
}

/// A 200 answer with the rate-limit headers when a token was taken, as `/v1` gives them.
fn answer(body: impl serde::Serialize, limit: Option<RateLimitState>) -> Response {
    let mut response = Json(body).into_response();
    if let Some(limit) = &limit {
        crate::rate_limit::insert_headers(response.headers_mut(), limit);
    }
    response
}
