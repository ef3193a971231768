//! RFC 5322 bytes of a message, with lettre's message builder (no transport in core).
//!
//! What goes on the wire:
//! - `From` (with the display name resolved at accept time: the send's own, else the
//!   registered sender's), `To`, `Subject`, `Date`, `Message-ID`, `MIME-Version`, and the
//!   body: `text/plain` or `text/html` alone, or `multipart/alternative` (text first, as
//!   RFC 2046 orders from plainest to richest) when both exist.
//! - `Message-ID: <ULID@sending-domain>`, the ULID being the message id, so the value without
//!   brackets (the `providerMessageId`) names the message on its own. `Date` is the time the
//!   message was accepted (RFC 5322 §3.6.1: when it was ready to enter the mail system), so
//!   every attempt carries the same bytes up to the DKIM signatures' timestamps.
//! - Non-ASCII in subjects and display names becomes RFC 2047 encoded words (and so does a
//!   whole subject holding a word too long to fit a 998-octet line); bodies are
//!   7bit, quoted-printable or base64, whichever lettre finds valid and shortest, with CRLF
//!   line ends. The multipart boundary is derived from the message id (deterministic output)
//!   unless a body happens to contain it.
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

use std::time::SystemTime;

use lettre::message::header::{ContentType, HeaderName, HeaderValue, MessageId as MessageIdHeader};
use lettre::message::{Mailbox as WireMailbox, MultiPart, SinglePart};

use crate::email::{EmailAddress, Mailbox};
use crate::model::{Domain, Message};
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
        reason: String,
    },
    /// lettre could not assemble the message.
    #[error("the message cannot be assembled: {0}")]
    Assemble(String),
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
/// the open and click tracking the message asks for when `tracking` is configured.
pub fn build_message(
    message: &Message,
    domain: &Domain,
    tracking: Option<&TrackingConfig>,
) -> Result<BuiltMessage, BuildError> {
    if message.domain_id != domain.id {
        return Err(BuildError::WrongDomain { expected: message.domain_id.to_string(), given: domain.id.to_string() });
    }
    let provider_message_id = provider_message_id(message, domain);
    let subject = clean_subject(&message.subject);
    let builder = lettre::Message::builder()
        .from(wire_mailbox("from", &message.from)?)
        .to(wire_mailbox("to", &Mailbox { display_name: None, address: message.to.clone() })?)
        .subject(subject.clone())
        .date(SystemTime::from(message.created_at))
        .header(MessageIdHeader::from(format!("<{provider_message_id}>")));
    let html = match (&message.html, tracking) {
        (Some(html), Some(config)) => {
            Some(rewrite_html(html, config, message.workspace_id, message.id, message.tracking))
        }
        (html, _) => html.clone(),
    };
    let assembled = match (&message.text, &html) {
        (Some(text), Some(html)) => {
            let boundary = format!("tidings-{}", message.id);
            let alternative = if text.contains(&boundary) || html.contains(&boundary) {
                MultiPart::alternative()
            } else {
                MultiPart::alternative().boundary(boundary)
            };
            builder.multipart(
                alternative.singlepart(SinglePart::plain(text.clone())).singlepart(SinglePart::html(html.clone())),
            )
        }
        (Some(text), None) => builder.singlepart(SinglePart::plain(text.clone())),
        (None, Some(html)) => {
            builder.singlepart(SinglePart::builder().header(ContentType::TEXT_HTML).body(html.clone()))
        }
        (None, None) => return Err(BuildError::NoBody),
    };
    let mut built = assembled.map_err(|e| BuildError::Assemble(e.to_string()))?;
    if subject.split([' ', '\t']).any(|word| word.len() > LONG_WORD) {
        // lettre folds only between words: one this long would make a line over RFC 5322's
        // 998 octets. Encoded words can be split anywhere, so encode the whole subject.
        let encoded = encoded_words(&subject);
        let value = HeaderValue::dangerous_new_pre_encoded(HeaderName::new_from_ascii_str("Subject"), subject, encoded);
        built.headers_mut().insert_raw(value);
    }
    Ok(BuiltMessage { provider_message_id, raw: built.formatted() })
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
        .map_err(|e| BuildError::Address { field, address: address.to_string(), reason: e.to_string() })?;
    Ok(WireMailbox::new(mailbox.display_name.as_ref().map(|n| n.as_str().to_owned()), email))
}

/// The subject as written: control characters other than tab become U+FFFD, which lettre
/// then encodes like any other non-ASCII character. The API already refuses CR and LF; this
/// keeps a stored subject from ever writing raw control bytes (or a line break) into a
/// header.
pub fn clean_subject(subject: &str) -> String {
    subject.chars().map(|c| if c.is_control() && c != '\t' { char::REPLACEMENT_CHARACTER } else { c }).collect()
}

/// The envelope sender (MAIL FROM) of `message` (contract §8): with a return-path domain,
/// `bounces+<message id>@<that domain>`, so a bounce report names the message it is about;
/// otherwise the `From` address.
///
/// The message id is written in lower case: some systems fold local parts to lower case on
/// the way back, and ULIDs read the same in either case ([`message_id_from_return_path`]
/// accepts both).
pub fn envelope_sender(message: &Message, return_path_domain: Option<&crate::domain_name::DomainName>) -> EmailAddress {
    let Some(domain) = return_path_domain else {
        return message.from.address.clone();
    };
    let local = format!("{RETURN_PATH_PREFIX}{}", message.id.to_string().to_ascii_lowercase());
    // "bounces+" and a ULID are a valid dot-atom and a DomainName is a valid domain, so this
    // cannot fail; the From address is the harmless fallback if it ever did.
    EmailAddress::from_parts(&local, domain).unwrap_or_else(|_| message.from.address.clone())
}

/// Local-part prefix of per-message return paths.
pub const RETURN_PATH_PREFIX: &str = "bounces+";

/// The message a per-message return path (`bounces+<id>@...`, any case) belongs to, for the
/// inbound bounce listener; `None` for any other address.
pub fn message_id_from_return_path(address: &EmailAddress) -> Option<crate::ids::MessageId> {
    let local = address.local_part();
    let prefix = local.get(..RETURN_PATH_PREFIX.len())?;
    if !prefix.eq_ignore_ascii_case(RETURN_PATH_PREFIX) {
        return None;
    }
    crate::ids::MessageId::parse(&local[RETURN_PATH_PREFIX.len()..])
}

#[cfg(test)]
#[path = "build_tests.rs"]
mod tests;
