//! The bodies of an `InboundReceived` event (contract §13), in each webhook format. None
//! carries the raw message or an attachment's contents: each has a URL of the API to fetch
//! it with a key (docs/api.md#inbound-mail).
//!
//! - `tidings`: `{"type":"InboundReceived","createdAt","data":{…}}` with the fields of
//!   `GET /v1/inbound/messages/{id}`, `rawUrl` and each attachment's `url`.
//! - `resend`: Resend's `email.received` (`{"type","created_at","data":{"email_id",
//!   "created_at","from","to","cc","bcc","subject","message_id","attachments"}}`): like
//!   Resend's, metadata only; the body is fetched through the API.
//! - `postmark`: Postmark's inbound webhook object (`From`, `FromFull`, `ToFull`, `Subject`,
//!   `TextBody`, `HtmlBody`, `StrippedTextReply`, `Headers`, `Attachments`, …), whose
//!   attachments have `ContentURL` in place of Postmark's inline `Content`.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::render_json;
use crate::Result;
use crate::ids::{EventId, InboundMessageId, MessageId};
use crate::model::{AttachmentMeta, AuthResults, InboundHeader, InboundMailbox, InboundMessage, WebhookFormat};

/// Where the API serves a message's raw bytes and attachments: `{base}/v1/inbound/messages/{id}`.
#[derive(Debug, Clone)]
pub(crate) struct InboundUrls {
    base: String,
}

impl InboundUrls {
    /// URLs under `base` (the server's public URL, or `""` for paths alone).
    pub(crate) fn new(base: &str) -> Self {
        Self { base: base.trim_end_matches('/').to_owned() }
    }

    fn message(&self, id: InboundMessageId) -> String {
        format!("{}/v1/inbound/messages/{id}", self.base)
    }

    /// The raw message's URL.
    pub(crate) fn raw(&self, id: InboundMessageId) -> String {
        format!("{}/raw", self.message(id))
    }

    /// The URL of attachment `index`.
    pub(crate) fn attachment(&self, id: InboundMessageId, index: usize) -> String {
        format!("{}/attachments/{index}", self.message(id))
    }
}

/// The body of the event about `message` for an endpoint in `format`.
pub(crate) fn inbound_body(
    format: WebhookFormat,
    event_id: EventId,
    at: DateTime<Utc>,
    message: &InboundMessage,
    urls: &InboundUrls,
) -> Result<String> {
    match format {
        WebhookFormat::Tidings => render_json(&TidingsPayload {
            event_type: "InboundReceived",
            created_at: at,
            data: TidingsData::of(event_id, message, urls),
        }),
        WebhookFormat::Resend => {
            render_json(&ResendPayload { event_type: "email.received", created_at: at, data: ResendData::of(message) })
        }
        WebhookFormat::Postmark => render_json(&PostmarkInbound::of(message, urls)),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TidingsPayload<'a> {
    #[serde(rename = "type")]
    event_type: &'static str,
    created_at: DateTime<Utc>,
    data: TidingsData<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TidingsData<'a> {
    inbound_message_id: InboundMessageId,
    event_id: EventId,
    received_at: DateTime<Utc>,
    from: Option<&'a InboundMailbox>,
    to: &'a [InboundMailbox],
    cc: &'a [InboundMailbox],
    recipients: Vec<String>,
    subject: Option<&'a str>,
    text: Option<&'a str>,
    html: Option<&'a str>,
    stripped_text_reply: Option<&'a str>,
    headers: &'a [InboundHeader],
    attachments: Vec<TidingsAttachment<'a>>,
    message_id: Option<&'a str>,
    in_reply_to_message_id: Option<MessageId>,
    spf: &'a crate::model::AuthCheck,
    dkim: &'a crate::model::AuthCheck,
    dmarc: &'a crate::model::AuthCheck,
    raw_url: String,
    size: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TidingsAttachment<'a> {
    #[serde(flatten)]
    meta: &'a AttachmentMeta,
    url: String,
}

impl<'a> TidingsData<'a> {
    fn of(event_id: EventId, m: &'a InboundMessage, urls: &InboundUrls) -> Self {
        let p = &m.parsed;
        let AuthResults { spf, dkim, dmarc } = &m.auth;
        Self {
            inbound_message_id: m.id,
            event_id,
            received_at: m.received_at,
            from: p.from.as_ref(),
            to: &p.to,
            cc: &p.cc,
            recipients: m.envelope.recipients.iter().map(ToString::to_string).collect(),
            subject: p.subject.as_deref(),
            text: p.text.as_deref(),
            html: p.html.as_deref(),
            stripped_text_reply: p.stripped_text_reply.as_deref(),
            headers: &p.headers,
            attachments: p
                .attachments
                .iter()
                .map(|meta| TidingsAttachment { meta, url: urls.attachment(m.id, meta.index) })
                .collect(),
            message_id: p.message_id.as_deref(),
            in_reply_to_message_id: m.in_reply_to_message_id,
            spf,
            dkim,
            dmarc,
            raw_url: urls.raw(m.id),
            size: m.size,
        }
    }
}

#[derive(Serialize)]
struct ResendPayload<'a> {
    #[serde(rename = "type")]
    event_type: &'static str,
    created_at: DateTime<Utc>,
    data: ResendData<'a>,
}

#[derive(Serialize)]
struct ResendData<'a> {
    email_id: InboundMessageId,
    created_at: DateTime<Utc>,
    from: String,
    to: Vec<String>,
    cc: Vec<String>,
    bcc: Vec<String>,
    subject: &'a str,
    message_id: String,
    attachments: Vec<ResendAttachment<'a>>,
}

#[derive(Serialize)]
struct ResendAttachment<'a> {
    id: String,
    filename: &'a str,
    content_type: &'a str,
    content_disposition: &'static str,
    content_id: Option<&'a str>,
}

/// A mailbox as `Name <address>`, or the address alone.
fn written(mailbox: &InboundMailbox) -> String {
    match &mailbox.name {
        Some(name) => format!("{name} <{}>", mailbox.address),
        None => mailbox.address.clone(),
    }
}

impl<'a> ResendData<'a> {
    fn of(m: &'a InboundMessage) -> Self {
        let p = &m.parsed;
        let listed: Vec<String> = p.to.iter().chain(&p.cc).map(|b| b.address.to_ascii_lowercase()).collect();
        // Envelope recipients not in To or Cc were Bcc'd.
        let bcc = m
            .envelope
            .recipients
            .iter()
            .map(ToString::to_string)
            .filter(|r| !listed.contains(&r.to_ascii_lowercase()))
            .collect();
        Self {
            email_id: m.id,
            created_at: m.received_at,
            from: p.from.as_ref().map(written).unwrap_or_default(),
            to: p.to.iter().map(|b| b.address.clone()).collect(),
            cc: p.cc.iter().map(|b| b.address.clone()).collect(),
            bcc,
            subject: p.subject.as_deref().unwrap_or(""),
            message_id: p.message_id.as_ref().map(|id| format!("<{id}>")).unwrap_or_default(),
            attachments: p
                .attachments
                .iter()
                .map(|a| ResendAttachment {
                    id: a.index.to_string(),
                    filename: a.filename.as_deref().unwrap_or(""),
                    content_type: &a.content_type,
                    content_disposition: if a.inline { "inline" } else { "attachment" },
                    content_id: a.content_id.as_deref(),
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct PostmarkInbound<'a> {
    from_name: &'a str,
    message_stream: &'static str,
    from: &'a str,
    from_full: PostmarkMailbox<'a>,
    to: String,
    to_full: Vec<PostmarkMailbox<'a>>,
    cc: String,
    cc_full: Vec<PostmarkMailbox<'a>>,
    original_recipient: String,
    subject: &'a str,
    #[serde(rename = "MessageID")]
    message_id: InboundMessageId,
    reply_to: &'a str,
    mailbox_hash: String,
    date: String,
    text_body: &'a str,
    html_body: &'a str,
    stripped_text_reply: &'a str,
    tag: &'a str,
    headers: Vec<PostmarkHeader<'a>>,
    attachments: Vec<PostmarkAttachment<'a>>,
    #[serde(rename = "RawURL")]
    raw_url: String,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct PostmarkMailbox<'a> {
    email: &'a str,
    name: &'a str,
    mailbox_hash: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct PostmarkHeader<'a> {
    name: &'a str,
    value: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct PostmarkAttachment<'a> {
    name: &'a str,
    content_type: &'a str,
    content_length: usize,
    #[serde(rename = "ContentID")]
    content_id: &'a str,
    #[serde(rename = "ContentURL")]
    content_url: String,
}

/// Postmark's `MailboxHash`: what follows `+` in the local part (`support+42@…` → `42`).
fn mailbox_hash(address: &str) -> &str {
    let local = address.rsplit_once('@').map_or(address, |(local, _)| local);
    local.split_once('+').map_or("", |(_, hash)| hash)
}

fn postmark_mailbox(b: &InboundMailbox) -> PostmarkMailbox<'_> {
    PostmarkMailbox { email: &b.address, name: b.name.as_deref().unwrap_or(""), mailbox_hash: mailbox_hash(&b.address) }
}

impl<'a> PostmarkInbound<'a> {
    fn of(m: &'a InboundMessage, urls: &InboundUrls) -> Self {
        let p = &m.parsed;
        let from = p.from.as_ref();
        let header =
            |name: &str| p.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value.as_str());
        let original = m.envelope.recipients.first().map(ToString::to_string).unwrap_or_default();
        let joined = |list: &[InboundMailbox]| list.iter().map(written).collect::<Vec<_>>().join(", ");
        Self {
            from_name: from.and_then(|b| b.name.as_deref()).unwrap_or(""),
            message_stream: "inbound",
            from: from.map_or("", |b| b.address.as_str()),
            from_full: from.map_or(PostmarkMailbox { email: "", name: "", mailbox_hash: "" }, postmark_mailbox),
            to: joined(&p.to),
            to_full: p.to.iter().map(postmark_mailbox).collect(),
            cc: joined(&p.cc),
            cc_full: p.cc.iter().map(postmark_mailbox).collect(),
            mailbox_hash: mailbox_hash(&original).to_owned(),
            original_recipient: original,
            subject: p.subject.as_deref().unwrap_or(""),
            message_id: m.id,
            reply_to: header("Reply-To").unwrap_or(""),
            date: header("Date").map_or_else(|| m.received_at.to_rfc2822(), ToOwned::to_owned),
            text_body: p.text.as_deref().unwrap_or(""),
            html_body: p.html.as_deref().unwrap_or(""),
            stripped_text_reply: p.stripped_text_reply.as_deref().unwrap_or(""),
            tag: "",
            headers: p.headers.iter().map(|h| PostmarkHeader { name: &h.name, value: &h.value }).collect(),
            attachments: p
                .attachments
                .iter()
                .map(|a| PostmarkAttachment {
                    name: a.filename.as_deref().unwrap_or(""),
                    content_type: &a.content_type,
                    content_length: a.size,
                    content_id: a.content_id.as_deref().unwrap_or(""),
                    content_url: urls.attachment(m.id, a.index),
                })
                .collect(),
            raw_url: urls.raw(m.id),
        }
    }
}
