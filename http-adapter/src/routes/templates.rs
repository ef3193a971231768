//! `/v1/templates`: create, list, get, rename or switch version, delete, add a version, and
//! render without sending (spec §4 and §9, contract §5).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tidings_core::model::{Template, TemplateVersion};
use tidings_core::templates::Rendered;
use tidings_core::usecases::{
    AddTemplateVersionRequest, CreateTemplateRequest, RenderTemplateRequest, UpdateTemplateRequest,
};

use super::table::RouteTable;
use crate::auth::Authed;
use crate::json::ApiJson;
use crate::path::ApiPath;
use crate::query::ListQuery;
use crate::{ApiError, ApiResult, ApiState, envelope};

/// A template with all its versions, oldest first.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateResponse {
    id: String,
    name: String,
    current_version_id: String,
    created_at: DateTime<Utc>,
    versions: Vec<TemplateVersionResponse>,
}

impl From<Template> for TemplateResponse {
    fn from(t: Template) -> Self {
        Self {
            id: t.id.to_string(),
            name: t.name,
            current_version_id: t.current_version_id.to_string(),
            created_at: t.created_at,
            versions: t.versions.into_iter().map(TemplateVersionResponse::from).collect(),
        }
    }
}

/// One version of a template, with its sources as written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateVersionResponse {
    id: String,
    version_no: u32,
    subject: String,
    html: Option<String>,
    text: Option<String>,
    created_at: DateTime<Utc>,
}

impl From<TemplateVersion> for TemplateVersionResponse {
    fn from(v: TemplateVersion) -> Self {
        Self {
            id: v.id.to_string(),
            version_no: v.version_no,
            subject: v.subject,
            html: v.html,
            text: v.text,
            created_at: v.created_at,
        }
    }
}

/// A rendered template; a part the template lacks is null.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RenderedResponse {
    subject: String,
    html: Option<String>,
    text: Option<String>,
}

impl From<Rendered> for RenderedResponse {
    fn from(r: Rendered) -> Self {
        Self { subject: r.subject, html: r.html, text: r.text }
    }
}

/// `POST /v1/templates`: version 1 is current.
pub async fn create_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiJson(req): ApiJson<CreateTemplateRequest>,
) -> ApiResult<Response> {
    let template = state.core.create_template(&who, req).await?;
    Ok(envelope::success(StatusCode::CREATED, "template created", TemplateResponse::from(template)))
}

/// `GET /v1/templates`: newest first, each with its versions.
pub async fn list_templates(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ListQuery(params): ListQuery,
) -> ApiResult<Response> {
    let listed = state.core.list_templates(&who, params).await?;
    Ok(envelope::list(listed, TemplateResponse::from))
}

/// `GET /v1/templates/{id}`.
pub async fn get_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let template = state.core.get_template(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "OK", TemplateResponse::from(template)))
}

/// `PATCH /v1/templates/{id}`: `name`, `currentVersionId`.
pub async fn update_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<UpdateTemplateRequest>,
) -> ApiResult<Response> {
    let template = state.core.update_template(&who, &id, req).await?;
    Ok(envelope::success(StatusCode::OK, "template updated", TemplateResponse::from(template)))
}

/// `DELETE /v1/templates/{id}`: sent messages keep the version id they recorded.
pub async fn delete_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    state.core.delete_template(&who, &id).await?;
    Ok(envelope::success(StatusCode::OK, "template deleted", ()))
}

/// `POST /v1/templates/{id}/versions`: the new version (current unless `makeCurrent` is false).
pub async fn create_template_version(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<AddTemplateVersionRequest>,
) -> ApiResult<Response> {
    let version = state.core.add_template_version(&who, &id, req).await?;
    Ok(envelope::success(StatusCode::CREATED, "template version created", TemplateVersionResponse::from(version)))
}

/// `POST /v1/templates/{id}/render`: `{subject, html, text}`, nothing sent. A render takes a
/// token of the key's rate limit like a send (core decides; 429 when the bucket is empty).
pub async fn render_template(
    State(state): State<ApiState>,
    Authed(who): Authed,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<RenderTemplateRequest>,
) -> ApiResult<Response> {
    match state.core.render_template_rate_limited(&*state.limits, &who, &id, req).await? {
        Ok((rendered, limit)) => {
            let mut response = envelope::success(StatusCode::OK, "OK", RenderedResponse::from(rendered));
            crate::rate_limit::insert_headers(response.headers_mut(), &limit);
            Ok(response)
        }
        Err(retry_after) => Err(ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() }),
    }
}

/// The template routes.
pub fn routes() -> RouteTable {
    RouteTable::default()
        .get("/v1/templates", list_templates)
        .post("/v1/templates", create_template)
        .get("/v1/templates/{id}", get_template)
        .patch("/v1/templates/{id}", update_template)
        .delete("/v1/templates/{id}", delete_template)
        .post("/v1/templates/{id}/versions", create_template_version)
        .post("/v1/templates/{id}/render", render_template)
}
