//! `DomainName`: a validated, lower-cased, fully qualified DNS name without a trailing dot.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a text is not a usable domain name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainNameError {
    /// Empty input.
    #[error("is empty")]
    Empty,
    /// Longer than 253 characters.
    #[error("is longer than 253 characters")]
    TooLong,
    /// Only one label (`localhost`, `com`): not a domain one can send from.
    #[error("must have at least two labels, like example.com")]
    SingleLabel,
    /// A label is empty or longer than 63 characters.
    #[error("has an empty label or one longer than 63 characters")]
    BadLabelLength,
    /// A character outside letters, digits and hyphen (internationalised names must be given
    /// in their `xn--` form).
    #[error("may contain only letters, digits, hyphens and dots (use the xn-- form for international names)")]
    BadCharacter,
    /// A label starts or ends with a hyphen.
    #[error("has a label that starts or ends with a hyphen")]
    BadHyphen,
    /// The top-level label is all digits, so this is an IP address or nonsense.
    #[error("must not end in a numeric label")]
    NumericTld,
}

/// A domain name as the API accepts it: ASCII (A-labels), lower-case, at least two labels,
/// no trailing dot.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DomainName(String);

impl DomainName {
    /// Parses and normalises (lower-case, one trailing dot removed).
    pub fn parse(input: &str) -> Result<Self, DomainNameError> {
        let trimmed = input.strip_suffix('.').unwrap_or(input);
        if trimmed.is_empty() {
            return Err(DomainNameError::Empty);
        }
        if trimmed.len() > 253 {
            return Err(DomainNameError::TooLong);
        }
        let lower = trimmed.to_ascii_lowercase();
        let labels: Vec<&str> = lower.split('.').collect();
        for label in &labels {
            if label.is_empty() || label.len() > 63 {
                return Err(DomainNameError::BadLabelLength);
            }
            if !label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(DomainNameError::BadCharacter);
            }
            if label.starts_with('-') || label.ends_with('-') {
                return Err(DomainNameError::BadHyphen);
            }
        }
        if labels.len() < 2 {
            return Err(DomainNameError::SingleLabel);
        }
        if labels.last().is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit())) {
            return Err(DomainNameError::NumericTld);
        }
        Ok(Self(lower))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `<label>.<self>`, for record names such as `_dmarc.example.com`. The label must be a
    /// valid DNS label (the callers pass constants and generated selectors).
    pub fn with_prefix(&self, label: &str) -> String {
        format!("{label}.{}", self.0)
    }
}

impl fmt::Display for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DomainName({})", self.0)
    }
}

impl TryFrom<String> for DomainName {
    type Error = DomainNameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<DomainName> for String {
    fn from(value: DomainName) -> Self {
        value.0
    }
}

/// A DNS name to look up: like [`DomainName`], but labels may contain `_`, as the record
/// names `<selector>._domainkey.<domain>` and `_dmarc.<domain>` do. Not for sending domains.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DnsName(String);

impl DnsName {
    /// Parses and normalises (lower-case, one trailing dot removed).
    pub fn parse(input: &str) -> Result<Self, DomainNameError> {
        // Underscores are the only difference from a domain name; check the rest by
        // validating the name with them replaced by a letter.
        let probe = input.replace('_', "u");
        DomainName::parse(&probe)?;
        let trimmed = input.strip_suffix('.').unwrap_or(input);
        Ok(Self(trimmed.to_ascii_lowercase()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&DomainName> for DnsName {
    fn from(name: &DomainName) -> Self {
        Self(name.0.clone())
    }
}

impl fmt::Display for DnsName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for DnsName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DnsName({})", self.0)
    }
}

impl TryFrom<String> for DnsName {
    type Error = DomainNameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<DnsName> for String {
    fn from(value: DnsName) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn normalises_case_and_trailing_dot() {
        assert_eq!(DomainName::parse("Mail.Example.COM.").unwrap().as_str(), "mail.example.com");
    }

    #[test]
    fn rejects_what_cannot_be_a_sending_domain() {
        for bad in ["", ".", "com", "a..b", "-a.com", "a-.com", "a b.com", "1.2.3.4", "é.com", "a.com\r\n"] {
            assert!(DomainName::parse(bad).is_err(), "{bad:?} accepted");
        }
        let long_label = format!("{}.com", "a".repeat(64));
        assert_eq!(DomainName::parse(&long_label), Err(DomainNameError::BadLabelLength));
    }

    #[test]
    fn dns_names_allow_underscore_labels() {
        assert_eq!(DnsName::parse("TD1r._domainkey.Example.com.").unwrap().as_str(), "td1r._domainkey.example.com");
        assert_eq!(DnsName::parse("_dmarc.example.com").unwrap().as_str(), "_dmarc.example.com");
        assert!(DnsName::parse("a b._dmarc.example.com").is_err());
        assert!(DomainName::parse("_dmarc.example.com").is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_output_reparses(s in "\\PC{0,300}") {
            if let Ok(d) = DomainName::parse(&s) {
                prop_assert_eq!(DomainName::parse(d.as_str()).unwrap(), d.clone());
                prop_assert!(d.as_str().len() <= 253);
                prop_assert!(!d.as_str().bytes().any(|b| b.is_ascii_uppercase() || b == b'\r' || b == b'\n'));
            }
        }

        #[test]
        fn valid_names_are_accepted(labels in proptest::collection::vec("[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", 1..4), tld in "[a-z]{2,10}") {
            let name = format!("{}.{}", labels.join("."), tld);
            prop_assert!(DomainName::parse(&name).is_ok(), "{} rejected", name);
        }
    }
}
