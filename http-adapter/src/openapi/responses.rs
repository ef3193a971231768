//! `components.responses` and `components.parameters`: the failures operations share, each
//! with the `error.code`s it can carry, the 429 headers, and the list and send parameters.

use serde_json::{Map, Value, json};

use super::components::{into_map, schema_ref};

/// A failure response whose `error.code` is one of `codes`.
fn error_response(status: u16, description: &str, codes: &[&str]) -> Value {
    json!({
        "description": format!("{description} (`{}`)", codes.join("`, `")),
        "content": { "application/json": { "schema": {
            "allOf": [schema_ref("ErrorEnvelope")],
            "properties": {
                "statusCode": { "const": status },
                "error": { "properties": { "code": { "enum": codes } } },
            },
        } } },
    })
}

/// `Retry-After`, sent with every 429.
pub fn retry_after_header() -> Value {
    json!({
        "description": "whole seconds to wait before retrying (at least 1)",
        "required": true,
        "schema": { "type": "integer", "minimum": 1 },
    })
}

/// The `RateLimit-*` headers of a send: on a 201 that took a token (not on a replay answered
/// while the bucket is empty), and on a 429 for the key's rate.
pub fn rate_limit_headers(required: bool) -> Map<String, Value> {
    let header = |description: &str| json!({ "description": description, "required": required, "schema": { "type": "integer", "minimum": 0 } });
    let mut headers = Map::new();
    headers.insert("RateLimit-Limit".into(), header("the key's `rateLimitPerSec`: the capacity of its token bucket"));
    headers.insert("RateLimit-Remaining".into(), header("whole sends left in the bucket"));
    headers.insert("RateLimit-Reset".into(), header("seconds until the bucket is full again"));
    headers
}

/// A reference to `components.headers.RequestId`, which every response carries.
pub fn request_id_header() -> Value {
    json!({ "$ref": "#/components/headers/RequestId" })
}

/// `components.headers`.
pub fn headers() -> Value {
    json!({
        "RequestId": {
            "description": "the request's id, as in the server's logs: the `X-Request-Id` the client sent \
                if it was 1–128 printable ASCII characters, else a new ULID",
            "required": true,
            "schema": { "type": "string", "minLength": 1, "maxLength": 128 },
        },
    })
}

/// `components.responses`: the failures, named for what the operations share.
pub fn responses() -> Value {
    let mut unavailable = error_response(
        503,
        "storage unreachable, shutting down, the request timed out, or the server's budget of request-body \
         bytes in flight cannot hold this body now (then with `Retry-After`)",
        &["unavailable"],
    );
    let mut busy_retry_after = retry_after_header();
    busy_retry_after["required"] = json!(false);
    unavailable["headers"] = json!({ "Retry-After": busy_retry_after });
    let mut too_many_auth_failures =
        error_response(429, "this client address failed authentication too often", &["too_many_auth_failures"]);
    too_many_auth_failures["headers"] = json!({ "Retry-After": retry_after_header() });
    let mut send_too_many_requests = error_response(
        429,
        "the key's send rate is exceeded, or this client address failed authentication too often",
        &["rate_limit_exceeded", "too_many_auth_failures"],
    );
    let mut send_headers = rate_limit_headers(false);
    send_headers.insert("Retry-After".into(), retry_after_header());
    send_too_many_requests["headers"] = send_headers.into();

    let mut metrics_token_required = error_response(
        401,
        "the server requires a metrics token (`TIDINGS_METRICS_TOKEN`) and the request carried none or another",
        &["invalid_metrics_token"],
    );
    metrics_token_required["headers"] = json!({ "WWW-Authenticate": {
        "description": "`Bearer realm=\"metrics\"`",
        "schema": { "type": "string" },
    } });
    let mut responses: Vec<(&str, Value)> = vec![
        ("MetricsTokenRequired", metrics_token_required),
        (
            "InvalidJson",
            error_response(
                400,
                "the body is not a JSON object, or lacks `Content-Type: application/json`",
                &["invalid_json"],
            ),
        ),
        (
            "SendBadRequest",
            error_response(
                400,
                "the body is not a JSON object, or the Idempotency-Key header is empty, over 256 characters or not printable",
                &["invalid_json", "invalid_idempotency_key"],
            ),
        ),
        (
            "Unauthorized",
            error_response(
                401,
                "no API key, or an unknown, malformed or revoked one",
                &["missing_api_key", "invalid_api_key"],
            ),
        ),
        (
            "InsufficientScope",
            error_response(403, "a `send` key calling a management operation", &["insufficient_scope"]),
        ),
        (
            "DomainNotAllowed",
            error_response(403, "a domain-scoped key sending from another domain", &["domain_not_allowed"]),
        ),
        ("NotFound", error_response(404, "no such resource in this workspace", &["not_found"])),
        ("Conflict", error_response(409, "it already exists", &["conflict"])),
        (
            "IdempotencyKeyReused",
            error_response(
                409,
                "the Idempotency-Key was used in this workspace with a different request, or by another API \
                 key when this one is a `send` key (which may read only the messages it sent); the message \
                 says which",
                &["idempotency_key_reused"],
            ),
        ),
        (
            "PayloadTooLarge",
            error_response(413, "the body is over the configured limit (default 10 MiB)", &["payload_too_large"]),
        ),
        (
            "ValidationError",
            error_response(
                422,
                "a field or query parameter is missing, malformed or out of range; `details` names it",
                &["validation_error"],
            ),
        ),
        (
            "SendUnprocessable",
            error_response(
                422,
                "invalid fields, an unverified sending domain, a suppressed recipient, or a template that does not render",
                &[
                    "validation_error",
                    "domain_not_verified",
                    "recipient_suppressed",
                    "template_render_error",
                    "template_syntax_error",
                ],
            ),
        ),
        (
            "SenderUnprocessable",
            error_response(
                422,
                "invalid fields, or the domain is not Verified",
                &["validation_error", "domain_not_verified"],
            ),
        ),
        (
            "TemplateUnprocessable",
            error_response(
                422,
                "invalid fields, or a template body that does not compile (the message names line and column)",
                &["validation_error", "template_syntax_error"],
            ),
        ),
        (
            "RenderUnprocessable",
            error_response(
                422,
                "invalid fields, or the template does not render (e.g. a variable was not supplied)",
                &["validation_error", "template_render_error", "template_syntax_error"],
            ),
        ),
        ("TooManyAuthFailures", too_many_auth_failures),
        ("SendTooManyRequests", send_too_many_requests),
        ("InternalError", error_response(500, "a bug; the cause is logged, never returned", &["internal_error"])),
        ("Unavailable", unavailable),
    ];
    for (_, response) in &mut responses {
        response["headers"]["X-Request-Id"] = request_id_header();
    }
    into_map(responses)
}

/// `components.parameters`.
pub fn parameters() -> Value {
    json!({
        "Limit": {
            "name": "limit", "in": "query", "required": false,
            "description": "page size",
            "schema": { "type": "integer", "minimum": 1, "maximum": 200, "default": 50 },
        },
        "Cursor": {
            "name": "cursor", "in": "query", "required": false,
            "description": "the `pagination.nextCursor` of the previous page",
            "schema": { "type": "string" },
        },
        "IdempotencyKey": {
            "name": "Idempotency-Key", "in": "header", "required": false,
            "description": "scoped to the workspace: a retry with the same key and body, from any API key \
                of the workspace that may read the original message (every `full` key; a `send` key only \
                for what it sent itself), returns the original message (201, `Idempotent-Replayed: true`) \
                and queues nothing; with another body, or from a `send` key that did not send the \
                original, it is a 409 `idempotency_key_reused`. Remembered for 24 hours (configurable).",
            "schema": { "type": "string", "minLength": 1, "maxLength": 256 },
        },
    })
}
