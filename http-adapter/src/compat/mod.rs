//! Other providers' APIs served beside Tidings' own, so that an application written for them
//! switches by changing a base URL and a key (contract §11). Each is a translation over the
//! same use cases as `/v1`: its request shapes into core's requests, core's answers and
//! errors into its response shapes. No rule lives here.

pub(crate) mod postmark;
pub(crate) mod resend;

use axum::response::{IntoResponse, Response};

/// The answer to a request that took too long, in the error body of the surface its path is
/// under (an SDK reads only its provider's body), or `None` for a path of `/v1`.
pub(crate) fn timed_out(path: &str) -> Option<Response> {
    let e = || tidings_core::Error::Unavailable("request timed out".into());
    if resend::owns(path) {
        Some(resend::ResendError::from(e()).into_response())
    } else if postmark::owns(path) {
        Some(postmark::PostmarkError::from(e()).into_response())
    } else {
        None
    }
}

/// Whether `path` is under one of the surfaces (`/resend`, `/postmark`), whose clients read
/// only their provider's error body.
pub(crate) fn owns(path: &str) -> bool {
    resend::owns(path) || postmark::owns(path)
}

/// An answer made outside a surface's router (the head's limits, a caught panic, the API
/// router's own fallback) in the error body of the surface `path` is under, so that its SDK
/// raises its own error type; the envelope for a path of `/v1`.
pub(crate) fn outer_answer(path: &str, e: crate::ApiError) -> Response {
    if resend::owns(path) {
        resend::outer_answer(e)
    } else if postmark::owns(path) {
        postmark::PostmarkError::from(e).into_response()
    } else {
        e.into_response()
    }
}

/// Defines a surface's two extractor wrappers around `/v1`'s extractors: `$parts<T>` for one
/// that reads the request's head (`Authed`, `IdPath`, …) and `$body<T>` for a body extractor
/// (`ApiJson`, `ApiJsonArray`), each answering its refusal as `$error` (built from the
/// `ApiError` `/v1` would have answered) instead of the envelope. A body extractor runs
/// last, so the two impls do not clash (axum picks by the `M` marker).
macro_rules! refusals_as {
    ($(#[$parts_doc:meta])* $parts:ident, $(#[$body_doc:meta])* $body:ident, $error:ty) => {
        $(#[$parts_doc])*
        pub(super) struct $parts<T>(pub T);
        $(#[$body_doc])*
        pub(super) struct $body<T>(pub T);

        impl<T: axum::extract::FromRequestParts<$crate::ApiState, Rejection = $crate::ApiError>>
            axum::extract::FromRequestParts<$crate::ApiState> for $parts<T>
        {
            type Rejection = $error;
            async fn from_request_parts(p: &mut axum::http::request::Parts, s: &$crate::ApiState) -> Result<Self, $error> {
                T::from_request_parts(p, s).await.map(Self).map_err(<$error>::from)
            }
        }
        impl<T: axum::extract::FromRequest<$crate::ApiState, Rejection = $crate::ApiError>>
            axum::extract::FromRequest<$crate::ApiState> for $body<T>
        {
            type Rejection = $error;
            async fn from_request(req: axum::extract::Request, s: &$crate::ApiState) -> Result<Self, $error> {
                T::from_request(req, s).await.map(Self).map_err(<$error>::from)
            }
        }
    };
}
pub(crate) use refusals_as;

/// `From<ApiError>` and `From<core::Error>` for a surface's error enum, whose variant `Api`
/// holds what `/v1` would have answered.
macro_rules! wraps_api_error {
    ($error:ident) => {
        impl From<$crate::ApiError> for $error {
            fn from(e: $crate::ApiError) -> Self {
                Self::Api(e)
            }
        }
        impl From<tidings_core::Error> for $error {
            fn from(e: tidings_core::Error) -> Self {
                Self::Api($crate::ApiError::Core(e))
            }
        }
    };
}
pub(crate) use wraps_api_error;
