//! Who the caller is, for `/postmark`: a Tidings key in `X-Postmark-Server-Token` (where
//! postmark.js puts its server token), under the same failed-auth throttle as `/v1`; and
//! every extractor's refusal in Postmark's error body instead of the envelope.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use tidings_core::usecases::Principal;

use super::PostmarkError;
use crate::ApiState;

/// The header postmark.js sends its server token in (its `X-Postmark-Account-Token`, for
/// account-level endpoints, is not served).
const TOKEN_HEADER: &str = "x-postmark-server-token";

/// The authenticated caller.
pub(super) struct Caller(pub Principal);

impl FromRequestParts<ApiState> for Caller {
    type Rejection = PostmarkError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Self::Rejection> {
        // Present but unreadable or empty counts as a (wrong) key, as on `/v1`.
        let token = parts.headers.get(TOKEN_HEADER).map(|v| v.to_str().unwrap_or("").trim().to_owned());
        Ok(Self(crate::auth::authenticate(parts, state, token.as_deref()).await?))
    }
}

/// A JSON body (`T` is `ApiJson` or `ApiJsonArray`), refused with Postmark's `ErrorCode` 409
/// when the request does not say `Content-Type: application/json`.
pub(super) struct JsonBody<T>(pub T);

impl<T> FromRequest<ApiState> for JsonBody<T>
where
    T: FromRequest<ApiState, Rejection = crate::ApiError>,
{
    type Rejection = PostmarkError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        if !crate::json::is_json(req.headers()) {
            return Err(PostmarkError::JsonRequired);
        }
        T::from_request(req, state).await.map(Self).map_err(PostmarkError::from)
    }
}
