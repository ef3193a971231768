//! Query strings, parsed by hand so that every mistake is a 422 naming the parameter rather
//! than the framework's plain-text rejection.

use std::collections::HashMap;

use tidings_core::Error;
use tidings_core::usecases::ListParams;

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
