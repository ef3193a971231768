use proptest::prelude::*;

use super::*;

fn address(s: &str) -> EmailAddress {
    EmailAddress::parse(s).unwrap()
}

#[test]
fn parses_the_null_sender_and_size() {
    assert_eq!(parse_command(b"MAIL FROM:<>"), Ok(Command::Mail { from: None, size: None }));
    assert_eq!(
        parse_command(b"mail from: <A@Example.COM> SIZE=1234 BODY=8BITMIME"),
        Ok(Command::Mail { from: Some(address("A@example.com")), size: Some(1234) })
    );
    assert_eq!(
        parse_command(b"MAIL FROM:<x@a.example> SIZE=99999999999999999999"),
        Ok(Command::Mail { from: Some(address("x@a.example")), size: Some(u64::MAX) })
    );
}

#[test]
fn parses_recipients_with_source_routes_and_postmaster() {
    assert_eq!(
        parse_command(b"RCPT TO:<@relay.example,@b.example:bounces+01abc@bounces.example>"),
        Ok(Command::Rcpt(ForwardPath::Address(address("bounces+01abc@bounces.example"))))
    );
    assert_eq!(parse_command(b"RCPT TO:<PostMaster>"), Ok(Command::Rcpt(ForwardPath::Postmaster)));
}

#[test]
fn refuses_malformed_paths_and_parameters() {
    for (line, expected) in [
        (&b"MAIL FROM:a@b.example"[..], CommandError::Address),
        (b"MAIL FROM:<a@b.example", CommandError::Address),
        (b"MAIL FROM:<a@b.example>x", CommandError::Address),
        (b"MAIL FROM:<a b@b.example>", CommandError::Address),
        (b"MAIL FROM:<@route>", CommandError::Address),
        (b"RCPT TO:<>", CommandError::Address),
        (b"RCPT TO:<not-an-address>", CommandError::Address),
        (b"MAIL FROM:<> SIZE=abc", CommandError::Arguments),
        (b"MAIL FROM:<> SMTPUTF8", CommandError::Parameter),
        (b"RCPT TO:<a@b.example> NOTIFY=NEVER", CommandError::Parameter),
        (b"MAIL TO:<a@b.example>", CommandError::Arguments),
        (b"EHLO", CommandError::Arguments),
        (b"DATA now", CommandError::Arguments),
        (b"VRFY", CommandError::Arguments),
        (b"FROB", CommandError::Unrecognized),
        (b"", CommandError::Unrecognized),
        (b"NOOP \xff", CommandError::Syntax),
        (b"NO\0OP", CommandError::Syntax),
    ] {
        assert_eq!(parse_command(line), Err(expected), "{}", String::from_utf8_lossy(line));
    }
}

#[test]
fn recognizes_the_simple_verbs_in_any_case() {
    assert_eq!(parse_command(b"ehlo mta.example"), Ok(Command::Ehlo("mta.example".into())));
    assert_eq!(parse_command(b"HELO [192.0.2.1]"), Ok(Command::Helo("[192.0.2.1]".into())));
    assert_eq!(parse_command(b"data"), Ok(Command::Data));
    assert_eq!(parse_command(b"RsEt"), Ok(Command::Rset));
    assert_eq!(parse_command(b"NOOP hello"), Ok(Command::Noop));
    assert_eq!(parse_command(b"VRFY someone"), Ok(Command::Vrfy));
    assert_eq!(parse_command(b"starttls"), Ok(Command::StartTls));
    assert_eq!(parse_command(b"STARTTLS now"), Err(CommandError::Arguments));
    assert_eq!(parse_command(b"AUTH PLAIN AGEAYg=="), Ok(Command::Auth("PLAIN AGEAYg==".into())));
    assert_eq!(parse_command(b"EXPN list"), Ok(Command::NotImplemented));
    assert_eq!(parse_command(b"QUIT"), Ok(Command::Quit));
}

proptest! {
    #[test]
    fn never_panics_on_any_bytes(line in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_command(&line);
    }

    #[test]
    fn never_panics_on_command_like_lines(line in "(MAIL FROM:|RCPT TO:|EHLO |VRFY )?[<>@:,. a-zA-Z0-9=\t\u{80}-\u{10ffff}]{0,80}") {
        if let Ok(Command::Ehlo(name) | Command::Helo(name)) = parse_command(line.as_bytes()) {
            prop_assert!(name.bytes().all(|b| b.is_ascii_graphic()));
        }
    }

    #[test]
    fn valid_paths_round_trip(local in "[a-zA-Z0-9+_-]{1,20}", domain in "[a-z]{1,10}\\.example", space in "( )?") {
        let text = format!("{local}@{domain}");
        let mail = format!("MAIL FROM:{space}<{text}>");
        let from = Some(address(&text));
        prop_assert_eq!(parse_command(mail.as_bytes()), Ok(Command::Mail { from, size: None }));
        let rcpt = format!("RCPT TO:{space}<{text}>");
        prop_assert_eq!(parse_command(rcpt.as_bytes()), Ok(Command::Rcpt(ForwardPath::Address(address(&text)))));
    }
}
