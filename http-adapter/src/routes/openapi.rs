//! `GET /v1/openapi.json`: the OpenAPI document of the API, without authentication and not
//! wrapped in the envelope (it is a document for tools such as Schemathesis, not a resource).

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::table::RouteTable;

/// an OpenAPI 3.1 document
// The shape of what `crate::openapi` serves (utoipa's `OpenApi`, which has no schema of its
// own), as far as tools rely on it.
#[derive(ToSchema)]
#[allow(dead_code)]
struct OpenApiDocument {
    #[schema(pattern = r"^3\.1\.\d+$")]
    openapi: String,
    #[schema(value_type = Object)]
    info: Value,
    #[schema(value_type = Object)]
    paths: Value,
}

/// `GET /v1/openapi.json`.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "meta",
    summary = "This OpenAPI document",
    description = "The document itself, not wrapped in the envelope; no authentication.",
    security(()),
    responses((status = 200, description = "this document", body = inline(OpenApiDocument)))
)]
pub async fn get_openapi_document() -> Response {
    let content_type = [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))];
    (content_type, crate::openapi::DOCUMENT.clone()).into_response()
}

/// The document's route.
pub fn routes() -> RouteTable {
    RouteTable::default().routes(routes!(get_openapi_document))
}
