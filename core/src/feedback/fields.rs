//! The field blocks of a report part: `Name: value` lines, folded lines joined, blocks
//! separated by blank lines (RFC 3464 §2.1, RFC 5965 §3.1); and the typed values in them.

use chrono::{DateTime, Utc};

use crate::email::EmailAddress;
use crate::ports::{EnhancedStatus, SmtpReply};

/// More blocks than this are not read: a report about our one-recipient messages needs two,
/// and a hostile one should not make us allocate without end.
const MAX_BLOCKS: usize = 100;
/// Fields per block beyond this are dropped, for the same reason.
const MAX_FIELDS: usize = 100;

/// One field: name lower-cased, value trimmed, folded lines joined with a space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Field {
    pub name: String,
    pub value: String,
}

/// The fields of one block, in order.
pub(super) type Block = Vec<Field>;

/// Splits `text` into blocks of fields. Lines that are neither a field nor a continuation
/// are skipped.
pub(super) fn blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Block = Vec::new();
    for line in text.lines() {
        if blocks.len() == MAX_BLOCKS {
            break;
        }
        if line.trim().is_empty() {
            if !current.is_empty() {
                blocks.push(std::mem::take(&mut current));
            }
        } else if line.starts_with([' ', '\t']) {
            if let Some(last) = current.last_mut() {
                last.value.push(' ');
                last.value.push_str(line.trim());
            }
        } else if let Some((name, value)) = line.split_once(':')
            && !name.is_empty()
            && !name.contains(char::is_whitespace)
            && current.len() < MAX_FIELDS
        {
            current.push(Field { name: name.to_ascii_lowercase(), value: value.trim().to_owned() });
        }
    }
    if !current.is_empty() && blocks.len() < MAX_BLOCKS {
        blocks.push(current);
    }
    blocks
}

/// The value of the first field called `name` (lower case).
pub(super) fn get<'a>(block: &'a [Field], name: &str) -> Option<&'a str> {
    block.iter().find(|f| f.name == name).map(|f| f.value.as_str()).filter(|v| !v.is_empty())
}

/// Whether the block has a field called `name`.
pub(super) fn has(block: &[Field], name: &str) -> bool {
    block.iter().any(|f| f.name == name)
}

/// The first word of a value, without comments: `5.1.1 (bad mailbox)` → `5.1.1`.
pub(super) fn first_word(value: &str) -> Option<&str> {
    value.split(|c: char| c.is_whitespace() || c == '(').find(|w| !w.is_empty())
}

/// An enhanced status code field (`Status: 5.1.1 (comment)`).
pub(super) fn status(value: &str) -> Option<EnhancedStatus> {
    first_word(value).and_then(EnhancedStatus::parse)
}

/// A date field (RFC 5322 date-time), in UTC; `None` if it is not a valid one.
pub(super) fn date(value: &str) -> Option<DateTime<Utc>> {
    let parsed = mail_parser::DateTime::parse_rfc822(value).filter(mail_parser::DateTime::is_valid)?;
    DateTime::from_timestamp(parsed.to_timestamp(), 0)
}

/// An address field, with or without angle brackets; `None` if it is not an address we
/// accept.
pub(super) fn address(value: &str) -> Option<EmailAddress> {
    let value = value.trim();
    let value = value.strip_prefix('<').and_then(|v| v.strip_suffix('>')).unwrap_or(value);
    EmailAddress::parse(value).ok()
}

/// A `type; value` field: `Final-Recipient: rfc822; jane@example.com`,
/// `Reporting-MTA: dns; mx.example.com`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedValue {
    /// The type, lower-cased (`rfc822`, `dns`, `smtp`); empty when the field named none.
    pub kind: String,
    /// The value as given, trimmed.
    pub value: String,
}

impl TypedValue {
    /// Reads a `type; value` field.
    pub fn parse(field: &str) -> Self {
        match field.split_once(';') {
            Some((kind, value)) => Self { kind: kind.trim().to_ascii_lowercase(), value: value.trim().to_owned() },
            None => Self { kind: String::new(), value: field.trim().to_owned() },
        }
    }

    /// The value as an address, for `rfc822` recipients.
    pub fn address(&self) -> Option<EmailAddress> {
        address(&self.value)
    }
}

/// A `Diagnostic-Code` field: what the remote server said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The diagnostic type, lower-cased (`smtp`, or e.g. `x-postfix`).
    pub kind: String,
    /// The SMTP reply code, when the text starts with one.
    pub code: Option<u16>,
    /// The enhanced status code after the reply code, if any.
    pub enhanced: Option<EnhancedStatus>,
    /// The text without the codes; the repeated `550-5.1.1` prefixes of a multi-line reply
    /// are removed.
    pub text: String,
}

impl Diagnostic {
    /// Reads a `Diagnostic-Code` field.
    pub fn parse(field: &str) -> Self {
        let TypedValue { kind, value } = TypedValue::parse(field);
        let code = value
            .get(..3)
            .filter(|c| c.bytes().all(|b| b.is_ascii_digit()))
            .filter(|_| matches!(value.as_bytes().get(3), None | Some(b' ' | b'-')))
            .and_then(|c| c.parse::<u16>().ok());
        let Some(code) = code else {
            return Self { kind, code: None, enhanced: None, text: value };
        };
        let rest = value[3..].trim_start_matches(['-', ' ']);
        let reply = SmtpReply::new(code, &without_continuations(rest, code));
        Self { kind, code: Some(code), enhanced: reply.enhanced, text: reply.text }
    }

    /// The SMTP reply it reports, if it has a code.
    pub fn reply(&self) -> Option<SmtpReply> {
        Some(SmtpReply { code: self.code?, enhanced: self.enhanced, text: self.text.clone() })
    }
}

/// Drops the `550-5.1.1` / `550 5.1.1` line prefixes that a folded multi-line reply repeats
/// after its first line.
fn without_continuations(text: &str, code: u16) -> String {
    let code = code.to_string();
    let mut words: Vec<&str> = Vec::new();
    let mut iter = text.split_whitespace().peekable();
    while let Some(word) = iter.next() {
        if !words.is_empty() {
            if word.strip_prefix(code.as_str()).is_some_and(|rest| rest.starts_with('-')) {
                continue;
            }
            if word == code {
                if iter.peek().is_some_and(|next| EnhancedStatus::parse(next).is_some()) {
                    iter.next();
                }
                continue;
            }
        }
        words.push(word);
    }
    words.join(" ")
}
