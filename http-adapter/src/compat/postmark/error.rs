//! The one place where errors become Postmark's error body, `{"ErrorCode","Message"}`, with
//! Postmark's HTTP statuses (401 for the token, 422 for what is wrong with the request, 429,
//! 503) and its documented `ErrorCode`s (10 bad or missing token, 300 invalid email request,
//! 400 sender not found, 402 invalid JSON, 406 inactive recipient, 409 JSON required, 410 too
//! many batch messages, 1101 template not found), so that postmark.js raises the error its
//! user already handles (`InvalidAPIKeyError`, `InvalidEmailRequestError`,
//! `InactiveRecipientsError` with the addresses, `RateLimitExceededError`, …). A batch item's
//! refusal is the same `Fault` inside the 200 answer. A 5xx is opaque and logged once.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tidings_core::Error;
use tidings_core::model::StoredError;

use crate::ApiError;

/// Postmark's `ErrorCode`s used here (its API reference, "Error codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// A success (a batch's sent item), or an answer Postmark documents no code for (an
    /// unknown path, a wrong method, a fault of the server).
    Zero = 0,
    BadToken = 10,
    /// Postmark's "Maintenance": the API cannot serve the request now; retry.
    Unavailable = 100,
    InvalidRequest = 300,
    SenderNotFound = 400,
    InvalidJson = 402,
    /// Postmark's "Not allowed to send": the account may not send now.
    NotAllowedToSend = 405,
    InactiveRecipient = 406,
    JsonRequired = 409,
    TooManyBatchMessages = 410,
    RateLimited = 429,
    TemplateNotFound = 1101,
}

/// `ErrorCode` and `Message`: a refusal of the whole request, or of one item of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    pub code: Code,
    pub message: String,
}

impl Fault {
    pub(super) fn new(code: Code, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// 300, naming a field in Postmark's words.
    pub(super) fn field(field: &str, message: impl std::fmt::Display) -> Self {
        Self::new(Code::InvalidRequest, format!("Invalid email request: `{field}` {message}"))
    }

    /// `{"ErrorCode","Message"}`.
    pub(super) fn body(&self) -> serde_json::Value {
        json!({ "ErrorCode": self.code as u16, "Message": self.message })
    }
}

/// Everything a `/postmark` request can fail with.
#[derive(Debug)]
pub(crate) enum PostmarkError {
    /// What `/v1` would have answered, translated by [`answer`].
    Api(ApiError),
    /// A refusal of this surface's own (a Postmark field Tidings does not serve, a template
    /// alias that names nothing): 422 with its code.
    Refused(Fault),
    /// 404: no route under `/postmark` has this path.
    UnknownRoute,
    /// 405.
    MethodNotAllowed,
    /// 422 `ErrorCode` 409: the body is not said to be JSON.
    JsonRequired,
}

crate::compat::wraps_api_error!(PostmarkError);

impl From<Fault> for PostmarkError {
    fn from(f: Fault) -> Self {
        Self::Refused(f)
    }
}

/// The status and the fault of a refused request.
fn answer(e: &PostmarkError) -> (StatusCode, Fault) {
    use StatusCode as S;
    let unprocessable = |code, message: &str| (S::UNPROCESSABLE_ENTITY, Fault::new(code, message));
    let api = match e {
        PostmarkError::Refused(fault) => return (S::UNPROCESSABLE_ENTITY, fault.clone()),
        PostmarkError::UnknownRoute => return not_served(),
        PostmarkError::MethodNotAllowed => {
            return (S::METHOD_NOT_ALLOWED, Fault::new(Code::Zero, "Method not allowed"));
        }
        PostmarkError::JsonRequired => {
            return unprocessable(
                Code::JsonRequired,
                "JSON required: send the body with `Content-Type: application/json`",
            );
        }
        PostmarkError::Api(api) => api,
    };
    let bad_token = |message: &str| (S::UNAUTHORIZED, Fault::new(Code::BadToken, message));
    let too_large =
        |status, what: &str| (status, Fault::new(Code::InvalidRequest, format!("The request {what} too large")));
    let core = match api {
        ApiError::Core(core) => core,
        ApiError::InvalidJson(why) => return unprocessable(Code::InvalidJson, &format!("Invalid JSON: {why}")),
        ApiError::MissingApiKey | ApiError::MetricsTokenRequired | ApiError::OperatorTokenRequired => {
            return bad_token(
                "Request does not contain a valid Server token: put a Tidings API key in `X-Postmark-Server-Token`",
            );
        }
        ApiError::UnknownRoute => return not_served(),
        ApiError::MethodNotAllowed => return (S::METHOD_NOT_ALLOWED, Fault::new(Code::Zero, "Method not allowed")),
        ApiError::PayloadTooLarge => return too_large(S::PAYLOAD_TOO_LARGE, "body is"),
        ApiError::UriTooLong => return too_large(S::URI_TOO_LONG, "URI is"),
        ApiError::HeadersTooLarge => return too_large(S::REQUEST_HEADER_FIELDS_TOO_LARGE, "headers are"),
        ApiError::RateLimited { retry_after, .. } => {
            let message =
                format!("Rate limit exceeded: this API key's send rate is used up; retry in {} s", retry_after.seconds);
            return (S::TOO_MANY_REQUESTS, Fault::new(Code::RateLimited, message));
        }
        ApiError::TooManyAuthFailures(retry_after) => {
            let message =
                format!("Too many failed authentications from this address; retry in {} s", retry_after.seconds);
            return (S::TOO_MANY_REQUESTS, Fault::new(Code::RateLimited, message));
        }
        ApiError::Busy | ApiError::TooSlow => {
            let message = format!("The server is busy; retry in {} s", crate::error::BUSY_RETRY_AFTER_SECS);
            return (S::SERVICE_UNAVAILABLE, Fault::new(Code::Unavailable, message));
        }
    };
    match core {
        Error::InvalidApiKey => {
            bad_token("The Server Token in `X-Postmark-Server-Token` is not a valid Tidings API key")
        }
        Error::InsufficientScope => bad_token("This API key's scope does not allow this operation"),
        Error::Unavailable(_) => (
            S::SERVICE_UNAVAILABLE,
            Fault::new(Code::Unavailable, "The service is temporarily unavailable; retry later"),
        ),
        Error::Internal(_) => (S::INTERNAL_SERVER_ERROR, Fault::new(Code::Zero, "An unexpected error occurred")),
        other => (S::UNPROCESSABLE_ENTITY, core_fault(other)),
    }
}

/// 404 for a path under `/postmark` that Tidings does not serve (Postmark's other APIs).
fn not_served() -> (StatusCode, Fault) {
    let message = "This endpoint is not served by Tidings' Postmark API: it serves /email, /email/batch, \
                   /email/withTemplate and /email/batchWithTemplates";
    (StatusCode::NOT_FOUND, Fault::new(Code::Zero, message))
}

/// A use case's refusal of one message as Postmark words it.
fn core_fault(e: &Error) -> Fault {
    let fields: Vec<(String, String)> = match e {
        Error::Validation { fields } | Error::AllRecipientsSuppressed { fields } => {
            fields.iter().map(|f| (f.field.clone(), f.message.clone())).collect()
        }
        _ => Vec::new(),
    };
    fault(e.code(), &e.to_string(), &fields)
}

/// A batch item's refusal (kept by core as the envelope showed it) as Postmark words it.
pub(super) fn stored_fault(e: &StoredError) -> Fault {
    fault(&e.code, &e.message, &e.fields)
}

/// The fault for core's error `code` with its message and fields.
fn fault(code_name: &str, message: &str, fields: &[(String, String)]) -> Fault {
    match code_name {
        "recipient_suppressed" => {
            let texts = std::iter::once(message).chain(fields.iter().map(|(_, m)| m.as_str()));
            inactive(texts.filter_map(tidings_core::error::suppressed_address))
        }
        "sending_paused" => Fault::new(Code::NotAllowedToSend, format!("Not allowed to send: {message}")),
        "domain_not_verified" | "domain_not_allowed" => {
            Fault::new(Code::SenderNotFound, format!("The 'From' address cannot be used: {message}"))
        }
        // Over 500, or more than the key's rate limit could ever grant at once.
        "validation_error" if fields.iter().any(|(f, m)| f == "batch" && m.contains("at most")) => {
            Fault::new(Code::TooManyBatchMessages, format!("Too many batch messages: {}", described(fields)))
        }
        "validation_error" if fields.iter().any(|(f, _)| f == "templateId" || f == "templateVersionId") => {
            Fault::new(Code::TemplateNotFound, format!("Template not found: {}", described(fields)))
        }
        "validation_error" if !fields.is_empty() => {
            Fault::new(Code::InvalidRequest, format!("Invalid email request: {}", described(fields)))
        }
        _ => Fault::new(Code::InvalidRequest, format!("Invalid email request: {message}")),
    }
}

/// Postmark's 406 text, which postmark.js reads the addresses back from
/// (`InactiveRecipientsError.parseInactiveRecipients`: "Found inactive addresses: (.+?)\.?
/// Inactive", split on commas).
fn inactive<'a>(addresses: impl Iterator<Item = &'a str>) -> Fault {
    let list = addresses.collect::<Vec<_>>().join(", ");
    Fault::new(
        Code::InactiveRecipient,
        format!(
            "You tried to send to recipient(s) that have been marked as inactive. Found inactive addresses: {list}. \
             Inactive recipients are ones that have generated a hard bounce, a spam complaint, or a manual suppression."
        ),
    )
}

/// `` `Field`: message; … `` with each field in Postmark's words.
fn described(fields: &[(String, String)]) -> String {
    fields.iter().map(|(f, m)| format!("`{}` {m}", postmark_field(f))).collect::<Vec<_>>().join("; ")
}

/// A field path as core names it (`to[1]`, `replyTo`, `attachments[0].contentType`,
/// `tags[0].value`) in the words of the Postmark request (`To[1]`, `ReplyTo`,
/// `Attachments[0].ContentType`, `Tag`).
fn postmark_field(field: &str) -> String {
    let split = field.find(['[', '.']).unwrap_or(field.len());
    let (head, rest) = field.split_at(split);
    let head = match head {
        "to" => "To",
        "cc" => "Cc",
        "bcc" => "Bcc",
        "from" => "From",
        "subject" => "Subject",
        "html" => "HtmlBody",
        "text" => "TextBody",
        "replyTo" => "ReplyTo",
        "headers" => "Headers",
        // A Postmark `Tag` is the one tag `tag`.
        "tags" => return "Tag".into(),
        "metadata" => "Metadata",
        "attachments" => "Attachments",
        "templateId" | "templateVersionId" => "TemplateId",
        "variables" => "TemplateModel",
        "tracking" => "TrackOpens/TrackLinks",
        other => other,
    };
    let rest = match rest.rsplit_once('.') {
        Some((index, "filename")) => format!("{index}.Name"),
        Some((index, "contentType")) => format!("{index}.ContentType"),
        Some((index, "content")) => format!("{index}.Content"),
        Some((index, "contentId")) => format!("{index}.ContentID"),
        _ => rest.to_owned(),
    };
    format!("{head}{rest}")
}

impl IntoResponse for PostmarkError {
    fn into_response(self) -> Response {
        if let Self::Api(ApiError::Core(e @ (Error::Internal(_) | Error::Unavailable(_)))) = &self {
            tracing::error!(error = %e, "request failed");
        }
        let (status, fault) = answer(&self);
        let mut response = (status, axum::Json(fault.body())).into_response();
        if let Self::Api(api) = &self {
            api.insert_retry_headers(response.headers_mut());
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(e: impl Into<PostmarkError>) -> (u16, u16, String) {
        let (status, fault) = answer(&e.into());
        (status.as_u16(), fault.code as u16, fault.message)
    }

    #[test]
    fn errors_take_postmarks_statuses_and_codes() {
        assert_eq!(answered(Error::InvalidApiKey).0, 401);
        assert_eq!(answered(Error::InvalidApiKey).1, 10);
        assert_eq!(answered(ApiError::MissingApiKey).1, 10);
        assert_eq!(answered(ApiError::InvalidJson("x".into())).1, 402);
        assert_eq!(answered(PostmarkError::JsonRequired).1, 409);
        let (status, code, message) = answered(Error::field("replyTo", "is not an address"));
        assert_eq!((status, code), (422, 300));
        assert_eq!(message, "Invalid email request: `ReplyTo` is not an address");
        let attachment = answered(Error::field("attachments[0].contentType", "bad")).2;
        assert!(attachment.ends_with("`Attachments[0].ContentType` bad"), "{attachment}");
        assert_eq!(answered(Error::field("templateId", "is not a template of this workspace")).1, 1101);
        assert_eq!(answered(Error::DomainNotVerified("no".into())).1, 400);
        assert_eq!(answered(PostmarkError::UnknownRoute).0, 404);
        assert_eq!(answered(PostmarkError::MethodNotAllowed).0, 405);
        let internal =
            answered(Error::Internal(tidings_core::error::Cause::new(std::io::Error::other("disk on fire"))));
        assert_eq!(internal.0, 500);
        assert!(!internal.2.contains("disk"), "a 5xx says nothing of its cause");
    }

    /// The 406 text must name the addresses the way postmark.js's pattern reads them.
    #[test]
    fn inactive_recipients_are_named_as_postmark_js_parses_them() {
        let one = answered(Error::RecipientSuppressed("gone@x.example".into()));
        assert_eq!((one.0, one.1), (422, 406));
        assert!(one.2.contains("Found inactive addresses: gone@x.example. Inactive"), "{}", one.2);
        let all = Error::AllRecipientsSuppressed {
            fields: vec![
                tidings_core::FieldError::new("to", tidings_core::error::suppressed_message("a@x.example")),
                tidings_core::FieldError::new("cc", tidings_core::error::suppressed_message("b@y.example")),
            ],
        };
        let (_, code, message) = answered(all);
        assert_eq!(code, 406);
        assert!(message.contains("Found inactive addresses: a@x.example, b@y.example. Inactive"), "{message}");
    }
}
