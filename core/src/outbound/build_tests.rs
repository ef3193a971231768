use mail_parser::{MessageParser, MimeHeaders};
use proptest::prelude::*;

use super::*;
use crate::domain_name::DomainName;
use crate::email::DisplayName;
use crate::outbound::test_support::{message_from, signing_domain};

/// The header field names of the top-level header block, in order (folded lines joined).
fn header_names(raw: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(raw).expect("the message is ASCII");
    let head = text.split("\r\n\r\n").next().unwrap();
    head.split("\r\n")
        .filter(|line| !line.starts_with([' ', '\t']))
        .map(|line| line.split(':').next().unwrap().to_owned())
        .collect()
}

/// Every line ends in CRLF, is at most 998 octets, and the whole message is 7-bit.
fn assert_wire_safe(raw: &[u8]) {
    assert!(raw.is_ascii(), "the message is 7-bit ASCII");
    let text = std::str::from_utf8(raw).unwrap();
    assert!(text.ends_with("\r\n"), "ends with CRLF");
    for line in text.split("\r\n") {
        assert!(!line.contains(['\r', '\n']), "bare CR or LF in {line:?}");
        assert!(line.len() <= 998, "line of {} octets", line.len());
    }
}

#[test]
fn html_and_text_become_multipart_alternative_with_every_required_header() {
    let domain = signing_domain("acme.example.com");
    let message = message_from(&domain);

    let built = build_message(&message, &domain, None).unwrap();

    assert_eq!(built.provider_message_id, format!("{}@acme.example.com", message.id));
    assert_wire_safe(&built.raw);
    assert_eq!(
        header_names(&built.raw),
        ["From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type"]
    );
    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    let from = parsed.from().and_then(|a| a.first()).unwrap();
    assert_eq!((from.name(), from.address()), (Some("Acme Billing"), Some("billing@acme.example.com")));
    assert_eq!(parsed.to().and_then(|a| a.first()).and_then(|a| a.address()), Some("user@example.net"));
    assert_eq!(parsed.subject(), Some("Your invoice"));
    assert_eq!(parsed.message_id(), Some(built.provider_message_id.as_str()));
    assert_eq!(parsed.date().map(|d| d.to_timestamp()), Some(message.created_at.timestamp()));
    assert_eq!(parsed.header_raw("MIME-Version").map(str::trim), Some("1.0"));
    let content_type = parsed.content_type().unwrap();
    assert_eq!((content_type.ctype(), content_type.subtype()), ("multipart", Some("alternative")));
    assert_eq!(content_type.attribute("boundary"), Some(format!("tidings-{}", message.id).as_str()));
    assert_eq!(parsed.body_text(0).as_deref(), Some("Thanks for your order."));
    assert_eq!(parsed.body_html(0).as_deref(), Some("<p>Thanks for your order.</p>"));
}

#[test]
fn non_ascii_subject_names_and_bodies_are_encoded_and_decode_back() {
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.subject = "Grüße – Rechnung №42 für Zoë 🎉, \"quoted\" and (parens)".to_owned();
    message.from.display_name = Some(DisplayName::parse("Åsa Öberg, \"Billing\" <Dept>").unwrap());
    let text = format!("Hallo Jürgen,\nanbei die Rechnung über 42 €.\n{}\n.\nEnde", "lang ".repeat(60));
    message.text = Some(text.clone());
    message.html = Some("<p>Grüße aus Köln — 日本語のテキスト</p>".to_owned());

    let built = build_message(&message, &domain, None).unwrap();

    assert_wire_safe(&built.raw);
    let raw = std::str::from_utf8(&built.raw).unwrap();
    assert!(raw.contains("=?utf-8?"), "RFC 2047 encoded words are used");
    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    assert_eq!(parsed.subject(), Some(message.subject.as_str()));
    let from = parsed.from().and_then(|a| a.first()).unwrap();
    assert_eq!(from.name(), Some("Åsa Öberg, \"Billing\" <Dept>"));
    assert_eq!(from.address(), Some("billing@acme.example.com"));
    assert_eq!(parsed.body_text(0).as_deref(), Some(text.replace('\n', "\r\n").as_str()));
    assert_eq!(parsed.body_html(0).as_deref(), message.html.as_deref());
}

#[test]
fn a_single_body_is_sent_as_that_part_alone() {
    let domain = signing_domain("acme.example.com");
    let mut text_only = message_from(&domain);
    text_only.html = None;
    let mut html_only = message_from(&domain);
    html_only.text = None;

    for (message, subtype) in [(text_only, "plain"), (html_only, "html")] {
        let built = build_message(&message, &domain, None).unwrap();
        assert_wire_safe(&built.raw);
        let names = header_names(&built.raw);
        assert_eq!(names.last().map(String::as_str), Some("Content-Transfer-Encoding"));
        let parsed = MessageParser::default().parse(&built.raw).unwrap();
        let content_type = parsed.content_type().unwrap();
        assert_eq!((content_type.ctype(), content_type.subtype()), ("text", Some(subtype)));
        assert_eq!(content_type.attribute("charset"), Some("utf-8"));
    }
}

#[test]
fn a_body_containing_the_boundary_gets_another_one() {
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    let boundary = format!("tidings-{}", message.id);
    message.text = Some(format!("--{boundary}\nnot a part"));

    let built = build_message(&message, &domain, None).unwrap();

    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    assert_ne!(parsed.content_type().unwrap().attribute("boundary"), Some(boundary.as_str()));
    assert_eq!(parsed.body_text(0).as_deref(), Some(format!("--{boundary}\r\nnot a part").as_str()));
}

#[test]
fn messages_without_a_body_or_of_another_domain_are_refused() {
    let domain = signing_domain("acme.example.com");
    let mut empty = message_from(&domain);
    empty.text = None;
    empty.html = None;
    assert_eq!(build_message(&empty, &domain, None), Err(BuildError::NoBody));

    let other = signing_domain("other.example.com");
    let result = build_message(&message_from(&other), &domain, None);
    assert!(matches!(result, Err(BuildError::WrongDomain { .. })), "{result:?}");
}

#[test]
fn the_envelope_sender_is_the_per_message_return_path_when_configured() {
    let domain = signing_domain("acme.example.com");
    let message = message_from(&domain);
    assert_eq!(envelope_sender(&message, None), message.from.address);

    let bounces = DomainName::parse("bounces.tidings.example").unwrap();
    let sender = envelope_sender(&message, Some(&bounces));
    let lower = message.id.to_string().to_ascii_lowercase();
    assert_eq!(sender.to_string(), format!("bounces+{lower}@bounces.tidings.example"));
    assert_eq!(message_id_from_return_path(&sender), Some(message.id));
    let upper = EmailAddress::parse(&format!("BOUNCES+{}@bounces.tidings.example", message.id)).unwrap();
    assert_eq!(message_id_from_return_path(&upper), Some(message.id));
    for other in ["billing@acme.example.com", "bounces+notanid@x.example", "bounces@x.example", "b@x.example"] {
        assert_eq!(message_id_from_return_path(&EmailAddress::parse(other).unwrap()), None, "{other}");
    }
}

#[test]
fn control_characters_in_a_subject_are_replaced_not_written() {
    assert_eq!(clean_subject("a\tb"), "a\tb");
    assert_eq!(clean_subject("a\r\nBcc: x@y.example"), "a\u{fffd}\u{fffd}Bcc: x@y.example");
    assert_eq!(clean_subject("bell\u{7}del\u{7f}"), "bell\u{fffd}del\u{fffd}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever a subject or display name holds (line breaks, colons, header-like text,
    /// any Unicode), the message has exactly the expected header lines and reads back as
    /// given.
    #[test]
    fn no_field_can_add_a_header_line(
        subject in "(\\PC|[\r\n:<>\"=?]|Bcc: x@evil\\.example|\r\nX-Injected: 1){0,60}",
        name in "(\\PC|[:<>\"=?,;@\\\\]){1,40}",
    ) {
        let domain = signing_domain("acme.example.com");
        let mut message = message_from(&domain);
        message.subject = subject.clone();
        message.from.display_name = DisplayName::parse(&name).ok();

        let built = build_message(&message, &domain, None).unwrap();

        assert_wire_safe(&built.raw);
        prop_assert_eq!(
            header_names(&built.raw),
            ["From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type"]
        );
        let parsed = MessageParser::default().parse(&built.raw).unwrap();
        let expected = clean_subject(&subject);
        prop_assert_eq!(parsed.subject().unwrap_or("").trim(), expected.trim());
        let from = parsed.from().and_then(|a| a.first()).unwrap();
        prop_assert_eq!(from.address(), Some("billing@acme.example.com"));
        prop_assert_eq!(from.name(), message.from.display_name.as_ref().map(DisplayName::as_str));
    }
}

#[test]
fn the_longest_allowed_subject_still_fits_on_wire_lines() {
    let domain = signing_domain("acme.example.com");
    for subject in ["a".repeat(998), "word ".repeat(199) + "end", "ü".repeat(998)] {
        let mut message = message_from(&domain);
        message.subject = subject.clone();
        let built = build_message(&message, &domain, None).unwrap();
        assert_wire_safe(&built.raw);
        let parsed = MessageParser::default().parse(&built.raw).unwrap();
        assert_eq!(parsed.subject(), Some(subject.as_str()));
    }
}
