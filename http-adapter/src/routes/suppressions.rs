//! `/v1/suppressions`: add, list, get, remove (spec §4, contract §6). The address in the path
//! is the URL-decoded segment, so `a%2Bb@example.com` names `a+b@example.com`.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tidings_core::model::{Suppression, SuppressionSource};
use tidings_core::usecases::AddSuppressionRequest;

use super::table::RouteTable;
use crate::auth::Authed;
use crate::json::ApiJson;
use crate::path::ApiPath;
use crate::{ApiResult, ApiState, envelope, query};

/// A suppression list entry.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SuppressionResponse {
    id: String,
    email: String,
    reason: &'static str,
    source: &'static str,
    message_id: Option<String>,
    created_at: DateTime<Utc>,
}

impl From<Suppression> for SuppressionResponse {
    fn from(s: Suppression) -> Self {
        Self {
            id: s.id.to_string(),
            email: s.email.to_string(),
            reason: s.reason.as_str(),
            source: match s.source {
                SuppressionSource::Api => "api",
                SuppressionSource::Bounce => "bounce",
                SuppressionSource::Complaint => "complaint",
            },
            message_id: s.message_id.map(|m| m.to_string()),
            created_at: s.created_at,
        }
    }
}

/// `POST /v1/suppressions`: 201 when added now, 200 with the existing entry when the address
/// is already on the list (contract §6).
pub async fn add_suppression(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<AddSuppressionRequest>,
) -> ApiResult<Response> {
    let (entry, created) = state.core.add_suppression(&who, req).await?;
    let (status, message) = if created {
        (StatusCode::CREATED, "address suppressed")
    } else {
        (StatusCode::OK, "address already suppressed")
    };
    Ok(envelope::success(status, message, SuppressionResponse::from(entry)))
}

/// `GET /v1/suppressions?limit&cursor&reason`.
pub async fn list_suppressions(
    State(state): State<ApiState>,
    Authed(who): Authed,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let q = query::params(raw.as_deref());
    let params = query::list_params(&q)?;
    let listed = state.core.list_suppressions(&who, params, q.get("reason").cloned()).await?;
    Ok(envelope::list(listed, SuppressionResponse::from))
}

/// `GET /v1/suppressions/{email}`.
pub async fn get_suppression(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(email): ApiPath<String>,
) -> ApiResult<Response> {
    let entry = state.core.get_suppression(&who, &email).await?;
    Ok(envelope::success(StatusCode::OK, "OK", SuppressionResponse::from(entry)))
}

/// `DELETE /v1/suppressions/{email}`: the address can be sent to again.
pub async fn delete_suppression(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(email): ApiPath<String>,
) -> ApiResult<Response> {
    state.core.delete_suppression(&who, &email).await?;
    Ok(envelope::success(StatusCode::OK, "suppression removed", ()))
}

/// The suppression routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .get("/v1/suppressions", list_suppressions)
        .post("/v1/suppressions", add_suppression)
        .get("/v1/suppressions/{email}", get_suppression)
        .delete("/v1/suppressions/{email}", delete_suppression)
}
