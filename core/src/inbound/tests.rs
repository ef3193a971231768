use proptest::prelude::*;

use super::*;
use crate::outbound::build_message;
use crate::outbound::test_support::{message_from, proptest_cases, signing_domain};

fn crlf(text: &str) -> Vec<u8> {
    text.replace('\n', "\r\n").into_bytes()
}

#[test]
fn a_plain_text_message_gives_its_addresses_subject_and_text() {
    let raw = crlf(
        "From: \"Ann Example\" <ann@example.net>\n\
         To: support@in.acme.example, Bob <bob@in.acme.example>\n\
         Cc: undisclosed-recipients:;, carol@example.org\n\
         Subject: Where is my order?\n\
         Message-ID: <abc.123@mail.example.net>\n\
         \n\
         Hello,\nit has not arrived.\n",
    );

    let parsed = parse(&raw).unwrap();

    let from = parsed.from.unwrap();
    assert_eq!((from.name.as_deref(), from.address.as_str()), (Some("Ann Example"), "ann@example.net"));
    let to: Vec<_> = parsed.to.iter().map(|m| (m.name.as_deref(), m.address.as_str())).collect();
    assert_eq!(to, [(None, "support@in.acme.example"), (Some("Bob"), "bob@in.acme.example")]);
    let cc: Vec<_> = parsed.cc.iter().map(|m| m.address.as_str()).collect();
    assert_eq!(cc, ["carol@example.org"]);
    assert_eq!(parsed.subject.as_deref(), Some("Where is my order?"));
    assert_eq!(parsed.text.as_deref(), Some("Hello,\r\nit has not arrived.\r\n"));
    assert_eq!(parsed.stripped_text_reply.as_deref(), Some("Hello,\r\nit has not arrived."));
    assert_eq!(parsed.html, None);
    assert_eq!(parsed.message_id.as_deref(), Some("abc.123@mail.example.net"));
    assert!(parsed.attachments.is_empty());
    let names: Vec<_> = parsed.headers.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["From", "To", "Cc", "Subject", "Message-ID"]);
    assert_eq!(parsed.headers[4].value, "<abc.123@mail.example.net>");
    assert_eq!(parsed.truncated, Truncation::default());
}

#[test]
fn multipart_alternative_gives_both_bodies_in_utf8() {
    let raw = crlf(
        "From: ann@example.net\n\
         To: support@in.acme.example\n\
         Subject: =?UTF-8?Q?Caf=C3=A9_cr=C3=A8me_=E2=98=95?=\n\
         MIME-Version: 1.0\n\
         Content-Type: multipart/alternative; boundary=\"b1\"\n\
         \n\
         --b1\n\
         Content-Type: text/plain; charset=utf-8\n\
         Content-Transfer-Encoding: quoted-printable\n\
         \n\
         Un caf=C3=A9, s'il vous pla=C3=AEt.\n\
         --b1\n\
         Content-Type: text/html; charset=utf-8\n\
         Content-Transfer-Encoding: 8bit\n\
         \n\
         <p>Un caf\u{e9}, s'il vous pla\u{ee}t.</p>\n\
         --b1--\n",
    );

    let parsed = parse(&raw).unwrap();

    assert_eq!(parsed.subject.as_deref(), Some("Caf\u{e9} cr\u{e8}me \u{2615}"));
    assert_eq!(parsed.text.as_deref().map(str::trim_end), Some("Un caf\u{e9}, s'il vous pla\u{ee}t."));
    assert_eq!(parsed.html.as_deref().map(str::trim_end), Some("<p>Un caf\u{e9}, s'il vous pla\u{ee}t.</p>"));
    assert!(parsed.attachments.is_empty());
    let subject = parsed.headers.iter().find(|h| h.name == "Subject").unwrap();
    assert_eq!(subject.value, "Caf\u{e9} cr\u{e8}me \u{2615}");
}

#[test]
fn iso_8859_1_subjects_bodies_and_names_are_decoded() {
    let mut raw = crlf(
        "From: =?ISO-8859-1?Q?Ren=E9e_M=FCller?= <renee@example.de>\n\
         To: support@in.acme.example\n\
         Subject: =?ISO-8859-1?Q?R=E9sum=E9_f=FCr_Sie?=\n\
         MIME-Version: 1.0\n\
         Content-Type: text/plain; charset=ISO-8859-1\n\
         Content-Transfer-Encoding: 8bit\n\
         \n",
    );
    raw.extend_from_slice(b"Gr\xfc\xdfe aus K\xf6ln\r\n");

    let parsed = parse(&raw).unwrap();

    assert_eq!(parsed.from.unwrap().name.as_deref(), Some("Ren\u{e9}e M\u{fc}ller"));
    assert_eq!(parsed.subject.as_deref(), Some("R\u{e9}sum\u{e9} f\u{fc}r Sie"));
    assert_eq!(parsed.text.as_deref(), Some("Gr\u{fc}\u{df}e aus K\u{f6}ln\r\n"));
    let from = parsed.headers.iter().find(|h| h.name == "From").unwrap();
    assert_eq!(from.value, "Ren\u{e9}e M\u{fc}ller <renee@example.de>");
}

#[test]
fn html_only_mail_gets_a_text_from_its_html_and_inline_images_are_listed() {
    let raw = crlf(
        "From: ann@example.net\n\
         To: support@in.acme.example\n\
         Subject: Screenshot\n\
         MIME-Version: 1.0\n\
         Content-Type: multipart/related; boundary=\"rel\"\n\
         \n\
         --rel\n\
         Content-Type: text/html; charset=utf-8\n\
         \n\
         <p>See the error:</p><img src=\"cid:shot@ann\"><p>Thanks</p>\n\
         --rel\n\
         Content-Type: image/png\n\
         Content-Transfer-Encoding: base64\n\
         Content-ID: <shot@ann>\n\
         \n\
         iVBORyBmYWtlIGltYWdl\n\
         --rel--\n",
    );

    let parsed = parse(&raw).unwrap();

    assert!(parsed.html.as_deref().unwrap().contains("cid:shot@ann"));
    assert_eq!(parsed.text.as_deref(), Some("See the error:\n\nThanks"));
    assert_eq!(parsed.attachments.len(), 1);
    let image = &parsed.attachments[0];
    assert_eq!(
        (image.index, image.content_type.as_str(), image.size, image.content_id.as_deref(), image.inline),
        (0, "image/png", b"\x89PNG fake image".len(), Some("shot@ann"), true)
    );
    assert_eq!(image.filename, None);
    assert_eq!(attachment_bytes(&raw, 0, &InboundLimits::default()).unwrap(), b"\x89PNG fake image");
}

#[test]
fn attachment_names_in_rfc_2231_and_encoded_words_are_decoded() {
    let raw = crlf(
        "From: ann@example.net\n\
         To: support@in.acme.example\n\
         Subject: Files\n\
         MIME-Version: 1.0\n\
         Content-Type: multipart/mixed; boundary=\"mix\"\n\
         \n\
         --mix\n\
         Content-Type: text/plain\n\
         \n\
         Two files attached.\n\
         --mix\n\
         Content-Type: application/pdf\n\
         Content-Disposition: attachment; filename*0*=UTF-8''r%C3%A9sum; filename*1*=%C3%A9.pdf\n\
         Content-Transfer-Encoding: base64\n\
         \n\
         JVBERi0xLjQgdGlueQ==\n\
         --mix\n\
         Content-Type: application/vnd.openxmlformats-officedocument.spreadsheetml.sheet;\n\
         \tname=\"=?UTF-8?B?w5xiZXJzaWNodCAyMDI2Lnhsc3g=?=\"\n\
         Content-Disposition: attachment\n\
         Content-Transfer-Encoding: base64\n\
         \n\
         JVBERi0xLjQgdGlueQ==\n\
         --mix--\n",
    );

    let parsed = parse(&raw).unwrap();

    assert_eq!(parsed.text.as_deref().map(str::trim_end), Some("Two files attached."));
    let files: Vec<_> = parsed.attachments.iter().map(|a| (a.index, a.filename.as_deref(), a.inline)).collect();
    assert_eq!(files, [(0, Some("r\u{e9}sum\u{e9}.pdf"), false), (1, Some("\u{dc}bersicht 2026.xlsx"), false)]);
    assert_eq!(parsed.attachments[0].content_type, "application/pdf");
    assert_eq!(parsed.attachments[1].content_type, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet");
    assert_eq!(parsed.attachments[1].size, 13);
    let limits = InboundLimits::default();
    assert_eq!(attachment_bytes(&raw, 1, &limits).unwrap(), b"%PDF-1.4 tiny");
    assert_eq!(attachment_bytes(&raw, 2, &limits), Err(InboundParseError::NoSuchAttachment { index: 2, count: 2 }));
}

#[test]
fn a_message_without_from_parses_with_none() {
    let parsed = parse(b"To: support@in.acme.example\r\nSubject: anonymous\r\n\r\nhi\r\n").unwrap();
    assert_eq!(parsed.from, None);
    assert_eq!(parsed.subject.as_deref(), Some("anonymous"));
}

#[test]
fn garbage_and_empty_input_are_not_messages() {
    assert_eq!(parse(b""), Err(InboundParseError::NotAMessage));
    assert_eq!(parse(b"\r\n\r\n"), Err(InboundParseError::NotAMessage));
    assert_eq!(parse(b"\r\nbody without headers\r\n"), Err(InboundParseError::NotAMessage));
    // Binary garbage: mail-parser reads its first line as a header attempt; whatever it
    // makes of it, no address or subject comes out of bytes that name none.
    let garbage: Vec<u8> = (0..=255u8).rev().cycle().take(4096).collect();
    let parsed = parse(&garbage).unwrap();
    assert_eq!((parsed.from, parsed.to, parsed.subject), (None, vec![], None));
    assert_eq!(
        attachment_bytes(&garbage, 0, &InboundLimits::default()),
        Err(InboundParseError::NoSuchAttachment { index: 0, count: 0 })
    );
}

#[test]
fn the_refusing_limits_refuse_with_their_figures() {
    let limits = InboundLimits { max_message_bytes: 10, ..InboundLimits::default() };
    assert_eq!(
        parse_with(b"Subject: too long\r\n\r\n", &limits),
        Err(InboundParseError::TooLarge { size: 21, limit: 10 })
    );

    let mut raw = String::from("Subject: many\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n");
    for _ in 0..20 {
        raw.push_str("--x\r\nContent-Type: text/plain\r\n\r\npart\r\n");
    }
    raw.push_str("--x--\r\n");
    let limits = InboundLimits { max_parts: 5, ..InboundLimits::default() };
    assert!(matches!(
        parse_with(raw.as_bytes(), &limits),
        Err(InboundParseError::TooManyParts { count: 21, limit: 5 })
    ));
    assert!(parse(raw.as_bytes()).is_ok());
}

#[test]
fn headers_past_the_limits_are_cut_and_said_to_be() {
    let mut raw = String::new();
    for i in 0..300 {
        raw.push_str(&format!("X-Hop-{i}: {}\r\n", "v".repeat(100)));
    }
    raw.push_str(&format!("X-Huge: {}\r\n", "w".repeat(20_000)));
    raw.push_str("\r\nbody\r\n");

    let parsed = parse(raw.as_bytes()).unwrap();

    assert_eq!(parsed.headers.len(), 200);
    assert!(parsed.truncated.headers);
    let tight = InboundLimits { max_header_value_bytes: 50, ..InboundLimits::default() };
    let parsed = parse_with(b"X-A: 0123456789012345678901234567890123456789012345678901234\r\n\r\n", &tight).unwrap();
    assert_eq!(parsed.headers[0].value.len(), 50);
    assert!(parsed.truncated.headers);
}

#[test]
fn recipients_and_references_past_the_limits_keep_the_first_and_the_newest() {
    let to: Vec<String> = (0..10).map(|i| format!("r{i}@example.net")).collect();
    let references: Vec<String> = (0..10).map(|i| format!("<m{i}@example.net>")).collect();
    let raw = format!("To: {}\r\nReferences: {}\r\n\r\nx\r\n", to.join(", "), references.join(" "));
    let limits = InboundLimits { max_recipients: 3, max_references: 2, ..InboundLimits::default() };

    let parsed = parse_with(raw.as_bytes(), &limits).unwrap();

    let kept: Vec<_> = parsed.to.iter().map(|m| m.address.as_str()).collect();
    assert_eq!(kept, ["r0@example.net", "r1@example.net", "r2@example.net"]);
    assert_eq!(parsed.references, ["m8@example.net", "m9@example.net"]);
    assert!(parsed.truncated.recipients && parsed.truncated.references && !parsed.truncated.headers);
}

#[test]
fn a_reply_to_a_message_tidings_sent_names_it() {
    let domain = signing_domain("acme.example");
    let sent = message_from(&domain);
    let built = build_message(&sent, &domain, None).unwrap();
    let written = mail_parser::MessageParser::default().parse(&built.raw[..]).unwrap();
    let their_id = written.message_id().unwrap().to_owned();
    let raw = format!(
        "From: user@example.net\r\nTo: billing@acme.example\r\nSubject: Re: Your invoice\r\n\
         In-Reply-To: <other@mail.example.net>\r\n\
         References: <{their_id}> <nonsense@acme.example>\r\n\r\nThanks\r\n"
    );

    let parsed = parse(raw.as_bytes()).unwrap();

    let ours = |d: &crate::domain_name::DomainName| d.as_str() == "acme.example";
    assert_eq!(in_reply_to_message_id(&parsed, ours), Some(sent.id));
    assert_eq!(in_reply_to_message_id(&parsed, |_| false), None);
}

#[test]
fn in_reply_to_wins_over_references_and_references_are_read_newest_first() {
    let a = "01JE00000000000000000000AA";
    let b = "01JE00000000000000000000BB";
    let c = "01JE00000000000000000000CC";
    let raw = format!("In-Reply-To: <{a}@acme.example>\r\nReferences: <{b}@acme.example> <{c}@ACME.example>\r\n\r\n");
    let parsed = parse(raw.as_bytes()).unwrap();
    let ours = |d: &crate::domain_name::DomainName| d.as_str() == "acme.example";
    assert_eq!(in_reply_to_message_id(&parsed, ours).map(|id| id.to_string()), Some(a.to_owned()));

    let raw = format!("In-Reply-To: <x@gmail.com>\r\nReferences: <{b}@acme.example> <{c}@ACME.example>\r\n\r\n");
    let parsed = parse(raw.as_bytes()).unwrap();
    assert_eq!(in_reply_to_message_id(&parsed, ours).map(|id| id.to_string()), Some(c.to_owned()));
    assert_eq!(tidings_message_id("00000000000000000000000000@acme.example"), None);
    assert_eq!(tidings_message_id(&format!("{a}x@acme.example")), None);
    assert_eq!(tidings_message_id(&format!("{a}@")), None);
}

mod stripping {
    use super::*;

    #[test]
    fn gmail_reply_with_the_header_on_one_line() {
        let text = "Yes, Tuesday works.\n\nOn Mon, Dec 1, 2026 at 9:14 AM Acme <billing@acme.example> wrote:\n> Can we meet?\n>\n";
        assert_eq!(strip_reply(text), "Yes, Tuesday works.");
    }

    #[test]
    fn gmail_reply_with_the_header_wrapped_over_two_lines() {
        let text = "Yes.\r\n\r\nOn Mon, Dec 1, 2026 at 9:14 AM Acme Billing Department <\r\nbilling@acme.example> wrote:\r\n\r\n> Can we meet?\r\n";
        assert_eq!(strip_reply(text), "Yes.");
    }

    #[test]
    fn apple_mail_reply_in_french_german_and_spanish() {
        let fr = "Merci !\n\nLe 1 déc. 2026 à 09:14, Acme <billing@acme.example> a écrit :\n\n> Bonjour\n";
        let de = "Danke!\n\nAm 01.12.2026 um 09:14 schrieb Acme <billing@acme.example>:\n> Hallo\n";
        let es = "Gracias.\n\nEl lun, 1 dic 2026 a las 9:14, Acme (<billing@acme.example>) escribió:\n> Hola\n";
        assert_eq!(
            (strip_reply(fr), strip_reply(de), strip_reply(es)),
            ("Merci !".into(), "Danke!".into(), "Gracias.".into())
        );
    }

    #[test]
    fn outlook_reply_with_original_message_or_a_header_block() {
        let original = "Fine by me.\r\n\r\n-----Original Message-----\r\nFrom: Acme\r\nSent: Monday\r\nSubject: Meeting\r\n\r\nCan we meet?\r\n";
        let block = "Fine by me.\r\n\r\n________________________________\r\nFrom: Acme <billing@acme.example>\r\nSent: Monday, December 1, 2026 9:14 AM\r\nTo: Ann\r\nSubject: Meeting\r\n\r\nCan we meet?\r\n";
        let bold =
            "Fine by me.\n\n*From:* Acme <billing@acme.example>\n*Sent:* Monday, December 1, 2026 9:14 AM\n*To:* Ann\n";
        assert_eq!(strip_reply(original), "Fine by me.");
        assert_eq!(strip_reply(block), "Fine by me.");
        assert_eq!(strip_reply(bold), "Fine by me.");
    }

    #[test]
    fn the_signature_and_trailing_quotes_go_but_interleaved_quotes_stay() {
        assert_eq!(strip_reply("Thanks!\n\n-- \nAnn Example\nCEO\n"), "Thanks!");
        assert_eq!(strip_reply("Thanks!\n--\nAnn\n"), "Thanks!");
        assert_eq!(strip_reply("Thanks!\n\n> old line\n> another\n\n"), "Thanks!");
        let interleaved = "> Can you come?\nYes.\n> And bring it?\nNo.\n> Thanks\n";
        assert_eq!(strip_reply(interleaved), "> Can you come?\nYes.\n> And bring it?\nNo.");
    }

    #[test]
    fn a_forwarded_message_keeps_what_it_forwards() {
        let gmail = "FYI, see below.\n\n---------- Forwarded message ---------\nFrom: Acme <billing@acme.example>\nDate: Mon, Dec 1, 2026 at 9:14 AM\nSubject: Invoice\n\nYour invoice.";
        let apple = "FYI\n\nBegin forwarded message:\n\nFrom: Acme <billing@acme.example>\nDate: 1 December 2026 at 09:14\n\nYour invoice.";
        assert_eq!(strip_reply(gmail), gmail);
        assert_eq!(strip_reply(apple), apple);
    }

    #[test]
    fn text_that_only_looks_similar_is_kept() {
        let text = "On Monday we ship.\nFrom: the warehouse, not the office.\n- item one\n- item two\nEl fin.";
        assert_eq!(strip_reply(text), text);
        assert_eq!(strip_reply("> all quote\n> nothing new\n"), "");
    }
}

/// Any message-like bytes: headers from a small alphabet with folding, encoded words,
/// boundaries and parts, or plain random bytes.
fn message_bytes() -> impl Strategy<Value = Vec<u8>> {
    let header = prop_oneof![
        Just("From: "),
        Just("To: "),
        Just("Cc: "),
        Just("Subject: "),
        Just("References: "),
        Just("In-Reply-To: "),
        Just("Content-Type: multipart/mixed; boundary=b\r\n"),
        Just("Content-Disposition: attachment; filename*0*=UTF-8''%C3; filename*1*=x\r\n"),
        Just("Content-Transfer-Encoding: base64\r\n"),
        Just("X-Other: ")
    ];
    let piece = prop_oneof![
        header.prop_map(|h| h.as_bytes().to_vec()),
        Just(b"=?UTF-8?B?w4k=?= ".to_vec()),
        Just(b"=?ISO-8859-1?Q?=E9?=".to_vec()),
        Just(b"<a@b> ".to_vec()),
        Just(b"\r\n ".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r\n\r\n".to_vec()),
        Just(b"--b\r\n".to_vec()),
        Just(b"--b--\r\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..20),
    ];
    prop_oneof![
        proptest::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat()),
        proptest::collection::vec(any::<u8>(), 0..512),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(256)))]

    /// Any bytes parse or fail with a typed error; none panics, and what parses keeps the
    /// header limits and numbers its attachments as `attachment_bytes` reads them.
    #[test]
    fn parse_never_panics_and_keeps_its_limits(raw in message_bytes(), max_headers in 0usize..8, max_value in 0usize..40) {
        let limits = InboundLimits {
            max_headers,
            max_header_value_bytes: max_value,
            max_header_bytes: 3 * max_value,
            ..InboundLimits::default()
        };
        if let Ok(parsed) = parse_with(&raw, &limits) {
            prop_assert!(parsed.headers.len() <= max_headers);
            prop_assert!(parsed.headers.iter().all(|h| h.value.len() <= max_value && h.name.len() <= max_value));
            prop_assert!(parsed.headers.iter().map(|h| h.name.len() + h.value.len()).sum::<usize>() <= 3 * max_value);
            prop_assert!(parsed.subject.as_ref().is_none_or(|s| s.len() <= max_value));
            for meta in &parsed.attachments {
                let bytes = attachment_bytes(&raw, meta.index, &limits).unwrap();
                prop_assert_eq!(bytes.len(), meta.size);
            }
            if let Some(text) = &parsed.text {
                let stripped = strip_reply(text);
                prop_assert_eq!(parsed.stripped_text_reply.as_deref(), Some(stripped.as_str()));
            }
        }
    }

    /// Whatever the text, the stripped reply is a prefix of it (so never longer), and
    /// stripping it again changes nothing.
    #[test]
    fn strip_reply_gives_a_prefix_and_is_idempotent(lines in proptest::collection::vec(prop_oneof![
        Just("On Mon, Ann <a@b> wrote:".to_owned()),
        Just("On Mon, Ann <".to_owned()),
        Just("a@b> wrote:".to_owned()),
        Just("-- ".to_owned()),
        Just("--".to_owned()),
        Just("-----Original Message-----".to_owned()),
        Just("____________________________".to_owned()),
        Just("From: Ann".to_owned()),
        Just("Sent: Monday".to_owned()),
        Just("Begin forwarded message:".to_owned()),
        Just("> quoted".to_owned()),
        Just("  ".to_owned()),
        Just(String::new()),
        "[a-zA-Z>: \r\t-]{0,12}",
        any::<String>(),
    ], 0..30)) {
        let text = lines.join("\n");
        let stripped = strip_reply(&text);
        prop_assert!(text.starts_with(&stripped), "{:?} is not a prefix of {:?}", stripped, text);
        prop_assert_eq!(strip_reply(&stripped), stripped.clone());
    }
}

#[test]
fn deeply_nested_multiparts_are_refused_not_overflowed() {
    let depth = 5_000;
    let mut raw = String::from("From: a@example.net\r\nContent-Type: multipart/mixed; boundary=b0\r\n\r\n");
    for level in 1..depth {
        raw.push_str(&format!("--b{}\r\nContent-Type: multipart/mixed; boundary=b{level}\r\n\r\n", level - 1));
    }
    raw.push_str("--b4999\r\nContent-Type: text/plain\r\n\r\ndeep\r\n");

    assert!(matches!(parse(raw.as_bytes()), Err(InboundParseError::TooManyParts { limit: 1_000, .. })));
}
