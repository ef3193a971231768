//! `/v1/templates`: create, list, get, rename or switch version, delete, add a version, and
//! render without sending (docs/api.md#templates).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tidings_core::ids::TemplateId;
use tidings_core::model::{Template, TemplateVersion};
use tidings_core::templates::Rendered;
use tidings_core::usecases;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::table::RouteTable;
use super::wire::Ulid;
use crate::auth::Authed;
use crate::envelope::{Null, Page, Success};
use crate::json::ApiJson;
use crate::openapi::failures::{InsufficientScope, RenderUnprocessable, SendTooManyRequests, TemplateUnprocessable};
use crate::path::IdPath;
use crate::query::ListQuery;
use crate::{ApiError, ApiResult, ApiState};

/// body of POST /v1/templates; handlebars syntax
#[derive(Deserialize, ToSchema)]
pub struct CreateTemplateRequest {
    /// 1–200 characters after trimming
    #[schema(required, value_type = String, min_length = 1)]
    name: Option<String>,
    /// subject template, no line breaks or control characters
    #[schema(required, value_type = String, min_length = 1)]
    subject: Option<String>,
    /// HTML body template
    html: Option<String>,
    /// plain-text body template
    text: Option<String>,
}

impl From<CreateTemplateRequest> for usecases::CreateTemplateRequest {
    fn from(r: CreateTemplateRequest) -> Self {
        Self { name: r.name, subject: r.subject, html: r.html, text: r.text }
    }
}

/// body of PATCH /v1/templates/{id}; an absent field is kept
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTemplateRequest {
    /// new name, 1–200 characters after trimming
    name: Option<String>,
    /// id of one of this template's versions to make current
    current_version_id: Option<String>,
}

impl From<UpdateTemplateRequest> for usecases::UpdateTemplateRequest {
    fn from(r: UpdateTemplateRequest) -> Self {
        Self { name: r.name, current_version_id: r.current_version_id }
    }
}

/// body of POST /v1/templates/{id}/versions
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddTemplateVersionRequest {
    /// subject template, no line breaks or control characters
    #[schema(required, value_type = String, min_length = 1)]
    subject: Option<String>,
    /// HTML body template (not inherited from the previous version)
    html: Option<String>,
    /// plain-text body template (not inherited from the previous version)
    text: Option<String>,
    /// make the new version current; default true
    make_current: Option<bool>,
}

impl From<AddTemplateVersionRequest> for usecases::AddTemplateVersionRequest {
    fn from(r: AddTemplateVersionRequest) -> Self {
        Self { subject: r.subject, html: r.html, text: r.text, make_current: r.make_current }
    }
}

/// body of POST /v1/templates/{id}/render
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenderTemplateRequest {
    /// values for the placeholders
    #[schema(value_type = Option<Object>)]
    variables: Option<Value>,
    /// render this version instead of the current one
    version_id: Option<String>,
}

impl From<RenderTemplateRequest> for usecases::RenderTemplateRequest {
    fn from(r: RenderTemplateRequest) -> Self {
        Self { variables: r.variables, version_id: r.version_id }
    }
}

/// a template with all its versions, oldest first
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = Template)]
pub struct TemplateResponse {
    id: Ulid,
    /// name
    name: String,
    current_version_id: Ulid,
    created_at: DateTime<Utc>,
    versions: Vec<TemplateVersionResponse>,
}

impl From<Template> for TemplateResponse {
    fn from(t: Template) -> Self {
        Self {
            id: Ulid::of(t.id),
            name: t.name,
            current_version_id: Ulid::of(t.current_version_id),
            created_at: t.created_at,
            versions: t.versions.into_iter().map(TemplateVersionResponse::from).collect(),
        }
    }
}

/// one version of a template, with its sources as written
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = TemplateVersion)]
pub struct TemplateVersionResponse {
    id: Ulid,
    #[schema(minimum = 1)]
    version_no: u32,
    /// subject template
    subject: String,
    /// HTML body template
    #[schema(required)]
    html: Option<String>,
    /// plain-text body template
    #[schema(required)]
    text: Option<String>,
    created_at: DateTime<Utc>,
}

impl From<TemplateVersion> for TemplateVersionResponse {
    fn from(v: TemplateVersion) -> Self {
        Self {
            id: Ulid::of(v.id),
            version_no: v.version_no,
            subject: v.subject,
            html: v.html,
            text: v.text,
            created_at: v.created_at,
        }
    }
}

/// a rendered template; a part the template lacks is null
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RenderedTemplate)]
struct RenderedResponse {
    /// rendered subject
    subject: String,
    /// rendered HTML body
    #[schema(required)]
    html: Option<String>,
    /// rendered text body
    #[schema(required)]
    text: Option<String>,
}

impl From<Rendered> for RenderedResponse {
    fn from(r: Rendered) -> Self {
        Self { subject: r.subject, html: r.html, text: r.text }
    }
}

type TemplateCreated = Success<201, TemplateResponse>;
type TemplateOk = Success<200, TemplateResponse>;
type TemplatePage = Page<TemplateResponse>;
type VersionCreated = Success<201, TemplateVersionResponse>;
type RenderedOk = Success<200, RenderedResponse>;
type Deleted = Success<200, Null>;

/// `POST /v1/templates`: version 1 is current.
#[utoipa::path(
    post,
    path = "/v1/templates",
    tag = "templates",
    summary = "Create a template; version 1 is current",
    request_body = CreateTemplateRequest,
    responses(
        (status = 201, description = "the template", body = inline(TemplateCreated)),
        (status = 403, response = InsufficientScope),
        (status = 422, response = TemplateUnprocessable),
    )
)]
pub async fn create_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<CreateTemplateRequest>,
) -> ApiResult<TemplateCreated> {
    let template = state.core.templates().create(&who, req.into()).await?;
    Ok(Success::new("template created", template.into()))
}

/// `GET /v1/templates`: newest first, each with its versions.
#[utoipa::path(
    get,
    path = "/v1/templates",
    tag = "templates",
    summary = "List templates with their versions, newest first",
    params(ListQuery),
    responses(
        (status = 200, description = "a page", body = inline(TemplatePage)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn list_templates(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ListQuery(params): ListQuery,
) -> ApiResult<TemplatePage> {
    let listed = state.core.templates().list(&who, params).await?;
    Ok(Page::new(listed, TemplateResponse::from))
}

/// `GET /v1/templates/{id}`.
#[utoipa::path(
    get,
    path = "/v1/templates/{id}",
    tag = "templates",
    summary = "Retrieve a template and all its versions",
    responses(
        (status = 200, description = "the template", body = inline(TemplateOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn get_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<TemplateId>,
) -> ApiResult<TemplateOk> {
    let template = state.core.templates().get(&who, id).await?;
    Ok(Success::new("OK", template.into()))
}

/// `PATCH /v1/templates/{id}`: `name`, `currentVersionId`.
#[utoipa::path(
    patch,
    path = "/v1/templates/{id}",
    tag = "templates",
    summary = "Rename, or switch the current version",
    request_body = UpdateTemplateRequest,
    responses(
        (status = 200, description = "the template", body = inline(TemplateOk)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn update_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<TemplateId>,
    ApiJson(req): ApiJson<UpdateTemplateRequest>,
) -> ApiResult<TemplateOk> {
    let template = state.core.templates().update(&who, id, req.into()).await?;
    Ok(Success::new("template updated", template.into()))
}

/// `DELETE /v1/templates/{id}`: sent messages keep the version id they recorded.
#[utoipa::path(
    delete,
    path = "/v1/templates/{id}",
    tag = "templates",
    summary = "Delete a template and its versions",
    description = "Messages already sent keep the version id they recorded.",
    responses(
        (status = 200, description = "deleted", body = inline(Deleted)),
        (status = 403, response = InsufficientScope),
    )
)]
pub async fn delete_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<TemplateId>,
) -> ApiResult<Deleted> {
    state.core.templates().delete(&who, id).await?;
    Ok(Success::new("template deleted", Null))
}

/// `POST /v1/templates/{id}/versions`: the new version (current unless `makeCurrent` is false).
#[utoipa::path(
    post,
    path = "/v1/templates/{id}/versions",
    tag = "templates",
    summary = "Add the next version",
    request_body = AddTemplateVersionRequest,
    responses(
        (status = 201, description = "the new version", body = inline(VersionCreated)),
        (status = 403, response = InsufficientScope),
        (status = 422, response = TemplateUnprocessable),
    )
)]
pub async fn create_template_version(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<TemplateId>,
    ApiJson(req): ApiJson<AddTemplateVersionRequest>,
) -> ApiResult<VersionCreated> {
    let version = state.core.templates().add_version(&who, id, req.into()).await?;
    Ok(Success::new("template version created", version.into()))
}

/// `POST /v1/templates/{id}/render`: `{subject, html, text}`, nothing sent. A render takes a
/// token of the key's rate limit like a send (core decides; 429 when the bucket is empty).
#[utoipa::path(
    post,
    path = "/v1/templates/{id}/render",
    tag = "templates",
    summary = "Render without sending",
    description = "Takes one token of the key's send rate, like a send: a render costs what a send's render \
        costs. The token is given back only when the request is refused before anything is rendered (unknown \
        template or version, bad variables); a template that fails to render keeps it.",
    request_body = RenderTemplateRequest,
    responses(
        (status = 200, description = "the rendered parts", body = inline(RenderedOk)),
        (status = 403, response = InsufficientScope),
        (status = 422, response = RenderUnprocessable),
        (status = 429, response = SendTooManyRequests),
    )
)]
pub async fn render_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    IdPath(id): IdPath<TemplateId>,
    ApiJson(req): ApiJson<RenderTemplateRequest>,
) -> ApiResult<Response> {
    match state.core.templates().render_rate_limited(&*state.limits, &who, id, req.into()).await? {
        usecases::Admission::Allowed((rendered, limit)) => {
            let mut response = RenderedOk::new("OK", rendered.into()).into_response();
            crate::rate_limit::insert_headers(response.headers_mut(), &limit);
            Ok(response)
        }
        usecases::Admission::Limited { retry_after } => {
            Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() })
        }
    }
}

/// The template routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .routes(routes!(list_templates, create_template))
        .routes(routes!(get_template, update_template, delete_template))
        .routes(routes!(create_template_version))
        .routes(routes!(render_template))
}
