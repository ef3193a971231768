//! Email addresses and mailboxes (`Display Name <local@domain>`), parsed at the edge so that
//! nothing past it can carry a CR, an LF or an address the SMTP layer would choke on.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::domain_name::{DomainName, DomainNameError};
use crate::text_checks::is_line_or_control;

/// Why a text is not an acceptable address or mailbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Empty input.
    #[error("is empty")]
    Empty,
    /// Over 320 characters (RFC 5321's 64 + 1 + 255).
    #[error("is longer than 320 characters")]
    TooLong,
    /// CR, LF or another control character (C1 and U+2028/U+2029 included): never allowed, it
    /// would be header injection.
    #[error("contains a line break or control character")]
    ControlCharacter,
    /// No `@`, or more than one outside quotes.
    #[error("must have the form local@domain")]
    MissingAt,
    /// Local part empty or over 64 characters.
    #[error("has a local part that is empty or longer than 64 characters")]
    LocalPartLength,
    /// Local part is not a dot-atom of RFC 5322 printable characters.
    #[error("has a local part with characters or dots that are not allowed")]
    LocalPartSyntax,
    /// The domain is not valid.
    #[error("has an invalid domain: {0}")]
    Domain(#[from] DomainNameError),
    /// `Name <addr>` is malformed (unbalanced brackets or quotes, text after `>`).
    #[error("must be an address or `Display Name <local@domain>`")]
    MailboxSyntax,
    /// The display name is over 256 characters.
    #[error("has a display name longer than 256 characters")]
    DisplayNameTooLong,
    /// The display name holds text shaped like an address (`y@other.test`) other than the
    /// mailbox's own: many mail programs show only the name, so it would pass for the sender.
    #[error("has a display name holding an address ({0}); a display name may not look like another address")]
    AddressInDisplayName(String),
}

/// One RFC 5321 mailbox address. The domain is lower-cased; the local part keeps its case
/// (it is the receiving server's to interpret), but [`EmailAddress::normalized`] lower-cases
/// everything for matching: suppressions match without regard to case.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EmailAddress {
    local: String,
    domain: DomainName,
}

fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c)
}

impl EmailAddress {
    /// Parses `local@domain`. Surrounding spaces are trimmed; quoted local parts and
    /// non-ASCII local parts (SMTPUTF8) are refused, since few receivers accept them.
    pub fn parse(input: &str) -> Result<Self, AddressError> {
        if input.chars().any(is_line_or_control) {
            return Err(AddressError::ControlCharacter);
        }
        let input = input.trim_matches(' ');
        if input.is_empty() {
            return Err(AddressError::Empty);
        }
        if input.len() > 320 {
            return Err(AddressError::TooLong);
        }
        let (local, domain) = input.rsplit_once('@').ok_or(AddressError::MissingAt)?;
        if local.is_empty() || local.len() > 64 {
            return Err(AddressError::LocalPartLength);
        }
        let dot_atom = local.split('.').all(|atom| !atom.is_empty() && atom.chars().all(is_atext));
        if !dot_atom {
            return Err(AddressError::LocalPartSyntax);
        }
        let domain = DomainName::parse(domain)?;
        Ok(Self { local: local.to_owned(), domain })
    }

    /// Builds `local@domain` from parts already known to be valid in isolation.
    pub fn from_parts(local: &str, domain: &DomainName) -> Result<Self, AddressError> {
        Self::parse(&format!("{local}@{domain}"))
    }

    /// The local part, as given.
    pub fn local_part(&self) -> &str {
        &self.local
    }

    /// The domain.
    pub fn domain(&self) -> &DomainName {
        &self.domain
    }

    /// The whole address lower-cased: the key for suppression matching.
    pub fn normalized(&self) -> String {
        format!("{}@{}", self.local.to_ascii_lowercase(), self.domain)
    }
}

impl fmt::Display for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.local, self.domain)
    }
}

impl fmt::Debug for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EmailAddress({self})")
    }
}

impl TryFrom<String> for EmailAddress {
    type Error = AddressError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<EmailAddress> for String {
    fn from(value: EmailAddress) -> Self {
        value.to_string()
    }
}

/// A display name: printable text without CR, LF or other control characters.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DisplayName(String);

impl DisplayName {
    /// Validates a display name (already unquoted). Empty names are refused: use `None`. So
    /// is a name holding address-shaped text ([`address_like_words`]), whatever the address
    /// it goes with; see [`DisplayName::parse_for`].
    pub fn parse(input: &str) -> Result<Self, AddressError> {
        let name = Self::checked(input, is_line_or_control)?;
        let found = address_like_words(&name.0).next().map(str::to_owned);
        match found {
            Some(word) => Err(AddressError::AddressInDisplayName(word)),
            None => Ok(name),
        }
    }

    /// [`DisplayName::parse`] for the name of `address`: address-shaped text is allowed when
    /// it is exactly that address (ASCII case aside). `"billing@acme.test" <billing@acme.test>`
    /// is what many mail libraries write and misleads no one; `"y@other.test" <x@acme.test>`
    /// shows a sender the message is not from.
    pub fn parse_for(input: &str, address: &EmailAddress) -> Result<Self, AddressError> {
        let name = Self::checked(input, is_line_or_control)?;
        let own = address.to_string();
        let found = address_like_words(&name.0).find(|word| !word.eq_ignore_ascii_case(&own)).map(str::to_owned);
        match found {
            Some(word) => Err(AddressError::AddressInDisplayName(word)),
            None => Ok(name),
        }
    }

    fn checked(input: &str, forbidden: fn(char) -> bool) -> Result<Self, AddressError> {
        if input.chars().any(forbidden) {
            return Err(AddressError::ControlCharacter);
        }
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Err(AddressError::Empty);
        }
        if trimmed.chars().count() > 256 {
            return Err(AddressError::DisplayNameTooLong);
        }
        Ok(Self(trimmed.to_owned()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DisplayName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for DisplayName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DisplayName({:?})", self.0)
    }
}

/// The at signs a reader takes for `@`: the ASCII one and its full-width (U+FF20) and small
/// (U+FE6B) look-alikes.
const AT_SIGNS: [char; 3] = ['@', '\u{FF20}', '\u{FE6B}'];

/// The words of `name` shaped like an address: an at sign ([`AT_SIGNS`]) with text on both
/// sides, the word running to white space or to a character that ends an address in prose
/// (`<>()[],;:"'`). `Ann@Work` and `y@other.test` are such words; `Acme @ Home` and
/// `Ann (@ann)` (a handle: nothing before the at sign) are not.
pub fn address_like_words(name: &str) -> impl Iterator<Item = &str> {
    let ends = |c: char| c.is_whitespace() || "<>()[],;:\"'".contains(c);
    name.split(ends).filter(|word| {
        word.char_indices()
            .any(|(i, c)| AT_SIGNS.contains(&c) && i > 0 && word[i + c.len_utf8()..].chars().next().is_some())
    })
}

/// The stored form (serde): what earlier versions accepted still loads. They allowed
/// U+2028/U+2029, which [`DisplayName::parse`] now refuses; a stored sender holding one must
/// stay readable. Requests never deserialize a `DisplayName` directly: they go through
/// [`DisplayName::parse`].
impl TryFrom<String> for DisplayName {
    type Error = AddressError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::checked(&value, char::is_control)
    }
}

impl From<DisplayName> for String {
    fn from(value: DisplayName) -> Self {
        value.0
    }
}

/// An address with an optional display name, as in a `From` header.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Mailbox {
    /// The friendly name, if any.
    pub display_name: Option<DisplayName>,
    /// The address.
    pub address: EmailAddress,
}

impl Mailbox {
    /// Parses `local@domain`, `Name <local@domain>` or `"Name, Inc." <local@domain>`.
    pub fn parse(input: &str) -> Result<Self, AddressError> {
        if input.chars().any(is_line_or_control) {
            return Err(AddressError::ControlCharacter);
        }
        let input = input.trim();
        let Some(open) = input.rfind('<') else {
            if input.contains('>') {
                return Err(AddressError::MailboxSyntax);
            }
            return Ok(Self { display_name: None, address: EmailAddress::parse(input)? });
        };
        let rest = &input[open + 1..];
        let addr = rest.strip_suffix('>').ok_or(AddressError::MailboxSyntax)?;
        if addr.contains(['<', '>']) {
            return Err(AddressError::MailboxSyntax);
        }
        let address = EmailAddress::parse(addr)?;
        let raw_name = input[..open].trim();
        let display_name =
            if raw_name.is_empty() { None } else { Some(DisplayName::parse_for(&unquote(raw_name)?, &address)?) };
        Ok(Self { display_name, address })
    }
}

/// Removes RFC 5322 quoting from a display name (`"A \"B\""` → `A "B"`); unquoted names are
/// taken as they are.
fn unquote(name: &str) -> Result<String, AddressError> {
    let Some(inner) = name.strip_prefix('"') else {
        return if name.contains('"') { Err(AddressError::MailboxSyntax) } else { Ok(name.to_owned()) };
    };
    let inner = inner.strip_suffix('"').ok_or(AddressError::MailboxSyntax)?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().ok_or(AddressError::MailboxSyntax)?),
            '"' => return Err(AddressError::MailboxSyntax),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// An address without a display name.
impl From<EmailAddress> for Mailbox {
    fn from(address: EmailAddress) -> Self {
        Self { display_name: None, address }
    }
}

impl fmt::Display for Mailbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.display_name {
            Some(name) => {
                let escaped = name.as_str().replace('\\', "\\\\").replace('"', "\\\"");
                write!(f, "\"{escaped}\" <{}>", self.address)
            }
            None => write!(f, "{}", self.address),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_plain_and_named_mailboxes() {
        let m = Mailbox::parse("Acme Billing <Billing@Acme.COM>").unwrap();
        assert_eq!(m.display_name.unwrap().as_str(), "Acme Billing");
        assert_eq!(m.address.to_string(), "Billing@acme.com");
        assert_eq!(m.address.normalized(), "billing@acme.com");

        let m = Mailbox::parse(r#""Acme, \"Inc.\"" <a@acme.com>"#).unwrap();
        assert_eq!(m.display_name.unwrap().as_str(), r#"Acme, "Inc.""#);

        let m = Mailbox::parse("a@acme.com").unwrap();
        assert!(m.display_name.is_none());
    }

    #[test]
    fn refuses_injection_and_malformed_input() {
        for bad in [
            "a@b.com\r\nBcc: x@y.com",
            "Name\n <a@b.com>",
            "a@b.com>",
            "<a@b.com",
            "Name <a@b.com> trailing",
            "Na\"me <a@b.com>",
            "a",
            "@b.com",
            "a@",
            ".a@b.com",
            "a..b@b.com",
            "a b@b.com",
            "ä@b.com",
        ] {
            assert!(Mailbox::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(EmailAddress::parse(&format!("{}@b.com", "a".repeat(65))), Err(AddressError::LocalPartLength));
    }

    #[test]
    fn a_display_name_stored_by_an_earlier_version_still_loads() {
        let stored: DisplayName = serde_json::from_str("\"Ann\\u2028Lee\"").unwrap();
        assert_eq!(stored.as_str(), "Ann\u{2028}Lee");
        assert!(serde_json::from_str::<DisplayName>("\"Ann\\r\\nBcc\"").is_err());
    }

    #[test]
    fn c1_controls_and_unicode_line_separators_are_refused_in_names_and_addresses() {
        for sep in ['\u{85}', '\u{2028}', '\u{2029}', '\0', '\x0b', '\t', '\u{9b}'] {
            let named = format!("Ann{sep}Bcc <ann@example.com>");
            assert_eq!(Mailbox::parse(&named), Err(AddressError::ControlCharacter), "{named:?}");
            assert_eq!(DisplayName::parse(&format!("Ann{sep}")), Err(AddressError::ControlCharacter));
            assert_eq!(EmailAddress::parse(&format!("ann{sep}@example.com")), Err(AddressError::ControlCharacter));
        }
    }

    #[test]
    fn a_display_name_may_not_hold_another_address() {
        for bad in [
            "y@other.test <x@acme.test>",
            "\"y@other.test\" <x@acme.test>",
            "Support y@other.test <x@acme.test>",
            "\"Billing (y@other.test)\" <x@acme.test>",
            "\"<y@other.test>\" <x@acme.test>",
            "Ann@Work <x@acme.test>",
            "y\u{FF20}other.test <x@acme.test>",
            "y\u{FE6B}other.test <x@acme.test>",
            "\"x@acme.test, y@other.test\" <x@acme.test>",
        ] {
            let err = Mailbox::parse(bad).unwrap_err();
            assert!(matches!(err, AddressError::AddressInDisplayName(_)), "{bad:?}: {err:?}");
        }
        for good in [
            "x@acme.test <x@acme.test>",
            "\"X@Acme.Test\" <x@acme.test>",
            "Acme @ Home <x@acme.test>",
            "\"Ann (@ann)\" <x@acme.test>",
            "Ann@ <x@acme.test>",
            "Acme Billing <x@acme.test>",
        ] {
            assert!(Mailbox::parse(good).is_ok(), "{good:?}");
        }
        let own = EmailAddress::parse("x@acme.test").unwrap();
        assert!(DisplayName::parse("x@acme.test").is_err(), "without its address, any address is refused");
        assert!(DisplayName::parse_for("x@acme.test", &own).is_ok());
        assert!(DisplayName::parse_for("y@acme.test", &own).is_err());
        let stored: DisplayName = serde_json::from_str("\"y@other.test\"").unwrap();
        assert_eq!(stored.as_str(), "y@other.test", "a name stored by an earlier version still loads");
    }

    proptest! {
        #[test]
        fn mailbox_parse_never_panics_and_never_keeps_line_breaks(s in "\\PC{0,80}|[a-z\"<> @.\r\n\\\\]{0,40}") {
            if let Ok(m) = Mailbox::parse(&s) {
                let shown = m.to_string();
                prop_assert!(!shown.contains('\r') && !shown.contains('\n'));
                prop_assert_eq!(Mailbox::parse(&shown).unwrap(), m);
            }
        }

        #[test]
        fn display_round_trips(local in "[a-zA-Z0-9_+-]{1,20}(\\.[a-z0-9]{1,5})?", name in "[A-Za-z ,\"\\\\]{0,30}") {
            let address = EmailAddress::parse(&format!("{local}@example.com")).unwrap();
            let display_name = DisplayName::parse(&name).ok();
            let m = Mailbox { display_name, address };
            prop_assert_eq!(Mailbox::parse(&m.to_string()).unwrap(), m);
        }
    }
}
