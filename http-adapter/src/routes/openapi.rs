//! `GET /v1/openapi.json`: the OpenAPI document of the API, without authentication and not
//! wrapped in the envelope (it is a document for tools such as Schemathesis, not a resource).

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::table::RouteTable;

/// `GET /v1/openapi.json`.
pub async fn get_openapi_document() -> Response {
    let content_type = [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))];
    (content_type, crate::openapi::DOCUMENT.clone()).into_response()
}

/// The document's route.
pub fn routes() -> RouteTable {
    RouteTable::default().get("/v1/openapi.json", get_openapi_document)
}
