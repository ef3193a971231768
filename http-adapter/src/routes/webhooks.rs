//! `/v1/webhooks`: endpoints, their secret rotation and test event, and their delivery log
//! (spec §4, contract §7). The signing secret appears only in the create and rotate-secret
//! responses.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tidings_core::model::{DeliveryStatus, WebhookDelivery, WebhookEndpoint};
use tidings_core::usecases::{CreateWebhookRequest, UpdateWebhookRequest};

use super::table::RouteTable;
use crate::auth::Authed;
use crate::json::ApiJson;
use crate::path::ApiPath;
use crate::query::ListQuery;
use crate::{ApiResult, ApiState, envelope};

/// An endpoint as every response but creation and rotation shows it (no secret).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookResponse {
    id: String,
    url: String,
    enabled: bool,
    event_types: Vec<&'static str>,
    disabled_reason: Option<String>,
    failing_since: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<WebhookEndpoint> for WebhookResponse {
    fn from(w: WebhookEndpoint) -> Self {
        Self {
            id: w.id.to_string(),
            url: w.url.to_string(),
            enabled: w.enabled,
            event_types: w.event_types.iter().map(|t| t.as_str()).collect(),
            disabled_reason: w.disabled_reason,
            failing_since: w.failing_since,
            created_at: w.created_at,
            updated_at: w.updated_at,
        }
    }
}

/// The creation and rotation response: the endpoint plus its current secret.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WebhookWithSecretResponse {
    #[serde(flatten)]
    webhook: WebhookResponse,
    secret: String,
}

impl From<WebhookEndpoint> for WebhookWithSecretResponse {
    fn from(w: WebhookEndpoint) -> Self {
        Self { secret: w.secret.expose().to_owned(), webhook: w.into() }
    }
}

/// One entry of an endpoint's delivery log.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDeliveryResponse {
    id: String,
    event_id: String,
    event_type: &'static str,
    status: &'static str,
    attempts: u32,
    response_code: Option<u16>,
    last_error: Option<String>,
    next_attempt_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

impl From<WebhookDelivery> for WebhookDeliveryResponse {
    fn from(d: WebhookDelivery) -> Self {
        Self {
            id: d.id.to_string(),
            event_id: d.event_id.to_string(),
            event_type: d.event_type.as_str(),
            status: match d.status {
                DeliveryStatus::Pending => "Pending",
                DeliveryStatus::Retrying => "Retrying",
                DeliveryStatus::Delivered => "Delivered",
                DeliveryStatus::Failed => "Failed",
            },
            attempts: d.attempts,
            response_code: d.response_code,
            last_error: d.last_error,
            next_attempt_at: d.next_attempt_at,
            created_at: d.created_at,
        }
    }
}

/// `POST /v1/webhooks`: 201 with the secret, shown here and after a rotation only.
pub async fn create_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<CreateWebhookRequest>,
) -> ApiResult<Response> {
    let endpoint = state.core.create_webhook(&who, req).await?;
    Ok(envelope::success(StatusCode::CREATED, "webhook created", WebhookWithSecretResponse::from(endpoint)))
}

/// `GET /v1/webhooks`.
pub async fn list_webhooks(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ListQuery(params): ListQuery,
) -> ApiResult<Response> {
    let listed = state.core.list_webhooks(&who, params).await?;
    Ok(envelope::list(listed, WebhookResponse::from))
}

/// `GET /v1/webhooks/{id}`.
pub async fn get_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let endpoint = state.core.get_webhook(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "OK", WebhookResponse::from(endpoint)))
}

/// `PATCH /v1/webhooks/{id}`: changes `url`, `eventTypes`, `enabled`.
pub async fn update_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<UpdateWebhookRequest>,
) -> ApiResult<Response> {
    let endpoint = state.core.update_webhook(&who, &id, req).await?;
    Ok(envelope::success(StatusCode::OK, "webhook updated", WebhookResponse::from(endpoint)))
}

/// `DELETE /v1/webhooks/{id}`: removes the endpoint and its delivery log.
pub async fn delete_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    state.core.delete_webhook(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "webhook deleted", ()))
}

/// `POST /v1/webhooks/{id}/test`: queues a `Test` event for this endpoint.
pub async fn test_webhook(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let delivery = state.core.test_webhook(&who, &id).await?;
    // 201, not 202: the call creates a delivery resource (listed under `deliveries` at once)
    // and returns it, as an accepted send answers 201 with its queued message (spec §7).
    Ok(envelope::success(StatusCode::CREATED, "test event queued", WebhookDeliveryResponse::from(delivery)))
}

/// `POST /v1/webhooks/{id}/rotate-secret`: 200 with the new secret; the old one keeps
/// signing beside it for the overlap (contract §7: 24 h).
pub async fn rotate_webhook_secret(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let endpoint = state.core.rotate_webhook_secret(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "webhook secret rotated", WebhookWithSecretResponse::from(endpoint)))
}

/// `GET /v1/webhooks/{id}/deliveries?limit&cursor`: newest first.
pub async fn list_webhook_deliveries(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ListQuery(params): ListQuery,
) -> ApiResult<Response> {
    let listed = state.core.list_webhook_deliveries(&who, &id, params).await?;
    Ok(envelope::list(listed, WebhookDeliveryResponse::from))
}

/// `POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry`: makes the delivery due now.
pub async fn retry_webhook_delivery(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath((id, delivery_id)): ApiPath<(String, String)>,
) -> ApiResult<Response> {
    let delivery = state.core.retry_webhook_delivery(&who, &id, &delivery_id).await?;
    Ok(envelope::success(StatusCode::OK, "delivery retry queued", WebhookDeliveryResponse::from(delivery)))
}

/// The webhook routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .get("/v1/webhooks", list_webhooks)
        .post("/v1/webhooks", create_webhook)
        .get("/v1/webhooks/{id}", get_webhook)
        .patch("/v1/webhooks/{id}", update_webhook)
        .delete("/v1/webhooks/{id}", delete_webhook)
        .post("/v1/webhooks/{id}/test", test_webhook)
        .post("/v1/webhooks/{id}/rotate-secret", rotate_webhook_secret)
        .get("/v1/webhooks/{id}/deliveries", list_webhook_deliveries)
        .post("/v1/webhooks/{id}/deliveries/{deliveryId}/retry", retry_webhook_delivery)
}
