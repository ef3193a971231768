//! The request body schemas, as serde reads the request types of `tidings_core::usecases`.
//!
//! They describe what the server accepts, not what it would like: serde ignores unknown
//! fields (so no `additionalProperties: false`) and reads `null` as absent for every
//! optional field; a length or range is stated only where the server checks exactly that.

use serde_json::{Value, json};

use super::components::{boolean_or_null, input, schema_ref, string, string_or_null};

/// The request body schemas, by name.
pub fn schemas() -> Vec<(&'static str, Value)> {
    vec![
        (
            "CreateApiKeyRequest",
            input(
                "body of POST /v1/keys",
                &[],
                vec![
                    (
                        "name",
                        json!({ "type": ["string", "null"], "minLength": 1, "maxLength": 100,
            "description": "label without control characters; default `default`" }),
                    ),
                    (
                        "scope",
                        json!({ "type": ["string", "null"], "enum": ["full", "send", null], "description": "default `full`" }),
                    ),
                    (
                        "sendingDomainId",
                        string_or_null("restrict the key to sending from this domain of the workspace"),
                    ),
                    (
                        "rateLimitPerSec",
                        json!({ "type": ["integer", "null"], "minimum": 1, "maximum": 10000,
            "description": "sends per second; default 10" }),
                    ),
                ],
            ),
        ),
        (
            "SendMessageRequest",
            input(
                "body of POST /v1/messages: give html, text or a template; `variables` only with a template",
                &["to"],
                vec![
                    ("to", string("one recipient address (at most 320 characters)")),
                    (
                        "from",
                        string_or_null(
                            "`Display Name <local@domain>` or `local@domain` on a Verified domain; \
                default: the key's sending domain or the workspace's only Verified domain, as noreply@",
                        ),
                    ),
                    (
                        "subject",
                        json!({ "type": ["string", "null"], "maxLength": 998,
                "description": "required unless sending from a template (then it overrides the template's); no line breaks or control characters" }),
                    ),
                    ("html", string_or_null("HTML body (overrides the template's)")),
                    (
                        "text",
                        string_or_null(
                            "plain-text body (overrides the template's). Absent with an `html` body: a text part is \
                generated from the HTML (links as `label (url)`, no markup). `\"\"` with an `html` body: no text \
                part, the HTML is sent alone. Line ends are sent as CRLF whatever they are",
                        ),
                    ),
                    ("templateId", string_or_null("render the current version of this template")),
                    ("templateVersionId", string_or_null("render exactly this template version")),
                    (
                        "variables",
                        json!({ "type": ["object", "null"], "description": "values for the template's placeholders" }),
                    ),
                    (
                        "tracking",
                        json!({
                            "type": ["object", "null"],
                            "description": "open and click tracking of this message; a key left out (or null) \
                                takes the sending domain's `openTracking` / `clickTracking`. Only the HTML part \
                                is tracked: links with `data-tidings-notrack` stay as written",
                            "properties": {
                                "opens": boolean_or_null("add the open pixel"),
                                "clicks": boolean_or_null("rewrite http(s) links to the click redirect"),
                            },
                        }),
                    ),
                    (
                        "scheduledAt",
                        json!({
                            "type": ["string", "null"],
                            "format": "date-time",
                            "description": "send at this time (RFC 3339) instead of now: status `Scheduled` until \
                                then. At most 30 days ahead; a time up to 60 s in the past (or now) sends at once; \
                                earlier is a 422",
                        }),
                    ),
                    (
                        "replyTo",
                        json!({
                            "description": "`Reply-To`: one address, or an array of 1 to 50, each checked like `to`",
                            "oneOf": [
                                { "type": "string" },
                                { "type": "array", "minItems": 1, "maxItems": 50, "items": { "type": "string" } },
                                { "type": "null" },
                            ],
                            "examples": ["support@acme.com", ["support@acme.com", "billing@acme.com"]],
                        }),
                    ),
                    (
                        "headers",
                        json!({
                            "type": ["object", "null"],
                            "description": "custom header fields, name to value (at most 50). A name is 1 to 76 \
                                printable ASCII characters other than ':'; a value at most 998 characters without \
                                CR, LF or other control characters (tab allowed); names ignore case and may not \
                                repeat. Names Tidings writes are refused: From, To, Cc, Bcc, Subject, Date, \
                                Message-ID, DKIM-Signature, Return-Path, Reply-To (use `replyTo`), Sender, \
                                MIME-Version, Content-Type, Content-Transfer-Encoding, Content-Disposition, \
                                Content-ID, Received, Received-SPF, Authentication-Results, Delivered-To, \
                                X-Original-To and any Resent-* or ARC-*. List-Unsubscribe and \
                                List-Unsubscribe-Post are allowed and DKIM-signed",
                            "maxProperties": 50,
                            "additionalProperties": { "type": "string", "maxLength": 998 },
                            "examples": [{ "List-Unsubscribe": "<https://acme.com/unsubscribe/42>", "X-Campaign": "spring" }],
                        }),
                    ),
                    (
                        "tags",
                        json!({
                            "type": ["array", "null"],
                            "description": "up to 10 tags, returned on the message and in webhook payloads, and \
                                usable as the `tag` list filter; names unique",
                            "maxItems": 10,
                            "items": {
                                "type": "object",
                                "required": ["name", "value"],
                                "properties": {
                                    "name": { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,256}$" },
                                    "value": { "type": "string", "pattern": "^[ -~]{0,256}$",
                                        "description": "printable ASCII; may be empty" },
                                },
                            },
                        }),
                    ),
                    (
                        "metadata",
                        json!({
                            "type": ["object", "null"],
                            "description": "string keys (1 to 40 characters, no control characters, '[' or ']') to \
                                string values, at most 10 KiB of UTF-8 together; returned on the message and in \
                                webhook payloads, and usable as the `metadata[key]` list filter",
                            "additionalProperties": { "type": "string" },
                        }),
                    ),
                    (
                        "attachments",
                        json!({
                            "type": ["array", "null"],
                            "description": "up to 100 files, their base64 `content` at most 40 MiB together. \
                                With `contentId` a file is an inline part (`Content-ID: <contentId>`, in \
                                multipart/related with the HTML, which refers to it as `cid:<contentId>`; needs an \
                                HTML body); otherwise an attachment. Executables are refused by extension (.exe, \
                                .bat, .cmd, .com, .scr, .pif, .vbs, .vbe, .js, .jse, .wsf, .wsh, .msi, .msp, .cpl, \
                                .jar, .ps1, .hta, .lnk, .reg, .dll and others) and by content type \
                                (application/x-msdownload, application/x-msdos-program, application/x-sh and \
                                others). The content is not returned, only a summary",
                            "maxItems": 100,
                            "items": {
                                "type": "object",
                                "required": ["filename", "contentType", "content"],
                                "properties": {
                                    "filename": { "type": "string", "minLength": 1, "maxLength": 255,
                                        "description": "no '/', '\\' or control characters" },
                                    "contentType": { "type": "string", "description": "`type/subtype`, no parameters",
                                        "examples": ["application/pdf"] },
                                    "content": { "type": "string", "contentEncoding": "base64",
                                        "description": "standard base64 with padding, no whitespace" },
                                    "contentId": { "type": ["string", "null"], "maxLength": 250,
                                        "description": "letters, digits and !#$%&'*+-/=?^_`{|}~.@, without angle brackets" },
                                },
                            },
                        }),
                    ),
                ],
            ),
        ),
        (
            "SendBatchRequest",
            json!({
                "type": "array",
                "description": "body of POST /v1/messages/batch: 1 to 500 sends, each what POST /v1/messages takes",
                "minItems": 1,
                "maxItems": 500,
                "items": schema_ref("SendMessageRequest"),
            }),
        ),
        (
            "UpdateMessageRequest",
            input(
                "body of PATCH /v1/messages/{id}",
                &["scheduledAt"],
                vec![(
                    "scheduledAt",
                    json!({
                        "type": ["string", "null"],
                        "format": "date-time",
                        "description": "the new send time (same limits as a send; a Queued message becomes \
                            Scheduled), or null to send a Scheduled message now",
                    }),
                )],
            ),
        ),
        (
            "AddDomainRequest",
            input(
                "body of POST /v1/domains",
                &["domain"],
                vec![("domain", string("the domain name, e.g. `example.com`"))],
            ),
        ),
        (
            "UpdateDomainRequest",
            input(
                "body of PATCH /v1/domains/{id}; an absent field is kept",
                &[],
                vec![
                    ("openTracking", boolean_or_null("track opens of messages from this domain")),
                    ("clickTracking", boolean_or_null("track clicks of messages from this domain")),
                ],
            ),
        ),
        (
            "AddSenderRequest",
            input(
                "body of POST /v1/domains/{id}/senders",
                &["username"],
                vec![
                    ("username", string("the local part, e.g. `billing`")),
                    (
                        "displayName",
                        string_or_null("friendly name used when a send's `from` has none; empty means none"),
                    ),
                ],
            ),
        ),
        (
            "CreateTemplateRequest",
            input(
                "body of POST /v1/templates; handlebars syntax",
                &["name", "subject"],
                vec![
                    (
                        "name",
                        json!({ "type": "string", "minLength": 1, "description": "1–200 characters after trimming" }),
                    ),
                    (
                        "subject",
                        json!({ "type": "string", "minLength": 1, "description": "subject template, no line breaks or control characters" }),
                    ),
                    ("html", string_or_null("HTML body template")),
                    ("text", string_or_null("plain-text body template")),
                ],
            ),
        ),
        (
            "UpdateTemplateRequest",
            input(
                "body of PATCH /v1/templates/{id}; an absent field is kept",
                &[],
                vec![
                    ("name", string_or_null("new name, 1–200 characters after trimming")),
                    ("currentVersionId", string_or_null("id of one of this template's versions to make current")),
                ],
            ),
        ),
        (
            "AddTemplateVersionRequest",
            input(
                "body of POST /v1/templates/{id}/versions",
                &["subject"],
                vec![
                    (
                        "subject",
                        json!({ "type": "string", "minLength": 1, "description": "subject template, no line breaks or control characters" }),
                    ),
                    ("html", string_or_null("HTML body template (not inherited from the previous version)")),
                    ("text", string_or_null("plain-text body template (not inherited from the previous version)")),
                    ("makeCurrent", boolean_or_null("make the new version current; default true")),
                ],
            ),
        ),
        (
            "RenderTemplateRequest",
            input(
                "body of POST /v1/templates/{id}/render",
                &[],
                vec![
                    ("variables", json!({ "type": ["object", "null"], "description": "values for the placeholders" })),
                    ("versionId", string_or_null("render this version instead of the current one")),
                ],
            ),
        ),
        (
            "AddSuppressionRequest",
            input("body of POST /v1/suppressions", &["email"], vec![("email", string("the address to suppress"))]),
        ),
        (
            "CreateWebhookRequest",
            input(
                "body of POST /v1/webhooks",
                &["url", "eventTypes"],
                vec![
                    ("url", string("https URL that does not name a non-public address")),
                    ("eventTypes", json!({ "type": "array", "minItems": 1, "items": schema_ref("WebhookEventType") })),
                    ("enabled", boolean_or_null("default true")),
                ],
            ),
        ),
        (
            "UpdateWebhookRequest",
            input(
                "body of PATCH /v1/webhooks/{id}; an absent field is kept",
                &[],
                vec![
                    ("url", string_or_null("new https URL")),
                    (
                        "eventTypes",
                        json!({ "type": ["array", "null"], "minItems": 1, "items": schema_ref("WebhookEventType") }),
                    ),
                    ("enabled", boolean_or_null("enable or disable")),
                ],
            ),
        ),
    ]
}
