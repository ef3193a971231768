//! `/v1/messages`: send (with Idempotency-Key and the per-key rate limit), list, get, events
//! (spec §4, contract §3).

use std::collections::BTreeMap;

use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::handler::Handler;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tidings_core::model::{EventDetails, Message, MessageEvent};
use tidings_core::usecases::{LimitedSend, MessageChange, MessageFilters, RateLimitState, SendOutcome, SendRequest};

use super::table::RouteTable;
use crate::auth::Authed;
use crate::body::BodyLimit;
use crate::json::ApiJson;
use crate::path::ApiPath;
use crate::query::ListQuery;
use crate::{ApiError, ApiResult, ApiState, envelope, query, rate_limit};

/// A message as the API shows it (bodies are not returned).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageResponse {
    id: String,
    status: &'static str,
    to: String,
    from_address: String,
    subject: String,
    provider_message_id: Option<String>,
    template_version_id: Option<String>,
    attempts: u32,
    created_at: DateTime<Utc>,
    tracking: TrackingResponse,
    scheduled_at: Option<DateTime<Utc>>,
    reply_to: Vec<String>,
    tags: Vec<TagResponse>,
    metadata: BTreeMap<String, String>,
    attachments: Vec<AttachmentSummary>,
}

/// One tag.
#[derive(Serialize)]
struct TagResponse {
    name: String,
    value: String,
}

/// What the API shows of an attachment: never its content.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttachmentSummary {
    filename: String,
    content_type: String,
    content_id: Option<String>,
    size: u64,
}

/// The tracking a message got (contract §8).
#[derive(Serialize)]
struct TrackingResponse {
    opens: bool,
    clicks: bool,
}

impl From<Message> for MessageResponse {
    fn from(m: Message) -> Self {
        Self {
            id: m.id.to_string(),
            status: m.status.as_str(),
            to: m.to.to_string(),
            from_address: m.from.address.to_string(),
            subject: m.subject,
            provider_message_id: m.provider_message_id,
            template_version_id: m.template_version_id.map(|v| v.to_string()),
            attempts: m.attempts,
            created_at: m.created_at,
            tracking: TrackingResponse { opens: m.tracking.opens, clicks: m.tracking.clicks },
            scheduled_at: m.scheduled_at,
            reply_to: m.extras.reply_to.iter().map(ToString::to_string).collect(),
            tags: m
                .extras
                .tags
                .iter()
                .map(|t| TagResponse { name: t.name().into(), value: t.value().into() })
                .collect(),
            metadata: m.extras.metadata.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
            attachments: m
                .extras
                .attachments
                .iter()
                .map(|a| AttachmentSummary {
                    filename: a.filename().into(),
                    content_type: a.content_type().into(),
                    content_id: a.content_id().map(Into::into),
                    size: a.size(),
                })
                .collect(),
        }
    }
}

/// One timeline event.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventResponse {
    id: String,
    #[serde(rename = "type")]
    event_type: &'static str,
    provider_message_id: Option<String>,
    occurred_at: DateTime<Utc>,
    details: EventDetails,
}

impl From<MessageEvent> for EventResponse {
    fn from(e: MessageEvent) -> Self {
        Self {
            id: e.id.to_string(),
            event_type: e.event_type.as_str(),
            provider_message_id: e.provider_message_id,
            occurred_at: e.occurred_at,
            details: e.details,
        }
    }
}

/// The `Idempotency-Key` header, if any.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<&str>> {
    match headers.get("idempotency-key") {
        None => Ok(None),
        Some(v) => v.to_str().map(Some).map_err(|_| {
            ApiError::Core(tidings_core::Error::InvalidIdempotencyKey("Idempotency-Key must be printable ASCII".into()))
        }),
    }
}

/// `POST /v1/messages`, under the key's rate limit (contract §2: core takes the token first
/// and gives it back when the send queues nothing).
pub async fn send_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    headers: HeaderMap,
    ApiJson(req): ApiJson<SendRequest>,
) -> ApiResult<Response> {
    let key = idempotency_key(&headers)?;
    match state.core.send_rate_limited(&*state.limits, &who, req, key).await? {
        Ok(LimitedSend { outcome, limit }) => Ok(send_response(outcome, limit.as_ref())),
        Err(retry_after) => Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() }),
    }
}

/// The 201 of a send or a replay, with the rate-limit headers when a token was taken.
fn send_response(outcome: SendOutcome, limit: Option<&RateLimitState>) -> Response {
    let message = if outcome.replayed { "message already accepted (idempotent replay)" } else { "message queued" };
    let mut response = envelope::success(StatusCode::CREATED, message, MessageResponse::from(outcome.message));
    if let Some(limit) = limit {
        rate_limit::insert_headers(response.headers_mut(), limit);
    }
    if outcome.replayed {
        response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// `GET /v1/messages?limit&cursor&status&to&tag&metadata[key]`. `tag` (`name` or
/// `name:value`) and `metadata[key]=value` may be repeated; every one must match.
pub async fn list_messages(
    State(state): State<ApiState>,
    Authed(who): Authed,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let q = query::params(raw.as_deref());
    let params = query::list_params(&q)?;
    let mut filters =
        MessageFilters { status: q.get("status").cloned(), to: q.get("to").cloned(), ..Default::default() };
    for (name, value) in query::pairs(raw.as_deref()) {
        if name == "tag" {
            filters.tags.push(value);
        } else if let Some(key) = name.strip_prefix("metadata[").and_then(|rest| rest.strip_suffix(']')) {
            filters.metadata.push((key.to_owned(), value));
        }
    }
    let listed = state.core.list_messages(&who, params, &filters).await?;
    Ok(envelope::list(listed, MessageResponse::from))
}

/// `GET /v1/messages/{id}`.
pub async fn get_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let message = state.core.get_message(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "OK", MessageResponse::from(message)))
}

/// `GET /v1/messages/{id}/events`: oldest first.
pub async fn list_message_events(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ListQuery(params): ListQuery,
) -> ApiResult<Response> {
    let listed = state.core.list_message_events(&who, &id, params).await?;
    Ok(envelope::list(listed, EventResponse::from))
}

/// `PATCH /v1/messages/{id}` body: `scheduledAt` must be present (a time, or null to send now).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateMessageRequest {
    #[serde(default, deserialize_with = "present")]
    scheduled_at: Option<Option<String>>,
}

/// Tells a present `null` (`Some(None)`) from an absent field (`None`, by `default`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// `PATCH /v1/messages/{id}`: reschedules a Scheduled or Queued message.
pub async fn update_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<UpdateMessageRequest>,
) -> ApiResult<Response> {
    let change = MessageChange { scheduled_at: req.scheduled_at };
    let message = state.core.reschedule_message(&who, &id, change).await?;
    Ok(envelope::success(StatusCode::OK, "message rescheduled", MessageResponse::from(message)))
}

/// `POST /v1/messages/{id}/cancel`: cancels a Scheduled or Queued message.
pub async fn cancel_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let message = state.core.cancel_message(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "message canceled", MessageResponse::from(message)))
}

/// The message routes; a send's or a batch's body may be up to `send_body_limit` bytes
/// (attachments), the others keep the router's limit.
pub fn routes(send_body_limit: usize) -> RouteTable {
    RouteTable::default()
        .get("/v1/messages", list_messages)
        .post("/v1/messages", send_message.layer(Extension(BodyLimit(send_body_limit))))
        .post("/v1/messages/batch", super::batch::send_batch.layer(Extension(BodyLimit(send_body_limit))))
        .get("/v1/messages/{id}", get_message)
        .patch("/v1/messages/{id}", update_message)
        .post("/v1/messages/{id}/cancel", cancel_message)
        .get("/v1/messages/{id}/events", list_message_events)
}
