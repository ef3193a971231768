//! RFC 5322 bytes of a message, with lettre's message builder (no transport in core).
//!
//! What goes on the wire:
//! - `From` (with the display name resolved at accept time: the send's own, else the
//!   registered sender's), `To`, `Subject`, `Date`, `Message-ID`, `MIME-Version`, and the
//!   body: `multipart/alternative` (text first, as RFC 2046 orders from plainest to richest)
//!   when there is HTML and a text, else the one part. A send with HTML and no text gets a
//!   text part generated from the HTML ([`text_from_html`]), as the HTML was sent, before
//!   tracking; an empty `text` beside HTML is the opt-out and sends `text/html` alone, and so
//!   does HTML that shows no text. The text is generated
//!   here rather than stored at accept time, so messages accepted before it existed get it
//!   too (docs/decisions.md).
//! - `Message-ID: <ULID@sending-domain>`, the ULID being the message id, so the value without
//!   brackets (the `providerMessageId`) names the message on its own. `Date` is the time the
//!   message was accepted (RFC 5322 §3.6.1: when it was ready to enter the mail system), so
//!   every attempt carries the same bytes up to the DKIM signatures' timestamps.
//! - Non-ASCII in subjects and display names becomes RFC 2047 encoded words (and so does a
//!   whole subject holding a word too long to fit a 998-octet line); text and HTML parts
//!   have CRLF line ends whatever the client sent and are 7bit, quoted-printable or base64;
//!   files are always base64 ([`bodies`](super::bodies)). The multipart boundary is derived
//!   from the message id (deterministic output) unless a body happens to contain it.
//!
//! - With tracking ([`TrackingConfig`] given and the message asking for it), the HTML part
//!   is rewritten ([`rewrite_html`]) before anything is encoded, so the DKIM signatures,
//!   which [`prepare`](super::prepare) adds to the built bytes, cover the tracked HTML.
//!   The text part is never touched, and a message without an HTML part is not tracked.
//!
//! No header injection: addresses and display names are newtypes that refuse control
//! characters, and the subject is passed through [`clean_subject`] (the API refuses CR/LF
//! already; other control characters are shown as U+FFFD rather than written raw). lettre
//! encodes every word that is not printable ASCII, so nothing a client sends can end a
//! header line.

use std::borrow::Cow;
use std::time::SystemTime;

use lettre::message::header::{
    ContentDisposition, ContentId, ContentType, Header, HeaderName, HeaderValue, MessageId as MessageIdHeader,
};
use lettre::message::{Mailbox as WireMailbox, MultiPart, MultiPartBuilder, SinglePart};

use crate::Cause;
use crate::email::{EmailAddress, Mailbox};
use crate::model::extras::{Attachment, CustomHeader};
use crate::model::{Domain, Message, RecipientKind};
use crate::outbound::bodies::{file_body, text_part};
use crate::outbound::html_text::text_from_html;
use crate::outbound::return_path::ReturnPath;
use crate::tracking::{TrackingConfig, rewrite_html};

/// Why a message cannot be turned into bytes. The message fails (`Failed`) with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Neither html nor text (the API refuses such sends; a stored one is corrupt).
    #[error("the message has neither an html nor a text body")]
    NoBody,
    /// The message names another domain than the one given to sign it with.
    #[error("the message belongs to domain {expected}, not {given}")]
    WrongDomain {
        /// The message's `domain_id`.
        expected: String,
        /// The domain passed in.
        given: String,
    },
    /// lettre refused an address that our own parser accepted.
    #[error("the {field} address {address} cannot be written: {reason}")]
    Address {
        /// `from` or `to`.
        field: &'static str,
        /// The address.
        address: String,
        /// lettre's reason.
        #[source]
        reason: Cause,
    },
    /// A stored attachment's content is not base64 (the API checks it; a stored one is corrupt).
    #[error("the attachment {filename} cannot be decoded: {reason}")]
    Attachment {
        /// Its filename.
        filename: String,
        /// The decoder's reason.
        reason: String,
    },
    /// lettre could not assemble the message.
    #[error("the message cannot be assembled: {0}")]
    Assemble(#[source] Cause),
}

/// The unsigned bytes of a message and the Message-ID they carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltMessage {
    /// The `Message-ID` value without angle brackets: `providerMessageId`.
    pub provider_message_id: String,
    /// The whole message, CRLF line ends, without DKIM signatures.
    pub raw: Vec<u8>,
}

/// `<message id>@<sending domain>`: the Message-ID (without brackets) of `message` sent
/// from `domain`, the same on every attempt.
pub fn provider_message_id(message: &Message, domain: &Domain) -> String {
    format!("{}@{}", message.id, domain.name)
}

/// Builds the RFC 5322 message for `message` sent from `domain` (its sending domain), with
/// the open and click tracking the message asks for when `tracking` is configured. On a
/// message with a recipient list, the tracking tokens are those of no recipient: see
/// [`build_copy`].
pub fn build_message(
    message: &Message,
    domain: &Domain,
    tracking: Option<&TrackingConfig>,
) -> Result<BuiltMessage, BuildError> {
    build_copy(message, domain, tracking, None)
}

/// [`build_message`] for the copy of the recipient at position `recipient` of the message's
/// list: the same bytes but for the tracking tokens, which name that recipient so that opens
/// and clicks are attributed to it. `To:` and `Cc:` list the to and cc recipients with their
/// display names in every copy; no copy has a `Bcc:` header.
pub fn build_copy(
    message: &Message,
    domain: &Domain,
    tracking: Option<&TrackingConfig>,
    recipient: Option<u8>,
) -> Result<BuiltMessage, BuildError> {
    if message.domain_id != domain.id {
        return Err(BuildError::WrongDomain { expected: message.domain_id.to_string(), given: domain.id.to_string() });
    }
    let provider_message_id = provider_message_id(message, domain);
    let subject = clean_subject(&message.subject);
    // The envelope is the transport's (`OutboundEmail`), never lettre's; giving lettre one lets
    // a message with no `To:` or `Cc:` (every recipient bcc) be built.
    let from = wire_mailbox("from", &message.from)?;
    let first = wire_mailbox("to", &Mailbox { display_name: None, address: message.to.clone() })?;
    let envelope = lettre::address::Envelope::new(Some(from.email.clone()), vec![first.email])
        .map_err(|e| BuildError::Assemble(Cause::new(e)))?;
    let mut builder = lettre::Message::builder().from(from).envelope(envelope);
    for mailbox in message.mailboxes_of(RecipientKind::To) {
        builder = builder.to(wire_mailbox("to", &mailbox)?);
    }
    for mailbox in message.mailboxes_of(RecipientKind::Cc) {
        builder = builder.cc(wire_mailbox("cc", &mailbox)?);
    }
    let mut builder = builder
        .subject(subject.clone())
        .date(SystemTime::from(message.created_at))
        .header(MessageIdHeader::from(format!("<{provider_message_id}>")));
    for address in &message.extras.reply_to {
        builder = builder.reply_to(wire_mailbox("replyTo", &Mailbox { display_name: None, address: address.clone() })?);
    }
    let text = text_body(message)?;
    let html = match (&message.html, tracking) {
        (Some(html), Some(config)) => {
            Some(Cow::Owned(rewrite_html(html, config, message.workspace_id, message.id, recipient, message.tracking)))
        }
        (html, _) => html.as_deref().map(Cow::Borrowed),
    };
    let mut files = Files::decode(&message.extras.attachments)?;
    let boundaries = Boundaries::new(message, [text.as_deref(), html.as_deref()], &files);
    let html = html.map(|html| files.related(&boundaries, text_part(ContentType::TEXT_HTML, &html)));
    let body = match (text, html) {
        (Some(text), Some(html)) => {
            let alternative =
                boundaries.start(MultiPart::alternative(), "alt").singlepart(text_part(ContentType::TEXT_PLAIN, &text));
            Node::Multi(html.append_to(alternative))
        }
        (Some(text), None) => Node::Single(text_part(ContentType::TEXT_PLAIN, &text)),
        (None, Some(html)) => html,
        (None, None) => return Err(BuildError::NoBody),
    };
    let assembled = match files.mixed(&boundaries, body) {
        Node::Single(part) => builder.singlepart(part),
        Node::Multi(part) => builder.multipart(part),
    };
    let mut built = assembled.map_err(|e| BuildError::Assemble(Cause::new(e)))?;
    if subject.split([' ', '\t']).any(|word| word.len() > LONG_WORD) {
        // lettre folds only between words: one this long would make a line over RFC 5322's
        // 998 octets. Encoded words can be split anywhere, so encode the whole subject.
        let encoded = encoded_words(&subject);
        let value = HeaderValue::dangerous_new_pre_encoded(HeaderName::new_from_ascii_str("Subject"), subject, encoded);
        built.headers_mut().insert_raw(value);
    }
    for header in &message.extras.headers {
        built.headers_mut().insert_raw(custom_header(header)?);
    }
    Ok(BuiltMessage { provider_message_id, raw: built.formatted() })
}

/// The text part's content: the send's own text; generated from the HTML when the send has
/// none (`None` too if the HTML shows no text); none when the send's text is empty beside
/// HTML, which is how a client opts out of the generated part. An empty text without HTML
/// is the body as sent.
fn text_body(message: &Message) -> Result<Option<Cow<'_, str>>, BuildError> {
    Ok(match (&message.text, &message.html) {
        (None, None) => return Err(BuildError::NoBody),
        (Some(text), Some(_)) if text.is_empty() => None,
        (Some(text), _) => Some(Cow::Borrowed(text)),
        (None, Some(html)) => text_from_html(html).map(Cow::Owned),
    })
}

/// A custom header as written. The name and value were checked when the message was accepted
/// and again when it was read back ([`CustomHeader`] re-parses itself), so neither holds a
/// line break; lettre encodes non-ASCII words and folds between words. A word too long to
/// fold is written as encoded words, like a long subject.
fn custom_header(header: &CustomHeader) -> Result<HeaderValue, BuildError> {
    let name = HeaderName::new_from_ascii(header.name().to_owned())
        .map_err(|_| BuildError::Assemble(format!("header name {:?} cannot be written", header.name()).into()))?;
    let value = header.value().to_owned();
    if value.split([' ', '\t']).any(|word| word.len() + header.name().len() > LONG_WORD) {
        let encoded = encoded_words(&value);
        return Ok(HeaderValue::dangerous_new_pre_encoded(name, value, encoded));
    }
    Ok(HeaderValue::new(name, value))
}

/// A MIME entity: one part or a multipart.
enum Node {
    Single(SinglePart),
    Multi(MultiPart),
}

impl Node {
    /// `parent` with this as its first part.
    fn first_in(self, parent: MultiPartBuilder) -> MultiPart {
        match self {
            Self::Single(part) => parent.singlepart(part),
            Self::Multi(part) => parent.multipart(part),
        }
    }

    /// `parent` with this as its next part.
    fn append_to(self, parent: MultiPart) -> MultiPart {
        match self {
            Self::Single(part) => parent.singlepart(part),
            Self::Multi(part) => parent.multipart(part),
        }
    }
}

/// The message's attachments, decoded once: inline parts (with a content id) and files.
/// Each decoded buffer moves into its MIME part, so an attachment is never copied whole.
struct Files<'m> {
    inline: Vec<(&'m Attachment, Vec<u8>)>,
    attached: Vec<(&'m Attachment, Vec<u8>)>,
}

impl<'m> Files<'m> {
    fn decode(attachments: &'m [Attachment]) -> Result<Self, BuildError> {
        let mut files = Self { inline: Vec::new(), attached: Vec::new() };
        for a in attachments {
            let bytes =
                a.bytes().map_err(|e| BuildError::Attachment { filename: a.filename().to_owned(), reason: e })?;
            let list = if a.content_id().is_some() { &mut files.inline } else { &mut files.attached };
            list.push((a, bytes));
        }
        Ok(files)
    }

    /// The HTML part, inside `multipart/related` with the inline parts when there are any
    /// (which move into it).
    fn related(&mut self, boundaries: &Boundaries, html: SinglePart) -> Node {
        if self.inline.is_empty() {
            return Node::Single(html);
        }
        let mut related = boundaries.start(MultiPart::related(), "rel").singlepart(html);
        for (a, bytes) in std::mem::take(&mut self.inline) {
            related = related.singlepart(part(a, bytes));
        }
        Node::Multi(related)
    }

    /// `body`, inside `multipart/mixed` with the attached files when there are any.
    fn mixed(self, boundaries: &Boundaries, body: Node) -> Node {
        if self.attached.is_empty() {
            return body;
        }
        let mut mixed = body.first_in(boundaries.start(MultiPart::mixed(), "mix"));
        for (a, bytes) in self.attached {
            mixed = mixed.singlepart(part(a, bytes));
        }
        Node::Multi(mixed)
    }
}

/// One attachment's part: `Content-Disposition: attachment; filename=...`, or for an inline
/// part `inline; filename=...` with `Content-ID: <id>`, always base64; lettre encodes a
/// non-ASCII or long filename per RFC 2231 (`filename*=`). The `Content-Type` carries the
/// name too ([`content_type_of`]), for readers that know no RFC 2231.
fn part(a: &Attachment, bytes: Vec<u8>) -> SinglePart {
    let content_type = content_type_of(a, &bytes);
    let builder = match a.content_id() {
        Some(id) => SinglePart::builder()
            .header(ContentId::from(format!("<{id}>")))
            .header(ContentDisposition::inline_with_name(a.filename())),
        None => SinglePart::builder().header(ContentDisposition::attachment(a.filename())),
    };
    builder.header(content_type).body(file_body(bytes))
}

/// An attachment's `Content-Type`: its type; its charset, or for `text/*` content that is
/// UTF-8 (ASCII included) `charset=utf-8`, since a reader otherwise takes text without one
/// for US-ASCII (RFC 2046 §4.1.2) and shows `ü` as two odd characters; and `name=` with the
/// file name, on a line of its own. The name is a quoted string when it is printable ASCII,
/// else RFC 2047 encoded words inside the quotes: not what RFC 2047 §5 allows in a parameter,
/// but what Outlook and Gmail write and what readers without RFC 2231 (old Outlook, Lotus
/// Notes, many webmail download links) read; RFC 2231 readers take `filename*=` first.
fn content_type_of(a: &Attachment, bytes: &[u8]) -> NamedContentType {
    let essence = a.essence();
    let charset = match a.charset() {
        Some(charset) => Some(charset),
        None if essence.get(..5).is_some_and(|t| t.eq_ignore_ascii_case("text/"))
            && std::str::from_utf8(bytes).is_ok() =>
        {
            Some("utf-8")
        }
        None => None,
    };
    let mut head = essence.to_owned();
    if let Some(charset) = charset {
        head.push_str("; charset=");
        head.push_str(charset);
    }
    let name = a.filename();
    let quoted = if name.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        format!("\"{}\"", name.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        format!("\"{}\"", encoded_words(name))
    };
    let raw = format!("{head}; name=\"{name}\"");
    NamedContentType(HeaderValue::dangerous_new_pre_encoded(
        HeaderName::new_from_ascii_str("Content-Type"),
        raw,
        format!("{head};\r\n name={quoted}"),
    ))
}

/// A `Content-Type` header field written by [`content_type_of`] (lettre's `ContentType` writes
/// a parameter value as an unstructured header would, not as a quoted string).
#[derive(Clone)]
struct NamedContentType(HeaderValue);

impl Header for NamedContentType {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("Content-Type")
    }

    fn parse(_: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Err("NamedContentType is only written".into())
    }

    fn display(&self) -> HeaderValue {
        self.0.clone()
    }
}

/// Multipart boundaries derived from the message id, so the bytes are the same on every
/// attempt, unless a body or a file happens to contain one (then lettre's random one).
struct Boundaries {
    id: String,
    clash: bool,
}

impl Boundaries {
    fn new(message: &Message, bodies: [Option<&str>; 2], files: &Files) -> Self {
        let id = message.id.to_string();
        // Any boundary holds the id, so a part without it cannot contain one.
        let contains = |hay: &[u8]| hay.windows(id.len()).any(|w| w == id.as_bytes());
        let clash = bodies.iter().flatten().any(|b| contains(b.as_bytes()))
            || files.inline.iter().chain(&files.attached).any(|(_, bytes)| contains(bytes));
        Self { id, clash }
    }

    /// `builder` with the boundary for the multipart named `kind`; the `multipart/alternative`
    /// keeps the `tidings-<id>` boundary it had before attachments existed. No boundary is a
    /// prefix of another, so a lenient parser cannot take an inner delimiter for an outer one.
    fn start(&self, builder: MultiPartBuilder, kind: &str) -> MultiPartBuilder {
        match (self.clash, kind) {
            (true, _) => builder,
            (false, "alt") => builder.boundary(format!("tidings-{}", self.id)),
            (false, kind) => builder.boundary(format!("tidings-{kind}-{}", self.id)),
        }
    }
}

/// Longest word lettre may write as it is: with `Subject: ` or a folding space before it,
/// the line stays well under 998 octets.
const LONG_WORD: usize = 900;

/// `text` as RFC 2047 `B` encoded words of at most 45 UTF-8 bytes each (72 characters),
/// split on character boundaries and folded onto separate lines. Decoders join adjacent
/// encoded words without the whitespace between them (RFC 2047 §6.2), so this reads back
/// exactly as `text`.
fn encoded_words(text: &str) -> String {
    use base64::Engine as _;
    const CHUNK: usize = 45;
    let mut words = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + CHUNK).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let chunk = base64::engine::general_purpose::STANDARD.encode(&text.as_bytes()[start..end]);
        words.push(format!("=?utf-8?b?{chunk}?="));
        start = end;
    }
    words.join("\r\n ")
}

fn wire_mailbox(field: &'static str, mailbox: &Mailbox) -> Result<WireMailbox, BuildError> {
    let address = &mailbox.address;
    let email = lettre::Address::new(address.local_part(), address.domain().as_str())
        .map_err(|e| BuildError::Address { field, address: address.to_string(), reason: Cause::new(e) })?;
    Ok(WireMailbox::new(mailbox.display_name.as_ref().map(|n| n.as_str().to_owned()), email))
}

/// The subject as written: control characters other than tab become U+FFFD, which lettre
/// then encodes like any other non-ASCII character. The API already refuses CR and LF; this
/// keeps a stored subject from ever writing raw control bytes (or a line break) into a
/// header.
pub fn clean_subject(subject: &str) -> String {
    subject.chars().map(|c| if c.is_control() && c != '\t' { char::REPLACEMENT_CHARACTER } else { c }).collect()
}

/// The envelope sender (MAIL FROM) of the copy of `message` to `recipient`
/// (docs/api.md#bounce-and-complaint-reports): with a return path configured, the message's
/// return path signed for that recipient ([`ReturnPath::address`]), so a bounce report names
/// the message and the recipient it is about and proves it concerns them; otherwise the
/// `From` address.
pub fn envelope_sender(message: &Message, recipient: &EmailAddress, return_path: Option<&ReturnPath>) -> EmailAddress {
    match return_path {
        Some(return_path) => return_path.address(message.id, recipient),
        None => message.from.address.clone(),
    }
}

#[cfg(test)]
#[path = "build_tests.rs"]
mod tests;
