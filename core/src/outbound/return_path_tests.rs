use proptest::prelude::*;

use super::*;
use crate::domain_name::DomainName;

fn return_path(key: u8) -> ReturnPath {
    ReturnPath {
        domain: DomainName::parse("bounces.tidings.example").unwrap(),
        key: ReturnPathKey::from_bytes([key; 32]),
    }
}

fn id(n: u128) -> MessageId {
    MessageId(ulid::Ulid(n))
}

fn addr(text: &str) -> EmailAddress {
    EmailAddress::parse(text).unwrap()
}

#[test]
fn the_address_names_the_message_and_verifies_for_its_recipient_only() {
    let rp = return_path(1);
    let message = id(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
    let jane = addr("Jane@Example.com");
    let address = rp.address(message, &jane);
    let local = address.local_part();
    assert!(local.starts_with("bounces+"), "{address}");
    assert!(local.len() <= 64, "a local part is at most 64 octets: {local}");
    assert_eq!(local, local.to_ascii_lowercase(), "written in lower case");

    let claimed = rp.claim(&address).unwrap();
    assert_eq!(claimed.message, message);
    assert!(rp.verify(&claimed, &jane));
    assert!(rp.verify(&claimed, &addr("jane@example.com")), "the recipient's case does not matter");
    assert!(!rp.verify(&claimed, &addr("john@example.com")), "another recipient");
    assert!(!return_path(2).verify(&claimed, &jane), "another key");
}

#[test]
fn case_folding_on_the_way_back_changes_nothing() {
    let rp = return_path(1);
    let jane = addr("jane@example.com");
    let address = rp.address(id(42), &jane);
    let upper = addr(&address.to_string().to_ascii_uppercase());
    let claimed = rp.claim(&upper).unwrap();
    assert_eq!(claimed.message, id(42));
    assert!(rp.verify(&claimed, &jane));
}

#[test]
fn a_neighbours_id_with_a_known_tag_does_not_verify() {
    // The attack of issue #28: the holder of one return path names the message next to it.
    let rp = return_path(1);
    let jane = addr("jane@example.com");
    let mine = rp.address(id(1000), &jane).to_string();
    let (local, domain) = mine.split_once('@').unwrap();
    let tag = local.rsplit_once('-').unwrap().1;
    for neighbour in [998u128, 999, 1001, 1002] {
        let forged = addr(&format!("bounces+{}-{tag}@{domain}", id(neighbour).to_string().to_ascii_lowercase()));
        let claimed = rp.claim(&forged).unwrap();
        assert!(!rp.verify(&claimed, &jane), "neighbour {neighbour}");
    }
}

#[test]
fn unsigned_and_foreign_addresses_are_told_apart() {
    let rp = return_path(1);
    let unsigned = format!("bounces+{}@bounces.tidings.example", id(7).to_string().to_ascii_lowercase());
    assert_eq!(rp.claim(&addr(&unsigned)), Err(ReturnPathError::Unsigned));
    let short_tag = format!("bounces+{}-abcd@bounces.tidings.example", id(7).to_string().to_ascii_lowercase());
    assert_eq!(rp.claim(&addr(&short_tag)), Err(ReturnPathError::Unsigned));
    let not_hex = format!("bounces+{}-zzzzzzzzzzzzzzzzzzzz@bounces.tidings.example", id(7));
    assert_eq!(rp.claim(&addr(&not_hex)), Err(ReturnPathError::Unsigned));
    for other in [
        "billing@bounces.tidings.example",
        "bounces+notanid-00000000000000000000@bounces.tidings.example",
        "fbl@bounces.tidings.example",
    ] {
        assert_eq!(rp.claim(&addr(other)), Err(ReturnPathError::NotAReturnPath), "{other}");
    }
    let elsewhere =
        rp.address(id(7), &addr("jane@example.com")).to_string().replace("bounces.tidings.example", "x.example");
    assert_eq!(rp.claim(&addr(&elsewhere)), Err(ReturnPathError::NotAReturnPath));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::outbound::test_support::proptest_cases(256)))]

    /// Every return path we write reads back as its message and verifies for its recipient;
    /// with any one hex digit of its tag changed, it does not.
    #[test]
    fn written_return_paths_verify_and_altered_ones_do_not(message in any::<u128>(), local in "[a-z0-9.]{1,20}", digit in 0usize..20, key in any::<u8>()) {
        prop_assume!(message != 0 && !local.starts_with('.') && !local.ends_with('.') && !local.contains(".."));
        let rp = return_path(key);
        let recipient = addr(&format!("{local}@example.org"));
        let address = rp.address(id(message), &recipient);
        let claimed = rp.claim(&address).unwrap();
        prop_assert_eq!(claimed.message, id(message));
        prop_assert!(rp.verify(&claimed, &recipient));

        let text = address.to_string();
        let at = text.find('-').unwrap() + 1 + digit;
        let mut bytes = text.into_bytes();
        bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
        let altered = addr(std::str::from_utf8(&bytes).unwrap());
        let claimed = rp.claim(&altered).unwrap();
        prop_assert!(!rp.verify(&claimed, &recipient));
    }

    /// Any local part at the domain is refused or claims something without panicking.
    #[test]
    fn claiming_arbitrary_local_parts_never_panics(local in "[a-zA-Z0-9+\\-.]{1,64}") {
        if let Ok(address) = EmailAddress::parse(&format!("{local}@bounces.tidings.example")) {
            let _ = return_path(3).claim(&address);
        }
    }
}
