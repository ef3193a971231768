use chrono::{TimeZone, Utc};
use proptest::prelude::*;

use super::*;
use crate::email::EmailAddress;
use crate::ports::EnhancedStatus;

const MESSAGE_ID: &str = "01JNV8Q4ZK3M5X7Y9A1B2C3D4E@acme.example";
const RETURN_PATH: &str = "bounces+01jnv8q4zk3m5x7y9a1b2c3d4e@bounces.tidings.example";
const RECIPIENT: &str = "no.such.user@example.com";

/// The names of every fixture, for the no-panic properties.
const FIXTURES: [&str; 12] = [
    "gmail_5_1_1.eml",
    "outlook_5_1_10.eml",
    "yahoo_5_7_9.eml",
    "postfix_failed_4_4_1.eml",
    "postfix_delayed_4_7_0.eml",
    "mailbox_full_5_2_2.eml",
    "yahoo_arf_abuse.eml",
    "outlook_jmrp_abuse.eml",
    "dsn_without_message_id.eml",
    "truncated_multipart.eml",
    "missing_boundary.eml",
    "garbage.bin",
];

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/reports/{name}", env!("CARGO_MANIFEST_DIR"));
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    match String::from_utf8(raw) {
        Ok(text) => text
            .replace("{{MESSAGE_ID}}", MESSAGE_ID)
            .replace("{{RETURN_PATH}}", RETURN_PATH)
            .replace("{{RECIPIENT}}", RECIPIENT)
            .into_bytes(),
        Err(binary) => binary.into_bytes(),
    }
}

fn dsn(name: &str) -> Dsn {
    match parse_report(&fixture(name)) {
        Report::Dsn(dsn) => dsn,
        other => panic!("{name}: expected a DSN, got {other:?}"),
    }
}

fn arf(name: &str) -> Arf {
    match parse_report(&fixture(name)) {
        Report::Complaint(arf) => arf,
        other => panic!("{name}: expected a complaint, got {other:?}"),
    }
}

fn typed(kind: &str, value: &str) -> Option<TypedValue> {
    Some(TypedValue { kind: kind.to_owned(), value: value.to_owned() })
}

fn status(text: &str) -> Option<EnhancedStatus> {
    Some(EnhancedStatus::parse(text).unwrap())
}

fn diagnostic(kind: &str, code: Option<u16>, enhanced: Option<&str>, text: &str) -> Option<Diagnostic> {
    Some(Diagnostic {
        kind: kind.to_owned(),
        code,
        enhanced: enhanced.map(|e| EnhancedStatus::parse(e).unwrap()),
        text: text.to_owned(),
    })
}

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Option<chrono::DateTime<Utc>> {
    Some(Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap())
}

#[test]
fn gmail_no_such_user() {
    let report = dsn("gmail_5_1_1.eml");
    assert_eq!(report.reporting_mta, typed("dns", "googlemail.com"));
    assert_eq!(report.arrival_date, at(2026, 3, 3, 18, 15, 41), "-0800 converted to UTC");
    assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID));
    assert_eq!(report.recipients.len(), 1);
    let r = &report.recipients[0];
    assert_eq!(r.final_recipient, typed("rfc822", RECIPIENT));
    assert_eq!(r.final_recipient.as_ref().and_then(TypedValue::address), EmailAddress::parse(RECIPIENT).ok());
    assert_eq!(r.original_recipient, None);
    assert_eq!(r.action, Some(Action::Failed));
    assert_eq!(r.status, status("5.1.1"));
    assert_eq!(
        r.remote_mta,
        typed("dns", "gmail-smtp-in.l.google.com. (2a00:1450:4013:c16::1b, the server for the domain gmail.com.)")
    );
    let text = "The email account that you tried to reach does not exist. Please try double-checking the \
                recipient's email address for typos or unnecessary spaces. For more information, go to \
                https://support.google.com/mail/?p=NoSuchUser a640c23a62f3a-abc123si1234567ejb.123 - gsmtp";
    assert_eq!(r.diagnostic, diagnostic("smtp", Some(550), Some("5.1.1"), text), "continuation prefixes removed");
}

#[test]
fn outlook_recipient_not_found() {
    let report = dsn("outlook_5_1_10.eml");
    assert_eq!(report.reporting_mta, typed("dns", "DB8EUR05HT123.eop-eur05.prod.protection.outlook.com"));
    assert_eq!(report.arrival_date, at(2026, 3, 3, 18, 20, 10));
    assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID));
    let [r] = &report.recipients[..] else { panic!("one recipient: {:?}", report.recipients) };
    assert_eq!(r.final_recipient, typed("rfc822", RECIPIENT));
    assert_eq!(r.action, Some(Action::Failed));
    assert_eq!(r.status, status("5.1.10"));
    assert_eq!(r.remote_mta, None);
    let text = "RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup";
    assert_eq!(r.diagnostic, diagnostic("smtp", Some(550), Some("5.1.10"), text));
}

#[test]
fn yahoo_policy_refusal_through_a_relay_with_headers_only() {
    let report = dsn("yahoo_5_7_9.eml");
    assert_eq!(report.reporting_mta, typed("dns", "relay.example.net"));
    assert_eq!(report.arrival_date, at(2026, 3, 3, 18, 25, 1));
    assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID), "from text/rfc822-headers");
    let [r] = &report.recipients[..] else { panic!("one recipient: {:?}", report.recipients) };
    assert_eq!(r.final_recipient, typed("rfc822", RECIPIENT));
    assert_eq!(r.original_recipient, typed("rfc822", RECIPIENT));
    assert_eq!(r.action, Some(Action::Failed));
    assert_eq!(r.status, status("5.7.9"));
    assert_eq!(r.remote_mta, typed("dns", "mta6.am0.yahoodns.net"));
    let text = "Message not accepted for policy reasons. See https://postmaster.yahooinc.com/error-codes";
    assert_eq!(r.diagnostic, diagnostic("smtp", Some(554), Some("5.7.9"), text));
}

#[test]
fn postfix_gave_up_on_a_timeout() {
    let report = dsn("postfix_failed_4_4_1.eml");
    assert_eq!(report.reporting_mta, typed("dns", "relay.example.net"));
    assert_eq!(report.arrival_date, at(2026, 2, 24, 9, 0, 1));
    assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID));
    let [r] = &report.recipients[..] else { panic!("one recipient: {:?}", report.recipients) };
    assert_eq!(r.action, Some(Action::Failed));
    assert_eq!(r.status, status("4.4.1"));
    let text = "connect to mx.example.org[203.0.113.9]:25: Connection timed out";
    assert_eq!(r.diagnostic, diagnostic("x-postfix", None, None, text), "no SMTP code: the text as is");
    assert_eq!(r.diagnostic.as_ref().and_then(Diagnostic::reply), None);
}

#[test]
fn postfix_delay_warning() {
    let report = dsn("postfix_delayed_4_7_0.eml");
    assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID));
    let [r] = &report.recipients[..] else { panic!("one recipient: {:?}", report.recipients) };
    assert_eq!(r.action, Some(Action::Delayed));
    assert_eq!(r.status, status("4.7.0"));
    assert_eq!(r.remote_mta, typed("dns", "mx.example.org"));
    let text = "Greylisted, please try again in 300 seconds";
    assert_eq!(r.diagnostic, diagnostic("smtp", Some(450), Some("4.7.0"), text));
}

#[test]
fn the_quoted_return_path_is_read_from_the_original_and_the_feedback_fields() {
    let rp = EmailAddress::parse(RETURN_PATH).unwrap();
    // The attached original's Return-Path (the receiving MTA wrote it at delivery).
    let delayed = parse_report(&fixture("postfix_delayed_4_7_0.eml"));
    assert_eq!(delayed.quoted_return_paths(), [&rp]);
    // A feedback report's Original-Mail-From; the Yahoo original carries no Return-Path.
    let complaint = parse_report(&fixture("yahoo_arf_abuse.eml"));
    assert_eq!(complaint.quoted_return_paths(), [&rp]);
    // Gmail quotes only headers without a Return-Path: the envelope must match it.
    assert!(parse_report(&fixture("gmail_5_1_1.eml")).quoted_return_paths().is_empty());
    assert!(parse_report(&fixture("garbage.bin")).quoted_return_paths().is_empty());
}

#[test]
fn mailbox_full() {
    let report = dsn("mailbox_full_5_2_2.eml");
    assert_eq!(report.reporting_mta, typed("dns", "mx.example.de"));
    assert_eq!(report.arrival_date, at(2026, 3, 4, 6, 12, 39), "+0100 converted to UTC");
    assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID));
    let [r] = &report.recipients[..] else { panic!("one recipient: {:?}", report.recipients) };
    assert_eq!(r.status, status("5.2.2"));
    let text = format!("<{RECIPIENT}>: Mailbox full, quota exceeded");
    assert_eq!(r.diagnostic, diagnostic("smtp", Some(552), Some("5.2.2"), &text));
}

#[test]
fn lower_case_field_names_and_no_original_attached() {
    let report = dsn("dsn_without_message_id.eml");
    assert_eq!(report.reporting_mta, typed("dns", "smtp.example.com"));
    assert_eq!(report.arrival_date, None);
    assert_eq!(report.original_message_id, None);
    let [r] = &report.recipients[..] else { panic!("one recipient: {:?}", report.recipients) };
    assert_eq!(r.action, Some(Action::Failed), "FAILED in upper case");
    assert_eq!(r.final_recipient, typed("rfc822", RECIPIENT));
    assert_eq!(r.diagnostic, diagnostic("smtp", Some(550), Some("5.1.1"), "User unknown"));
}

#[test]
fn yahoo_complaint_with_the_whole_original() {
    let report = arf("yahoo_arf_abuse.eml");
    assert_eq!(report.feedback_type, FeedbackType::Abuse);
    assert_eq!(report.user_agent.as_deref(), Some("Yahoo!-Mail-Feedback/2.0"));
    assert_eq!(report.version.as_deref(), Some("0.1"));
    assert_eq!(report.original_mail_from, EmailAddress::parse(RETURN_PATH).ok());
    assert_eq!(report.original_rcpt_to, EmailAddress::parse(RECIPIENT).ok());
    assert_eq!(report.arrival_date, at(2026, 3, 3, 18, 30, 0));
    assert_eq!(report.source_ip, Some("198.51.100.25".parse().unwrap()));
    assert_eq!(report.reported_domain.as_deref(), Some("acme.example"));
    assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID));
}

#[test]
fn microsoft_complaint_with_headers_only_and_no_recipient() {
    let report = arf("outlook_jmrp_abuse.eml");
    assert_eq!(report.feedback_type, FeedbackType::Abuse, "FEEDBACK-TYPE: Abuse in any case");
    assert_eq!(report.user_agent.as_deref(), Some("Hotmail FBL"));
    assert_eq!(report.version.as_deref(), Some("1"));
    assert_eq!(report.original_mail_from, EmailAddress::parse(RETURN_PATH).ok());
    assert_eq!(report.original_rcpt_to, None, "JMRP redacts the recipient");
    assert_eq!(report.arrival_date, at(2026, 3, 4, 3, 2, 44));
    assert_eq!(report.source_ip, Some("198.51.100.25".parse().unwrap()));
    assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID), "a folded Message-ID header");
}

#[test]
fn a_truncated_report_keeps_what_arrived() {
    let report = dsn("truncated_multipart.eml");
    assert_eq!(report.original_message_id, None, "the original was cut off");
    let [r] = &report.recipients[..] else { panic!("one recipient: {:?}", report.recipients) };
    assert_eq!((r.action, r.status), (Some(Action::Failed), status("5.1.1")));
}

#[test]
fn malformed_input_is_other() {
    assert_eq!(parse_report(&fixture("missing_boundary.eml")), Report::Other(NotAReport::MissingReportPart));
    assert!(matches!(parse_report(&fixture("garbage.bin")), Report::Other(_)));
    assert_eq!(parse_report(b""), Report::Other(NotAReport::Unparseable));
    let plain = b"From: a@example.com\r\nSubject: out of office\r\n\r\nI am away.\r\n";
    assert_eq!(parse_report(plain), Report::Other(NotAReport::NotMultipartReport));
}

#[test]
fn feedback_types_follow_the_registry() {
    for (text, expected) in [
        ("abuse", FeedbackType::Abuse),
        ("Fraud", FeedbackType::Fraud),
        ("virus", FeedbackType::Virus),
        ("other", FeedbackType::Other),
        ("NOT-SPAM", FeedbackType::NotSpam),
        ("auth-failure (dkim)", FeedbackType::AuthFailure),
        ("opt-out", FeedbackType::Unknown("opt-out".into())),
        ("", FeedbackType::Unknown(String::new())),
    ] {
        assert_eq!(FeedbackType::parse(text), expected, "{text:?}");
    }
}

#[test]
fn diagnostics_without_a_type_or_code_keep_their_text() {
    assert_eq!(
        Diagnostic::parse("550"),
        Diagnostic { kind: String::new(), code: Some(550), enhanced: None, text: String::new() }
    );
    assert_eq!(
        Diagnostic::parse("smtp; 5501 odd"),
        Diagnostic { kind: "smtp".into(), code: None, enhanced: None, text: "5501 odd".into() }
    );
    let four = Diagnostic::parse("SMTP; 421 4.7.0 Try again later");
    assert_eq!((four.kind.as_str(), four.code, four.enhanced), ("smtp", Some(421), EnhancedStatus::parse("4.7.0")));
}

fn fixture_bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::sample::select(FIXTURES.to_vec()).prop_map(fixture)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_on_arbitrary_bytes(raw in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let _ = parse_report(&raw);
    }

    /// Fixtures with bytes flipped, cut short or spliced: the shapes real damage takes.
    #[test]
    fn never_panics_on_mutated_fixtures(
        raw in fixture_bytes(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..16),
        cut in any::<prop::sample::Index>(),
        splice in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut raw = raw;
        for (at, byte) in flips {
            let i = at.index(raw.len());
            raw[i] = byte;
        }
        let _ = parse_report(&raw);
        let cut = cut.index(raw.len() + 1);
        let _ = parse_report(&raw[..cut]);
        let mut spliced = raw[..cut].to_vec();
        spliced.extend_from_slice(&splice);
        spliced.extend_from_slice(&raw[cut..]);
        let _ = parse_report(&spliced);
    }

    /// Field blocks in any case, folded at any space, give the same values.
    #[test]
    fn field_names_are_case_insensitive_and_folding_is_undone(upper in any::<bool>(), fold in any::<prop::sample::Index>()) {
        let name = if upper { "DIAGNOSTIC-CODE" } else { "diagnostic-code" };
        let words = ["smtp;", "550", "5.1.1", "<someone@example.com>:", "Recipient", "address", "rejected:", "User", "unknown"];
        let at = fold.index(words.len() - 1) + 1;
        let folded = format!("{}\r\n\t{}", words[..at].join(" "), words[at..].join(" "));
        let text = format!("Reporting-MTA: dns; mx\r\n\r\nAction: failed\r\nStatus: 5.1.1\r\n{name}: {folded}\r\n");
        let report = Dsn::from_fields(&fields::blocks(&text), Original::default());
        prop_assert_eq!(report.recipients.len(), 1);
        let d = report.recipients[0].diagnostic.clone().unwrap();
        prop_assert_eq!(d.code, Some(550));
        prop_assert_eq!(d.enhanced, EnhancedStatus::parse("5.1.1"));
        prop_assert_eq!(d.text, "<someone@example.com>: Recipient address rejected: User unknown");
    }
}
