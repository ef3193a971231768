//! `ApiJson<T>`: the request-body extractor that answers in the contract's terms — 400
//! `invalid_json` for a missing content type, bad syntax or a non-object, 413 for a body
//! over the limit, 422 `validation_error` naming the field whose type is wrong.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;
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

/// The body of a JSON request: 400 without the JSON content type, 413 over the limit.
async fn json_bytes(req: Request, state: &ApiState) -> Result<Bytes, ApiError> {
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(ApiError::InvalidJson("send the body as JSON with `Content-Type: application/json`".into()));
    }
    let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge
        } else {
            ApiError::InvalidJson(format!("could not read the request body: {rejection}"))
        }
    })?;
    Ok(bytes)
}

/// Parses a body: syntax first (400), then shape (422 naming the field).
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::InvalidJson(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::InvalidJson("the body must be a JSON object".into()));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let message = e.into_inner().to_string();
        Error::field(if field == "." { "body".to_owned() } else { field }, message).into()
    })
}
