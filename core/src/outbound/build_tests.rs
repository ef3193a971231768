use mail_parser::{MessageParser, MimeHeaders};
use proptest::prelude::*;

use super::*;
use crate::domain_name::DomainName;
use crate::email::DisplayName;
use crate::outbound::DomainSigner;
use crate::outbound::return_path::ReturnPathKey;
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
    // An empty text beside HTML opts out of the generated text part.
    let mut html_only = message_from(&domain);
    html_only.text = Some(String::new());

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
fn an_html_only_message_gets_a_text_alternative_generated_from_its_html() {
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.text = None;
    message.html = Some(
        concat!(
            "<html><head><style>p{margin:0}</style></head><body><h1>Order &amp; invoice</h1>",
            "<p>Thanks, Ann.<br>See <a href=\"https://shop.example.com/o/42?a=1&amp;b=2\">your order</a>.</p>",
            "<ul><li>Shirt &times; 2</li><li>Hat</li></ul></body></html>"
        )
        .to_owned(),
    );

    let built = build_message(&message, &domain, None).unwrap();

    assert_wire_safe(&built.raw);
    assert_eq!(mime_tree(&built.raw), ["multipart/alternative", "  text/plain", "  text/html"]);
    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    assert_eq!(
        parsed.body_text(0).as_deref(),
        Some(
            "Order & invoice\r\n\r\nThanks, Ann.\r\nSee your order (https://shop.example.com/o/42?a=1&b=2).\r\n\r\n- Shirt × 2\r\n- Hat"
        )
    );
    assert_eq!(parsed.body_html(0).as_deref(), message.html.as_deref());
}

#[test]
fn html_that_shows_no_text_gets_no_text_part() {
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.text = None;
    message.html = Some(r#"<img src="https://acme.example.com/banner.png">"#.to_owned());

    let built = build_message(&message, &domain, None).unwrap();

    assert_eq!(mime_tree(&built.raw), ["text/html"]);
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
fn the_envelope_sender_is_the_signed_return_path_when_configured() {
    let domain = signing_domain("acme.example.com");
    let message = message_from(&domain);
    assert_eq!(envelope_sender(&message, &message.to, None), message.from.address);

    let return_path = ReturnPath {
        domain: DomainName::parse("bounces.tidings.example").unwrap(),
        key: ReturnPathKey::from_bytes([9; 32]),
    };
    let sender = envelope_sender(&message, &message.to, Some(&return_path));
    assert_eq!(sender, return_path.address(message.id, &message.to));
    let claimed = return_path.claim(&sender).expect("our own return path");
    assert_eq!(claimed.message, message.id);
    assert!(return_path.verify(&claimed, &message.to));
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

/// The MIME tree of `raw`, one line per part, indented by depth: the content type, then for
/// parts with a disposition the disposition, the content id and the filename.
fn mime_tree(raw: &[u8]) -> Vec<String> {
    fn walk(parsed: &mail_parser::Message<'_>, id: u32, depth: usize, out: &mut Vec<String>) {
        let part = &parsed.parts[id as usize];
        let ctype = part
            .content_type()
            .map_or("text/plain".to_owned(), |c| format!("{}/{}", c.ctype(), c.subtype().unwrap_or("")));
        let mut line = format!("{}{ctype}", "  ".repeat(depth));
        if let Some(disposition) = part.content_disposition() {
            line.push_str(&format!(" {}", disposition.ctype()));
            if let Some(cid) = part.content_id() {
                line.push_str(&format!(" <{cid}>"));
            }
            if let Some(name) = part.attachment_name() {
                line.push_str(&format!(" {name}"));
            }
        }
        out.push(line);
        if let mail_parser::PartType::Multipart(children) = &part.body {
            for child in children {
                walk(parsed, *child, depth + 1, out);
            }
        }
    }
    let parsed = MessageParser::default().parse(raw).unwrap();
    let mut out = Vec::new();
    walk(&parsed, 0, 0, &mut out);
    out
}

/// The decoded body of the part whose attachment name is `name`.
fn attachment_bytes(raw: &[u8], name: &str) -> Vec<u8> {
    let parsed = MessageParser::default().parse(raw).unwrap();
    let part = parsed.parts.iter().find(|p| p.attachment_name() == Some(name)).unwrap();
    part.contents().to_vec()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn reply_to_and_custom_headers_are_written_with_the_standard_ones() {
    use crate::model::extras::CustomHeader;
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.extras.reply_to = vec![
        EmailAddress::parse("help@acme.example.com").unwrap(),
        EmailAddress::parse("ops@acme.example.com").unwrap(),
    ];
    message.extras.headers = vec![
        CustomHeader::parse("X-Campaign", "spring").unwrap(),
        CustomHeader::parse("List-Unsubscribe", "<mailto:u@acme.example.com>").unwrap(),
        CustomHeader::parse("X-Greeting", "Grüße aus Köln").unwrap(),
        CustomHeader::parse("X-Long", &"x".repeat(998)).unwrap(),
    ];

    let built = build_message(&message, &domain, None).unwrap();

    assert_wire_safe(&built.raw);
    assert_eq!(
        header_names(&built.raw),
        [
            "From",
            "To",
            "Subject",
            "Date",
            "Message-ID",
            "Reply-To",
            "MIME-Version",
            "X-Campaign",
            "List-Unsubscribe",
            "X-Greeting",
            "X-Long",
            "Content-Type"
        ]
    );
    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    let reply_to: Vec<&str> = parsed.reply_to().unwrap().iter().filter_map(|a| a.address()).collect();
    assert_eq!(reply_to, ["help@acme.example.com", "ops@acme.example.com"]);
    assert_eq!(parsed.header_raw("X-Campaign").map(str::trim), Some("spring"));
    assert_eq!(parsed.header_raw("List-Unsubscribe").map(str::trim), Some("<mailto:u@acme.example.com>"));
    // Unknown headers decoded as unstructured text (RFC 2047 words joined back).
    let decoded = MessageParser::new()
        .header_text(mail_parser::HeaderName::Other("X-Greeting".into()))
        .header_text(mail_parser::HeaderName::Other("X-Long".into()))
        .parse(&built.raw)
        .unwrap();
    assert_eq!(decoded.header("X-Greeting").and_then(|h| h.as_text()), Some("Grüße aus Köln"));
    assert_eq!(decoded.header("X-Long").and_then(|h| h.as_text()), Some("x".repeat(998).as_str()));
}

#[test]
fn attachments_make_multipart_mixed_around_the_alternative_and_decode_back() {
    use crate::model::extras::Attachment;
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    let pdf: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    message.extras.attachments = vec![
        Attachment::parse("Rechnung März.pdf", "application/pdf", b64(&pdf), None).unwrap(),
        Attachment::parse("notes.txt", "text/plain", b64(b"line one\r\nline two\r\n"), None).unwrap(),
    ];

    let built = build_message(&message, &domain, None).unwrap();

    assert_wire_safe(&built.raw);
    assert_eq!(
        mime_tree(&built.raw),
        [
            "multipart/mixed",
            "  multipart/alternative",
            "    text/plain",
            "    text/html",
            "  application/pdf attachment Rechnung März.pdf",
            "  text/plain attachment notes.txt",
        ]
    );
    assert_eq!(attachment_bytes(&built.raw, "Rechnung März.pdf"), pdf);
    assert_eq!(attachment_bytes(&built.raw, "notes.txt"), b"line one\r\nline two\r\n");
    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    assert_eq!(
        parsed.content_type().unwrap().attribute("boundary"),
        Some(format!("tidings-mix-{}", message.id).as_str())
    );
    assert_eq!(parsed.body_text(0).as_deref(), Some("Thanks for your order."));
    assert_eq!(built, build_message(&message, &domain, None).unwrap(), "the bytes are the same on every attempt");
}

#[test]
fn inline_parts_go_in_multipart_related_with_the_html_and_files_around_it() {
    use crate::model::extras::Attachment;
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.html = Some(r#"<p><img src="cid:logo@acme"> Thanks</p>"#.into());
    let png = b"\x89PNG\r\n\x1a\n fake image".to_vec();
    message.extras.attachments = vec![
        Attachment::parse("logo.png", "image/png", b64(&png), Some("logo@acme")).unwrap(),
        Attachment::parse("terms.pdf", "application/pdf", b64(b"%PDF"), None).unwrap(),
    ];

    let built = build_message(&message, &domain, None).unwrap();

    assert_wire_safe(&built.raw);
    assert_eq!(
        mime_tree(&built.raw),
        [
            "multipart/mixed",
            "  multipart/alternative",
            "    text/plain",
            "    multipart/related",
            "      text/html",
            "      image/png inline <logo@acme> logo.png",
            "  application/pdf attachment terms.pdf",
        ]
    );
    assert_eq!(attachment_bytes(&built.raw, "logo.png"), png);
    let text = String::from_utf8(built.raw).unwrap();
    assert!(text.contains("Content-ID: <logo@acme>\r\n"), "{text}");
}

#[test]
fn an_html_only_message_with_inline_images_and_files_nests_the_generated_text_beside_the_related_html() {
    use crate::model::extras::Attachment;
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.text = None;
    message.html = Some(r#"<p><img src="cid:a" alt="logo"> Thanks</p>"#.to_owned());
    message.extras.attachments = vec![
        Attachment::parse("a.gif", "image/gif", b64(b"GIF89a"), Some("a")).unwrap(),
        Attachment::parse("terms.pdf", "application/pdf", b64(b"%PDF"), None).unwrap(),
    ];

    let built = build_message(&message, &domain, None).unwrap();

    assert_eq!(
        mime_tree(&built.raw),
        [
            "multipart/mixed",
            "  multipart/alternative",
            "    text/plain",
            "    multipart/related",
            "      text/html",
            "      image/gif inline <a> a.gif",
            "  application/pdf attachment terms.pdf",
        ]
    );
    assert_eq!(MessageParser::default().parse(&built.raw).unwrap().body_text(0).as_deref(), Some("Thanks"));

    message.text = Some(String::new());
    message.extras.attachments.pop();
    let opted_out = build_message(&message, &domain, None).unwrap();
    assert_eq!(mime_tree(&opted_out.raw), ["multipart/related", "  text/html", "  image/gif inline <a> a.gif"]);
}

#[test]
fn bare_cr_and_lf_in_text_and_html_go_out_as_crlf() {
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.text = Some("crlf line\r\nlf line\nlone cr\rend".to_owned());
    message.html = Some("<p>crlf\r\nlf\nlone cr\rend</p>".to_owned());

    let built = build_message(&message, &domain, None).unwrap();

    assert_wire_safe(&built.raw);
    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    assert_eq!(parsed.body_text(0).as_deref(), Some("crlf line\r\nlf line\r\nlone cr\r\nend"));
    assert_eq!(parsed.body_html(0).as_deref(), Some("<p>crlf\r\nlf\r\nlone cr\r\nend</p>"));

    // A text part generated from such HTML, and control characters, are written safely too.
    message.text = None;
    message.html = Some("<pre>a\rb\nc</pre><p>nul\u{0} esc\u{1b}</p>".to_owned());
    let built = build_message(&message, &domain, None).unwrap();
    assert_wire_safe(&built.raw);
    assert!(!built.raw.contains(&0), "no NUL on the wire");
    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    assert_eq!(parsed.body_html(0).as_deref(), Some("<pre>a\r\nb\r\nc</pre><p>nul\u{0} esc\u{1b}</p>"));
}

#[test]
fn every_file_and_inline_part_is_base64_whatever_its_bytes() {
    use crate::model::extras::Attachment;
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    let csv = b"a,b\n1,2\n".to_vec();
    // A tiny ZIP is ASCII: a header, NULs and control bytes.
    let zip = b"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0".to_vec();
    let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n".to_vec();
    message.html = Some(r#"<p><img src="cid:s"></p>"#.to_owned());
    message.extras.attachments = vec![
        Attachment::parse("data.csv", "text/csv", b64(&csv), None).unwrap(),
        Attachment::parse("empty.zip", "application/zip", b64(&zip), None).unwrap(),
        Attachment::parse("s.svg", "image/svg+xml", b64(&svg), Some("s")).unwrap(),
        Attachment::parse("note.txt", "text/plain", b64(b"plain words"), None).unwrap(),
    ];

    let built = build_message(&message, &domain, None).unwrap();

    assert_wire_safe(&built.raw);
    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    let files: Vec<_> = parsed.parts.iter().filter(|p| p.attachment_name().is_some()).collect();
    assert_eq!(files.len(), 4);
    for part in files {
        assert_eq!(part.content_transfer_encoding(), Some("base64"), "{:?}", part.attachment_name());
    }
    assert_eq!(attachment_bytes(&built.raw, "data.csv"), csv);
    assert_eq!(attachment_bytes(&built.raw, "empty.zip"), zip);
    assert_eq!(attachment_bytes(&built.raw, "s.svg"), svg);
}

#[test]
fn a_stored_attachment_that_is_not_base64_fails_the_build_not_the_process() {
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    let mut doc =
        serde_json::to_value(crate::model::extras::Attachment::parse("a.txt", "text/plain", "", None).unwrap())
            .unwrap();
    doc["content"] = "%%%".into();
    message.extras.attachments = vec![serde_json::from_value(doc).unwrap()];

    let err = build_message(&message, &domain, None).unwrap_err();

    assert!(matches!(err, BuildError::Attachment { .. }), "{err:?}");
}

proptest! {
    /// Whatever custom header the parser accepts writes exactly one header field, on
    /// wire-safe lines, and reads back as given.
    #[test]
    fn no_custom_header_can_add_a_header_line(
        name in "X-[A-Za-z0-9-]{1,20}",
        value in "(\\PC|\t|[\r\n:<>\"=?]|Bcc: x@evil\\.example|\r\nX-Injected: 1){0,40}",
    ) {
        use crate::model::extras::CustomHeader;
        let Ok(header) = CustomHeader::parse(&name, &value) else { return Ok(()) };
        let domain = signing_domain("acme.example.com");
        let mut message = message_from(&domain);
        message.extras.headers = vec![header];

        let built = build_message(&message, &domain, None).unwrap();

        assert_wire_safe(&built.raw);
        let names = header_names(&built.raw);
        prop_assert_eq!(names.len(), 8, "{:?}", names);
        prop_assert!(names.iter().any(|n| n == &name));
        prop_assert!(!names.iter().any(|n| n == "X-Injected" || n == "Bcc"));
        let parsed = MessageParser::new()
            .header_text(mail_parser::HeaderName::Other(name.clone().into()))
            .parse(&built.raw)
            .unwrap();
        let read = parsed.header(name.as_str()).and_then(|h| h.as_text()).unwrap_or("");
        // Unstructured text reads back as given up to white space: folding trims the edges,
        // and a run of spaces and tabs next to an encoded word (non-ASCII) comes back as one
        // space.
        let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        prop_assert_eq!(words(read), words(&value));
    }
}

/// Checks on signed bytes that any receiver's parser and every DKIM verifier rely on: CR and
/// LF only as CRLF, no NUL (base64 never holds one), no line over 998 octets, and no white
/// space between a `DKIM-Signature`'s `b=` value and the `;` after it.
fn assert_receivable(signed: &[u8]) -> Result<(), TestCaseError> {
    for (i, &byte) in signed.iter().enumerate() {
        match byte {
            b'\r' => prop_assert_eq!(signed.get(i + 1), Some(&b'\n'), "bare CR at {}", i),
            b'\n' => prop_assert!(i > 0 && signed[i - 1] == b'\r', "bare LF at {}", i),
            0 => prop_assert!(false, "NUL at {}", i),
            _ => {}
        }
    }
    for line in signed.split(|&b| b == b'\n') {
        prop_assert!(line.len() <= 999, "a line of {} octets", line.len() - 1);
    }
    let text = String::from_utf8_lossy(signed);
    let head = text.split("\r\n\r\n").next().unwrap_or("");
    let mut fields: Vec<String> = Vec::new();
    for line in head.split("\r\n") {
        match fields.last_mut() {
            Some(field) if line.starts_with([' ', '\t']) => field.push_str(&format!("\r\n{line}")),
            _ => fields.push(line.to_owned()),
        }
    }
    for field in fields.iter().filter(|f| f.starts_with("DKIM-Signature:")) {
        let (_, after_b) = field.rsplit_once("b=").unwrap_or_default();
        let value = after_b.strip_suffix(';').unwrap_or(after_b);
        prop_assert!(!value.ends_with([' ', '\t', '\r', '\n']), "white space after b=: {}", field);
    }
    Ok(())
}

/// Text with every kind of line end, control characters and long lines.
fn any_body() -> impl Strategy<Value = String> {
    prop_oneof![
        "(\\PC|[\r\n\t\u{0}\u{1b}\u{7f}]|\r\n|<p>|<br>|<a href=\"https://e.example/x\">|</a>|&amp;){0,120}",
        "[a-z]{0,1200}(\r|\n|\r\n)[a-zé]{0,1200}",
    ]
}

prop_compose! {
    fn any_attachment()(
        name in "[a-zA-Z0-9 äé._-]{1,30}",
        content_type in prop::sample::select(vec!["text/csv", "text/plain", "application/zip", "image/png", "application/octet-stream"]),
        bytes in prop_oneof![prop::collection::vec(any::<u8>(), 0..300), "[ -~\r\n]{0,300}".prop_map(String::into_bytes)],
        inline in any::<bool>(),
    ) -> Option<crate::model::extras::Attachment> {
        let id = inline.then(|| format!("cid{}", bytes.len()));
        crate::model::extras::Attachment::parse(&format!("{name}.bin"), content_type, b64(&bytes), id.as_deref()).ok()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::outbound::test_support::proptest_cases(128)))]

    /// Whatever a send holds, the signed bytes are receivable (see [`assert_receivable`]).
    #[test]
    fn any_send_is_built_and_signed_into_receivable_bytes(
        subject in "(\\PC|[\t\u{1}\u{7f}]){0,300}",
        name in proptest::option::of("(\\PC|[:<>\"=?,;@\\\\]){1,60}"),
        text in proptest::option::of(any_body()),
        html in proptest::option::of(any_body()),
        reply_to in prop::collection::vec("[a-z]{1,10}@(acme|help)\\.example", 0..3),
        headers in prop::collection::vec(("X-[A-Za-z0-9-]{1,20}|In-Reply-To|References|List-Unsubscribe", "(\\PC|\t){0,200}"), 0..4),
        attachments in prop::collection::vec(any_attachment(), 0..3),
    ) {
        let domain = signing_domain("acme.example.com");
        let signer = DomainSigner::new(&domain).unwrap();
        let mut message = message_from(&domain);
        message.subject = subject;
        message.from.display_name = name.and_then(|n| DisplayName::parse(&n).ok());
        message.text = text;
        message.html = html.or_else(|| message.text.is_none().then(|| "<p>only html</p>".to_owned()));
        message.extras.reply_to = reply_to.iter().filter_map(|a| EmailAddress::parse(a).ok()).collect();
        let mut names = std::collections::HashSet::new();
        message.extras.headers = headers
            .iter()
            .filter(|(n, _)| names.insert(n.to_ascii_lowercase()))
            .filter_map(|(n, v)| crate::model::extras::CustomHeader::parse(n, v).ok())
            .collect();
        message.extras.attachments = attachments
            .into_iter()
            .flatten()
            .filter(|a| a.content_id().is_none() || message.html.is_some())
            .collect();

        let built = build_message(&message, &domain, None).unwrap();
        let signed = signer.sign(&built.raw).unwrap();

        assert_receivable(&signed)?;
        prop_assert!(MessageParser::default().parse(&signed).is_some());
    }
}

/// The raw `Content-Type` value of the part whose attachment name is `name`, unfolded.
fn part_content_type(raw: &[u8], name: &str) -> String {
    let parsed = MessageParser::default().parse(raw).unwrap();
    let part = parsed.parts.iter().find(|p| p.attachment_name() == Some(name)).unwrap();
    let header = part.headers.iter().find(|h| h.name.as_str().eq_ignore_ascii_case("Content-Type")).unwrap();
    let field = &raw[header.offset_start as usize..header.offset_end as usize];
    String::from_utf8(field.to_vec()).unwrap().replace("\r\n", "").trim().to_owned()
}

#[test]
fn text_attachments_say_utf_8_when_they_are_and_keep_a_declared_charset() {
    use crate::model::extras::Attachment;
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.extras.attachments = vec![
        Attachment::parse("kunden.csv", "text/csv", b64("id;name\r\n1;Müller\r\n".as_bytes()), None).unwrap(),
        Attachment::parse("ascii.txt", "text/plain", b64(b"plain\n"), None).unwrap(),
        Attachment::parse("latin1.txt", "text/plain", b64(b"M\xfcller\n"), None).unwrap(),
        Attachment::parse("declared.txt", "text/plain; charset=ISO-8859-1", b64(b"M\xfcller\n"), None).unwrap(),
        Attachment::parse("data.json", "application/json", b64(b"{}"), None).unwrap(),
    ];

    let built = build_message(&message, &domain, None).unwrap();

    assert_wire_safe(&built.raw);
    let parsed = MessageParser::default().parse(&built.raw).unwrap();
    let charset = |name: &str| {
        let part = parsed.parts.iter().find(|p| p.attachment_name() == Some(name)).unwrap();
        part.content_type().unwrap().attribute("charset").map(str::to_owned)
    };
    assert_eq!(charset("kunden.csv").as_deref(), Some("utf-8"));
    assert_eq!(charset("ascii.txt").as_deref(), Some("utf-8"), "ASCII is UTF-8");
    assert_eq!(charset("latin1.txt"), None, "not UTF-8, and no charset was declared");
    assert_eq!(charset("declared.txt").as_deref(), Some("iso-8859-1"));
    assert_eq!(charset("data.json"), None, "only text/* gets one by itself");
    assert_eq!(part_content_type(&built.raw, "kunden.csv"), "text/csv; charset=utf-8; name=\"kunden.csv\"");
}

#[test]
fn a_file_name_in_rfc_2231_form_also_has_a_name_parameter_old_readers_decode() {
    use crate::model::extras::Attachment;
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    let long = format!("{}.pdf", "Quarterly statement ".repeat(10));
    message.extras.attachments = vec![
        Attachment::parse("請求書.csv", "text/csv", b64(b"a,b\n"), None).unwrap(),
        Attachment::parse("Rechnung März 2026 – Übersicht.pdf", "application/pdf", b64(b"%PDF"), None).unwrap(),
        Attachment::parse(&long, "application/pdf", b64(b"%PDF"), None).unwrap(),
        Attachment::parse("a \"quoted\" name.txt", "text/plain", b64(b"x"), None).unwrap(),
    ];

    let built = build_message(&message, &domain, None).unwrap();

    assert_wire_safe(&built.raw);
    let raw = std::str::from_utf8(&built.raw).unwrap();
    assert!(raw.contains("filename*"), "lettre writes RFC 2231 names: {raw}");
    for name in ["請求書.csv", "Rechnung März 2026 – Übersicht.pdf", long.as_str(), "a \"quoted\" name.txt"] {
        let field = part_content_type(&built.raw, name);
        assert!(field.contains("; name=\"") && !field.contains("name*"), "{field}");
        let parsed = MessageParser::default().parse(&built.raw).unwrap();
        let part = parsed.parts.iter().find(|p| p.attachment_name() == Some(name)).unwrap();
        assert_eq!(part.content_type().unwrap().attribute("name"), Some(name), "{field}");
    }
    assert!(raw.contains("name=\"=?utf-8?b?"), "non-ASCII names are encoded words: {raw}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::outbound::test_support::proptest_cases(64)))]

    /// Whatever the file name, the part's `Content-Disposition` and its `Content-Type`'s
    /// `name=` read back as that name, and the lines stay receivable.
    #[test]
    fn any_file_name_reads_back_from_both_parameters(
        stem in "(\\PC|[\"' ;=?*%]){1,120}",
        inline in any::<bool>(),
    ) {
        use crate::model::extras::Attachment;
        let name = format!("{stem}.txt");
        let Ok(a) = Attachment::parse(&name, "text/plain", b64("ü".as_bytes()), inline.then_some("part")) else {
            return Ok(());
        };
        let domain = signing_domain("acme.example.com");
        let mut message = message_from(&domain);
        message.extras.attachments = vec![a];

        let built = build_message(&message, &domain, None).unwrap();

        assert_receivable(&built.raw)?;
        let parsed = MessageParser::default().parse(&built.raw).unwrap();
        let part = parsed.parts.iter().find(|p| p.content_disposition().is_some()).unwrap();
        prop_assert_eq!(part.attachment_name(), Some(name.as_str()));
        prop_assert_eq!(part.content_type().unwrap().attribute("name"), Some(name.as_str()));
        prop_assert_eq!(part.content_type().unwrap().attribute("charset"), Some("utf-8"));
    }
}
