//! The OpenAPI 3.1 document of the whole API, served as it is at `GET /v1/openapi.json`.
//!
//! It is built in Rust rather than kept as a JSON file so that what every operation shares
//! is stated once: an authenticated operation always documents 401, 429, 500 and 503; one
//! with a path parameter 404 (an unknown or foreign id, or a segment that is not UTF-8); one
//! with a body 400, 413 and 422; a list `limit`, `cursor` and 422. `paths.rs` then lists
//! only what is particular to each operation. The tests of `tests/openapi.rs` compare the
//! document with the routes the router serves and validate real responses against it.

mod components;
mod paths;
mod requests;
mod responses;

use std::sync::LazyLock;

use axum::body::Bytes;
use serde_json::{Map, Value, json};

use components::schema_ref;

/// The document as served: built once.
pub static DOCUMENT: LazyLock<Bytes> = LazyLock::new(|| Bytes::from(document().to_string()));

/// The document.
fn document() -> Value {
    let mut paths = Map::new();
    for op in paths::operations() {
        let (path, method, operation) = op.build();
        let item = paths.entry(path.clone()).or_insert_with(|| json!({}));
        // A second description would silently replace the first; every test would see this.
        assert!(item.get(method).is_none(), "{method} {path} is described twice");
        item[method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Tidings",
            "version": env!("CARGO_PKG_VERSION"),
            "description": DESCRIPTION,
        },
        "tags": [
            { "name": "keys", "description": "API keys (contract §2)" },
            { "name": "messages", "description": "sending and the event timeline (contract §3)" },
            { "name": "domains", "description": "sending domains, their DNS records and senders (contract §4)" },
            { "name": "templates", "description": "versioned handlebars templates (contract §5)" },
            { "name": "suppressions", "description": "the suppression list (contract §6)" },
            { "name": "webhooks", "description": "webhook endpoints and their delivery log (contract §7)" },
            { "name": "tracking", "description": "the public open pixel and click redirect (contract §8)" },
            { "name": "meta", "description": "this document" },
            { "name": "operations", "description": "liveness and readiness probes" },
        ],
        "security": [{ "bearerAuth": [] }, { "apiKeyHeader": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "`Authorization: Bearer tid_…`. When this header is present it is the one \
                        used, even if `X-Api-Key` is sent too.",
                },
                "apiKeyHeader": { "type": "apiKey", "in": "header", "name": "X-Api-Key" },
            },
            "schemas": components::schemas(),
            "responses": responses::responses(),
            "headers": responses::headers(),
            "parameters": responses::parameters(),
        },
    })
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

/// One operation as [`paths::operations`] describes it; [`Op::build`] adds what operations
/// of its kind share.
pub struct Op {
    method: &'static str,
    path: &'static str,
    operation: Map<String, Value>,
    parameters: Vec<Value>,
    responses: Map<String, Value>,
    authenticated: bool,
    has_body: bool,
}

/// An authenticated operation.
pub fn op(method: &'static str, path: &'static str, id: &'static str, tag: &'static str, summary: &str) -> Op {
    let mut operation = Map::new();
    operation.insert("operationId".into(), id.into());
    operation.insert("tags".into(), json!([tag]));
    operation.insert("summary".into(), summary.into());
    Op { method, path, operation, parameters: Vec::new(), responses: Map::new(), authenticated: true, has_body: false }
}

impl Op {
    /// A longer description.
    pub fn describe(mut self, text: &str) -> Self {
        self.operation.insert("description".into(), text.into());
        self
    }

    /// No authentication (`security: []`).
    pub fn public(mut self) -> Self {
        self.authenticated = false;
        self.operation.insert("security".into(), json!([]));
        self
    }

    /// A query or header parameter.
    pub fn parameter(mut self, parameter: Value) -> Self {
        self.parameters.push(parameter);
        self
    }

    /// A required JSON body of the schema `schema`.
    pub fn body(mut self, schema: &str) -> Self {
        self.has_body = true;
        let content = json!({ "application/json": { "schema": schema_ref(schema) } });
        self.operation.insert("requestBody".into(), json!({ "required": true, "content": content }));
        self
    }

    /// A success answering the envelope with `data` of `data` (a schema).
    pub fn success(mut self, status: u16, description: &str, data: Value) -> Self {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["success", "message", "statusCode", "data"],
            "properties": {
                "success": { "const": true },
                "message": { "type": "string" },
                "statusCode": { "const": status },
                "data": data,
            },
        });
        let response = json!({ "description": description, "content": { "application/json": { "schema": schema } } });
        self.responses.insert(status.to_string(), response);
        self
    }

    /// A page of `item`s: `limit` and `cursor` (422 when malformed), and the list envelope.
    pub fn list(mut self, item: &str) -> Self {
        self.parameters.push(json!({ "$ref": "#/components/parameters/Limit" }));
        self.parameters.push(json!({ "$ref": "#/components/parameters/Cursor" }));
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["success", "message", "statusCode", "data", "pagination"],
            "properties": {
                "success": { "const": true },
                "message": { "type": "string" },
                "statusCode": { "const": 200 },
                "data": { "type": "array", "items": schema_ref(item) },
                "pagination": schema_ref("Pagination"),
            },
        });
        let response = json!({ "description": "a page", "content": { "application/json": { "schema": schema } } });
        self.responses.insert("200".into(), response);
        self.fails(422, "ValidationError")
    }

    /// A success whose `data` is null (deletes).
    pub fn deleted(self, description: &str) -> Self {
        self.success(200, description, json!({ "type": "null" }))
    }

    /// Headers of the success response `status` (which must already be described).
    pub fn headers(mut self, status: u16, headers: Map<String, Value>) -> Self {
        if let Some(response) = self.responses.get_mut(&status.to_string()) {
            response["headers"] = headers.into();
        }
        self
    }

    /// The failure `status` answers the shared response `components.responses.<name>`.
    pub fn fails(mut self, status: u16, name: &str) -> Self {
        self.responses.insert(status.to_string(), response_ref(name));
        self
    }

    /// A management operation: a `send` key gets 403.
    pub fn management(self) -> Self {
        self.fails(403, "InsufficientScope")
    }

    /// The path, the method's lowercase name and the operation object.
    pub fn build(mut self) -> (String, &'static str, Value) {
        let path_parameters: Vec<Value> = path_parameter_names(self.path).into_iter().map(path_parameter).collect();
        let mut shared = Vec::new();
        if self.has_body {
            shared.extend([(400, "InvalidJson"), (413, "PayloadTooLarge"), (422, "ValidationError")]);
        }
        if !path_parameters.is_empty() {
            shared.push((404, "NotFound"));
        }
        if self.authenticated {
            shared.extend([
                (401, "Unauthorized"),
                (429, "TooManyAuthFailures"),
                (500, "InternalError"),
                (503, "Unavailable"),
            ]);
        }
        for (status, name) in shared {
            self.responses.entry(status.to_string()).or_insert_with(|| response_ref(name));
        }
        // Shared responses carry it already (`responses::responses`).
        for response in self.responses.values_mut().filter(|r| r.get("$ref").is_none()) {
            response["headers"]["X-Request-Id"] = responses::request_id_header();
        }
        let mut parameters = path_parameters;
        parameters.append(&mut self.parameters);
        if !parameters.is_empty() {
            self.operation.insert("parameters".into(), parameters.into());
        }
        self.operation.insert("responses".into(), self.responses.into());
        (self.path.to_owned(), self.method, self.operation.into())
    }
}

fn response_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/responses/{name}") })
}

/// The `{name}` segments of `path`.
fn path_parameter_names(path: &str) -> Vec<&str> {
    path.split('/').filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}')).collect()
}

fn path_parameter(name: &str) -> Value {
    let description = match name {
        "email" => "the address, URL-encoded (`a%2Bb@example.com` names `a+b@example.com`); matched case-insensitively",
        "username" => "the sender's local part, matched case-insensitively",
        "deliveryId" => "id of a delivery of this endpoint",
        "token" => "the signed token of a pixel or link, as the message carries it",
        _ => "id of the resource (an id that is not a ULID is simply not found)",
    };
    json!({ "name": name, "in": "path", "required": true, "description": description, "schema": { "type": "string" } })
}
