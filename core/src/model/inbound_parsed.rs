//! What an inbound message says, read from its bytes by `crate::inbound::parse`: the parsed
//! form stored with the message and shown by the API and the `InboundReceived` event
//! (contract §13). Here, below the ports, because the store keeps it.

use serde::{Deserialize, Serialize};

/// What an inbound message says, as the API and the `InboundReceived` event show it
/// (contract §13), but for the authentication results, which need the SMTP session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParsedInbound {
    /// The first mailbox of `From`, `None` without one.
    pub from: Option<InboundMailbox>,
    /// The mailboxes of every `To` header.
    pub to: Vec<InboundMailbox>,
    /// The mailboxes of every `Cc` header.
    pub cc: Vec<InboundMailbox>,
    /// `Subject`, decoded, cut to `InboundLimits::max_header_value_bytes`.
    pub subject: Option<String>,
    /// The text body, or the text of the HTML body when there is no text one.
    pub text: Option<String>,
    /// The HTML body.
    pub html: Option<String>,
    /// `inbound::strip_reply` of `text`.
    pub stripped_text_reply: Option<String>,
    /// The top-level headers, in order, decoded and bounded.
    pub headers: Vec<InboundHeader>,
    /// Every part that is not the body.
    pub attachments: Vec<AttachmentMeta>,
    /// `Message-ID`, without angle brackets.
    pub message_id: Option<String>,
    /// The ids of `In-Reply-To`, without angle brackets, as written.
    pub in_reply_to: Vec<String>,
    /// The ids of `References`, oldest first as written, the newest
    /// `InboundLimits::max_references` of them.
    pub references: Vec<String>,
    /// Which lists a truncating limit cut.
    pub truncated: Truncation,
}

/// The lists of a [`ParsedInbound`] a limit has cut (`true`: some entries are left out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Truncation {
    /// `headers` (count, total size or one value's size).
    pub headers: bool,
    /// `to` or `cc`.
    pub recipients: bool,
    /// `references` (or `in_reply_to`, which has the same limit but keeps its first ids).
    pub references: bool,
}

/// A mailbox as the message wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboundMailbox {
    /// The display name, decoded; `None` when absent or blank.
    pub name: Option<String>,
    /// The address as written; not checked against Tidings' rules for sending.
    pub address: String,
}

/// One attachment's metadata; its contents come from `inbound::attachment_bytes` with `index`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentMeta {
    /// Position among the message's attachments, from 0.
    pub index: usize,
    /// The file name (RFC 2231 and RFC 2047 forms decoded), `None` if the part has none.
    pub filename: Option<String>,
    /// `type/subtype`, lower-case; `application/octet-stream` when the part declares none.
    pub content_type: String,
    /// Size of the decoded contents in bytes.
    pub size: usize,
    /// `Content-ID` without angle brackets: what a `cid:` URL in the HTML names.
    pub content_id: Option<String>,
    /// Shown in the body rather than offered as a file: `Content-Disposition: inline`, or no
    /// disposition and a `Content-ID`.
    pub inline: bool,
}

/// One header as written: `name` as the sender spelled it, `value` decoded to one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboundHeader {
    /// The field name, e.g. `Received` or `X-Mailer`.
    pub name: String,
    /// The value, unfolded, encoded words decoded, cut to the value limit.
    pub value: String,
}
