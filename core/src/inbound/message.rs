//! The mapping from MIME (read by mail-parser) to [`ParsedInbound`].
//!
//! - `text` is every `text/plain` body part mail-parser counts as the body (a client that
//!   puts an image between two paragraphs sends two), joined by a line feed; without one,
//!   the text of the HTML body ([`text_from_html`], the converter outbound mail uses).
//!   `html` is every `text/html` body part, joined. Charsets and transfer encodings are
//!   decoded; bytes invalid in their charset become U+FFFD.
//! - Addresses are kept as written, not as [`EmailAddress`](crate::email::EmailAddress):
//!   inbound mail must stay readable when its sender wrote an address Tidings would not send
//!   to. Groups are flattened; entries without an address (`undisclosed-recipients:;`) are
//!   left out.
//! - Attachments are the parts mail-parser does not take as the body, numbered from 0 in
//!   the order it lists them; [`attachment_bytes`] uses the same numbering.

use mail_parser::{Address, Message, MessageParser, MimeHeaders, PartType};

use super::headers::{cut, decoded_headers};
use super::reply::strip_reply;
use super::{InboundLimits, InboundParseError};
use crate::model::{AttachmentMeta, InboundMailbox, ParsedInbound, Truncation};
use crate::outbound::html_text::text_from_html;

/// Bytes kept of a display name or an address (an RFC 5322 line's length).
const MAX_ADDRESS_PART_BYTES: usize = 998;

/// [`parse_with`] with the default [`InboundLimits`].
pub fn parse(raw: &[u8]) -> Result<ParsedInbound, InboundParseError> {
    parse_with(raw, &InboundLimits::default())
}

/// Reads `raw` (a message as received after `DATA`) within `limits`. Never panics, for any
/// bytes: what cannot be decoded is left out or replaced, and only the refusing limits and
/// bytes without any header fail.
pub fn parse_with(raw: &[u8], limits: &InboundLimits) -> Result<ParsedInbound, InboundParseError> {
    let message = read(raw, limits)?;
    let mut truncated = Truncation::default();
    let from = message.from().and_then(|address| mailboxes(address).into_iter().next());
    let to = bounded(message.all_to(), limits.max_recipients, &mut truncated.recipients);
    let cc = bounded(message.all_cc(), limits.max_recipients, &mut truncated.recipients);

    let texts: Vec<&str> = body_parts(&message, &message.text_body, |body| match body {
        PartType::Text(text) => Some(text.as_ref()),
        _ => None,
    });
    let htmls: Vec<&str> = body_parts(&message, &message.html_body, |body| match body {
        PartType::Html(html) => Some(html.as_ref()),
        _ => None,
    });
    let html = (!htmls.is_empty()).then(|| htmls.join("\n"));
    let text = if texts.is_empty() { html.as_deref().and_then(text_from_html) } else { Some(texts.join("\n")) };
    let stripped_text_reply = text.as_deref().map(strip_reply);

    let (headers, headers_cut) = decoded_headers(raw, limits);
    truncated.headers = headers_cut;

    let attachments = message
        .attachments()
        .enumerate()
        .map(|(index, part)| AttachmentMeta {
            index,
            filename: part.attachment_name().map(str::to_owned),
            content_type: part.content_type().map_or_else(
                || "application/octet-stream".to_owned(),
                |t| format!("{}/{}", t.ctype(), t.subtype().unwrap_or("octet-stream")).to_ascii_lowercase(),
            ),
            size: part.contents().len(),
            content_id: part.content_id().map(|id| id.trim_matches(['<', '>']).to_owned()),
            inline: match part.content_disposition() {
                Some(disposition) => disposition.is_inline(),
                None => part.content_id().is_some(),
            },
        })
        .collect();

    let mut references = ids(message.references());
    if references.len() > limits.max_references {
        references.drain(..references.len() - limits.max_references);
        truncated.references = true;
    }
    let mut in_reply_to = ids(message.in_reply_to());
    if in_reply_to.len() > limits.max_references {
        in_reply_to.truncate(limits.max_references);
        truncated.references = true;
    }

    Ok(ParsedInbound {
        from,
        to,
        cc,
        subject: message.subject().map(|s| cut(s, limits.max_header_value_bytes).to_owned()),
        text,
        html,
        stripped_text_reply,
        headers,
        attachments,
        message_id: message.message_id().map(|id| cut(id, limits.max_header_value_bytes).to_owned()),
        in_reply_to,
        references,
        truncated,
    })
}

/// The decoded contents of attachment `index` of `raw` (as numbered in
/// [`ParsedInbound::attachments`] by [`parse`] with the same limits): for an attached
/// message, its raw bytes.
pub fn attachment_bytes(raw: &[u8], index: usize, limits: &InboundLimits) -> Result<Vec<u8>, InboundParseError> {
    let message = read(raw, limits)?;
    let count = message.attachment_count();
    u32::try_from(index)
        .ok()
        .and_then(|at| message.attachment(at))
        .map(|part| part.contents().to_vec())
        .ok_or(InboundParseError::NoSuchAttachment { index, count })
}

/// mail-parser's reading of `raw`, after the refusing limits.
fn read<'x>(raw: &'x [u8], limits: &InboundLimits) -> Result<Message<'x>, InboundParseError> {
    if raw.len() > limits.max_message_bytes {
        return Err(InboundParseError::TooLarge { size: raw.len(), limit: limits.max_message_bytes });
    }
    let message = MessageParser::default().parse(raw).ok_or(InboundParseError::NotAMessage)?;
    // mail-parser takes bytes that start with a blank line as a body without headers.
    if message.parts.first().is_none_or(|root| root.headers.is_empty()) {
        return Err(InboundParseError::NotAMessage);
    }
    if message.parts.len() > limits.max_parts {
        return Err(InboundParseError::TooManyParts { count: message.parts.len(), limit: limits.max_parts });
    }
    Ok(message)
}

/// The contents `pick` takes from the body parts `ids` of `message`.
fn body_parts<'m>(
    message: &'m Message<'_>,
    ids: &[u32],
    pick: impl Fn(&'m PartType<'_>) -> Option<&'m str>,
) -> Vec<&'m str> {
    ids.iter().filter_map(|&id| pick(&message.part(id)?.body)).collect()
}

/// The mailboxes of one address header (groups flattened) that have an address.
fn mailboxes(address: &Address<'_>) -> Vec<InboundMailbox> {
    let all: Vec<_> = match address {
        Address::List(list) => list.iter().collect(),
        Address::Group(groups) => groups.iter().flat_map(|group| group.addresses.iter()).collect(),
    };
    all.into_iter()
        .filter_map(|m| {
            let address = m.address()?.trim();
            (!address.is_empty()).then(|| InboundMailbox {
                name: m
                    .name()
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(|n| cut(n, MAX_ADDRESS_PART_BYTES).to_owned()),
                address: cut(address, MAX_ADDRESS_PART_BYTES).to_owned(),
            })
        })
        .collect()
}

/// The mailboxes of every header in `headers`, at most `limit`, setting `cut_any` when
/// more were left out.
fn bounded<'a>(
    headers: impl Iterator<Item = &'a Address<'a>>,
    limit: usize,
    cut_any: &mut bool,
) -> Vec<InboundMailbox> {
    let mut all: Vec<_> = headers.flat_map(mailboxes).collect();
    if all.len() > limit {
        all.truncate(limit);
        *cut_any = true;
    }
    all
}

/// The message ids of an id header, without angle brackets, empty ones left out.
fn ids(value: &mail_parser::HeaderValue<'_>) -> Vec<String> {
    let list: Vec<&str> = match value {
        mail_parser::HeaderValue::Text(id) => vec![id.as_ref()],
        mail_parser::HeaderValue::TextList(ids) => ids.iter().map(AsRef::as_ref).collect(),
        _ => Vec::new(),
    };
    list.into_iter()
        .map(|id| id.trim().trim_matches(['<', '>']))
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect()
}
