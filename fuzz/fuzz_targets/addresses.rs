//! Addresses, mailboxes and domain names as clients write them: parsing never panics, and
//! whatever is accepted carries no control character (a header injection) and parses again
//! to the same value from its own text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidings_core::domain_name::DomainName;
use tidings_core::email::{EmailAddress, Mailbox};

fuzz_target!(|text: &str| {
    if let Ok(address) = EmailAddress::parse(text) {
        let shown = address.to_string();
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert_eq!(EmailAddress::parse(&shown).ok().as_ref(), Some(&address));
    }
    if let Ok(mailbox) = Mailbox::parse(text) {
        let name = mailbox.display_name.as_ref().map_or("", |n| n.as_str());
        assert!(!name.chars().any(char::is_control), "{name:?}");
    }
    if let Ok(domain) = DomainName::parse(text) {
        assert_eq!(DomainName::parse(domain.as_str()).ok().as_ref(), Some(&domain));
    }
});
