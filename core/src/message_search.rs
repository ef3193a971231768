//! Finding messages by part of their subject or of a recipient (`GET /v1/messages?q=`), and
//! the creation-time bounds of a list (`createdAfter`, `createdBefore`).
//!
//! The rule every store answers with: a message matches `q` when its subject, one of its
//! recipients' addresses (to, cc, bcc) or one of their display names contains `q`, both
//! lower-cased ([`fold`]). Each text is matched on its own: `q` never spans two of them.
//! Stores index this their own way (docs/decisions.md, "Finding messages"); the record
//! decides, through [`SearchText::matches`].

use std::fmt;

use chrono::{DateTime, Utc};

use crate::ids::MessageId;
use crate::model::Message;
use crate::text_checks::is_line_or_control;

/// Fewest characters of a search: fewer than a trigram cannot use a trigram index, and two
/// letters match most of any mailbox.
pub const MIN_SEARCH_CHARS: usize = 3;
/// Most characters of a search.
pub const MAX_SEARCH_CHARS: usize = 200;

/// Why a search text is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchTextError {
    /// Fewer than [`MIN_SEARCH_CHARS`] characters after trimming.
    #[error("must be at least {MIN_SEARCH_CHARS} characters")]
    TooShort,
    /// More than [`MAX_SEARCH_CHARS`] characters after trimming.
    #[error("must be at most {MAX_SEARCH_CHARS} characters")]
    TooLong,
    /// A line break or control character, which no searched text holds.
    #[error("must not contain line breaks or control characters")]
    ControlCharacter,
}

/// A search text: trimmed, 3–200 characters, no control characters, kept lower-cased.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SearchText(String);

impl SearchText {
    /// Trims `text` and checks it; counts characters, not bytes.
    pub fn parse(text: &str) -> Result<Self, SearchTextError> {
        let text = text.trim();
        // TAB aside, as in subjects: no searched text has another control character, and
        // PostgreSQL's index keeps the texts of one message apart with a line break.
        if text.chars().any(|c| c != '\t' && is_line_or_control(c)) {
            return Err(SearchTextError::ControlCharacter);
        }
        match text.chars().count() {
            n if n < MIN_SEARCH_CHARS => Err(SearchTextError::TooShort),
            n if n > MAX_SEARCH_CHARS => Err(SearchTextError::TooLong),
            _ => Ok(Self(fold(text))),
        }
    }

    /// The text, lower-cased.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether one of `message`'s searched texts contains this one, ignoring case.
    pub fn matches(&self, message: &Message) -> bool {
        searched_texts(message).iter().any(|text| fold(text).contains(&self.0))
    }
}

impl fmt::Debug for SearchText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// Case folding for search: Unicode lower case ([`str::to_lowercase`]), which is what
/// PostgreSQL's `lower()` does under a UTF-8 locale. Under the `C` locale PostgreSQL folds
/// only ASCII; docs/decisions.md says so.
pub fn fold(text: &str) -> String {
    text.to_lowercase()
}

/// The texts of a message a search looks in, as stored: the subject, then every recipient's
/// address and display name (a message without a recipient list has its `to` only).
pub fn searched_texts(message: &Message) -> Vec<String> {
    let mut texts = Vec::with_capacity(2 + 2 * message.recipients.len());
    texts.push(message.subject.clone());
    texts.push(message.to.to_string());
    for r in &message.recipients {
        texts.push(r.email.to_string());
        if let Some(name) = &r.name {
            texts.push(name.to_string());
        }
    }
    texts
}

/// Bounds on creation of a list, as ids: message ids are ULIDs whose time part is the
/// creation time to the millisecond, so a store walks ids newest first from `end` and stops
/// at `start` instead of reading older records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreatedRange {
    /// Only ids at or above this one (created at or after its millisecond).
    pub start: Option<MessageId>,
    /// Only ids below this one (created before its millisecond).
    pub end: Option<MessageId>,
}

impl CreatedRange {
    /// Messages created at or after `after` and before `before`, compared to the
    /// millisecond (sub-millisecond parts are dropped, as the ids drop them).
    pub fn between(after: Option<DateTime<Utc>>, before: Option<DateTime<Utc>>) -> Self {
        Self { start: after.map(MessageId::first_at), end: before.map(MessageId::first_at) }
    }

    /// Whether the range holds `id`.
    pub fn contains(&self, id: MessageId) -> bool {
        self.start.is_none_or(|s| id >= s) && self.end.is_none_or(|e| id < e)
    }

    /// Whether no id can be in it.
    pub fn is_empty(&self) -> bool {
        matches!((self.start, self.end), (Some(s), Some(e)) if s >= e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_is_trimmed_lower_cased_and_counted_in_characters() {
        assert_eq!(SearchText::parse("  Inv ").unwrap().as_str(), "inv");
        assert_eq!(SearchText::parse("ÄÖÜ").unwrap().as_str(), "äöü", "three characters, six bytes");
        assert_eq!(SearchText::parse(" ab "), Err(SearchTextError::TooShort));
        assert_eq!(SearchText::parse("éé"), Err(SearchTextError::TooShort), "four bytes are two characters");
        assert!(SearchText::parse(&"x".repeat(200)).is_ok());
        assert_eq!(SearchText::parse(&"é".repeat(201)), Err(SearchTextError::TooLong));
        assert_eq!(SearchText::parse("abc\ndef"), Err(SearchTextError::ControlCharacter));
    }

    #[test]
    fn a_range_compares_ids_to_the_millisecond() {
        let at = |ms: i64| DateTime::<Utc>::from_timestamp_millis(ms).unwrap();
        let range = CreatedRange::between(Some(at(1_000)), Some(at(2_000)));
        assert!(range.contains(MessageId::first_at(at(1_000))));
        assert!(range.contains(MessageId(ulid::Ulid::from_parts(1_999, u128::MAX >> 48))));
        assert!(!range.contains(MessageId::first_at(at(2_000))));
        assert!(!range.contains(MessageId(ulid::Ulid::from_parts(999, 5))));
        assert!(CreatedRange::between(Some(at(5)), Some(at(5))).is_empty());
        assert!(!CreatedRange::default().is_empty());
    }
}
