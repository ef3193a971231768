//! The body of a send (`POST /v1/messages`, and each item of a batch) as the client writes
//! it, and its schema. Fields have the Rust types of core's `SendRequest`, which they are moved
//! into, so that parsing answers as core's own types would; what the use case checks by hand
//! (addresses, header names, metadata sizes) is stated in the schema as far as it can be.

use serde::Deserialize;
use serde_json::{Value, json};
use tidings_core::model::extras::AttachmentContent;
use tidings_core::usecases;
use utoipa::ToSchema;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type};

/// body of POST /v1/messages: give html, text or a template; `variables` only with a template
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SendMessageRequest)]
pub struct SendMessageRequest {
    #[schema(required, schema_with = to_schema)]
    to: Option<Value>,
    #[schema(schema_with = cc_schema)]
    cc: Option<Value>,
    #[schema(schema_with = bcc_schema)]
    bcc: Option<Value>,
    /// `Display Name <local@domain>` or `local@domain` on a Verified domain; default: the key's sending
    /// domain or the workspace's only Verified domain, as noreply@
    from: Option<String>,
    /// required unless sending from a template (then it overrides the template's); no line breaks or
    /// control characters
    #[schema(max_length = 998)]
    subject: Option<String>,
    /// HTML body (overrides the template's)
    html: Option<String>,
    /// plain-text body (overrides the template's). Absent with an `html` body: a text part is generated
    /// from the HTML (links as `label (url)`, no markup). `""` with an `html` body: no text part, the
    /// HTML is sent alone. Line ends are sent as CRLF whatever they are
    text: Option<String>,
    /// render the current version of this template
    template_id: Option<String>,
    /// render exactly this template version
    template_version_id: Option<String>,
    /// values for the template's placeholders
    #[schema(value_type = Option<Object>)]
    variables: Option<Value>,
    tracking: Option<TrackingRequest>,
    /// send at this time (RFC 3339) instead of now: status `Scheduled` until then. At most 30 days
    /// ahead; a time up to 60 s in the past (or now) sends at once; earlier is a 422
    #[schema(format = DateTime)]
    scheduled_at: Option<String>,
    #[schema(schema_with = reply_to_schema)]
    reply_to: Option<Value>,
    #[schema(schema_with = headers_schema)]
    headers: Option<Value>,
    /// up to 10 tags, returned on the message and in webhook payloads, and usable as the `tag` list
    /// filter; names unique
    #[schema(max_items = 10)]
    tags: Option<Vec<TagRequest>>,
    /// string keys (1 to 40 characters, no control characters, '[' or ']') to string values, at most
    /// 10 KiB of UTF-8 together; returned on the message and in webhook payloads, and usable as the
    /// `metadata[key]` list filter
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    metadata: Option<Value>,
    /// up to 100 files, their base64 `content` at most 40 MiB together. With `contentId` a file is an
    /// inline part (`Content-ID: <contentId>`, in multipart/related with the HTML, which refers to it
    /// as `cid:<contentId>`; needs an HTML body); otherwise an attachment. Executables are refused by
    /// extension (.exe, .bat, .cmd, .com, .scr, .pif, .vbs, .vbe, .js, .jse, .wsf, .wsh, .msi, .msp,
    /// .cpl, .jar, .ps1, .hta, .lnk, .reg, .dll and others) and by content type
    /// (application/x-msdownload, application/x-msdos-program, application/x-sh and others). The
    /// content is not returned, only a summary
    #[schema(max_items = 100)]
    attachments: Option<Vec<AttachmentRequest>>,
}

impl From<SendMessageRequest> for usecases::SendRequest {
    fn from(r: SendMessageRequest) -> Self {
        Self {
            to: r.to,
            cc: r.cc,
            bcc: r.bcc,
            from: r.from,
            subject: r.subject,
            html: r.html,
            text: r.text,
            template_id: r.template_id,
            template_version_id: r.template_version_id,
            variables: r.variables,
            tracking: r.tracking.map(|t| usecases::TrackingRequest { opens: t.opens, clicks: t.clicks }),
            reply_to: r.reply_to,
            headers: r.headers,
            tags: r
                .tags
                .map(|tags| tags.into_iter().map(|t| usecases::TagRequest { name: t.name, value: t.value }).collect()),
            metadata: r.metadata,
            attachments: r.attachments.map(|files| files.into_iter().map(Into::into).collect()),
            scheduled_at: r.scheduled_at,
            written_headers: None,
        }
    }
}

/// open and click tracking of this message; a key left out (or null) takes the sending domain's
/// `openTracking` / `clickTracking`. Only the HTML part is tracked: links with
/// `data-tidings-notrack` stay as written
#[derive(ToSchema)]
pub struct TrackingRequest {
    /// add the open pixel
    opens: Option<bool>,
    /// rewrite http(s) links to the click redirect
    clicks: Option<bool>,
}

impl<'de> Deserialize<'de> for TrackingRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Core's rule: only a JSON object is read as one.
        let usecases::TrackingRequest { opens, clicks } = usecases::TrackingRequest::deserialize(deserializer)?;
        Ok(Self { opens, clicks })
    }
}

/// a tag of a send
#[derive(Deserialize, ToSchema)]
pub struct TagRequest {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,256}$")]
    name: String,
    /// printable ASCII; may be empty
    #[schema(pattern = "^[ -~]{0,256}$")]
    value: String,
}

/// a file of a send
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentRequest {
    /// no '/', '\' or control characters
    #[schema(min_length = 1, max_length = 255)]
    filename: String,
    /// `type/subtype`, optionally with a charset: `text/plain; charset=utf-8`
    #[schema(examples("application/pdf"))]
    content_type: String,
    /// standard base64 with padding, no whitespace
    #[schema(value_type = String, content_encoding = "base64")]
    content: AttachmentContent,
    /// letters, digits and !#$%&'*+-/=?^_`{|}~.@, without angle brackets
    #[serde(default)]
    #[schema(max_length = 250)]
    content_id: Option<String>,
}

impl From<AttachmentRequest> for usecases::AttachmentRequest {
    fn from(a: AttachmentRequest) -> Self {
        Self { filename: a.filename, content_type: a.content_type, content: a.content, content_id: a.content_id }
    }
}

/// `replyTo`: one address or an array (the use case checks each).
fn reply_to_schema() -> Schema {
    let one = ObjectBuilder::new().schema_type(Type::String);
    let many = ArrayBuilder::new()
        .min_items(Some(1))
        .max_items(Some(50))
        .items(ObjectBuilder::new().schema_type(Type::String));
    OneOfBuilder::new()
        .item(one)
        .item(many)
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some("`Reply-To`: one address, or an array of 1 to 50, each checked like `to`"))
        .examples([json!("support@acme.com"), json!(["support@acme.com", "billing@acme.com"])])
        .into()
}

/// `to`, `cc` or `bcc`: one address or an array of them (contract §10).
fn recipients_schema(description: &str, nullable: bool, example: Value) -> Schema {
    let one = ObjectBuilder::new().schema_type(Type::String).max_length(Some(600));
    let many = ArrayBuilder::new()
        .min_items(Some(usize::from(!nullable)))
        .max_items(Some(50))
        .items(ObjectBuilder::new().schema_type(Type::String).max_length(Some(600)));
    let mut choice = OneOfBuilder::new().item(one).item(many);
    if nullable {
        choice = choice.item(ObjectBuilder::new().schema_type(Type::Null));
    }
    choice.description(Some(description)).examples([example]).into()
}

fn to_schema() -> Schema {
    recipients_schema(
        "recipients: one address or an array of 1 to 50, each `local@domain` or `Display Name <local@domain>`. \
         At most 50 distinct recipients across to, cc and bcc; an address named twice receives once, in the first \
         list naming it (to, then cc, then bcc). One message: one id, one Message-ID, one rate-limit token",
        false,
        json!(["Ann <ann@example.com>", "bob@example.com"]),
    )
}

fn cc_schema() -> Schema {
    recipients_schema(
        "Cc recipients: one address or an array, like `to`; shown in every copy's `Cc:` header",
        true,
        json!("Carol <carol@example.com>"),
    )
}

fn bcc_schema() -> Schema {
    recipients_schema(
        "Bcc recipients: one address or an array, like `to`; in no header of any copy",
        true,
        json!(["audit@example.com"]),
    )
}

/// `headers`: a map the use case checks name by name.
fn headers_schema() -> Schema {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .description(Some(
            "custom header fields, name to value (at most 50). A name is 1 to 76 printable ASCII characters other \
             than ':'; a value at most 998 characters without CR, LF or other control characters (tab allowed); \
             names ignore case and may not repeat. Names Tidings writes are refused: From, To, Cc, Bcc, Subject, \
             Date, Message-ID, DKIM-Signature, Return-Path, Reply-To (use `replyTo`), Sender, MIME-Version, \
             Content-Type, Content-Transfer-Encoding, Content-Disposition, Content-ID, Received, Received-SPF, \
             Authentication-Results, Delivered-To, X-Original-To and any Resent-* or ARC-*. List-Unsubscribe and \
             List-Unsubscribe-Post are allowed and DKIM-signed",
        ))
        .max_properties(Some(50))
        .additional_properties(Some(ObjectBuilder::new().schema_type(Type::String).max_length(Some(998))))
        .examples([json!({ "List-Unsubscribe": "<https://acme.com/unsubscribe/42>", "X-Campaign": "spring" })])
        .into()
}
