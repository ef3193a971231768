use proptest::prelude::*;

use super::*;
use crate::model::BounceType::{Hard, Soft};

fn reply(code: u16, text: &str) -> SmtpReply {
    SmtpReply::new(code, text)
}

fn rejected(code: u16, text: &str) -> Result<SendReceipt, SendError> {
    Err(SendError::Rejected { reply: reply(code, text), remote: "mx.example.net:25".into() })
}

const RETRY: Verdict = Verdict::Retry { not_before: None };

#[test]
fn the_table() {
    let cases: &[(u16, &str, Verdict)] = &[
        (250, "2.0.0 OK queued as 1234", Verdict::Delivered),
        (251, "User not local; will forward", Verdict::Delivered),
        (421, "4.3.2 Service not available, closing channel", RETRY),
        (450, "4.2.1 mailbox busy", RETRY),
        (
            451,
            "4.7.1 Greylisted, please try again in 300 seconds",
            Verdict::Retry { not_before: Some(Duration::from_secs(300)) },
        ),
        (452, "4.2.2 Mailbox full", RETRY),
        (530, "5.7.0 Authentication required", RETRY),
        (535, "5.7.8 Authentication credentials invalid", RETRY),
        (550, "5.1.1 <u@example.net>: Recipient address rejected: User unknown", Verdict::Bounce(Hard)),
        (550, "5.1.10 Recipient address rejected: null MX", Verdict::Bounce(Hard)),
        (550, "5.1.2 Bad destination system address", Verdict::Bounce(Hard)),
        (553, "5.1.3 Bad destination mailbox address syntax", Verdict::Bounce(Hard)),
        (550, "5.1.6 Mailbox has moved", Verdict::Bounce(Hard)),
        (550, "5.1.7 Bad sender's mailbox address syntax", Verdict::Bounce(Soft)),
        (550, "5.1.8 Sender address rejected: Domain not found", Verdict::Bounce(Soft)),
        (550, "5.2.1 The email account that you tried to reach is disabled", Verdict::Bounce(Hard)),
        (552, "5.2.2 Mailbox full", Verdict::Bounce(Soft)),
        (552, "5.2.3 Message length exceeds administrative limit", Verdict::Bounce(Soft)),
        (552, "5.3.4 Message too big for system", Verdict::Bounce(Soft)),
        (550, "5.4.4 Unable to route", Verdict::Bounce(Soft)),
        (554, "5.6.0 Message content rejected", Verdict::Bounce(Soft)),
        (550, "5.7.1 Message rejected as spam", Verdict::Bounce(Soft)),
        (554, "5.7.1 Client host rejected: Access denied", Verdict::Bounce(Soft)),
        (550, "5.7.13 User account disabled", Verdict::Bounce(Hard)),
        (550, "5.7.17 Mailbox owner has changed", Verdict::Bounce(Hard)),
        (550, "5.0.0 Recipient rejected", Verdict::Bounce(Hard)),
        (552, "5.0.0 too much mail data", Verdict::Bounce(Soft)),
        (550, "5.9.1 unknown subject", Verdict::Bounce(Hard)),
        (550, "Requested action not taken: mailbox unavailable", Verdict::Bounce(Hard)),
        (554, "Transaction failed", Verdict::Bounce(Hard)),
        (551, "User not local", Verdict::Bounce(Hard)),
        (521, "Host does not accept mail", Verdict::Bounce(Hard)),
        (556, "Domain does not accept mail", Verdict::Bounce(Hard)),
        (552, "Requested mail action aborted: exceeded storage allocation", Verdict::Bounce(Soft)),
        (500, "Syntax error, command unrecognized", Verdict::Bounce(Soft)),
        (503, "Bad sequence of commands", Verdict::Bounce(Soft)),
        (354, "Start mail input", RETRY),
        (0, "", RETRY),
        (999, "what", RETRY),
    ];
    for (code, text, expected) in cases {
        assert_eq!(classify(&rejected(*code, text)), *expected, "{code} {text}");
    }
}

#[test]
fn receipts_and_transport_errors() {
    let receipt = SendReceipt { reply: reply(250, "2.0.0 Ok: queued as ABC"), remote: "relay:587".into(), tls: None };
    assert_eq!(classify(&Ok(receipt)), Verdict::Delivered);
    let unreachable = SendError::Unreachable { reason: "connection refused".into() };
    assert_eq!(classify(&Err(unreachable)), RETRY);
    assert_eq!(classify(&Err(SendError::Local { reason: "outbox not writable".into() })), RETRY);
    let nxdomain = SendError::NoMailServer { reason: "example.invalid does not exist".into() };
    assert_eq!(classify(&Err(nxdomain)), Verdict::Bounce(Hard));
}

#[test]
fn retry_times_named_in_replies_are_found() {
    let minutes = |m: u64| Some(Duration::from_secs(m * 60));
    let cases: &[(&str, Option<Duration>)] = &[
        ("try again in 5 minutes", minutes(5)),
        ("Please try again in 300 seconds", Some(Duration::from_secs(300))),
        ("retry after 120 seconds", Some(Duration::from_secs(120))),
        ("Greylisted; retry in 60s", Some(Duration::from_secs(60))),
        ("Rate limited, wait 2 min", minutes(2)),
        ("Try again in 1 hour.", minutes(60)),
        ("RETRY IN 10 MINS", minutes(10)),
        ("retry again in 3 days", Some(MAX_NAMED_RETRY)),
        ("try again later", None),
        ("500 messages in 24 hours, try again later", None),
        ("try again in a few minutes", None),
        ("retry in 5 fortnights", None),
        ("retry in 99999999999 seconds", None),
        ("", None),
    ];
    for (text, expected) in cases {
        assert_eq!(named_retry_delay(text), *expected, "{text:?}");
    }
    // Only the first KiB is read.
    let late = format!("{} try again in 5 minutes", "x".repeat(MAX_SCANNED_TEXT));
    assert_eq!(named_retry_delay(&late), None);
    let multibyte = format!("{}é try again in 5 minutes", "x".repeat(MAX_SCANNED_TEXT - 1));
    assert_eq!(named_retry_delay(&multibyte), None);
}

fn any_send_error() -> impl Strategy<Value = SendError> {
    prop_oneof![
        (any::<u16>(), "\\PC{0,80}", proptest::option::of((0u8..10, 0u16..1200, 0u16..1200))).prop_map(
            |(code, text, enhanced)| {
                let text = match enhanced {
                    Some((c, s, d)) => format!("{c}.{s}.{d} {text}"),
                    None => text,
                };
                SendError::Rejected { reply: SmtpReply::new(code, &text), remote: "mx".into() }
            }
        ),
        "\\PC{0,40}".prop_map(|reason| SendError::Unreachable { reason }),
        "\\PC{0,40}".prop_map(|reason| SendError::NoMailServer { reason }),
        "\\PC{0,40}".prop_map(|reason| SendError::Local { reason }),
    ]
}

proptest! {
    /// Every observation maps to one verdict without panicking, and the verdict agrees with
    /// the reply's class: 2xx delivered, 4xx retried, 5xx never delivered; only a 5xx or a
    /// missing mail server suppresses; named delays stay within the cap.
    #[test]
    fn classification_is_total_and_consistent(error in any_send_error()) {
        let verdict = classify(&Err(error.clone()));
        if let Verdict::Retry { not_before: Some(delay) } = verdict {
            prop_assert!(delay <= MAX_NAMED_RETRY);
        }
        let is_retry = matches!(verdict, Verdict::Retry { .. });
        match &error {
            SendError::Rejected { reply, .. } => match reply.code / 100 {
                2 => prop_assert_eq!(verdict, Verdict::Delivered),
                5 => prop_assert!(verdict != Verdict::Delivered),
                _ => prop_assert!(is_retry),
            },
            SendError::NoMailServer { .. } => prop_assert_eq!(verdict, Verdict::Bounce(Hard)),
            SendError::Unreachable { .. } | SendError::Local { .. } => prop_assert_eq!(verdict, RETRY),
        }
    }

    /// Any text at all: no panic, and a found delay is within the cap.
    #[test]
    fn named_retry_delay_never_panics(text in "(\\PC|retry|again|wait| in | [0-9]{1,12} ?(s|m|h|d|minutes)?){0,40}") {
        if let Some(delay) = named_retry_delay(&text) {
            prop_assert!(delay <= MAX_NAMED_RETRY);
        }
    }
}
