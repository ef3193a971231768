//! `/v1/suppressions`: add, list, get, remove (docs/api.md#suppressions). The address in the
//! path is the URL-decoded segment, so `a%2Bb@example.com` names `a+b@example.com`.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tidings_core::email::EmailAddress;
use tidings_core::model::Suppression;
use tidings_core::usecases;
use utoipa::openapi::Ref;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::table::RouteTable;
use super::wire::{SuppressionReason, SuppressionSource, Ulid};
use crate::auth::Authed;
use crate::envelope::{Null, Page, Success};
use crate::json::ApiJson;
use crate::openapi::failures::InsufficientScope;
use crate::path::ApiPath;
use crate::query::{ListQuery, query_parameter};
use crate::{ApiResult, ApiState, query};

/// body of POST /v1/suppressions
#[derive(Deserialize, ToSchema)]
pub struct AddSuppressionRequest {
    /// the address to suppress: `local@domain`, the local part dot-atom text (no quoted or non-ASCII
    /// local parts), the domain as `POST /v1/domains` takes it; surrounding spaces are ignored
    // The pattern admits every address `EmailAddress::parse` accepts, so that what it refuses is
    // refused by the server too.
    #[schema(
        required,
        value_type = String,
        pattern = r"^ *[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+@([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\.)+([A-Za-z]|[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z-][A-Za-z0-9-]*[A-Za-z0-9])\.? *$"
    )]
    email: Option<String>,
}

impl From<AddSuppressionRequest> for usecases::AddSuppressionRequest {
    fn from(r: AddSuppressionRequest) -> Self {
        Self { email: r.email }
    }
}

/// a suppressed address
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = Suppression)]
pub struct SuppressionResponse {
    id: Ulid,
    /// the address as first given (matched case-insensitively)
    email: String,
    reason: SuppressionReason,
    source: SuppressionSource,
    #[schema(required)]
    message_id: Option<Ulid>,
    created_at: DateTime<Utc>,
}

impl From<Suppression> for SuppressionResponse {
    fn from(s: Suppression) -> Self {
        Self {
            id: Ulid::of(s.id),
            email: s.email.to_string(),
            reason: s.reason.into(),
            source: s.source.into(),
            message_id: s.message_id.map(Ulid::of),
            created_at: s.created_at,
        }
    }
}

type SuppressionCreated = Success<201, SuppressionResponse>;
type SuppressionOk = Success<200, SuppressionResponse>;
type SuppressionPage = Page<SuppressionResponse>;
type Removed = Success<200, Null>;

/// The `reason` filter of `GET /v1/suppressions`, which `list_suppressions` reads from the
/// raw query.
struct ReasonQuery;

impl IntoParams for ReasonQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![query_parameter(
            "reason",
            "only entries with this reason",
            Ref::from_schema_name(SuppressionReason::name()),
        )]
    }
}

/// `POST /v1/suppressions`: 201 when added now, 200 with the existing entry when the address
/// is already on the list (docs/api.md#suppressions).
#[utoipa::path(
    post,
    path = "/v1/suppressions",
    tag = "suppressions",
    summary = "Suppress an address (reason Manual)",
    request_body = AddSuppressionRequest,
    responses(
        (status = 201, description = "added now", body = inline(SuppressionCreated)),
        (status = 200, description = "the address was already suppressed: the existing entry", body = inline(SuppressionOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn add_suppression(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<AddSuppressionRequest>,
) -> ApiResult<Response> {
    let (entry, created) = state.core.suppressions().add(&who, req.into()).await?;
    Ok(if created {
        SuppressionCreated::new("address suppressed", entry.into()).into_response()
    } else {
        SuppressionOk::new("address already suppressed", entry.into()).into_response()
    })
}

/// `GET /v1/suppressions?limit&cursor&reason`.
#[utoipa::path(
    get,
    path = "/v1/suppressions",
    tag = "suppressions",
    summary = "List suppressed addresses, newest first",
    params(ListQuery, ReasonQuery),
    responses(
        (status = 200, description = "a page", body = inline(SuppressionPage)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn list_suppressions(
    State(state): State<ApiState>,
    Authed(who): Authed,
    RawQuery(raw): RawQuery,
) -> ApiResult<SuppressionPage> {
    let q = query::params(raw.as_deref());
    let params = query::list_params(&q)?;
    let listed = state.core.suppressions().list(&who, params, q.get("reason").cloned()).await?;
    Ok(Page::new(listed, SuppressionResponse::from))
}

/// `GET /v1/suppressions/{email}`.
#[utoipa::path(
    get,
    path = "/v1/suppressions/{email}",
    tag = "suppressions",
    summary = "Retrieve an address's entry",
    responses(
        (status = 200, description = "the entry", body = inline(SuppressionOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_suppression(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(email): ApiPath<String>,
) -> ApiResult<SuppressionOk> {
    let entry = state.core.suppressions().get(&who, EmailAddress::parse(&email).into()).await?;
    Ok(Success::new("OK", entry.into()))
}

/// `DELETE /v1/suppressions/{email}`: the address can be sent to again.
#[utoipa::path(
    delete,
    path = "/v1/suppressions/{email}",
    tag = "suppressions",
    summary = "Remove an address",
    responses(
        (status = 200, description = "removed; the address can be sent to again", body = inline(Removed)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn delete_suppression(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(email): ApiPath<String>,
) -> ApiResult<Removed> {
    state.core.suppressions().delete(&who, EmailAddress::parse(&email).into()).await?;
    Ok(Success::new("suppression removed", Null))
}

/// The suppression routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .routes(routes!(list_suppressions, add_suppression))
        .routes(routes!(get_suppression, delete_suppression))
}
