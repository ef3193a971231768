//! `/v1/webhooks`: endpoints, their secret rotation and test event, and their delivery log
//! (docs/api.md#webhooks). The signing secret appears only in the create and rotate-secret
//! responses.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tidings_core::ids::{DeliveryId, WebhookId};
use tidings_core::model::{WebhookDelivery, WebhookEndpoint};
use tidings_core::usecases;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::table::RouteTable;
use super::wire::{DeliveryStatus, Ulid, WebhookEventType, WebhookFormat};
use crate::auth::Authed;
use crate::envelope::{Null, Page, Success};
use crate::json::ApiJson;
use crate::openapi::failures::InsufficientScope;
use crate::path::{ApiPath, IdPath};
use crate::query::ListQuery;
use crate::{ApiResult, ApiState};

/// body of POST /v1/webhooks
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateWebhookRequest {
    /// https URL that does not name a non-public address
    #[schema(required, value_type = String)]
    url: Option<String>,
    #[schema(required, value_type = Vec<WebhookEventType>, min_items = 1)]
    event_types: Option<Vec<String>>,
    /// default true
    enabled: Option<bool>,
    /// default `tidings`
    #[schema(value_type = Option<WebhookFormat>)]
    format: Option<String>,
}

impl From<CreateWebhookRequest> for usecases::CreateWebhookRequest {
    fn from(r: CreateWebhookRequest) -> Self {
        Self { url: r.url, event_types: r.event_types, enabled: r.enabled, format: r.format }
    }
}

/// body of PATCH /v1/webhooks/{id}; an absent field is kept
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateWebhookRequest {
    /// new https URL
    url: Option<String>,
    #[schema(value_type = Option<Vec<WebhookEventType>>, min_items = 1)]
    event_types: Option<Vec<String>>,
    /// enable or disable
    enabled: Option<bool>,
    /// new format, for deliveries queued from now on
    #[schema(value_type = Option<WebhookFormat>)]
    format: Option<String>,
}

impl From<UpdateWebhookRequest> for usecases::UpdateWebhookRequest {
    fn from(r: UpdateWebhookRequest) -> Self {
        Self { url: r.url, event_types: r.event_types, enabled: r.enabled, format: r.format }
    }
}

/// a webhook endpoint (without its secret)
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = Webhook)]
pub struct WebhookResponse {
    id: Ulid,
    /// receiving URL
    url: String,
    enabled: bool,
    event_types: Vec<WebhookEventType>,
    format: WebhookFormat,
    /// why the server disabled the endpoint (e.g. it answered 410 Gone)
    #[schema(required)]
    disabled_reason: Option<String>,
    /// when the endpoint's current run of failed attempts began; null while it is healthy. Failing every
    /// attempt for 5 days (configurable) disables it
    #[schema(required)]
    failing_since: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<WebhookEndpoint> for WebhookResponse {
    fn from(w: WebhookEndpoint) -> Self {
        Self {
            id: Ulid::of(w.id),
            url: w.url.to_string(),
            enabled: w.enabled,
            event_types: w.event_types.iter().map(|t| (*t).into()).collect(),
            format: w.format.into(),
            disabled_reason: w.disabled_reason,
            failing_since: w.failing_since,
            created_at: w.created_at,
            updated_at: w.updated_at,
        }
    }
}

/// a webhook endpoint with its current signing secret
// Every field of `WebhookResponse` again rather than `#[serde(flatten)]`: utoipa writes a
// flattened struct as `allOf`, which a closed `Webhook` schema would refuse `secret` in.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = WebhookWithSecret)]
pub struct WebhookWithSecretResponse {
    id: Ulid,
    /// receiving URL
    url: String,
    enabled: bool,
    event_types: Vec<WebhookEventType>,
    format: WebhookFormat,
    /// why the server disabled the endpoint (e.g. it answered 410 Gone)
    #[schema(required)]
    disabled_reason: Option<String>,
    /// when the endpoint's current run of failed attempts began; null while it is healthy. Failing every
    /// attempt for 5 days (configurable) disables it
    #[schema(required)]
    failing_since: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    /// `whsec_` + base64 of 32 bytes; shown only at creation and rotation
    secret: String,
}

impl From<WebhookEndpoint> for WebhookWithSecretResponse {
    fn from(w: WebhookEndpoint) -> Self {
        let secret = w.secret.expose().to_owned();
        let WebhookResponse {
            id,
            url,
            enabled,
            event_types,
            format,
            disabled_reason,
            failing_since,
            created_at,
            updated_at,
        } = w.into();
        Self { id, url, enabled, event_types, format, disabled_reason, failing_since, created_at, updated_at, secret }
    }
}

/// one entry of an endpoint's delivery log
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = WebhookDelivery)]
pub struct WebhookDeliveryResponse {
    id: Ulid,
    event_id: Ulid,
    event_type: WebhookEventType,
    status: DeliveryStatus,
    attempts: u32,
    /// HTTP status of the last attempt
    #[schema(required)]
    response_code: Option<u16>,
    /// why the last attempt failed
    #[schema(required)]
    last_error: Option<String>,
    #[schema(required)]
    next_attempt_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

impl From<WebhookDelivery> for WebhookDeliveryResponse {
    fn from(d: WebhookDelivery) -> Self {
        Self {
            id: Ulid::of(d.id),
            event_id: Ulid::of(d.event_id),
            event_type: d.event_type.into(),
            status: d.status.into(),
            attempts: d.attempts,
            response_code: d.response_code,
            last_error: d.last_error,
            next_attempt_at: d.next_attempt_at,
            created_at: d.created_at,
        }
    }
}

type WebhookCreated = Success<201, WebhookWithSecretResponse>;
type WebhookOk = Success<200, WebhookResponse>;
type WebhookPage = Page<WebhookResponse>;
type Rotated = Success<200, WebhookWithSecretResponse>;
type DeliveryCreated = Success<201, WebhookDeliveryResponse>;
type DeliveryOk = Success<200, WebhookDeliveryResponse>;
type DeliveryPage = Page<WebhookDeliveryResponse>;
type Deleted = Success<200, Null>;

/// `POST /v1/webhooks`: 201 with the secret, shown here and after a rotation only.
#[utoipa::path(
    post,
    path = "/v1/webhooks",
    tag = "webhooks",
    summary = "Create an endpoint; its secret is returned",
    description = "Each event is POSTed as `{type, createdAt, data: {messageId, eventId, to, from, subject, \
        providerMessageId, tags, metadata, details}}`, signed per Standard Webhooks; `tags` and `metadata` are the \
        message's (empty for a `Test` event).",
    request_body = CreateWebhookRequest,
    responses(
        (status = 201, description = "the endpoint with its secret", body = inline(WebhookCreated)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn create_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<CreateWebhookRequest>,
) -> ApiResult<WebhookCreated> {
    let endpoint = state.core.webhooks().create(&who, req.into()).await?;
    Ok(Success::new("webhook created", endpoint.into()))
}

/// `GET /v1/webhooks`.
#[utoipa::path(
    get,
    path = "/v1/webhooks",
    tag = "webhooks",
    summary = "List webhook endpoints, newest first",
    params(ListQuery),
    responses(
        (status = 200, description = "a page", body = inline(WebhookPage)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn list_webhooks(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ListQuery(params): ListQuery,
) -> ApiResult<WebhookPage> {
    let listed = state.core.webhooks().list(&who, params).await?;
    Ok(Page::new(listed, WebhookResponse::from))
}

/// `GET /v1/webhooks/{id}`.
#[utoipa::path(
    get,
    path = "/v1/webhooks/{id}",
    tag = "webhooks",
    summary = "Retrieve an endpoint",
    responses(
        (status = 200, description = "the endpoint", body = inline(WebhookOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<WebhookId>,
) -> ApiResult<WebhookOk> {
    let endpoint = state.core.webhooks().get(&who, id).await?;
    Ok(Success::new("OK", endpoint.into()))
}

/// `PATCH /v1/webhooks/{id}`: changes `url`, `eventTypes`, `enabled`, `format`.
#[utoipa::path(
    patch,
    path = "/v1/webhooks/{id}",
    tag = "webhooks",
    summary = "Change the URL, event types, enabled or format",
    request_body = UpdateWebhookRequest,
    responses(
        (status = 200, description = "the endpoint", body = inline(WebhookOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn update_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<WebhookId>,
    ApiJson(req): ApiJson<UpdateWebhookRequest>,
) -> ApiResult<WebhookOk> {
    let endpoint = state.core.webhooks().update(&who, id, req.into()).await?;
    Ok(Success::new("webhook updated", endpoint.into()))
}

/// `DELETE /v1/webhooks/{id}`: removes the endpoint and its delivery log.
#[utoipa::path(
    delete,
    path = "/v1/webhooks/{id}",
    tag = "webhooks",
    summary = "Delete an endpoint and its delivery log",
    responses(
        (status = 200, description = "deleted", body = inline(Deleted)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn delete_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<WebhookId>,
) -> ApiResult<Deleted> {
    state.core.webhooks().delete(&who, id).await?;
    Ok(Success::new("webhook deleted", Null))
}

/// `POST /v1/webhooks/{id}/test`: queues a `Test` event for this endpoint.
// 201, not 202: the call creates a delivery resource (listed under `deliveries` at once) and
// returns it, as an accepted send answers 201 with its queued message.
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/test",
    tag = "webhooks",
    summary = "Queue a `Test` event for this endpoint",
    responses(
        (status = 201, description = "the queued delivery", body = inline(DeliveryCreated),
            links(("retry_webhook_delivery" = (
                operation_id = "retry_webhook_delivery",
                parameters(("id" = "$request.path.id"), ("deliveryId" = "$response.body#/data/id"))
            )))),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn test_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<WebhookId>,
) -> ApiResult<DeliveryCreated> {
    let delivery = state.core.webhooks().test(&who, id).await?;
    Ok(Success::new("test event queued", delivery.into()))
}

/// `POST /v1/webhooks/{id}/rotate-secret`: 200 with the new secret; the old one keeps
/// signing beside it for the overlap (24 h).
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/rotate-secret",
    tag = "webhooks",
    summary = "Rotate the secret",
    description = "The old secret keeps signing beside the new one for 24 hours.",
    responses(
        (status = 200, description = "the endpoint with its new secret", body = inline(Rotated)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn rotate_webhook_secret(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<WebhookId>,
) -> ApiResult<Rotated> {
    let endpoint = state.core.webhooks().rotate_secret(&who, id).await?;
    Ok(Success::new("webhook secret rotated", endpoint.into()))
}

/// `GET /v1/webhooks/{id}/deliveries?limit&cursor`: newest first.
#[utoipa::path(
    get,
    path = "/v1/webhooks/{id}/deliveries",
    tag = "webhooks",
    summary = "The delivery log",
    params(ListQuery),
    responses(
        (status = 200, description = "a page", body = inline(DeliveryPage)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn list_webhook_deliveries(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<WebhookId>,
    ListQuery(params): ListQuery,
) -> ApiResult<DeliveryPage> {
    let listed = state.core.webhooks().deliveries(&who, id, params).await?;
    Ok(Page::new(listed, WebhookDeliveryResponse::from))
}

/// `POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry`: makes the delivery due now.
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/deliveries/{deliveryId}/retry",
    tag = "webhooks",
    summary = "Make a delivery due now",
    responses(
        (status = 200, description = "the delivery", body = inline(DeliveryOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn retry_webhook_delivery(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath((id, delivery_id)): ApiPath<(String, String)>,
) -> ApiResult<DeliveryOk> {
    let (id, delivery_id) = (WebhookId::parse_or_none(&id), DeliveryId::parse_or_none(&delivery_id));
    let delivery = state.core.webhooks().retry_delivery(&who, id, delivery_id).await?;
    Ok(Success::new("delivery retry queued", delivery.into()))
}

/// The webhook routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .routes(routes!(list_webhooks, create_webhook))
        .routes(routes!(get_webhook, update_webhook, delete_webhook))
        .routes(routes!(test_webhook))
        .routes(routes!(rotate_webhook_secret))
        .routes(routes!(list_webhook_deliveries))
        .routes(routes!(retry_webhook_delivery))
}
