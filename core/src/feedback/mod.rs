//! Inbound reports about mail we sent (docs/api.md#tracking): RFC 3464 delivery status
//! notifications (bounces, delays) and RFC 5965 abuse reports (complaints), parsed from raw
//! bytes into [`Report`]. Pure: no I/O, never panics, and anything it does not understand is
//! [`Report::Other`], not an error, because whoever hands us a report can only drop it.
//!
//! MIME is mail-parser's job; the machine-readable part of a report (`message/delivery-status`,
//! `message/feedback-report`) is itself blocks of header-like fields separated by blank lines,
//! which [`fields`] reads (case-insensitive names, folded lines joined). The original
//! message's `Message-ID` comes from the attached `message/rfc822` or `text/rfc822-headers`
//! part when there is one. Plain-text bounces that are not `multipart/report` are `Other`:
//! guessing from prose would turn autoreplies into bounces, and every large provider sends
//! RFC 3464 (the per-message return path still matches them to a message).
//!
//! What a report *does* to a message is decided in `usecases/feedback.rs`.

mod arf;
mod dsn;
mod fields;

use mail_parser::{MessageParser, MessagePart, MimeHeaders, PartType};

use crate::email::EmailAddress;

pub use arf::{Arf, FeedbackType};
pub use dsn::{Action, Dsn, DsnRecipient};
pub use fields::{Diagnostic, TypedValue};

/// What a received report is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// A delivery status notification (`report-type=delivery-status`).
    Dsn(Dsn),
    /// A feedback report (`report-type=feedback-report`), usually a spam complaint.
    Complaint(Arf),
    /// Anything else, and why it is not a report we understand.
    Other(NotAReport),
}

/// Why raw bytes are [`Report::Other`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAReport {
    /// No message headers could be found at all.
    #[error("not a mail message")]
    Unparseable,
    /// A message, but not `multipart/report`.
    #[error("not a multipart/report message")]
    NotMultipartReport,
    /// A `multipart/report` without a `message/delivery-status` or `message/feedback-report`
    /// part (truncated, a missing boundary, or a report type we do not handle).
    #[error("a multipart/report without a delivery-status or feedback-report part")]
    MissingReportPart,
}

/// Parses a received message into a [`Report`].
pub fn parse_report(raw: &[u8]) -> Report {
    let Some(message) = MessageParser::default().parse(raw) else {
        return Report::Other(NotAReport::Unparseable);
    };
    let is_report = message
        .root_part()
        .content_type()
        .is_some_and(|ct| ct.ctype() == "multipart" && ct.subtype() == Some("report"));
    if !is_report {
        return Report::Other(NotAReport::NotMultipartReport);
    }
    // The report-type parameter is not trusted on its own: the part that carries the fields
    // decides, so a report with a missing or misspelt parameter still parses.
    let parts = message.parts.get(1..).unwrap_or_default();
    let original = Original {
        message_id: parts.iter().find_map(original_message_id),
        return_path: parts.iter().find_map(original_return_path),
    };
    if let Some(part) = parts.iter().find(|p| is(p, "message", &["delivery-status", "global-delivery-status"])) {
        let text = String::from_utf8_lossy(part.contents());
        return Report::Dsn(Dsn::from_fields(&fields::blocks(&text), original));
    }
    if let Some(part) = parts.iter().find(|p| is(p, "message", &["feedback-report"])) {
        let text = String::from_utf8_lossy(part.contents());
        return Report::Complaint(Arf::from_fields(&fields::blocks(&text), original));
    }
    Report::Other(NotAReport::MissingReportPart)
}

/// Whether a part's content type is `ctype/<one of subtypes>` (mail-parser lower-cases both).
fn is(part: &MessagePart<'_>, ctype: &str, subtypes: &[&str]) -> bool {
    part.content_type().is_some_and(|ct| ct.ctype() == ctype && ct.subtype().is_some_and(|s| subtypes.contains(&s)))
}

/// What a report quotes of the original message.
#[derive(Debug, Default)]
struct Original {
    message_id: Option<String>,
    return_path: Option<EmailAddress>,
}

impl Report {
    /// The return paths the report names as the original's envelope sender: a feedback
    /// report's `Original-Mail-From`, and the `Return-Path` of the attached original. A
    /// report is matched to a message by these and by the addresses it was sent to, and only
    /// when one is that message's signed return path (`usecases/feedback.rs`).
    pub fn quoted_return_paths(&self) -> Vec<&EmailAddress> {
        match self {
            Report::Dsn(dsn) => dsn.original_return_path.iter().collect(),
            Report::Complaint(arf) => arf.original_mail_from.iter().chain(&arf.original_return_path).collect(),
            Report::Other(_) => Vec::new(),
        }
    }
}

/// The `Return-Path` of an attached original, a whole message or only its headers.
fn original_return_path(part: &MessagePart<'_>) -> Option<EmailAddress> {
    let raw = match &part.body {
        PartType::Message(original) => original.header_raw("Return-Path").map(str::to_owned),
        _ if is(part, "text", &["rfc822-headers"]) || is(part, "message", &["rfc822-headers"]) => {
            let headers = MessageParser::default().parse_headers(part.contents())?;
            headers.header_raw("Return-Path").map(str::to_owned)
        }
        _ => None,
    }?;
    fields::address(&raw)
}

/// The `Message-ID` (without brackets) of an attached original: a whole message, or only its
/// headers.
fn original_message_id(part: &MessagePart<'_>) -> Option<String> {
    let id = match &part.body {
        PartType::Message(original) => original.message_id().map(str::to_owned),
        _ if is(part, "text", &["rfc822-headers"]) || is(part, "message", &["rfc822-headers"]) => {
            let headers = MessageParser::default().parse_headers(part.contents())?;
            headers.message_id().map(str::to_owned)
        }
        _ => None,
    }?;
    let id = id.trim().trim_start_matches('<').trim_end_matches('>').to_owned();
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
mod tests;
