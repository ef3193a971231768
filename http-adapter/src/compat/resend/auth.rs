//! Who the caller is, for `/resend`: the same `Authorization: Bearer <a Tidings key>` and the
//! same failed-auth throttle as `/v1` (the shared `Authed` extractor), and every extractor's
//! refusal in Resend's error body instead of the envelope.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;

use super::ResendError;
use crate::ApiState;
use crate::auth::Authed;

/// An extractor of `/v1` (`Authed`, `ApiJson`, `IdPath`, …) whose refusal answers in Resend's
/// shape.
pub(super) struct Resend<T>(pub T);

impl<T> FromRequestParts<ApiState> for Resend<T>
where
    T: FromRequestParts<ApiState, Rejection = crate::ApiError>,
{
    type Rejection = ResendError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Self::Rejection> {
        T::from_request_parts(parts, state).await.map(Self).map_err(ResendError::from)
    }
}

/// The body extractors; a body extractor runs last, so this does not clash with the parts
/// impl above (axum picks by the `M` marker).
pub(super) struct ResendBody<T>(pub T);

impl<T> FromRequest<ApiState> for ResendBody<T>
where
    T: FromRequest<ApiState, Rejection = crate::ApiError>,
{
    type Rejection = ResendError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        T::from_request(req, state).await.map(Self).map_err(ResendError::from)
    }
}

/// The authenticated caller.
pub(super) type Caller = Resend<Authed>;
