//! `ApiJson<T>`: the request-body extractor that answers in the API's terms — 400
//! `invalid_json` for a missing content type, bad syntax or a non-object, 413 for a body
//! over the limit, 422 `validation_error` naming the field whose type is wrong, 503 when the
//! server's budget of body bytes in flight is used up (`body`).
//!
//! A body is deserialised straight into `T` after a syntax-only pass, not through a
//! `serde_json::Value`: the tree held a second copy of every string (a send's attachments
//! are most of its body), and the syntax pass keeps the order of answers (any syntax error
//! is a 400 before any field is a 422).

use axum::extract::{FromRequest, Request};
use axum::http::header;
use serde::de::{DeserializeOwned, IgnoredAny};
use tidings_core::Error;

use crate::{ApiError, ApiState};

/// A JSON object body deserialised into `T`.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<ApiState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        let bytes = json_bytes(req, state).await?;
        parse(&bytes).map(Self)
    }
}

/// A JSON array body deserialised into `Vec<T>` (`POST /v1/messages/batch`); a wrong field
/// is named with its index, `[3].to`.
pub struct ApiJsonArray<T>(pub Vec<T>);

impl<T: DeserializeOwned> FromRequest<ApiState> for ApiJsonArray<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        let bytes = json_bytes(req, state).await?;
        let value: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::InvalidJson(format!("the body is not valid JSON: {e}")))?;
        drop(bytes);
        if !value.is_array() {
            return Err(ApiError::InvalidJson("the body must be a JSON array of messages".into()));
        }
        if let Some(i) = value.as_array().and_then(|items| items.iter().position(|item| !item.is_object())) {
            return Err(Error::field(format!("[{i}]"), "must be a JSON object").into());
        }
        serde_path_to_error::deserialize(value).map(Self).map_err(|e| {
            let field = e.path().to_string();
            Error::field(field, e.into_inner().to_string()).into()
        })
    }
}

/// The body of a JSON request: 400 without the JSON content type, 413 over the limit, 503
/// over the budget.
async fn json_bytes(req: Request, state: &ApiState) -> Result<Vec<u8>, ApiError> {
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(ApiError::InvalidJson("send the body as JSON with `Content-Type: application/json`".into()));
    }
    crate::body::read(req, &state.body_budget, state.config.max_body_bytes).await
}

/// Parses a body: syntax first (400), then shape (422 naming the field).
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // The skipping pass below does not look inside strings it skips (unknown fields).
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(ApiError::InvalidJson(format!("the body is not valid JSON: it is not UTF-8 ({e})")));
    }
    // Allocates nothing: strings are skipped, not copied.
    serde_json::from_slice::<IgnoredAny>(bytes)
        .map_err(|e| ApiError::InvalidJson(format!("the body is not valid JSON: {e}")))?;
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::InvalidJson("the body must be a JSON object".into()));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let message = without_position(e.into_inner());
        Error::field(if field == "." { "body".to_owned() } else { field }, message).into()
    })
}

/// A shape error's message without serde_json's " at line L column C" (the field is named
/// already, and a tree-based parse, which this replaced, gave none).
fn without_position(e: serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(message) => message.to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Shape {
        to: String,
        count: Option<u32>,
    }

    fn fails(body: &str) -> (u16, String) {
        use axum::response::IntoResponse;
        let e = parse::<Shape>(body.as_bytes()).unwrap_err();
        let debug = format!("{e:?}");
        (e.into_response().status().as_u16(), debug)
    }

    #[test]
    fn syntax_errors_come_before_shape_errors_and_shape_errors_name_the_field_without_a_position() {
        // A wrong type early and broken syntax later: still the syntax error.
        assert_eq!(fails(r#"{"to": 5, "count": }"#).0, 400);
        assert_eq!(fails("[1, 2]").0, 400);
        assert_eq!(fails(" 5 ").0, 400);
        // Invalid UTF-8 in a field nobody reads.
        let e = parse::<Shape>(b"{\"to\": \"a\", \"name\": \"\xff\xfe\"}").unwrap_err();
        assert!(matches!(e, ApiError::InvalidJson(_)), "{e:?}");
        let (status, debug) = fails(r#"{"to": 5}"#);
        assert_eq!(status, 422);
        assert!(debug.contains("\"to\"") && debug.contains("invalid type: integer `5`"), "{debug}");
        assert!(!debug.contains("line 1"), "{debug}");
        let (status, debug) = fails(r#"{"count": 1}"#);
        assert_eq!(status, 422);
        assert!(debug.contains("missing field `to`") && debug.contains("\"body\""), "{debug}");
        assert!(parse::<Shape>(br#" {"to": "a@b.example", "count": 3} "#).is_ok());
    }
}
