//! The OpenAPI 3.1 document of the whole API, served as it is at `GET /v1/openapi.json`.
//!
//! Derived with utoipa: the schemas from the request and response types (`ToSchema`), each
//! operation from its handler's `#[utoipa::path]`, and the router from the same attributes
//! (`routes::table`), so that the document names exactly what is served. [`complete`] then
//! adds, once, what every operation of a kind shares, as the handlers' extractors and the
//! server's layers make it so:
//!
//! - an authenticated operation (no `security(())`) answers 401, 429, 500 and 503; a public
//!   one is `security: []`;
//! - one with a path parameter documents it and answers 404 (an unknown or foreign id, or a
//!   segment that is not UTF-8); one with a body answers 400, 413 and 422; a list 422;
//! - every response carries `X-Request-Id`; the successes of a rate-limited operation the
//!   `RateLimit-*` headers, and those of an idempotent one `Idempotent-Replayed`;
//! - a 2xx of a `POST` that creates a resource links to every operation on it ([`links`]).
//!
//! The tests of `tests/openapi.rs` compare the document with the routes the router serves
//! and validate real responses against it.

pub mod failures;
pub mod headers;
mod links;

use std::sync::LazyLock;

use axum::body::Bytes;
use utoipa::openapi::path::{Operation, Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{InfoBuilder, OpenApi, RefOr, Required, Response};
use utoipa::{PartialSchema, ToResponse, ToSchema};

use crate::envelope::Failure;
use failures::{
    InternalError, InvalidJson, NotFound, PayloadTooLarge, SendTooManyRequests, TooManyAuthFailures, Unauthorized,
    Unavailable, ValidationError,
};

/// The document as served: built once.
pub static DOCUMENT: LazyLock<Bytes> = LazyLock::new(|| {
    let document = complete(crate::routes::operations());
    // The document is plain data; serialisation cannot fail.
    Bytes::from(serde_json::to_vec(&document).unwrap_or_default())
});

/// `api`, the operations as the handlers describe them, completed into the document.
pub fn complete(mut api: OpenApi) -> OpenApi {
    api.info =
        InfoBuilder::new().title("Tidings").version(env!("CARGO_PKG_VERSION")).description(Some(DESCRIPTION)).build();
    api.tags =
        Some(TAGS.iter().map(|(name, text)| TagBuilder::new().name(*name).description(Some(*text)).build()).collect());
    api.security =
        Some(vec![SecurityRequirement::new("bearerAuth", [""; 0]), SecurityRequirement::new("apiKeyHeader", [""; 0])]);
    for (path, item) in api.paths.paths.iter_mut() {
        for operation in operations(item) {
            complete_operation(path, operation);
        }
    }
    links::add(&mut api);
    let components = api.components.get_or_insert_with(Default::default);
    components.security_schemes.insert("bearerAuth".into(), bearer().into());
    components
        .security_schemes
        .insert("apiKeyHeader".into(), SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-Api-Key"))).into());
    components.responses.extend(failures::all().into_iter().map(|(name, response)| (name.to_owned(), response)));
    // What the failure responses refer to.
    let mut schemas = vec![(Failure::name().into_owned(), Failure::schema())];
    Failure::schemas(&mut schemas);
    components.schemas.extend(schemas);
    components.headers.extend(headers::components().into_iter().map(|(name, header)| (name.to_owned(), header.into())));
    api
}

const DESCRIPTION: &str = "Transactional email over HTTPS with JSON bodies.\n\n\
Every response (except this document) is the envelope `{success, message, statusCode, data}`; \
a failure has `data: null` and `error: {code, message, details?}`, a list adds `pagination: \
{limit, hasMore, nextCursor}` (pass `nextCursor` as `cursor` for the next page). Unknown paths \
answer 404 `not_found` and wrong methods 405 `method_not_allowed`, in the envelope too.\n\n\
Authenticate with `Authorization: Bearer <key>` or `X-Api-Key: <key>`. A `send` key may only \
send and read the messages it sent; other operations answer it 403 `insufficient_scope`. \
After 20 failed authentications in a minute a client address gets 429 \
`too_many_auth_failures` with `Retry-After`.\n\n\
The tracking endpoints under `/t/` are public (no key) and answer a GIF or a redirect; a \
token that is forged, altered or unknown is 404 `not_found` in the envelope.\n\n\
`GET /healthz` (the process answers) and `GET /readyz` (the store is reachable and the \
server is not shutting down; 503 `unavailable` when not) need no key and count against no \
limit, nor does `GET /metrics` (this process's counters in the Prometheus text format; \
`Authorization: Bearer <metrics token>` when the operator set one).\n\n\
Every response carries `X-Request-Id`: the one the request sent, if it was 1–128 printable \
ASCII characters, else a new ULID. The server logs it with the request.";

const TAGS: [(&str, &str); 10] = [
    ("keys", "API keys (docs/api.md#authentication)"),
    ("messages", "sending and the event timeline (docs/api.md#messages)"),
    ("domains", "sending domains, their DNS records and senders (docs/api.md#domains)"),
    ("reputation", "bounce and complaint rates, and the sending pauses they cause (docs/api.md#reputation)"),
    ("templates", "versioned handlebars templates (docs/api.md#templates)"),
    ("suppressions", "the suppression list (docs/api.md#suppressions)"),
    ("webhooks", "webhook endpoints and their delivery log (docs/api.md#webhooks)"),
    ("tracking", "the public open pixel and click redirect (docs/api.md#tracking)"),
    ("meta", "this document"),
    ("operations", "liveness and readiness probes"),
];

fn bearer() -> SecurityScheme {
    let http = HttpBuilder::new()
        .scheme(HttpAuthScheme::Bearer)
        .description(Some(
            "`Authorization: Bearer tid_…`. When this header is present it is the one used, even if `X-Api-Key` is \
             sent too.",
        ))
        .build();
    SecurityScheme::Http(http)
}

/// The operations of a path item.
fn operations(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
        &mut item.head,
        &mut item.options,
        &mut item.trace,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

/// Adds to the operation at `path` what operations of its kind share.
fn complete_operation(path: &str, op: &mut Operation) {
    // `security(())` in the attribute is utoipa's `[{}]` ("optional"); the API's public
    // operations need no key at all, which OpenAPI writes `[]`.
    let public = op.security.as_ref().is_some_and(|s| s.iter().all(|r| *r == SecurityRequirement::default()));
    if public {
        op.security = Some(Vec::new());
    }
    let parameters = op.parameters.get_or_insert_with(Vec::new);
    let names = path_parameter_names(path);
    let has_path_parameters = !names.is_empty();
    for (i, name) in names.into_iter().enumerate() {
        parameters.insert(i, path_parameter(name).into());
    }
    let is_list = parameters.iter().any(|p| matches!(p, RefOr::T(p) if p.name == "limit"));
    let is_idempotent = parameters.iter().any(|p| matches!(p, RefOr::T(p) if p.name == "Idempotency-Key"));
    if parameters.is_empty() {
        op.parameters = None;
    }
    let is_rate_limited = op.responses.responses.get("429") == Some(&shared::<SendTooManyRequests>());

    let mut shared_responses = Vec::new();
    if op.request_body.is_some() {
        shared_responses.extend([("400", shared::<InvalidJson>()), ("413", shared::<PayloadTooLarge>())]);
    }
    if op.request_body.is_some() || is_list {
        shared_responses.push(("422", shared::<ValidationError>()));
    }
    if has_path_parameters {
        shared_responses.push(("404", shared::<NotFound>()));
    }
    if !public {
        shared_responses.extend([
            ("401", shared::<Unauthorized>()),
            ("429", shared::<TooManyAuthFailures>()),
            ("500", shared::<InternalError>()),
            ("503", shared::<Unavailable>()),
        ]);
    }
    let responses = &mut op.responses.responses;
    for (status, response) in shared_responses {
        responses.entry(status.to_owned()).or_insert(response);
    }
    for (status, response) in responses.iter_mut() {
        let RefOr::T(response) = response else { continue };
        response.headers.insert("X-Request-Id".into(), RefOr::Ref(headers::request_id()));
        if status.starts_with('2') {
            if is_rate_limited {
                response.headers.insert("RateLimit-Limit".into(), headers::rate_limit_limit().into());
                response.headers.insert("RateLimit-Remaining".into(), headers::rate_limit_remaining().into());
                response.headers.insert("RateLimit-Reset".into(), headers::rate_limit_reset().into());
            }
            if is_idempotent {
                response.headers.insert("Idempotent-Replayed".into(), headers::idempotent_replayed().into());
            }
        }
    }
}

/// A reference to the shared response `R`.
fn shared<'r, R: ToResponse<'r>>() -> RefOr<Response> {
    RefOr::Ref(utoipa::openapi::Ref::from_response_name(R::response().0))
}

/// The `{name}` segments of `path`.
fn path_parameter_names(path: &str) -> Vec<&str> {
    path.split('/').filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}')).collect()
}

fn path_parameter(name: &str) -> Parameter {
    let description = match name {
        "email" => "the address, URL-encoded (`a%2Bb@example.com` names `a+b@example.com`); matched case-insensitively",
        "username" => "the sender's local part, matched case-insensitively",
        "deliveryId" => "id of a delivery of this endpoint",
        "token" => "the signed token of a pixel or link, as the message carries it",
        _ => "id of the resource (an id that is not a ULID is simply not found)",
    };
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(description))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .build()
}
