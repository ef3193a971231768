//! `/v1/messages`: send (with Idempotency-Key and the per-key rate limit), list, get, events
//! (spec §4, contract §3).

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tidings_core::model::{EventDetails, Message, MessageEvent};
use tidings_core::usecases::{LimitedSend, MessageFilters, RateLimitState, SendOutcome, SendRequest};

use super::table::RouteTable;
use crate::auth::Authed;
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

/// `POST /v1/messages`, under the key's rate limit (contract §2: core takes the token first
/// and gives it back when the send queues nothing).
pub async fn send_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    headers: HeaderMap,
    ApiJson(req): ApiJson<SendRequest>,
) -> ApiResult<Response> {
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(v.to_str().map_err(|_| {
            ApiError::Core(tidings_core::Error::InvalidIdempotencyKey("Idempotency-Key must be printable ASCII".into()))
        })?),
    };
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

/// `GET /v1/messages?limit&cursor&status&to`.
pub async fn list_messages(
    State(state): State<ApiState>,
    Authed(who): Authed,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let q = query::params(raw.as_deref());
    let params = query::list_params(&q)?;
    let filters = MessageFilters { status: q.get("status").cloned(), to: q.get("to").cloned() };
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

/// The message routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .get("/v1/messages", list_messages)
        .post("/v1/messages", send_message)
        .get("/v1/messages/{id}", get_message)
        .get("/v1/messages/{id}/events", list_message_events)
}
