//! The failure responses operations share, in `components.responses`: each the error
//! envelope (the derived `ErrorEnvelope` schema) narrowed to its status and to the
//! `error.code`s it can carry, with its headers. An operation names one in its
//! `#[utoipa::path]` as `(status = 403, response = InsufficientScope)`; the ones every
//! operation of a kind shares are added by [`super::complete`].
//!
//! Which codes a status carries is written here by hand: `error.rs` maps errors to statuses
//! and codes at run time, and no type holds the subset an operation can meet.

use utoipa::openapi::header::Header;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr};
use utoipa::{ToResponse, ToSchema};

use super::headers;
use crate::envelope::{Failure, constant};

/// The failure `status` whose `error.code` is one of `codes`.
fn failure(status: u16, description: &str, codes: &[&str]) -> ResponseBuilder {
    let narrowed = ObjectBuilder::new().property("statusCode", constant(Type::Integer, status)).property(
        "error",
        ObjectBuilder::new()
            .property("code", ObjectBuilder::new().schema_type(Type::String).enum_values(Some(codes.to_vec()))),
    );
    let schema = AllOfBuilder::new().item(Ref::from_schema_name(Failure::name())).item(narrowed);
    ResponseBuilder::new()
        .description(format!("{description} (`{}`)", codes.join("`, `")))
        .content("application/json", ContentBuilder::new().schema(Some(schema)).build())
        .header_ref("X-Request-Id", headers::request_id())
}

macro_rules! failures {
    ($( $(#[$doc:meta])* $name:ident = $status:literal, $description:expr, [$($code:literal),+] $(, $header:literal: $value:expr)* ; )*) => {
        $(
            $(#[$doc])*
            pub struct $name;

            impl<'r> ToResponse<'r> for $name {
                fn response() -> (&'r str, RefOr<Response>) {
                    let response = failure($status, $description, &[$($code),+]);
                    $( let response = response.header($header, $value); )*
                    (stringify!($name), response.build().into())
                }
            }
        )*

        /// Every failure response, by name, for `components.responses`.
        pub fn all() -> Vec<(&'static str, RefOr<Response>)> {
            vec![$( <$name as ToResponse>::response() ),*]
        }
    };
}

failures! {
    /// `/metrics` with a token configured, and none or another presented.
    MetricsTokenRequired = 401,
        "the server requires a metrics token (`TIDINGS_METRICS_TOKEN`) and the request carried none or another",
        ["invalid_metrics_token"], "WWW-Authenticate": www_authenticate();
    /// A body that is not a JSON object.
    InvalidJson = 400, "the body is not a JSON object, or lacks `Content-Type: application/json`", ["invalid_json"];
    /// A send's body or Idempotency-Key is malformed.
    SendBadRequest = 400,
        "the body is not a JSON object, or the Idempotency-Key header is empty, over 256 characters or not printable",
        ["invalid_json", "invalid_idempotency_key"];
    /// No key, or a bad one.
    Unauthorized = 401, "no API key, or an unknown, malformed or revoked one", ["missing_api_key", "invalid_api_key"];
    /// A `send` key on a management operation.
    InsufficientScope = 403, "a `send` key calling a management operation", ["insufficient_scope"];
    /// A domain-scoped key sending from another domain.
    DomainNotAllowed = 403,
        "a domain-scoped key sending from another domain, or sending from the domain or workspace is paused by the \
         reputation guard (resume with `POST /v1/domains/{id}/resume` or `POST /v1/reputation/resume`)",
        ["domain_not_allowed", "sending_paused"];
    /// No such resource.
    NotFound = 404, "no such resource in this workspace", ["not_found"];
    /// A duplicate, or a state that does not allow the change.
    Conflict = 409, "it already exists", ["conflict"];
    /// A DKIM rotation while one is pending, or racing another.
    RotationConflict = 409,
        "a rotation is already pending (its records must verify first), or another rotation or switch was stored \
         meanwhile",
        ["conflict"];
    /// An Idempotency-Key used for another request.
    IdempotencyKeyReused = 409,
        "the Idempotency-Key was used with a different request: by a `full` key of this workspace, or, for a \
         `send` key, by that key itself (each `send` key's Idempotency-Keys are its own)",
        ["idempotency_key_reused"];
    /// A body over the limit.
    PayloadTooLarge = 413, "the body is over the configured limit (default 10 MiB)", ["payload_too_large"];
    /// A field at fault.
    ValidationError = 422,
        "a field or query parameter is missing, malformed or out of range; `details` names it",
        ["validation_error"];
    /// A send that cannot be queued.
    SendUnprocessable = 422,
        "invalid fields, an unverified sending domain, a suppressed recipient, or a template that does not render",
        ["validation_error", "domain_not_verified", "recipient_suppressed", "template_render_error", "template_syntax_error"];
    /// A sender on a domain that is not Verified.
    SenderUnprocessable = 422,
        "invalid fields, or the domain is not Verified",
        ["validation_error", "domain_not_verified"];
    /// A template that does not compile.
    TemplateUnprocessable = 422,
        "invalid fields, or a template body that does not compile (the message names line and column)",
        ["validation_error", "template_syntax_error"];
    /// A render that fails.
    RenderUnprocessable = 422,
        "invalid fields, or the template does not render (e.g. a variable was not supplied)",
        ["validation_error", "template_render_error", "template_syntax_error"];
    /// The failed-auth throttle.
    TooManyAuthFailures = 429,
        "this client address failed authentication too often",
        ["too_many_auth_failures"], "Retry-After": headers::retry_after(true);
    /// The key's send rate, or the failed-auth throttle.
    SendTooManyRequests = 429,
        "the key's send rate is exceeded, or this client address failed authentication too often",
        ["rate_limit_exceeded", "too_many_auth_failures"],
        "Retry-After": headers::retry_after(true),
        "RateLimit-Limit": headers::rate_limit_limit(),
        "RateLimit-Remaining": headers::rate_limit_remaining(),
        "RateLimit-Reset": headers::rate_limit_reset();
    /// A bug.
    InternalError = 500, "a bug; the cause is logged, never returned", ["internal_error"];
    /// The store, a shutdown, a timeout or the body budget.
    Unavailable = 503,
        "storage unreachable, shutting down, the request timed out, or the server's budget of request-body bytes \
         in flight cannot hold this body now (then with `Retry-After`)",
        ["unavailable"], "Retry-After": headers::retry_after(false);
}

fn www_authenticate() -> Header {
    headers::header(ObjectBuilder::new().schema_type(Type::String), "`Bearer realm=\"metrics\"`", false)
}
