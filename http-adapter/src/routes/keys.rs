//! `/v1/keys`: create, list, get, revoke (spec §4, contract §2).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tidings_core::model::ApiKey;
use tidings_core::usecases::CreateApiKeyRequest;

use super::table::RouteTable;
use crate::auth::Authed;
use crate::json::ApiJson;
use crate::path::ApiPath;
use crate::query::ListQuery;
use crate::{ApiResult, ApiState, envelope};

/// A key as every response but the creation shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyResponse {
    id: String,
    name: String,
    prefix: String,
    scope: &'static str,
    sending_domain_id: Option<String>,
    rate_limit_per_sec: u32,
    created_at: DateTime<Utc>,
    last_used_at: Option<DateTime<Utc>>,
}

impl From<ApiKey> for ApiKeyResponse {
    fn from(k: ApiKey) -> Self {
        Self {
            id: k.id.to_string(),
            name: k.name,
            prefix: k.prefix,
            scope: match k.scope {
                tidings_core::model::KeyScope::Full => "full",
                tidings_core::model::KeyScope::Send => "send",
            },
            sending_domain_id: k.sending_domain_id.map(|d| d.to_string()),
            rate_limit_per_sec: k.rate_limit.per_sec(),
            created_at: k.created_at,
            last_used_at: k.last_used_at,
        }
    }
}

/// The creation response: the key plus its plaintext, shown this once.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreatedKeyResponse {
    #[serde(flatten)]
    key: ApiKeyResponse,
    plaintext_key: String,
}

/// `POST /v1/keys`.
pub async fn create_api_key(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<CreateApiKeyRequest>,
) -> ApiResult<Response> {
    let created = state.core.create_api_key(&who, req).await?;
    let body = CreatedKeyResponse { plaintext_key: created.plaintext.expose().to_owned(), key: created.key.into() };
    Ok(envelope::success(StatusCode::CREATED, "API key created", body))
}

/// `GET /v1/keys`.
pub async fn list_api_keys(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ListQuery(params): ListQuery,
) -> ApiResult<Response> {
    let listed = state.core.list_api_keys(&who, params).await?;
    Ok(envelope::list(listed, ApiKeyResponse::from))
}

/// `GET /v1/keys/{id}`.
pub async fn get_api_key(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let key = state.core.get_api_key(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "OK", ApiKeyResponse::from(key)))
}

/// `DELETE /v1/keys/{id}`: revokes; the key fails from the next request on.
pub async fn revoke_api_key(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    state.core.revoke_api_key(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "API key revoked", ()))
}

/// The key routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .get("/v1/keys", list_api_keys)
        .post("/v1/keys", create_api_key)
        .get("/v1/keys/{id}", get_api_key)
        .delete("/v1/keys/{id}", revoke_api_key)
}
