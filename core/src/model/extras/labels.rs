//! `tags` and `metadata`: a client's own labels on a message, returned on the message and in
//! every webhook payload about it, and usable as list filters. They never reach the MIME.
//!
//! - A tag is `{name, value}`: the name 1–256 characters of `[A-Za-z0-9_-]` (Resend's rule,
//!   and it keeps `name:value` in the `tag` filter unambiguous), the value 0–256 printable
//!   ASCII characters (an empty value is allowed: a tag used as a plain label). At most
//!   [`MAX_TAGS`], names unique (with case).
//! - Metadata is a map of string keys to string values: keys 1–40 characters, no control
//!   characters and no `[` or `]` (they delimit the key in `metadata[key]=value`); values
//!   any string; keys and values together at most [`MAX_METADATA_BYTES`] of UTF-8.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Most tags on one message.
pub const MAX_TAGS: usize = 10;
/// Longest tag name or value.
pub const MAX_TAG_CHARS: usize = 256;
/// Longest metadata key, in characters.
pub const MAX_METADATA_KEY: usize = 40;
/// Most UTF-8 bytes of all metadata keys and values together (10 KiB).
pub const MAX_METADATA_BYTES: usize = 10 * 1024;

/// Why a tag or a metadata entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// A tag name that is empty, too long or holds another character than `[A-Za-z0-9_-]`.
    #[error("must be 1 to {MAX_TAG_CHARS} characters of A-Z, a-z, 0-9, '_' and '-'")]
    TagName,
    /// A tag value too long or not printable ASCII.
    #[error("must be at most {MAX_TAG_CHARS} printable ASCII characters")]
    TagValue,
    /// A metadata key that is empty, too long, or holds a control character, `[` or `]`.
    #[error("metadata keys must be 1 to {MAX_METADATA_KEY} characters without control characters, '[' or ']'")]
    MetadataKey,
    /// Metadata whose keys and values together exceed [`MAX_METADATA_BYTES`].
    #[error("keys and values together must be at most {MAX_METADATA_BYTES} bytes of UTF-8")]
    MetadataTooLarge,
}

/// One tag; built by [`Tag::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tag {
    name: String,
    value: String,
}

impl Tag {
    /// Checks the name and the value (see the module docs); the error says which is bad in
    /// its variant.
    pub fn parse(name: &str, value: &str) -> Result<Self, LabelError> {
        check_tag_name(name)?;
        if value.len() > MAX_TAG_CHARS || !value.bytes().all(|b| (b' '..=b'~').contains(&b)) {
            return Err(LabelError::TagValue);
        }
        Ok(Self { name: name.to_owned(), value: value.to_owned() })
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value (possibly empty).
    pub fn value(&self) -> &str {
        &self.value
    }
}

/// Checks a tag name on its own (also for the `tag` list filter).
pub fn check_tag_name(name: &str) -> Result<(), LabelError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_TAG_CHARS
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok { Ok(()) } else { Err(LabelError::TagName) }
}

/// Checks a metadata key on its own (also for the `metadata[key]` list filter).
pub fn check_metadata_key(key: &str) -> Result<(), LabelError> {
    let ok = !key.is_empty()
        && key.chars().count() <= MAX_METADATA_KEY
        && !key.chars().any(|c| c.is_control() || c == '[' || c == ']');
    if ok { Ok(()) } else { Err(LabelError::MetadataKey) }
}

/// A message's metadata: string keys to string values, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metadata(BTreeMap<String, String>);

impl Metadata {
    /// Metadata from checked entries; the caller has checked every key
    /// ([`check_metadata_key`]) and the total size ([`Metadata::total_bytes`]).
    pub(crate) fn from_checked(map: BTreeMap<String, String>) -> Self {
        Self(map)
    }

    /// Checks every key ([`check_metadata_key`]) and the total size ([`MAX_METADATA_BYTES`]);
    /// the error says which rule an entry broke.
    pub fn parse(map: BTreeMap<String, String>) -> Result<Self, LabelError> {
        map.keys().try_for_each(|key| check_metadata_key(key))?;
        if Self::total_bytes(map.iter().map(|(k, v)| (k.as_str(), v.as_str()))) > MAX_METADATA_BYTES {
            return Err(LabelError::MetadataTooLarge);
        }
        Ok(Self(map))
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Bytes of UTF-8 of `entries`' keys and values together, the measure of the 10 KiB limit.
    pub fn total_bytes<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> usize {
        entries.into_iter().map(|(k, v)| k.len() + v.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_accept_the_documented_characters_and_an_empty_value() {
        let tag = Tag::parse("Campaign_2026-spring", "welcome email: v2").unwrap();
        assert_eq!((tag.name(), tag.value()), ("Campaign_2026-spring", "welcome email: v2"));
        assert!(Tag::parse("label", "").is_ok());
        assert!(Tag::parse(&"a".repeat(256), &"b".repeat(256)).is_ok());
    }

    #[test]
    fn bad_tags_are_refused_naming_the_part() {
        for name in ["", "has space", "colon:", "é", &"a".repeat(257)] {
            assert_eq!(Tag::parse(name, "v"), Err(LabelError::TagName), "{name:?}");
        }
        for value in ["é", "a\nb", "\t", &"b".repeat(257)] {
            assert_eq!(Tag::parse("n", value), Err(LabelError::TagValue), "{value:?}");
        }
    }

    #[test]
    fn metadata_keys_follow_the_rules() {
        for key in ["order_id", "Kunde Nr.", "ключ", &"k".repeat(40)] {
            assert!(check_metadata_key(key).is_ok(), "{key:?}");
        }
        for key in ["", "a[b", "a]", "a\nb", &"k".repeat(41)] {
            assert_eq!(check_metadata_key(key), Err(LabelError::MetadataKey), "{key:?}");
        }
        assert_eq!(Metadata::total_bytes([("ab", "cdé")]), 6);
    }

    #[test]
    fn metadata_parses_only_when_every_key_and_the_total_size_are_allowed() {
        let entries = |pairs: &[(&str, String)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        let parsed = Metadata::parse(entries(&[("order_id", "42".to_owned())])).unwrap();
        assert_eq!(parsed.get("order_id"), Some("42"));
        assert_eq!(Metadata::parse(entries(&[("a]", String::new())])), Err(LabelError::MetadataKey));
        let at_limit = "v".repeat(MAX_METADATA_BYTES - 1);
        assert!(Metadata::parse(entries(&[("k", at_limit.clone())])).is_ok());
        assert_eq!(Metadata::parse(entries(&[("k", at_limit + "v")])), Err(LabelError::MetadataTooLarge));
    }
}
