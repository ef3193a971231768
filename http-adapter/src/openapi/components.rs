//! `components.schemas` of the OpenAPI document: the response schemas as the DTOs of
//! `routes/` write them, the enumerations and the error envelope (request bodies are in
//! `requests.rs`), and the helpers that build schemas.
//!
//! Response schemas are closed (`additionalProperties: false`) and list every field as
//! required, because the DTOs always serialise every field (`Option` as `null`).

use serde_json::{Map, Value, json};

/// `{"$ref": "#/components/schemas/<name>"}`.
pub fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// A response object: closed, every property required.
pub(super) fn output(description: &str, properties: Vec<(&str, Value)>) -> Value {
    let required: Vec<&str> = properties.iter().map(|(name, _)| *name).collect();
    let properties: Map<String, Value> = properties.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    json!({
        "type": "object",
        "description": description,
        "additionalProperties": false,
        "required": required,
        "properties": properties,
    })
}

/// A request body object: open (unknown fields are ignored), `required` as the use case
/// enforces it.
pub(super) fn input(description: &str, required: &[&str], properties: Vec<(&str, Value)>) -> Value {
    let properties: Map<String, Value> = properties.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    json!({ "type": "object", "description": description, "required": required, "properties": properties })
}

pub(super) fn string(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

pub(super) fn string_or_null(description: &str) -> Value {
    json!({ "type": ["string", "null"], "description": description })
}

pub(super) fn boolean_or_null(description: &str) -> Value {
    json!({ "type": ["boolean", "null"], "description": description })
}

fn timestamp() -> Value {
    json!({ "type": "string", "format": "date-time" })
}

fn timestamp_or_null() -> Value {
    json!({ "type": ["string", "null"], "format": "date-time" })
}

fn timestamp_or_null_described(description: &str) -> Value {
    json!({ "type": ["string", "null"], "format": "date-time", "description": description })
}

fn ulid_or_null() -> Value {
    json!({ "anyOf": [schema_ref("Ulid"), { "type": "null" }] })
}

pub(super) fn enumeration(description: &str, values: &[&str]) -> Value {
    json!({ "type": "string", "description": description, "enum": values })
}

const MESSAGE_STATUSES: [&str; 10] = [
    "Queued",
    "Scheduled",
    "Sent",
    "Deferred",
    "Delivered",
    "Bounced",
    "Complained",
    "Failed",
    "Suppressed",
    "Canceled",
];
const EVENT_TYPES: [&str; 12] = [
    "Queued",
    "Sent",
    "Delivered",
    "Deferred",
    "Bounced",
    "Complained",
    "Opened",
    "Clicked",
    "Failed",
    "Suppressed",
    "Scheduled",
    "Canceled",
];

/// `components.schemas`.
pub fn schemas() -> Value {
    let mut webhook_event_types = vec!["Test"];
    webhook_event_types.extend(EVENT_TYPES);
    let key_fields = || {
        vec![
            ("id", schema_ref("Ulid")),
            ("name", string("label")),
            ("prefix", string("the first 12 characters of the key, safe to display")),
            ("scope", schema_ref("KeyScope")),
            ("sendingDomainId", ulid_or_null()),
            ("rateLimitPerSec", json!({ "type": "integer", "minimum": 1, "maximum": 10000 })),
            ("createdAt", timestamp()),
            ("lastUsedAt", timestamp_or_null()),
        ]
    };
    let mut created_key_fields = key_fields();
    created_key_fields.push(("plaintextKey", string("the full key (`tid_` + 40 base62 characters); shown only here")));
    let webhook_fields = || {
        vec![
            ("id", schema_ref("Ulid")),
            ("url", string("receiving URL")),
            ("enabled", json!({ "type": "boolean" })),
            ("eventTypes", json!({ "type": "array", "items": schema_ref("WebhookEventType") })),
            ("disabledReason", string_or_null("why the server disabled the endpoint (e.g. it answered 410 Gone)")),
            (
                "failingSince",
                timestamp_or_null_described(
                    "when the endpoint's current run of failed attempts began; null while it is healthy. \
                     Failing every attempt for 5 days (configurable) disables it",
                ),
            ),
            ("createdAt", timestamp()),
            ("updatedAt", timestamp()),
        ]
    };
    let mut webhook_with_secret_fields = webhook_fields();
    webhook_with_secret_fields
        .push(("secret", string("`whsec_` + base64 of 32 bytes; shown only at creation and rotation")));
    let record_status = || schema_ref("RecordStatus");

    let schemas: Vec<(&str, Value)> = vec![
        (
            "Ulid",
            json!({
                "type": "string",
                "description": "a 26-character ULID, sortable by creation time",
                "pattern": "^[0-9A-HJKMNP-TV-Z]{26}$",
            }),
        ),
        (
            "KeyScope",
            enumeration("`full` may do everything; `send` may send and read its own messages", &["full", "send"]),
        ),
        ("MessageStatus", enumeration("where a message is in its life (contract §3)", &MESSAGE_STATUSES)),
        ("EventType", enumeration("type of a timeline event", &EVENT_TYPES)),
        ("WebhookEventType", enumeration("what a webhook endpoint can subscribe to", &webhook_event_types)),
        (
            "DomainStatus",
            enumeration("overall verification status", &["Pending", "Verified", "PartiallyVerified", "Failed"]),
        ),
        ("RecordStatus", enumeration("verification status of one DNS record", &["Pending", "Verified", "Failed"])),
        ("SuppressionReason", enumeration("why an address is suppressed", &["Manual", "HardBounce", "Complaint"])),
        (
            "DeliveryStatus",
            enumeration("status of a webhook delivery", &["Pending", "Retrying", "Delivered", "Failed"]),
        ),
        ("ApiKey", output("an API key (never with its plaintext)", key_fields())),
        ("CreatedApiKey", output("a key just created, with its plaintext", created_key_fields)),
        (
            "Message",
            output(
                "a message (bodies are not returned)",
                vec![
                    ("id", schema_ref("Ulid")),
                    ("status", schema_ref("MessageStatus")),
                    ("to", string("recipient address")),
                    ("fromAddress", string("sender address, without display name")),
                    ("subject", string("rendered subject")),
                    ("providerMessageId", string_or_null("the Message-ID written on the wire; null while queued")),
                    ("templateVersionId", ulid_or_null()),
                    ("attempts", json!({ "type": "integer", "minimum": 0 })),
                    ("createdAt", timestamp()),
                    ("tracking", schema_ref("MessageTracking")),
                    (
                        "scheduledAt",
                        timestamp_or_null_described(
                            "the send time asked for with `scheduledAt` (kept after it passed); null for a message \
                             sent at once",
                        ),
                    ),
                    (
                        "replyTo",
                        json!({ "type": "array", "items": { "type": "string" }, "description": "Reply-To addresses" }),
                    ),
                    ("tags", json!({ "type": "array", "items": schema_ref("Tag") })),
                    (
                        "metadata",
                        json!({ "type": "object", "additionalProperties": { "type": "string" }, "description": "the send's metadata" }),
                    ),
                    ("attachments", json!({ "type": "array", "items": schema_ref("AttachmentSummary") })),
                ],
            ),
        ),
        (
            "Tag",
            output(
                "a tag of a message",
                vec![("name", string("`[A-Za-z0-9_-]`")), ("value", string("printable ASCII; may be empty"))],
            ),
        ),
        (
            "AttachmentSummary",
            output(
                "an attachment as the API shows it (the content is never returned)",
                vec![
                    ("filename", string("the file name")),
                    ("contentType", string("`type/subtype`")),
                    ("contentId", string_or_null("set for an inline part")),
                    ("size", json!({ "type": "integer", "minimum": 0, "description": "decoded size in bytes" })),
                ],
            ),
        ),
        (
            "BatchItemResult",
            json!({
                "type": "object",
                "description": "the result of one batch item: `message` when it was queued, `error` when it was \
                    refused (permissive batches only)",
                "additionalProperties": false,
                "required": ["index"],
                "properties": {
                    "index": { "type": "integer", "minimum": 0, "description": "the item's index in the request" },
                    "message": schema_ref("Message"),
                    "error": schema_ref("Error"),
                },
                "oneOf": [{ "required": ["message"] }, { "required": ["error"] }],
            }),
        ),
        (
            "MessageTracking",
            output(
                "the open and click tracking the message got: the send's choice, else its domain's default",
                vec![
                    ("opens", json!({ "type": "boolean", "description": "a pixel in the HTML part records `Opened`" })),
                    (
                        "clicks",
                        json!({ "type": "boolean", "description": "http(s) links of the HTML part record `Clicked`" }),
                    ),
                ],
            ),
        ),
        (
            "MessageEvent",
            output(
                "one entry of a message's timeline",
                vec![
                    ("id", schema_ref("Ulid")),
                    ("type", schema_ref("EventType")),
                    ("providerMessageId", string_or_null("null on Queued")),
                    ("occurredAt", timestamp()),
                    ("details", schema_ref("EventDetails")),
                ],
            ),
        ),
        (
            "EventDetails",
            json!({
                "type": "object",
                "description": "what the event type carries; absent fields are omitted",
                "additionalProperties": false,
                "properties": {
                    "smtpCode": { "type": "integer" },
                    "enhancedCode": string("enhanced status code, e.g. `5.1.1`"),
                    "response": string("the remote server's reply"),
                    "attempt": { "type": "integer", "minimum": 1 },
                    "nextAttemptAt": timestamp(),
                    "bounceType": enumeration("Hard suppresses the address, Soft does not", &["Hard", "Soft"]),
                    "url": string("the clicked URL"),
                    "userAgent": string("user agent of an open or click"),
                    "scheduledAt": timestamp(),
                },
            }),
        ),
        (
            "Domain",
            output(
                "a sending domain with the records to publish",
                vec![
                    ("id", schema_ref("Ulid")),
                    ("domain", string("the domain name")),
                    ("overallStatus", schema_ref("DomainStatus")),
                    ("spfStatus", record_status()),
                    ("dkimStatus", record_status()),
                    ("dkim2Status", record_status()),
                    ("dmarcStatus", record_status()),
                    ("dnsRecords", json!({ "type": "array", "items": schema_ref("DnsRecord") })),
                    ("verifiedAt", timestamp_or_null()),
                    ("openTracking", json!({ "type": "boolean" })),
                    ("clickTracking", json!({ "type": "boolean" })),
                    ("createdAt", timestamp()),
                    (
                        "sandbox",
                        json!({
                            "type": "boolean",
                            "description": "true for the workspace's sandbox sending domain, sandbox.tidings.invalid: \
                                            made and Verified by Tidings, usable only while the server delivers to \
                                            its outbox (TIDINGS_DELIVERY=outbox), and listed only then; its records \
                                            need no publishing. It cannot be deleted (422), and verifying it \
                                            returns it unchanged. false for every domain you add",
                        }),
                    ),
                ],
            ),
        ),
        (
            "DnsRecord",
            output(
                "a DNS record to publish, with its last check",
                vec![
                    ("purpose", string("e.g. `DKIM (TXT)`")),
                    ("type", string("DNS record type, e.g. TXT")),
                    ("name", string("fully qualified name, without a trailing dot")),
                    ("value", string("value to publish")),
                    ("ttl", json!({ "type": "integer", "minimum": 0 })),
                    ("status", record_status()),
                    ("lastCheckedAt", timestamp_or_null()),
                    ("error", string_or_null("why the last check failed")),
                    (
                        "warning",
                        string_or_null(
                            "what is wrong with the value Tidings asks for, whatever the check says; on the SPF \
                             record when the server delivers by relay or MX and its operator has not set \
                             TIDINGS_SPF_INCLUDE, so the value authorises only loopback (127.0.0.1)",
                        ),
                    ),
                    (
                        "note",
                        string_or_null(
                            "on the sandbox domain's records: nothing to publish (the value is shown so that its \
                             DKIM signatures can be checked); null on the records of the domains you add",
                        ),
                    ),
                ],
            ),
        ),
        (
            "Sender",
            output(
                "a registered sender of a domain",
                vec![
                    ("username", string("local part")),
                    ("displayName", string_or_null("friendly name")),
                    ("address", string("username@domain")),
                    ("createdAt", timestamp()),
                ],
            ),
        ),
        (
            "Template",
            output(
                "a template with all its versions, oldest first",
                vec![
                    ("id", schema_ref("Ulid")),
                    ("name", string("name")),
                    ("currentVersionId", schema_ref("Ulid")),
                    ("createdAt", timestamp()),
                    ("versions", json!({ "type": "array", "items": schema_ref("TemplateVersion") })),
                ],
            ),
        ),
        (
            "TemplateVersion",
            output(
                "one version of a template, with its sources as written",
                vec![
                    ("id", schema_ref("Ulid")),
                    ("versionNo", json!({ "type": "integer", "minimum": 1 })),
                    ("subject", string("subject template")),
                    ("html", string_or_null("HTML body template")),
                    ("text", string_or_null("plain-text body template")),
                    ("createdAt", timestamp()),
                ],
            ),
        ),
        (
            "RenderedTemplate",
            output(
                "a rendered template; a part the template lacks is null",
                vec![
                    ("subject", string("rendered subject")),
                    ("html", string_or_null("rendered HTML body")),
                    ("text", string_or_null("rendered text body")),
                ],
            ),
        ),
        (
            "Suppression",
            output(
                "a suppressed address",
                vec![
                    ("id", schema_ref("Ulid")),
                    ("email", string("the address as first given (matched case-insensitively)")),
                    ("reason", schema_ref("SuppressionReason")),
                    ("source", enumeration("where the entry came from", &["api", "bounce", "complaint"])),
                    ("messageId", ulid_or_null()),
                    ("createdAt", timestamp()),
                ],
            ),
        ),
        ("Webhook", output("a webhook endpoint (without its secret)", webhook_fields())),
        ("WebhookWithSecret", output("a webhook endpoint with its current signing secret", webhook_with_secret_fields)),
        (
            "WebhookDelivery",
            output(
                "one entry of an endpoint's delivery log",
                vec![
                    ("id", schema_ref("Ulid")),
                    ("eventId", schema_ref("Ulid")),
                    ("eventType", schema_ref("WebhookEventType")),
                    ("status", schema_ref("DeliveryStatus")),
                    ("attempts", json!({ "type": "integer", "minimum": 0 })),
                    (
                        "responseCode",
                        json!({ "type": ["integer", "null"], "description": "HTTP status of the last attempt" }),
                    ),
                    ("lastError", string_or_null("why the last attempt failed")),
                    ("nextAttemptAt", timestamp_or_null()),
                    ("createdAt", timestamp()),
                ],
            ),
        ),
        (
            "Pagination",
            output(
                "paging of a list; pass `nextCursor` as `cursor` for the next page",
                vec![
                    ("limit", json!({ "type": "integer", "minimum": 1, "maximum": 200 })),
                    ("hasMore", json!({ "type": "boolean" })),
                    ("nextCursor", string_or_null("null on the last page")),
                ],
            ),
        ),
        (
            "FieldError",
            output(
                "a field at fault",
                vec![
                    ("field", string("the JSON field or query parameter, as the client named it")),
                    ("message", string("what is wrong")),
                ],
            ),
        ),
        (
            "Error",
            json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["code", "message"],
                "properties": {
                    "code": string("machine-readable snake_case code (contract §1)"),
                    "message": string("human text"),
                    "details": { "type": "array", "items": schema_ref("FieldError"), "description": "only where fields are at fault" },
                },
            }),
        ),
        (
            "ErrorEnvelope",
            output(
                "the envelope of every failure",
                vec![
                    ("success", json!({ "const": false })),
                    ("message", string("the same human text as `error.message`")),
                    ("statusCode", json!({ "type": "integer" })),
                    ("data", json!({ "type": "null" })),
                    ("error", schema_ref("Error")),
                ],
            ),
        ),
    ];
    let mut schemas = schemas;
    schemas.extend(super::requests::schemas());
    into_map(schemas)
}

pub(super) fn into_map(entries: Vec<(&str, Value)>) -> Value {
    entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<String, Value>>().into()
}
