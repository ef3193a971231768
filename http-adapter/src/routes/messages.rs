//! `/v1/messages`: send (with Idempotency-Key and the per-key rate limit), list, get, events
//! (docs/api.md#messages).

use std::collections::BTreeMap;

use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tidings_core::ids::MessageId;
use tidings_core::model::{EventDetails, Message, MessageEvent, RecipientKind};
use tidings_core::usecases::{Admission, LimitedSend, MessageChange, MessageFilters, RateLimitState, SendOutcome};
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn, ParameterStyle};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
use utoipa::openapi::{Ref, Required};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::UtoipaMethodRouterExt;
use utoipa_axum::routes;

use super::send_request::SendMessageRequest;
use super::table::RouteTable;
use super::wire::{BounceType, ConnectionTls, EventType, MessageStatus, Ulid};
use crate::auth::Authed;
use crate::body::BodyLimit;
use crate::envelope::{Page, Success};
use crate::json::ApiJson;
use crate::openapi::failures::{
    Conflict, DomainNotAllowed, IdempotencyKeyReused, SendBadRequest, SendTooManyRequests, SendUnprocessable,
};
use crate::path::IdPath;
use crate::query::{ListQuery, query_parameter};
use crate::{ApiError, ApiResult, ApiState, query, rate_limit};

/// a message (bodies are not returned)
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = Message)]
pub struct MessageResponse {
    id: Ulid,
    status: MessageStatus,
    /// the to recipients as written, joined by ", " (one recipient: its address)
    to: String,
    /// the cc recipients as written
    cc: Vec<String>,
    /// the bcc recipients
    bcc: Vec<String>,
    /// every recipient with its own status, in request order
    recipients: Vec<RecipientResponse>,
    /// sender address, without display name
    from_address: String,
    /// rendered subject
    subject: String,
    /// the Message-ID written on the wire; null while queued
    #[schema(required)]
    provider_message_id: Option<String>,
    #[schema(required)]
    template_version_id: Option<Ulid>,
    attempts: u32,
    created_at: DateTime<Utc>,
    tracking: TrackingResponse,
    /// the send time asked for with `scheduledAt` (kept after it passed); null for a message sent at
    /// once
    #[schema(required)]
    scheduled_at: Option<DateTime<Utc>>,
    /// Reply-To addresses
    reply_to: Vec<String>,
    tags: Vec<TagResponse>,
    /// the send's metadata
    metadata: BTreeMap<String, String>,
    attachments: Vec<AttachmentSummary>,
}

/// one recipient of a message and where it is
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = Recipient)]
struct RecipientResponse {
    email: String,
    /// the display name the send gave, if any
    #[schema(required)]
    name: Option<String>,
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^(to|cc|bcc)$")]
    kind: &'static str,
    status: MessageStatus,
    attempts: u32,
    updated_at: DateTime<Utc>,
}

/// a tag of a message
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Tag)]
struct TagResponse {
    /// `[A-Za-z0-9_-]`
    name: String,
    /// printable ASCII; may be empty
    value: String,
}

/// an attachment as the API shows it (the content is never returned)
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AttachmentSummary {
    /// the file name
    filename: String,
    /// `type/subtype`
    content_type: String,
    /// set for an inline part
    #[schema(required)]
    content_id: Option<String>,
    /// decoded size in bytes
    size: u64,
}

/// the open and click tracking the message got: the send's choice, else its domain's default
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = MessageTracking)]
struct TrackingResponse {
    /// a pixel in the HTML part records `Opened`
    opens: bool,
    /// http(s) links of the HTML part record `Clicked`
    clicks: bool,
}

impl From<Message> for MessageResponse {
    fn from(m: Message) -> Self {
        let shown = |kind| m.mailboxes_of(kind).iter().map(ToString::to_string).collect();
        let recipients = m
            .recipient_list()
            .iter()
            .map(|r| RecipientResponse {
                email: r.email.to_string(),
                name: r.name.as_ref().map(ToString::to_string),
                kind: r.kind.as_str(),
                status: r.status.into(),
                attempts: r.attempts,
                updated_at: r.updated_at,
            })
            .collect();
        Self {
            id: Ulid::of(m.id),
            status: m.status.into(),
            to: m.to_field(),
            cc: shown(RecipientKind::Cc),
            bcc: shown(RecipientKind::Bcc),
            recipients,
            from_address: m.from.address.to_string(),
            subject: m.subject,
            provider_message_id: m.provider_message_id,
            template_version_id: m.template_version_id.map(Ulid::of),
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

/// one entry of a message's timeline
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = MessageEvent)]
pub struct EventResponse {
    id: Ulid,
    #[serde(rename = "type")]
    event_type: EventType,
    /// null on Queued
    #[schema(required)]
    provider_message_id: Option<String>,
    occurred_at: DateTime<Utc>,
    /// the recipient the event is about, on a message to several; absent otherwise
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    recipient: Option<String>,
    details: EventDetailsResponse,
}

impl From<MessageEvent> for EventResponse {
    fn from(e: MessageEvent) -> Self {
        Self {
            id: Ulid::of(e.id),
            event_type: e.event_type.into(),
            provider_message_id: e.provider_message_id,
            occurred_at: e.occurred_at,
            recipient: e.recipient.map(|r| r.to_string()),
            details: e.details.into(),
        }
    }
}

/// what the event type carries; absent fields are omitted
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = EventDetails)]
struct EventDetailsResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    smtp_code: Option<u16>,
    /// enhanced status code, e.g. `5.1.1`
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    enhanced_code: Option<String>,
    /// the remote server's reply
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    response: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, minimum = 1)]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    next_attempt_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    bounce_type: Option<BounceType>,
    /// the clicked URL
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    url: Option<String>,
    /// user agent of an open or click
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    user_agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    scheduled_at: Option<DateTime<Utc>>,
    /// on `Delivered` through SMTP (a relay or the recipient's mail servers): how the
    /// connection that carried the message was secured
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    tls: Option<ConnectionTls>,
}

impl From<EventDetails> for EventDetailsResponse {
    fn from(d: EventDetails) -> Self {
        Self {
            smtp_code: d.smtp_code,
            enhanced_code: d.enhanced_code,
            response: d.response,
            attempt: d.attempt,
            next_attempt_at: d.next_attempt_at,
            bounce_type: d.bounce_type.map(Into::into),
            url: d.url,
            user_agent: d.user_agent,
            scheduled_at: d.scheduled_at,
            tls: d.tls.map(Into::into),
        }
    }
}

/// The answers of this module, as their `#[utoipa::path]`s name them.
pub(super) type MessageCreated = Success<201, MessageResponse>;
type MessageOk = Success<200, MessageResponse>;
type MessagePage = Page<MessageResponse>;
type EventPage = Page<EventResponse>;

/// The `Idempotency-Key` header of the send operations.
pub(super) struct IdempotencyKeyHeader;

impl IntoParams for IdempotencyKeyHeader {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let description = "scoped to the workspace: a retry with the same key and body, from any API key of the \
            workspace that may read the original message (every `full` key; a `send` key only for what it sent \
            itself), returns the original message (201, `Idempotent-Replayed: true`) and queues nothing; with \
            another body, or from a `send` key that did not send the original, it is a 409 \
            `idempotency_key_reused`. Remembered for 24 hours (configurable).";
        let schema = ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(256));
        let header = ParameterBuilder::new()
            .name("Idempotency-Key")
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some(description))
            .schema(Some(schema));
        vec![header.build()]
    }
}

/// The filters of `GET /v1/messages`, which `list_messages` reads from the raw query.
struct MessageFilterQuery;

impl IntoParams for MessageFilterQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let tags = ArrayBuilder::new()
            .items(ObjectBuilder::new().schema_type(Type::String))
            .max_items(Some(10))
            .examples([json!(["plan:pro"]), json!(["welcome"])]);
        let tag = query_parameter(
            "tag",
            "only messages with this tag: `name` (any value) or `name:value`; repeat for several (every one must \
             match); at most 10",
            tags,
        );
        let entries = ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(ObjectBuilder::new().schema_type(Type::String)))
            .max_properties(Some(10))
            .examples([json!({ "orderId": "A-17" })]);
        let metadata = query_parameter(
            "metadata",
            "only messages whose metadata has these entries, as `metadata[key]=value`; repeat for several keys \
             (every one must match); at most 10",
            entries,
        );
        let text = ObjectBuilder::new().schema_type(Type::String).min_length(Some(3)).max_length(Some(200));
        let time = || {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .examples([json!("2026-05-01"), json!("2026-05-01T12:00:00Z")])
        };
        vec![
            query_parameter("status", "only messages in this status", Ref::from_schema_name(MessageStatus::name())),
            query_parameter(
                "to",
                "only messages to this address (to, cc or bcc; the whole address, any case)",
                ObjectBuilder::new().schema_type(Type::String),
            ),
            query_parameter(
                "q",
                "only messages whose subject, or a recipient's address or display name, contains this text \
                 (ignoring case; `%` and `_` are plain characters); 3 to 200 characters after trimming",
                text,
            ),
            query_parameter(
                "createdAfter",
                "only messages created at or after this time: RFC 3339, or a date (`YYYY-MM-DD`, its 00:00 UTC); \
                 compared to the millisecond",
                time(),
            ),
            query_parameter(
                "createdBefore",
                "only messages created before this time (same forms); must be later than `createdAfter`",
                time(),
            ),
            query_parameter(
                "endingBefore",
                "the `pagination.prevCursor` of a page: the page of up to `limit` matching messages just newer \
                 than it, still newest first. Not with `cursor`.",
                ObjectBuilder::new().schema_type(Type::String),
            ),
            with_style(tag, ParameterStyle::Form),
            with_style(metadata, ParameterStyle::DeepObject),
        ]
    }
}

fn with_style(mut parameter: Parameter, style: ParameterStyle) -> Parameter {
    parameter.style = Some(style);
    parameter.explode = Some(true);
    parameter
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

/// `POST /v1/messages`, under the key's rate limit (docs/api.md#rate-limits: core takes the
/// token first and gives it back when the send queues nothing).
#[utoipa::path(
    post,
    path = "/v1/messages",
    tag = "messages",
    summary = "Send an email: stored durably and queued",
    description = "Give `html`, `text` or a template. Takes one token of the key's send rate; a rejected send or \
        an idempotent replay gives it back, except a send refused by its template (`template_render_error`, \
        `template_syntax_error`), which keeps it. The body may be up to 56 MiB (configurable, \
        `TIDINGS_MAX_SEND_BODY_BYTES`) so that 40 MiB of base64 attachments fit; other routes keep the general \
        limit.",
    params(IdempotencyKeyHeader),
    request_body = SendMessageRequest,
    responses(
        (status = 201, description = "the queued message (or, for a replay, the original one)", body = inline(MessageCreated)),
        (status = 400, response = SendBadRequest),
        (status = 403, response = DomainNotAllowed),
        (status = 409, response = IdempotencyKeyReused),
        (status = 422, response = SendUnprocessable),
        (status = 429, response = SendTooManyRequests),
    )
)]
pub async fn send_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    headers: HeaderMap,
    ApiJson(req): ApiJson<SendMessageRequest>,
) -> ApiResult<Response> {
    let key = idempotency_key(&headers)?;
    match state.core.messages().send_rate_limited(&*state.limits, &who, req.into(), key).await? {
        Admission::Allowed(LimitedSend { outcome, limit }) => Ok(send_response(outcome, limit.as_ref())),
        Admission::Limited { retry_after } => {
            Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() })
        }
    }
}

/// The 201 of a send or a replay, with the rate-limit headers when a token was taken.
fn send_response(outcome: SendOutcome, limit: Option<&RateLimitState>) -> Response {
    let message = if outcome.replayed { "message already accepted (idempotent replay)" } else { "message queued" };
    let mut response = MessageCreated::new(message, outcome.message.into()).into_response();
    if let Some(limit) = limit {
        rate_limit::insert_headers(response.headers_mut(), limit);
    }
    if outcome.replayed {
        response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// `GET /v1/messages?limit&cursor&endingBefore&status&to&q&createdAfter&createdBefore&tag&metadata[key]`.
/// `tag` (`name` or `name:value`) and `metadata[key]=value` may be repeated; every one must
/// match.
#[utoipa::path(
    get,
    path = "/v1/messages",
    tag = "messages",
    summary = "List and find messages, newest first",
    description = "Every filter given must match. A `send` key sees only the messages it sent. \
        `pagination.prevCursor`, passed as `endingBefore`, pages back to newer messages.",
    params(ListQuery, MessageFilterQuery),
    responses((status = 200, description = "a page", body = inline(MessagePage)))
)]
pub async fn list_messages(
    State(state): State<ApiState>,
    Authed(who): Authed,
    RawQuery(raw): RawQuery,
) -> ApiResult<MessagePage> {
    let q = query::params(raw.as_deref());
    let params = query::list_params(&q)?;
    let mut filters = MessageFilters {
        status: q.get("status").cloned(),
        to: q.get("to").cloned(),
        q: q.get("q").cloned(),
        created_after: q.get("createdAfter").cloned(),
        created_before: q.get("createdBefore").cloned(),
        ending_before: q.get("endingBefore").cloned(),
        ..Default::default()
    };
    for (name, value) in query::pairs(raw.as_deref()) {
        if name == "tag" {
            filters.tags.push(value);
        } else if let Some(key) = name.strip_prefix("metadata[").and_then(|rest| rest.strip_suffix(']')) {
            filters.metadata.push((key.to_owned(), value));
        }
    }
    let listed = state.core.messages().list(&who, params, &filters).await?;
    Ok(Page::both_ways(listed, MessageResponse::from))
}

/// `GET /v1/messages/{id}`.
#[utoipa::path(
    get,
    path = "/v1/messages/{id}",
    tag = "messages",
    summary = "Retrieve a message with its current status",
    description = "A `send` key gets 404 for a message another key sent.",
    responses((status = 200, description = "the message", body = inline(MessageOk)))
)]
pub async fn get_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<MessageId>,
) -> ApiResult<MessageOk> {
    let message = state.core.messages().get(&who, id).await?;
    Ok(Success::new("OK", message.into()))
}

/// `GET /v1/messages/{id}/events`: oldest first.
#[utoipa::path(
    get,
    path = "/v1/messages/{id}/events",
    tag = "messages",
    summary = "A message's timeline, oldest first",
    params(ListQuery),
    responses((status = 200, description = "a page", body = inline(EventPage)))
)]
pub async fn list_message_events(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<MessageId>,
    ListQuery(params): ListQuery,
) -> ApiResult<EventPage> {
    let listed = state.core.messages().events(&who, id, params).await?;
    Ok(Page::new(listed, EventResponse::from))
}

/// body of PATCH /v1/messages/{id}
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateMessageRequest {
    /// the new send time (same limits as a send; a Queued message becomes Scheduled), or null to send a
    /// Scheduled message now
    // `Some(None)` is a present `null`, `None` an absent field (by `default`).
    #[serde(default, deserialize_with = "present")]
    #[schema(required, value_type = Option<String>, format = DateTime)]
    scheduled_at: Option<Option<String>>,
}

/// Tells a present `null` (`Some(None)`) from an absent field (`None`, by `default`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// `PATCH /v1/messages/{id}`: reschedules a Scheduled or Queued message.
#[utoipa::path(
    patch,
    path = "/v1/messages/{id}",
    tag = "messages",
    summary = "Reschedule a message not yet attempted",
    description = "Moves a Scheduled message's send time, gives a Queued one a time (it becomes Scheduled), or \
        with `scheduledAt: null` sends a Scheduled one now. Records a `Scheduled` (or `Queued`) event. Any other \
        status is a 409 `conflict`. A `send` key may change only its own messages.",
    request_body = UpdateMessageRequest,
    responses(
        (status = 200, description = "the message as changed", body = inline(MessageOk)),
        (status = 409, response = Conflict),
    )
)]
pub async fn update_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<MessageId>,
    ApiJson(req): ApiJson<UpdateMessageRequest>,
) -> ApiResult<MessageOk> {
    let change = MessageChange { scheduled_at: req.scheduled_at };
    let message = state.core.messages().reschedule(&who, id, change).await?;
    Ok(Success::new("message rescheduled", message.into()))
}

/// `POST /v1/messages/{id}/cancel`: cancels a Scheduled or Queued message.
#[utoipa::path(
    post,
    path = "/v1/messages/{id}/cancel",
    tag = "messages",
    summary = "Cancel a Scheduled or Queued message",
    description = "The message becomes `Canceled` (terminal, with a `Canceled` event) and is never sent. A message \
        whose first attempt has started (or that ended otherwise) is a 409 `conflict`. A `send` key may cancel only \
        its own messages.",
    responses(
        (status = 200, description = "the canceled message", body = inline(MessageOk)),
        (status = 409, response = Conflict),
    )
)]
pub async fn cancel_message(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<MessageId>,
) -> ApiResult<MessageOk> {
    let message = state.core.messages().cancel(&who, id).await?;
    Ok(Success::new("message canceled", message.into()))
}

/// The message routes; a send's body may be up to `send_body_limit` bytes (attachments), the
/// others, a batch's included, keep the router's limit (`TIDINGS_MAX_BODY_BYTES`, as
/// docs/decisions.md says of batches).
pub fn routes(send_body_limit: usize) -> RouteTable {
    let send_limit = Extension(BodyLimit(send_body_limit));
    RouteTable::default()
        .routes(routes!(list_messages))
        .routes(routes!(send_message).layer(send_limit))
        .routes(routes!(super::batch::send_batch))
        .routes(routes!(get_message, update_message))
        .routes(routes!(cancel_message))
        .routes(routes!(list_message_events))
}
