//! Custom header fields of a send (`headers`): names and values that cannot inject a header
//! and cannot replace one Tidings writes itself.
//!
//! A name is RFC 5322 `field-name` (printable ASCII 33–126 except `:`), at most 76 octets
//! (lettre's limit, and what fits a line beside a value). A value is at most 998 characters
//! and holds no control character other than tab (no CR, LF, NUL, U+0085, U+2028 or U+2029),
//! so nothing a client sends can end the header line. Names Tidings writes, or that only
//! relays may write, are [reserved](is_reserved); `List-Unsubscribe` and
//! `List-Unsubscribe-Post` are allowed, as Postmark and Resend allow them.

use serde::{Deserialize, Serialize};

use crate::text_checks::is_line_or_control;

/// Most custom headers one message may carry.
pub const MAX_HEADERS: usize = 50;
/// Longest header name, in octets.
pub const MAX_HEADER_NAME: usize = 76;
/// Longest header value, in characters (RFC 5322's line limit).
pub const MAX_HEADER_VALUE: usize = 998;

/// Header names a send may not set (compared without case): Tidings writes them, a relay
/// writes them, or another field of the send sets them (`replyTo`, `attachments`).
const RESERVED: &[&str] = &[
    "From",
    "To",
    "Cc",
    "Bcc",
    "Subject",
    "Date",
    "Message-ID",
    "DKIM-Signature",
    "Return-Path",
    "Reply-To",
    "Sender",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
    "Content-Disposition",
    "Content-ID",
    "Received",
    "Received-SPF",
    "Authentication-Results",
    "Delivered-To",
    "X-Original-To",
];

/// Prefixes reserved the same way: resent blocks and ARC sets are a relay's to write.
const RESERVED_PREFIXES: &[&str] = &["Resent-", "ARC-"];

/// Why a custom header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Empty name.
    #[error("the header name is empty")]
    EmptyName,
    /// Name over [`MAX_HEADER_NAME`] octets.
    #[error("the header name is longer than {MAX_HEADER_NAME} characters")]
    NameTooLong,
    /// A character outside printable ASCII, or `:`.
    #[error("the header name may hold only printable ASCII characters other than ':' (found {0:?})")]
    NameCharacter(char),
    /// A name Tidings or a relay writes.
    #[error("{0} is set by Tidings and cannot be given as a custom header{hint}", hint = reserved_hint(.0))]
    Reserved(String),
    /// Value over [`MAX_HEADER_VALUE`] characters.
    #[error("the header value is longer than {MAX_HEADER_VALUE} characters")]
    ValueTooLong,
    /// CR, LF, NUL or another control character other than tab.
    #[error("the header value must not contain line breaks or control characters")]
    ValueControl,
}

fn reserved_hint(name: &str) -> &'static str {
    if name.eq_ignore_ascii_case("Reply-To") { " (use replyTo)" } else { "" }
}

/// Whether `name` may not be set by a send (without regard to case).
pub fn is_reserved(name: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(name))
        || RESERVED_PREFIXES
            .iter()
            .any(|p| name.len() >= p.len() && name.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes()))
}

/// One custom header, name and value checked; built only by [`CustomHeader::parse`], or when
/// read back from a store by the same checks as earlier versions made (U+2028/U+2029, now
/// refused, were accepted then, and a stored message must stay readable; a stored document
/// still cannot smuggle a CR, LF or other control character).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawHeader")]
pub struct CustomHeader {
    name: String,
    value: String,
}

#[derive(Deserialize)]
struct RawHeader {
    name: String,
    value: String,
}

impl TryFrom<RawHeader> for CustomHeader {
    type Error = HeaderError;
    fn try_from(raw: RawHeader) -> Result<Self, Self::Error> {
        Self::checked(&raw.name, &raw.value, char::is_control)
    }
}

impl CustomHeader {
    /// Checks `name` and `value` (see the module docs).
    pub fn parse(name: &str, value: &str) -> Result<Self, HeaderError> {
        Self::checked(name, value, is_line_or_control)
    }

    fn checked(name: &str, value: &str, forbidden: fn(char) -> bool) -> Result<Self, HeaderError> {
        check_name(name)?;
        if is_reserved(name) {
            return Err(HeaderError::Reserved(name.to_owned()));
        }
        if value.chars().any(|c| c != '\t' && forbidden(c)) {
            return Err(HeaderError::ValueControl);
        }
        if value.chars().count() > MAX_HEADER_VALUE {
            return Err(HeaderError::ValueTooLong);
        }
        Ok(Self { name: name.to_owned(), value: value.to_owned() })
    }

    /// The name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value as given (unencoded).
    pub fn value(&self) -> &str {
        &self.value
    }
}

fn check_name(name: &str) -> Result<(), HeaderError> {
    if name.is_empty() {
        return Err(HeaderError::EmptyName);
    }
    if let Some(c) = name.chars().find(|c| !matches!(*c, '!'..='~') || *c == ':') {
        return Err(HeaderError::NameCharacter(c));
    }
    if name.len() > MAX_HEADER_NAME {
        return Err(HeaderError::NameTooLong);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn unicode_line_separators_are_refused_in_values_but_a_stored_one_still_loads() {
        for sep in ["\u{2028}", "\u{2029}", "\u{85}"] {
            assert_eq!(CustomHeader::parse("X-A", &format!("1{sep}Bcc: x@y.z")), Err(HeaderError::ValueControl));
        }
        let stored: CustomHeader = serde_json::from_str(r#"{"name":"X-A","value":"1\u2028 2"}"#).unwrap();
        assert_eq!(stored.value(), "1\u{2028} 2");
        assert!(serde_json::from_str::<CustomHeader>(r#"{"name":"X-A","value":"1\r\nBcc: x"}"#).is_err());
    }

    #[test]
    fn ordinary_headers_and_list_unsubscribe_are_accepted() {
        for (name, value) in [
            ("X-Campaign", "spring-2026"),
            ("List-Unsubscribe", "<https://example.com/u/1>, <mailto:u@example.com>"),
            ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
            ("In-Reply-To", "<abc@example.com>"),
            ("X-Tab", "a\tb"),
            ("X-Empty", ""),
            ("X-Unicode", "Grüße"),
        ] {
            let header = CustomHeader::parse(name, value).unwrap();
            assert_eq!((header.name(), header.value()), (name, value));
        }
    }

    #[test]
    fn reserved_names_are_refused_in_any_case() {
        for name in [
            "From",
            "to",
            "CC",
            "bcc",
            "Subject",
            "date",
            "message-id",
            "DKIM-Signature",
            "Return-Path",
            "reply-to",
            "Sender",
            "MIME-Version",
            "content-type",
            "Content-Transfer-Encoding",
            "Received",
            "Resent-From",
            "arc-seal",
        ] {
            assert_eq!(CustomHeader::parse(name, "x"), Err(HeaderError::Reserved(name.to_owned())), "{name}");
        }
        assert!(HeaderError::Reserved("Reply-To".into()).to_string().contains("use replyTo"));
    }

    #[test]
    fn bad_names_are_refused() {
        assert_eq!(CustomHeader::parse("", "x"), Err(HeaderError::EmptyName));
        assert_eq!(CustomHeader::parse("X-A:B", "x"), Err(HeaderError::NameCharacter(':')));
        assert_eq!(CustomHeader::parse("X A", "x"), Err(HeaderError::NameCharacter(' ')));
        assert_eq!(CustomHeader::parse("X-\u{e9}", "x"), Err(HeaderError::NameCharacter('\u{e9}')));
        assert_eq!(CustomHeader::parse("X-A\r\nBcc", "x"), Err(HeaderError::NameCharacter('\r')));
        assert_eq!(CustomHeader::parse(&"X".repeat(77), "x"), Err(HeaderError::NameTooLong));
        assert!(CustomHeader::parse(&"X".repeat(76), "x").is_ok());
    }

    #[test]
    fn bad_values_are_refused() {
        for value in ["a\r\nBcc: victim@example.com", "a\nb", "a\rb", "a\0b", "a\u{7f}b", "a\u{85}b"] {
            assert_eq!(CustomHeader::parse("X-A", value), Err(HeaderError::ValueControl), "{value:?}");
        }
        assert_eq!(CustomHeader::parse("X-A", &"é".repeat(999)), Err(HeaderError::ValueTooLong));
        assert!(CustomHeader::parse("X-A", &"é".repeat(998)).is_ok());
    }

    #[test]
    fn a_stored_header_is_checked_again_when_read() {
        let bad = r#"{"name":"X-A","value":"a\r\nBcc: x@example.com"}"#;
        assert!(serde_json::from_str::<CustomHeader>(bad).is_err());
        let good = serde_json::to_string(&CustomHeader::parse("X-A", "b").unwrap()).unwrap();
        assert_eq!(serde_json::from_str::<CustomHeader>(&good).unwrap().value(), "b");
    }

    proptest! {
        #[test]
        fn no_accepted_header_holds_a_line_break(name in "[\\x00-\\x7f]{0,80}", value in "(?s).{0,60}") {
            if let Ok(header) = CustomHeader::parse(&name, &value) {
                prop_assert!(!header.name().contains(['\r', '\n', ':', ' ']));
                prop_assert!(!header.value().contains(['\r', '\n', '\0']));
            }
        }

        #[test]
        fn values_with_a_line_break_anywhere_are_refused(
            before in "[ -~]{0,20}", brk in "\r|\n|\r\n", after in "[ -~]{0,20}"
        ) {
            let value = format!("{before}{brk}{after}");
            prop_assert_eq!(CustomHeader::parse("X-Test", &value), Err(HeaderError::ValueControl));
        }
    }
}
