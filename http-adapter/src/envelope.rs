//! The response envelope of spec §2 and contract §1: `success`, `message`, `statusCode`,
//! `data`, `error` on failure and `pagination` on lists.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use tidings_core::usecases::Listed;

/// A successful response with `data`.
pub fn success(status: StatusCode, message: &str, data: impl Serialize) -> Response {
    let body = json!({
        "success": true,
        "message": message,
        "statusCode": status.as_u16(),
        "data": to_value(data),
    });
    (status, Json(body)).into_response()
}

/// A successful list: `data` is the array, plus `pagination`.
pub fn list<T, U: Serialize>(listed: Listed<T>, item: impl FnMut(T) -> U) -> Response {
    let Listed { limit, has_more, next_cursor, .. } = &listed;
    let pagination = json!({ "limit": limit, "hasMore": has_more, "nextCursor": next_cursor });
    let items: Vec<U> = listed.items.into_iter().map(item).collect();
    let body = json!({
        "success": true,
        "message": "OK",
        "statusCode": 200,
        "data": to_value(items),
        "pagination": pagination,
    });
    (StatusCode::OK, Json(body)).into_response()
}

/// The body of a failure without details, as bytes: for answers written outside the router
/// (the server's answer to plain HTTP, and to requests hyper could not parse).
pub fn failure_body(status: StatusCode, code: &str, message: &str) -> Vec<u8> {
    failure_value(status, code, message, None).to_string().into_bytes()
}

/// A failure: `data` null and the `error` object.
pub fn failure(status: StatusCode, code: &str, message: &str, details: Option<Value>) -> Response {
    (status, Json(failure_value(status, code, message, details))).into_response()
}

fn failure_value(status: StatusCode, code: &str, message: &str, details: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message });
    if let Some(details) = details {
        error["details"] = details;
    }
    json!({
        "success": false,
        "message": message,
        "statusCode": status.as_u16(),
        "data": null,
        "error": error,
    })
}

fn to_value(data: impl Serialize) -> Value {
    // Our DTOs are plain data; serialisation cannot fail (no maps with non-string keys).
    serde_json::to_value(data).unwrap_or(Value::Null)
}
