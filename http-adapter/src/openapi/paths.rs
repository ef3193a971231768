//! Every operation of the API, in the order of `routes/`, with what is particular to it;
//! [`super::Op::build`] adds the responses and parameters operations of its kind share. The
//! `operationId` is the handler's name.

use serde_json::{Value, json};

use super::components::schema_ref;
use super::responses::rate_limit_headers;
use super::{Op, op};

/// A `Cache-Control` header that is always `value`.
fn no_store_header(value: &str) -> Value {
    json!({ "description": "every request must reach the server", "required": true, "schema": { "const": value } })
}

/// A query parameter of type `schema`.
fn query(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "query", "required": false, "description": description, "schema": schema })
}

/// All operations.
pub fn operations() -> Vec<Op> {
    let mut all = Vec::new();
    all.extend(keys());
    all.extend(messages());
    all.extend(domains());
    all.extend(templates());
    all.extend(suppressions());
    all.extend(webhooks());
    all.extend(tracking());
    all.push(
        op("get", "/v1/openapi.json", "get_openapi_document", "meta", "This OpenAPI document")
            .describe("The document itself, not wrapped in the envelope; no authentication.")
            .public()
            .document_response(),
    );
    all.extend(probes());
    all
}

/// `data` of the probes' 200.
fn probe_status() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["status"],
        "properties": { "status": { "const": "ok" } },
    })
}

/// `/healthz` and `/readyz`: public, in the envelope.
fn probes() -> Vec<Op> {
    vec![
        op("get", "/healthz", "check_liveness", "operations", "Liveness: the process answers")
            .describe("Always 200 while the process serves requests; touches no storage. No authentication.")
            .public()
            .success(200, "the process is alive", probe_status()),
        op("get", "/readyz", "check_readiness", "operations", "Readiness: the store is reachable")
            .describe(
                "200 when a cheap read of the store succeeds, else 503 `unavailable`; 503 too once the server \
                 has started shutting down (SIGTERM), so load balancers stop sending while in-flight requests \
                 finish. No authentication.",
            )
            .public()
            .success(200, "ready for traffic", probe_status())
            .fails(503, "Unavailable"),
        op("get", "/metrics", "get_metrics", "operations", "Prometheus metrics of this process")
            .describe(
                "Counters and histograms of this process (messages accepted and their events by type, bounces by \
                 type, delivery latency, webhook attempts by outcome, HTTP requests by route template and \
                 status) and the store's queue depth, in the Prometheus text exposition format 0.0.4. Each node \
                 exports its own counters. No API key: open, unless the operator set `TIDINGS_METRICS_TOKEN`, \
                 which a scraper then presents as `Authorization: Bearer <token>` (401 `invalid_metrics_token` \
                 without it, counted as a failed authentication); or served only on `TIDINGS_METRICS_LISTEN`. \
                 See the README for the metric names.",
            )
            .public()
            .metrics_response()
            .fails(401, "MetricsTokenRequired")
            .fails(429, "TooManyAuthFailures"),
    ]
}

impl Op {
    /// The 200 of the open pixel: a 43-byte transparent GIF, never cached.
    fn pixel_response(mut self) -> Self {
        let response = json!({
            "description": "a 1×1 transparent GIF",
            "headers": { "Cache-Control": no_store_header("no-store, private") },
            "content": { "image/gif": { "schema": { "type": "string", "contentMediaType": "image/gif" } } },
        });
        self.responses.insert("200".into(), response);
        self
    }

    /// The 302 of a tracked link, to the URL signed in the token; no body.
    fn redirect_response(mut self) -> Self {
        let response = json!({
            "description": "the link's destination, taken only from the signed token",
            "headers": {
                "Location": {
                    "description": "the original http(s) URL of the link",
                    "required": true,
                    "schema": { "type": "string", "format": "uri", "pattern": "^https?://" },
                },
                "Cache-Control": no_store_header("no-store"),
            },
        });
        self.responses.insert("302".into(), response);
        self
    }

    /// The 200 of `/metrics`: the Prometheus text format.
    fn metrics_response(mut self) -> Self {
        let schema = json!({ "type": "string", "description": "Prometheus text exposition format 0.0.4" });
        let response = json!({
            "description": "the metrics, one sample per line",
            "content": { "text/plain; version=0.0.4; charset=utf-8": { "schema": schema } },
        });
        self.responses.insert("200".into(), response);
        self
    }

    /// The 200 of the document endpoint: the document itself.
    fn document_response(mut self) -> Self {
        let schema = json!({
            "type": "object",
            "required": ["openapi", "info", "paths"],
            "properties": { "openapi": { "type": "string", "pattern": "^3\\.1\\.\\d+$" } },
        });
        let response =
            json!({ "description": "this document", "content": { "application/json": { "schema": schema } } });
        self.responses.insert("200".into(), response);
        self
    }
}

fn tracking() -> Vec<Op> {
    let token = "a tracking token from a sent message; forged, altered and unknown tokens are 404 and record \
        nothing. HEAD answers the same and records nothing";
    vec![
        op("get", "/t/o/{token}", "get_open_pixel", "tracking", "The open pixel: records `Opened`")
            .describe(token)
            .public()
            .pixel_response()
            .fails(500, "InternalError")
            .fails(503, "Unavailable"),
        op("get", "/t/c/{token}", "follow_tracked_link", "tracking", "A tracked link: records `Clicked`, redirects")
            .describe(token)
            .public()
            .redirect_response()
            .fails(500, "InternalError")
            .fails(503, "Unavailable"),
    ]
}

fn keys() -> Vec<Op> {
    vec![
        op("get", "/v1/keys", "list_api_keys", "keys", "List the workspace's keys that are not revoked, newest first")
            .list("ApiKey")
            .management(),
        op("post", "/v1/keys", "create_api_key", "keys", "Create a key; its plaintext is returned this once")
            .body("CreateApiKeyRequest")
            .success(201, "the key, with `plaintextKey`", schema_ref("CreatedApiKey"))
            .management(),
        op("get", "/v1/keys/{id}", "get_api_key", "keys", "Retrieve a key (a revoked key is not found)")
            .success(200, "the key", schema_ref("ApiKey"))
            .management(),
        op("delete", "/v1/keys/{id}", "revoke_api_key", "keys", "Revoke a key; it fails from the next request on")
            .deleted("revoked")
            .management(),
    ]
}

/// The headers of a send's success: the rate limit's, and `Idempotent-Replayed`.
fn send_headers() -> serde_json::Map<String, Value> {
    let mut headers = rate_limit_headers(false);
    headers.insert(
        "Idempotent-Replayed".into(),
        json!({
            "description": "present when an earlier request with this Idempotency-Key created the message(s)",
            "schema": { "type": "string", "enum": ["true"] },
        }),
    );
    headers
}

/// `data` of a batch's answer.
fn batch_results() -> Value {
    json!({ "type": "array", "minItems": 1, "maxItems": 500, "items": schema_ref("BatchItemResult") })
}

fn messages() -> Vec<Op> {
    let statuses = schema_ref("MessageStatus");
    vec![
        op("get", "/v1/messages", "list_messages", "messages", "List messages, newest first")
            .describe("A `send` key sees only the messages it sent.")
            .list("Message")
            .parameter(query("status", "only messages in this status", statuses))
            .parameter(query("to", "only messages to this address", json!({ "type": "string" })))
            .parameter(json!({
                "name": "tag",
                "in": "query",
                "required": false,
                "description": "only messages with this tag: `name` (any value) or `name:value`; repeat for several \
                    (every one must match); at most 10",
                "schema": { "type": "array", "items": { "type": "string" }, "maxItems": 10 },
                "style": "form",
                "explode": true,
                "examples": { "nameAndValue": { "value": ["plan:pro"] }, "nameOnly": { "value": ["welcome"] } },
            }))
            .parameter(json!({
                "name": "metadata",
                "in": "query",
                "required": false,
                "description": "only messages whose metadata has these entries, as `metadata[key]=value`; repeat for \
                    several keys (every one must match); at most 10",
                "schema": { "type": "object", "additionalProperties": { "type": "string" }, "maxProperties": 10 },
                "style": "deepObject",
                "explode": true,
                "examples": { "order": { "value": { "orderId": "A-17" } } },
            })),
        op("post", "/v1/messages", "send_message", "messages", "Send an email: stored durably and queued")
            .describe(
                "Give `html`, `text` or a template. Takes one token of the key's send rate; a rejected \
                 send or an idempotent replay gives it back, except a send refused by its template \
                 (`template_render_error`, `template_syntax_error`), which keeps it. The body may be up to 56 MiB (configurable, \
                 `TIDINGS_MAX_SEND_BODY_BYTES`) so that 40 MiB of base64 attachments fit; other routes keep \
                 the general limit.",
            )
            .parameter(json!({ "$ref": "#/components/parameters/IdempotencyKey" }))
            .body("SendMessageRequest")
            .success(201, "the queued message (or, for a replay, the original one)", schema_ref("Message"))
            .headers(201, send_headers())
            .fails(400, "SendBadRequest")
            .fails(403, "DomainNotAllowed")
            .fails(409, "IdempotencyKeyReused")
            .fails(422, "SendUnprocessable")
            .fails(429, "SendTooManyRequests"),
        op("post", "/v1/messages/batch", "send_batch", "messages", "Send up to 500 emails in one request")
            .describe(
                "A JSON array of what POST /v1/messages takes; `data` holds one result per item at its index. \
                 `x-batch-validation: strict` (default) is all or nothing: one bad item is a 422 whose details \
                 name `[i].field`, and nothing is queued. `permissive` queues the valid items and answers the \
                 others' errors at their index. 201 when every item was queued, 200 when some were refused. \
                 Takes one rate-limit token per item at once (429 if fewer are available; a batch larger than \
                 the key's `rateLimitPerSec` is a 422); refused items give theirs back, except items whose template \
                 was rendered (or failed to render), which keep theirs. The Idempotency-Key \
                 covers the whole batch: a replay answers the same results.",
            )
            .parameter(json!({ "$ref": "#/components/parameters/IdempotencyKey" }))
            .parameter(json!({
                "name": "x-batch-validation",
                "in": "header",
                "required": false,
                "description": "`strict` (default): all or nothing; `permissive`: valid items queued, errors per index",
                "schema": { "type": "string", "enum": ["strict", "permissive"] },
            }))
            .body("SendBatchRequest")
            .success(201, "every item queued (or, for a replay, the original results)", batch_results())
            .success(
                200,
                "a permissive batch with refused items: each result is a message or an error",
                batch_results(),
            )
            .headers(201, send_headers())
            .headers(200, send_headers())
            .fails(400, "SendBadRequest")
            .fails(409, "IdempotencyKeyReused")
            .fails(422, "SendUnprocessable")
            .fails(429, "SendTooManyRequests"),
        op("get", "/v1/messages/{id}", "get_message", "messages", "Retrieve a message with its current status")
            .describe("A `send` key gets 404 for a message another key sent.")
            .success(200, "the message", schema_ref("Message")),
        op("patch", "/v1/messages/{id}", "update_message", "messages", "Reschedule a message not yet attempted")
            .describe(
                "Moves a Scheduled message's send time, gives a Queued one a time (it becomes Scheduled), or with \
                 `scheduledAt: null` sends a Scheduled one now. Records a `Scheduled` (or `Queued`) event. Any \
                 other status is a 409 `conflict`. A `send` key may change only its own messages.",
            )
            .body("UpdateMessageRequest")
            .success(200, "the message as changed", schema_ref("Message"))
            .fails(409, "Conflict"),
        op("post", "/v1/messages/{id}/cancel", "cancel_message", "messages", "Cancel a Scheduled or Queued message")
            .describe(
                "The message becomes `Canceled` (terminal, with a `Canceled` event) and is never sent. A message \
                 whose first attempt has started (or that ended otherwise) is a 409 `conflict`. A `send` key may \
                 cancel only its own messages.",
            )
            .success(200, "the canceled message", schema_ref("Message"))
            .fails(409, "Conflict"),
        op("get", "/v1/messages/{id}/events", "list_message_events", "messages", "A message's timeline, oldest first")
            .list("MessageEvent"),
    ]
}

fn domains() -> Vec<Op> {
    vec![
        op("get", "/v1/domains", "list_domains", "domains", "List sending domains, newest first")
            .list("Domain")
            .management(),
        op("post", "/v1/domains", "create_domain", "domains", "Add a domain: Pending, with the records to publish")
            .body("AddDomainRequest")
            .success(201, "the domain", schema_ref("Domain"))
            .management()
            .fails(409, "Conflict"),
        op("get", "/v1/domains/{id}", "get_domain", "domains", "Retrieve a domain with per-record status")
            .success(200, "the domain", schema_ref("Domain"))
            .management(),
        op("patch", "/v1/domains/{id}", "update_domain", "domains", "Switch open and click tracking")
            .body("UpdateDomainRequest")
            .success(200, "the domain", schema_ref("Domain"))
            .management(),
        op("delete", "/v1/domains/{id}", "delete_domain", "domains", "Delete a domain and its senders")
            .describe("The sandbox sending domain (`sandbox: true`) cannot be deleted: 422 `validation_error`.")
            .deleted("deleted")
            .management()
            .fails(422, "ValidationError"),
        op("post", "/v1/domains/{id}/verify", "verify_domain", "domains", "Check the DNS records now")
            .describe(
                "Records that are not found are an outcome (`Failed`), not an error. The sandbox sending domain \
                 (`sandbox: true`) is returned unchanged: it is never looked up in DNS.",
            )
            .success(200, "the domain with the outcome of the check", schema_ref("Domain"))
            .management(),
        op("get", "/v1/domains/{id}/senders", "list_senders", "domains", "List the domain's senders, newest first")
            .list("Sender")
            .management(),
        op("post", "/v1/domains/{id}/senders", "create_sender", "domains", "Register a sender on a Verified domain")
            .body("AddSenderRequest")
            .success(201, "the sender", schema_ref("Sender"))
            .management()
            .fails(409, "Conflict")
            .fails(422, "SenderUnprocessable"),
        op("delete", "/v1/domains/{id}/senders/{username}", "delete_sender", "domains", "Remove a sender")
            .deleted("removed")
            .management(),
    ]
}

fn templates() -> Vec<Op> {
    vec![
        op("get", "/v1/templates", "list_templates", "templates", "List templates with their versions, newest first")
            .list("Template")
            .management(),
        op("post", "/v1/templates", "create_template", "templates", "Create a template; version 1 is current")
            .body("CreateTemplateRequest")
            .success(201, "the template", schema_ref("Template"))
            .management()
            .fails(422, "TemplateUnprocessable"),
        op("get", "/v1/templates/{id}", "get_template", "templates", "Retrieve a template and all its versions")
            .success(200, "the template", schema_ref("Template"))
            .management(),
        op("patch", "/v1/templates/{id}", "update_template", "templates", "Rename, or switch the current version")
            .body("UpdateTemplateRequest")
            .success(200, "the template", schema_ref("Template"))
            .management(),
        op("delete", "/v1/templates/{id}", "delete_template", "templates", "Delete a template and its versions")
            .describe("Messages already sent keep the version id they recorded.")
            .deleted("deleted")
            .management(),
        op("post", "/v1/templates/{id}/versions", "create_template_version", "templates", "Add the next version")
            .body("AddTemplateVersionRequest")
            .success(201, "the new version", schema_ref("TemplateVersion"))
            .management()
            .fails(422, "TemplateUnprocessable"),
        op("post", "/v1/templates/{id}/render", "render_template", "templates", "Render without sending")
            .describe(
                "Takes one token of the key's send rate, like a send: a render costs what a send's render \
                 costs. The token is given back only when the request is refused before anything is rendered \
                 (unknown template or version, bad variables); a template that fails to render keeps it.",
            )
            .body("RenderTemplateRequest")
            .success(200, "the rendered parts", schema_ref("RenderedTemplate"))
            .headers(200, rate_limit_headers(false))
            .management()
            .fails(422, "RenderUnprocessable")
            .fails(429, "SendTooManyRequests"),
    ]
}

fn suppressions() -> Vec<Op> {
    vec![
        op("get", "/v1/suppressions", "list_suppressions", "suppressions", "List suppressed addresses, newest first")
            .list("Suppression")
            .parameter(query("reason", "only entries with this reason", schema_ref("SuppressionReason")))
            .management(),
        op("post", "/v1/suppressions", "add_suppression", "suppressions", "Suppress an address (reason Manual)")
            .body("AddSuppressionRequest")
            .success(201, "added now", schema_ref("Suppression"))
            .success(200, "the address was already suppressed: the existing entry", schema_ref("Suppression"))
            .management(),
        op("get", "/v1/suppressions/{email}", "get_suppression", "suppressions", "Retrieve an address's entry")
            .success(200, "the entry", schema_ref("Suppression"))
            .management(),
        op("delete", "/v1/suppressions/{email}", "delete_suppression", "suppressions", "Remove an address")
            .deleted("removed; the address can be sent to again")
            .management(),
    ]
}

fn webhooks() -> Vec<Op> {
    vec![
        op("get", "/v1/webhooks", "list_webhooks", "webhooks", "List webhook endpoints, newest first")
            .list("Webhook")
            .management(),
        op("post", "/v1/webhooks", "create_webhook", "webhooks", "Create an endpoint; its secret is returned")
            .describe(
                "Each event is POSTed as `{type, createdAt, data: {messageId, eventId, to, from, subject, \
                 providerMessageId, tags, metadata, details}}`, signed per Standard Webhooks; `tags` and \
                 `metadata` are the message's (empty for a `Test` event).",
            )
            .body("CreateWebhookRequest")
            .success(201, "the endpoint with its secret", schema_ref("WebhookWithSecret"))
            .management(),
        op("get", "/v1/webhooks/{id}", "get_webhook", "webhooks", "Retrieve an endpoint")
            .success(200, "the endpoint", schema_ref("Webhook"))
            .management(),
        op("patch", "/v1/webhooks/{id}", "update_webhook", "webhooks", "Change the URL, event types or enabled")
            .body("UpdateWebhookRequest")
            .success(200, "the endpoint", schema_ref("Webhook"))
            .management(),
        op("delete", "/v1/webhooks/{id}", "delete_webhook", "webhooks", "Delete an endpoint and its delivery log")
            .deleted("deleted")
            .management(),
        op("post", "/v1/webhooks/{id}/test", "test_webhook", "webhooks", "Queue a `Test` event for this endpoint")
            .success(201, "the queued delivery", schema_ref("WebhookDelivery"))
            .management(),
        op("post", "/v1/webhooks/{id}/rotate-secret", "rotate_webhook_secret", "webhooks", "Rotate the secret")
            .describe("The old secret keeps signing beside the new one for 24 hours.")
            .success(200, "the endpoint with its new secret", schema_ref("WebhookWithSecret"))
            .management(),
        op("get", "/v1/webhooks/{id}/deliveries", "list_webhook_deliveries", "webhooks", "The delivery log")
            .list("WebhookDelivery")
            .management(),
        op(
            "post",
            "/v1/webhooks/{id}/deliveries/{deliveryId}/retry",
            "retry_webhook_delivery",
            "webhooks",
            "Make a delivery due now",
        )
        .success(200, "the delivery", schema_ref("WebhookDelivery"))
        .management(),
    ]
}
