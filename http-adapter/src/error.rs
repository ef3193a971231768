//! The one place where errors become HTTP responses in the envelope (docs/api.md#errors). A
//! 4xx carries a client-safe message; a 5xx is opaque to the client and logged once with its
//! cause.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tidings_core::Error;
use tidings_core::usecases::{RateLimitState, RetryAfter};

use crate::envelope::{self, ErrorObject};

/// Everything a request can fail with.
#[derive(Debug)]
pub enum ApiError {
    /// A use case refused or failed.
    Core(Error),
    /// 400 `invalid_json`.
    InvalidJson(String),
    /// 401 `missing_api_key`.
    MissingApiKey,
    /// 404 `not_found` for a path that matches no route.
    UnknownRoute,
    /// 405 `method_not_allowed`.
    MethodNotAllowed,
    /// 413 `payload_too_large`.
    PayloadTooLarge,
    /// 429 `rate_limit_exceeded`, with the limiter's state for the headers.
    RateLimited {
        /// When to retry.
        retry_after: RetryAfter,
        /// The key's limit.
        limit: u32,
    },
    /// 429 `too_many_auth_failures`.
    TooManyAuthFailures(RetryAfter),
    /// 503 `unavailable` with `Retry-After`: the server's memory budget (or the caller's
    /// share of it) cannot hold this body now.
    Busy,
    /// 503 `unavailable` with `Retry-After`: the body arrived too slowly and its place in the
    /// memory budget went to another request.
    TooSlow,
    /// 414 `uri_too_long`: the request target is over [`crate::MAX_URI_BYTES`].
    UriTooLong,
    /// 431 `headers_too_large`: the header section is over [`crate::MAX_HEADER_LIST_BYTES`].
    HeadersTooLarge,
    /// 401 `invalid_metrics_token`: `/metrics` needs the operator's token, which was missing
    /// or wrong. Not an API code: `/metrics` is outside the API (`/v1`).
    MetricsTokenRequired,
    /// 401 `invalid_operator_token`: the operator's API needs the operator's token, which was
    /// missing or wrong.
    OperatorTokenRequired,
}

/// `Retry-After` of a [`ApiError::Busy`] answer, in seconds: large bodies in flight are
/// usually done within one.
pub(crate) const BUSY_RETRY_AFTER_SECS: u32 = 1;

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        Self::Core(e)
    }
}

fn core_status(e: &Error) -> StatusCode {
    match e {
        Error::Validation { .. }
        | Error::DomainNotVerified(_)
        | Error::RecipientSuppressed(_)
        | Error::AllRecipientsSuppressed { .. }
        | Error::TemplateRender(_)
        | Error::TemplateSyntax(_) => StatusCode::UNPROCESSABLE_ENTITY,
        Error::InvalidIdempotencyKey(_) => StatusCode::BAD_REQUEST,
        Error::InvalidApiKey => StatusCode::UNAUTHORIZED,
        Error::InsufficientScope | Error::DomainNotAllowed { .. } | Error::SendingPaused(_) => StatusCode::FORBIDDEN,
        Error::NotFound(_) => StatusCode::NOT_FOUND,
        Error::Conflict(_) | Error::IdempotencyKeyReused(_) => StatusCode::CONFLICT,
        Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl ApiError {
    /// Status, code, message and the fields at fault.
    fn parts(&self) -> (StatusCode, &'static str, String, Vec<(String, String)>) {
        match self {
            Self::Core(e) => {
                let status = core_status(e);
                let message = match e {
                    Error::Internal(_) => "internal error".to_owned(),
                    Error::Unavailable(_) => "the service is temporarily unavailable; retry later".to_owned(),
                    Error::Validation { .. } => "validation failed".to_owned(),
                    other => other.to_string(),
                };
                let details = match e {
                    Error::Validation { fields } | Error::AllRecipientsSuppressed { fields } => {
                        fields.iter().map(|f| (f.field.clone(), f.message.clone())).collect()
                    }
                    _ => Vec::new(),
                };
                (status, e.code(), message, details)
            }
            Self::InvalidJson(why) => (StatusCode::BAD_REQUEST, "invalid_json", why.clone(), Vec::new()),
            Self::MissingApiKey => (
                StatusCode::UNAUTHORIZED,
                "missing_api_key",
                "send an API key as `Authorization: Bearer <key>` or `X-Api-Key: <key>`".to_owned(),
                Vec::new(),
            ),
            Self::UnknownRoute => (StatusCode::NOT_FOUND, "not_found", "no such endpoint".to_owned(), Vec::new()),
            Self::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this path".to_owned(),
                Vec::new(),
            ),
            Self::PayloadTooLarge => {
                (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", "request body is too large".to_owned(), Vec::new())
            }
            Self::RateLimited { retry_after, .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_exceeded",
                format!("this API key's send rate is exceeded; retry in {} s", retry_after.seconds),
                Vec::new(),
            ),
            Self::TooManyAuthFailures(retry_after) => (
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_auth_failures",
                format!("too many failed authentications from this address; retry in {} s", retry_after.seconds),
                Vec::new(),
            ),
            Self::Busy => (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("the server is busy receiving other large requests; retry in {BUSY_RETRY_AFTER_SECS} s"),
                Vec::new(),
            ),
            Self::TooSlow => (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!(
                    "the request body arrived too slowly while the server needed the room; retry in {BUSY_RETRY_AFTER_SECS} s"
                ),
                Vec::new(),
            ),
            Self::UriTooLong => (
                StatusCode::URI_TOO_LONG,
                "uri_too_long",
                format!("the request URI is over {} bytes", crate::MAX_URI_BYTES),
                Vec::new(),
            ),
            Self::HeadersTooLarge => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers_too_large",
                format!("the request headers are over {} bytes", crate::MAX_HEADER_LIST_BYTES),
                Vec::new(),
            ),
            Self::MetricsTokenRequired => (
                StatusCode::UNAUTHORIZED,
                "invalid_metrics_token",
                "send the metrics token (TIDINGS_METRICS_TOKEN) as `Authorization: Bearer <token>`".to_owned(),
                Vec::new(),
            ),
            Self::OperatorTokenRequired => (
                StatusCode::UNAUTHORIZED,
                "invalid_operator_token",
                "send the operator token (TIDINGS_OPERATOR_TOKEN) as `Authorization: Bearer <token>`".to_owned(),
                Vec::new(),
            ),
        }
    }
}

impl ApiError {
    /// `Retry-After` (and the rate-limit headers) on a 429, `Retry-After` on a busy 503: the
    /// headers a client of any surface (`/v1`, the drop-in APIs) may wait by.
    pub(crate) fn insert_retry_headers(&self, headers: &mut axum::http::HeaderMap) {
        match self {
            Self::RateLimited { retry_after, limit } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after.seconds));
                let state = RateLimitState { limit: *limit, remaining: 0, reset: retry_after.seconds };
                crate::rate_limit::insert_headers(headers, &state);
            }
            Self::TooManyAuthFailures(retry_after) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after.seconds));
            }
            Self::Busy | Self::TooSlow => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(BUSY_RETRY_AFTER_SECS));
            }
            _ => {}
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Core(e @ (Error::Internal(_) | Error::Unavailable(_))) = &self {
            tracing::error!(error = %e, "request failed");
        }
        let (status, code, message, details) = self.parts();
        let mut response = envelope::failure(status, ErrorObject::new(code, message, &details));
        let headers = response.headers_mut();
        self.insert_retry_headers(headers);
        if let Self::MetricsTokenRequired = self {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"metrics\""));
        }
        if let Self::OperatorTokenRequired = self {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"operator\""));
        }
        response
    }
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;
