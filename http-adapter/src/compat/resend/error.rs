//! The one place where errors become Resend's error body, `{"statusCode","name","message"}`
//! with Resend's names and statuses (the `RESEND_ERROR_CODE_KEY` names of resend-node), so
//! that an SDK returns or raises the error its user already handles. A 5xx is opaque to the
//! client and logged once with its cause, as on `/v1`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tidings_core::Error;

use crate::ApiError;
use crate::error::BUSY_RETRY_AFTER_SECS;

/// Everything a `/resend` request can fail with: what the shared extractors and the use
/// cases answer, and this surface's own 404 and 405.
#[derive(Debug)]
pub(crate) enum ResendError {
    /// What `/v1` would have answered, translated by [`parts`].
    Api(ApiError),
    /// 404 `not_found`: no route under `/resend` has this path.
    UnknownRoute,
    /// 405 `method_not_allowed`.
    MethodNotAllowed,
    /// 500 `internal_server_error`: a handler panicked (logged where it was caught).
    Panicked,
}

crate::compat::wraps_api_error!(ResendError);

/// Status, Resend's error name and the message.
fn parts(e: &ResendError) -> (StatusCode, &'static str, String) {
    use StatusCode as S;
    let api = match e {
        ResendError::UnknownRoute => return (S::NOT_FOUND, "not_found", "Route not found".into()),
        ResendError::MethodNotAllowed => {
            return (S::METHOD_NOT_ALLOWED, "method_not_allowed", "Method not allowed on this path".into());
        }
        ResendError::Panicked => {
            return (S::INTERNAL_SERVER_ERROR, "internal_server_error", "An unexpected error occurred".into());
        }
        ResendError::Api(api) => api,
    };
    let core = match api {
        ApiError::Core(core) => core,
        ApiError::InvalidJson(why) => return (S::BAD_REQUEST, "validation_error", why.clone()),
        ApiError::MissingApiKey => {
            return (S::UNAUTHORIZED, "missing_api_key", "Missing API key in the authorization header".into());
        }
        ApiError::UnknownRoute => return (S::NOT_FOUND, "not_found", "Route not found".into()),
        ApiError::MethodNotAllowed => {
            return (S::METHOD_NOT_ALLOWED, "method_not_allowed", "Method not allowed on this path".into());
        }
        ApiError::PayloadTooLarge => {
            return (S::PAYLOAD_TOO_LARGE, "validation_error", "The request body is too large".into());
        }
        ApiError::RateLimited { retry_after, .. } => {
            let message =
                format!("Too many requests: this API key's send rate is exceeded; retry in {} s", retry_after.seconds);
            return (S::TOO_MANY_REQUESTS, "rate_limit_exceeded", message);
        }
        ApiError::TooManyAuthFailures(retry_after) => {
            let message =
                format!("Too many failed authentications from this address; retry in {} s", retry_after.seconds);
            return (S::TOO_MANY_REQUESTS, "rate_limit_exceeded", message);
        }
        // Resend has no 503 name; `application_error` is what its SDKs treat as "try later".
        ApiError::Busy | ApiError::TooSlow => {
            let message = format!("The server is busy; retry in {BUSY_RETRY_AFTER_SECS} s");
            return (S::SERVICE_UNAVAILABLE, "application_error", message);
        }
        ApiError::UriTooLong => return (S::URI_TOO_LONG, "validation_error", "The request URI is too long".into()),
        ApiError::HeadersTooLarge => {
            return (
                S::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "validation_error",
                "The request headers are too large".into(),
            );
        }
        ApiError::MetricsTokenRequired | ApiError::OperatorTokenRequired => {
            return (S::UNAUTHORIZED, "missing_api_key", "Missing API key in the authorization header".into());
        }
    };
    match core {
        Error::Validation { fields } => {
            let required =
                fields.iter().all(|f| f.message.starts_with("is required") || f.message.starts_with("missing field"));
            let name = if required { "missing_required_field" } else { "validation_error" };
            let text =
                fields.iter().map(|f| format!("`{}`: {}", resend_field(&f.field), f.message)).collect::<Vec<_>>();
            (S::UNPROCESSABLE_ENTITY, name, text.join("; "))
        }
        Error::InvalidIdempotencyKey(why) => (S::BAD_REQUEST, "invalid_idempotency_key", why.clone()),
        Error::InvalidApiKey => (S::FORBIDDEN, "invalid_api_key", "API key is invalid".into()),
        Error::InsufficientScope => {
            (S::UNAUTHORIZED, "restricted_api_key", "This API key is restricted to only send emails".into())
        }
        // Resend answers an unverified or disallowed sending domain with 403 `validation_error`.
        Error::DomainNotAllowed { .. } | Error::DomainNotVerified(_) => {
            (S::FORBIDDEN, "validation_error", core.to_string())
        }
        // Resend has no pause of its own; a refusal of the sender is its 403 `validation_error`.
        Error::SendingPaused(_) => (S::FORBIDDEN, "validation_error", core.to_string()),
        Error::NotFound(what) => (S::NOT_FOUND, "not_found", format!("{} not found", resend_resource(what))),
        Error::IdempotencyKeyReused(_) => (S::CONFLICT, "invalid_idempotent_request", core.to_string()),
        // A message no longer reschedulable or cancelable: Resend has no `conflict` name.
        Error::Conflict(why) => (S::CONFLICT, "validation_error", why.clone()),
        Error::RecipientSuppressed(_) | Error::AllRecipientsSuppressed { .. } => {
            let fields = match core {
                Error::AllRecipientsSuppressed { fields } => {
                    fields.iter().map(|f| format!(" {}", f.message)).collect::<String>()
                }
                _ => String::new(),
            };
            (S::UNPROCESSABLE_ENTITY, "validation_error", format!("{core}{fields}"))
        }
        Error::TemplateRender(_) | Error::TemplateSyntax(_) => {
            (S::UNPROCESSABLE_ENTITY, "validation_error", core.to_string())
        }
        Error::Unavailable(_) => {
            (S::SERVICE_UNAVAILABLE, "application_error", "The service is temporarily unavailable; retry later".into())
        }
        Error::Internal(_) => {
            (S::INTERNAL_SERVER_ERROR, "internal_server_error", "An unexpected error occurred".into())
        }
    }
}

/// A field path as core names it (`/v1`'s camelCase: `replyTo`, `attachments[0].contentType`,
/// `templateId`) in the words of the Resend request (`reply_to`, `content_type`, `template.id`).
fn resend_field(field: &str) -> String {
    match field {
        "templateId" => return "template.id".into(),
        "variables" => return "template.variables".into(),
        _ => {}
    }
    let mut out = String::with_capacity(field.len() + 4);
    for c in field.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `e` with core's field `from` named `to`, where a Resend request names a field otherwise
/// than `/v1` does (`domain` is Resend's `name`).
pub(super) fn renamed(e: Error, from: &str, to: &str) -> Error {
    match e {
        Error::Validation { fields } => Error::Validation {
            fields: fields
                .into_iter()
                .map(|mut f| {
                    if f.field == from {
                        f.field = to.to_owned();
                    }
                    f
                })
                .collect(),
        },
        other => other,
    }
}

/// Core's resource names in Resend's words.
fn resend_resource(what: &str) -> String {
    match what {
        "message" => "Email".into(),
        other => {
            let mut chars = other.chars();
            chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
        }
    }
}

impl IntoResponse for ResendError {
    fn into_response(self) -> Response {
        if let Self::Api(ApiError::Core(e @ (Error::Internal(_) | Error::Unavailable(_)))) = &self {
            tracing::error!(error = %e, "request failed");
        }
        let (status, name, message) = parts(&self);
        let body = json!({ "statusCode": status.as_u16(), "name": name, "message": message });
        let mut response = (status, axum::Json(body)).into_response();
        if let Self::Api(api) = &self {
            api.insert_retry_headers(response.headers_mut());
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(e: impl Into<ResendError>) -> (u16, &'static str, String) {
        let (status, name, message) = parts(&e.into());
        (status.as_u16(), name, message)
    }

    #[test]
    fn core_errors_take_resends_names_and_statuses() {
        assert_eq!(answer(Error::InvalidApiKey).0, 403);
        assert_eq!(answer(Error::InvalidApiKey).1, "invalid_api_key");
        assert_eq!(answer(ApiError::MissingApiKey).1, "missing_api_key");
        assert_eq!(answer(Error::InsufficientScope).1, "restricted_api_key");
        assert_eq!(answer(Error::NotFound("message")), (404, "not_found", "Email not found".into()));
        assert_eq!(answer(Error::InvalidIdempotencyKey("too long".into())).1, "invalid_idempotency_key");
        let (status, name, message) = answer(Error::field("replyTo", "is not an address"));
        assert_eq!((status, name), (422, "validation_error"));
        assert_eq!(message, "`reply_to`: is not an address");
        assert_eq!(answer(Error::field("to", "is required")).1, "missing_required_field");
        assert_eq!(answer(Error::field("attachments[0].contentType", "bad")).2, "`attachments[0].content_type`: bad");
        assert_eq!(answer(ResendError::UnknownRoute).1, "not_found");
        assert_eq!(answer(ResendError::MethodNotAllowed).0, 405);
        let internal = answer(Error::Internal(tidings_core::error::Cause::new(std::io::Error::other("disk on fire"))));
        assert_eq!((internal.0, internal.1), (500, "internal_server_error"));
        assert!(!internal.2.contains("disk"), "a 5xx says nothing of its cause");
    }
}
