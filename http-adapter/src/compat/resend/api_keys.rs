//! `/resend/api-keys`: Resend's API key shapes over the same use cases and scopes as
//! `/v1/keys`. Resend's `permission` is Tidings' scope (`full_access` is `full`,
//! `sending_access` is `send`) and its `domain_id` the key's sending domain; the create
//! answer is `{id, token}`, the token being the Tidings key's plaintext, shown this once.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::SecondsFormat;
use serde::Deserialize;
use serde_json::json;
use tidings_core::Error;
use tidings_core::ids::ApiKeyId;
use tidings_core::model::ApiKey;
use tidings_core::usecases::CreateApiKeyRequest;

use super::auth::{Caller, Resend, ResendBody};
use super::error::{ResendError, renamed};
use crate::ApiState;
use crate::json::ApiJson;
use crate::path::IdPath;

/// Body of `POST /resend/api-keys`.
#[derive(Deserialize)]
pub(super) struct CreateKeyRequest {
    name: Option<String>,
    permission: Option<String>,
    domain_id: Option<String>,
}

impl CreateKeyRequest {
    /// Core's request. Resend requires `name`; an unknown `permission` is a 422 naming it.
    fn into_core(self) -> Result<CreateApiKeyRequest, Error> {
        let scope = match self.permission.as_deref() {
            None | Some("full_access") => "full",
            Some("sending_access") => "send",
            Some(_) => return Err(Error::field("permission", "must be `full_access` or `sending_access`")),
        };
        if self.name.is_none() {
            return Err(Error::field("name", "is required"));
        }
        Ok(CreateApiKeyRequest {
            name: self.name,
            scope: Some(scope.to_owned()),
            sending_domain_id: self.domain_id,
            rate_limit_per_sec: None,
        })
    }
}

/// A key as Resend lists it: `{id, name, created_at, last_used_at}`.
fn listed(k: ApiKey) -> serde_json::Value {
    let at = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
    json!({ "id": k.id.to_string(), "name": k.name, "created_at": at(k.created_at), "last_used_at": k.last_used_at.map(at) })
}

type Result<T, E = ResendError> = std::result::Result<T, E>;

/// `POST /resend/api-keys`: 201 `{id, token}`.
pub(super) async fn create_api_key(
    State(state): State<ApiState>,
    Resend(who): Caller,
    ResendBody(ApiJson(req)): ResendBody<ApiJson<CreateKeyRequest>>,
) -> Result<Response> {
    let created = state
        .core
        .keys()
        .create(&who.0, req.into_core()?)
        .await
        .map_err(|e| renamed(renamed(e, "sendingDomainId", "domain_id"), "scope", "permission"))?;
    let body = json!({ "id": created.key.id.to_string(), "token": created.plaintext.expose() });
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /resend/api-keys?limit&after`: the workspace's live keys, newest first.
pub(super) async fn list_api_keys(
    State(state): State<ApiState>,
    Resend(who): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Response> {
    let params = super::paging::forward_page(raw.as_deref())?;
    let listed_keys = state.core.keys().list(&who.0, params).await?;
    let data = listed_keys.items.into_iter().map(listed).collect::<Vec<_>>();
    Ok(Json(json!({ "object": "list", "has_more": listed_keys.has_more, "data": data })).into_response())
}

/// `DELETE /resend/api-keys/{id}`: revokes; the key fails from the next request on.
pub(super) async fn remove_api_key(
    State(state): State<ApiState>,
    Resend(who): Caller,
    Resend(IdPath(id)): Resend<IdPath<ApiKeyId>>,
) -> Result<Response> {
    state.core.keys().revoke(&who.0, id).await?;
    Ok(Json(json!({ "object": "api_key", "id": id.to_string(), "deleted": true })).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(body: serde_json::Value) -> std::result::Result<CreateApiKeyRequest, Error> {
        serde_json::from_value::<CreateKeyRequest>(body).unwrap().into_core()
    }

    #[test]
    fn permissions_are_scopes() {
        let full = core(json!({ "name": "ci" })).unwrap();
        assert_eq!(full.scope.as_deref(), Some("full"));
        let send = core(json!({ "name": "ci", "permission": "sending_access", "domain_id": "dom_x" })).unwrap();
        assert_eq!((send.scope.as_deref(), send.sending_domain_id.as_deref()), (Some("send"), Some("dom_x")));
        assert!(matches!(core(json!({ "name": "ci", "permission": "admin" })),
            Err(Error::Validation { fields }) if fields[0].field == "permission"));
        assert!(matches!(core(json!({})), Err(Error::Validation { fields }) if fields[0].field == "name"));
    }
}
