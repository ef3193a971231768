//! Query strings, parsed by hand so that every mistake is a 422 naming the parameter rather
//! than the framework's plain-text rejection; the extractors document the parameters they
//! read (`utoipa::IntoParams`).

use std::collections::HashMap;

use tidings_core::Error;
use tidings_core::usecases::ListParams;

use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{RefOr, Required};

use crate::ApiError;

/// The query's parameters (the last value wins for repeated names).
pub fn params(raw: Option<&str>) -> HashMap<String, String> {
    raw.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default()
}

/// Every `(name, value)` pair of the query in order, repeated names included.
pub fn pairs(raw: Option<&str>) -> Vec<(String, String)> {
    raw.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default()
}

/// `limit` and `cursor`.
pub fn list_params(query: &HashMap<String, String>) -> Result<ListParams, ApiError> {
    let limit = match query.get("limit") {
        None => None,
        Some(text) => {
            Some(text.parse::<i64>().map_err(|_| Error::field("limit", "must be an integer between 1 and 200"))?)
        }
    };
    Ok(ListParams { limit, cursor: query.get("cursor").cloned() })
}

/// Extracts `limit` and `cursor` of a list route (422 naming the parameter when malformed).
pub struct ListQuery(pub ListParams);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ListQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        list_params(&params(parts.uri.query())).map(Self)
    }
}

impl utoipa::IntoParams for ListQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let limit = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1))
            .maximum(Some(200))
            .default(Some(50.into()));
        vec![
            query_parameter("limit", "page size", limit),
            query_parameter(
                "cursor",
                "the `pagination.nextCursor` of the previous page",
                ObjectBuilder::new().schema_type(Type::String),
            ),
        ]
    }
}

/// An optional query parameter.
pub fn query_parameter(name: &str, description: &str, schema: impl Into<RefOr<Schema>>) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .required(Required::False)
        .description(Some(description))
        .schema(Some(schema))
        .build()
}
