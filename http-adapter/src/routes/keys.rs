//! `/v1/keys`: create, list, get, change the rate of, revoke (docs/api.md#authentication).

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tidings_core::ids::ApiKeyId;
use tidings_core::model::ApiKey;
use tidings_core::usecases;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::table::RouteTable;
use super::wire::{KeyScope, Ulid};
use crate::auth::Authed;
use crate::envelope::{Null, Page, Success};
use crate::json::ApiJson;
use crate::openapi::failures::InsufficientScope;
use crate::path::IdPath;
use crate::query::ListQuery;
use crate::{ApiResult, ApiState};

/// body of POST /v1/keys
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateApiKeyRequest {
    /// label without control characters; default `default`
    #[schema(min_length = 1, max_length = 100)]
    name: Option<String>,
    /// default `full`
    #[schema(value_type = Option<KeyScope>)]
    scope: Option<String>,
    /// restrict the key to sending from this domain of the workspace
    sending_domain_id: Option<String>,
    /// sends per second; default 10
    #[schema(minimum = 1, maximum = 10000)]
    rate_limit_per_sec: Option<i64>,
}

impl From<CreateApiKeyRequest> for usecases::CreateApiKeyRequest {
    fn from(r: CreateApiKeyRequest) -> Self {
        Self {
            name: r.name,
            scope: r.scope,
            sending_domain_id: r.sending_domain_id,
            rate_limit_per_sec: r.rate_limit_per_sec,
        }
    }
}

/// body of PATCH /v1/keys/{id}
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = UpdateApiKeyRequest)]
pub struct UpdateApiKeyRequest {
    /// sends per second, from the key's next send on
    #[schema(required, nullable = false, minimum = 1, maximum = 10000)]
    rate_limit_per_sec: Option<i64>,
}

impl From<UpdateApiKeyRequest> for usecases::UpdateApiKeyRequest {
    fn from(r: UpdateApiKeyRequest) -> Self {
        Self { rate_limit_per_sec: r.rate_limit_per_sec }
    }
}

/// an API key (never with its plaintext)
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = ApiKey)]
pub struct ApiKeyResponse {
    id: Ulid,
    /// label
    name: String,
    /// the first 12 characters of the key, safe to display
    prefix: String,
    scope: KeyScope,
    #[schema(required)]
    sending_domain_id: Option<Ulid>,
    #[schema(minimum = 1, maximum = 10000)]
    rate_limit_per_sec: u32,
    created_at: DateTime<Utc>,
    #[schema(required)]
    last_used_at: Option<DateTime<Utc>>,
}

impl From<ApiKey> for ApiKeyResponse {
    fn from(k: ApiKey) -> Self {
        Self {
            id: Ulid::of(k.id),
            name: k.name,
            prefix: k.prefix,
            scope: k.scope.into(),
            sending_domain_id: k.sending_domain_id.map(Ulid::of),
            rate_limit_per_sec: k.rate_limit.per_sec(),
            created_at: k.created_at,
            last_used_at: k.last_used_at,
        }
    }
}

/// a key just created, with its plaintext
// Every field of `ApiKeyResponse` again rather than `#[serde(flatten)]`: utoipa writes a
// flattened struct as `allOf`, which a closed `ApiKey` schema would refuse `plaintextKey` in.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = CreatedApiKey)]
pub struct CreatedKeyResponse {
    id: Ulid,
    /// label
    name: String,
    /// the first 12 characters of the key, safe to display
    prefix: String,
    scope: KeyScope,
    #[schema(required)]
    sending_domain_id: Option<Ulid>,
    #[schema(minimum = 1, maximum = 10000)]
    rate_limit_per_sec: u32,
    created_at: DateTime<Utc>,
    #[schema(required)]
    last_used_at: Option<DateTime<Utc>>,
    /// the full key (`tid_` + 40 base62 characters); shown only here
    plaintext_key: String,
}

impl From<usecases::CreatedKey> for CreatedKeyResponse {
    fn from(created: usecases::CreatedKey) -> Self {
        let ApiKeyResponse { id, name, prefix, scope, sending_domain_id, rate_limit_per_sec, created_at, last_used_at } =
            created.key.into();
        let plaintext_key = created.plaintext.expose().to_owned();
        Self { id, name, prefix, scope, sending_domain_id, rate_limit_per_sec, created_at, last_used_at, plaintext_key }
    }
}

type KeyCreated = Success<201, CreatedKeyResponse>;
type KeyOk = Success<200, ApiKeyResponse>;
type KeyPage = Page<ApiKeyResponse>;
type Revoked = Success<200, Null>;

/// `POST /v1/keys`.
#[utoipa::path(
    post,
    path = "/v1/keys",
    tag = "keys",
    summary = "Create a key; its plaintext is returned this once",
    request_body = CreateApiKeyRequest,
    responses(
        (status = 201, description = "the key, with `plaintextKey`", body = inline(KeyCreated)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn create_api_key(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<CreateApiKeyRequest>,
) -> ApiResult<KeyCreated> {
    let created = state.core.keys().create(&who, req.into()).await?;
    Ok(Success::new("API key created", created.into()))
}

/// `GET /v1/keys`.
#[utoipa::path(
    get,
    path = "/v1/keys",
    tag = "keys",
    summary = "List the workspace's keys that are not revoked, newest first",
    params(ListQuery),
    responses(
        (status = 200, description = "a page", body = inline(KeyPage)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn list_api_keys(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ListQuery(params): ListQuery,
) -> ApiResult<KeyPage> {
    let listed = state.core.keys().list(&who, params).await?;
    Ok(Page::new(listed, ApiKeyResponse::from))
}

/// `GET /v1/keys/{id}`.
#[utoipa::path(
    get,
    path = "/v1/keys/{id}",
    tag = "keys",
    summary = "Retrieve a key (a revoked key is not found)",
    responses(
        (status = 200, description = "the key", body = inline(KeyOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_api_key(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<ApiKeyId>,
) -> ApiResult<KeyOk> {
    let key = state.core.keys().get(&who, id).await?;
    Ok(Success::new("OK", key.into()))
}

/// `PATCH /v1/keys/{id}`: `rateLimitPerSec`.
#[utoipa::path(
    patch,
    path = "/v1/keys/{id}",
    tag = "keys",
    summary = "Change a key's send rate",
    description = "Takes effect from the key's next send, on every node. A key restricted to a sending domain \
                   changes only keys restricted to the same domain.",
    request_body = UpdateApiKeyRequest,
    responses(
        (status = 200, description = "the key", body = inline(KeyOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn update_api_key(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<ApiKeyId>,
    ApiJson(req): ApiJson<UpdateApiKeyRequest>,
) -> ApiResult<KeyOk> {
    let key = state.core.keys().update(&who, id, req.into()).await?;
    Ok(Success::new("API key updated", key.into()))
}

/// `DELETE /v1/keys/{id}`: revokes; the key fails from the next request on.
#[utoipa::path(
    delete,
    path = "/v1/keys/{id}",
    tag = "keys",
    summary = "Revoke a key; it fails from the next request on",
    responses(
        (status = 200, description = "revoked", body = inline(Revoked)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn revoke_api_key(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<ApiKeyId>,
) -> ApiResult<Revoked> {
    state.core.keys().revoke(&who, id).await?;
    Ok(Success::new("API key revoked", Null))
}

/// The key routes.
pub fn routes() -> RouteTable {
    RouteTable::default().routes(routes!(list_api_keys, create_api_key)).routes(routes!(
        get_api_key,
        update_api_key,
        revoke_api_key
    ))
}
