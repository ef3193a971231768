use chrono::{TimeZone, Utc};

use super::*;
use crate::model::MessageStatus as S;

fn recipient(address: &str, status: MessageStatus, attempts: u32) -> Recipient {
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let mut r = Recipient::new(Mailbox::parse(address).unwrap(), RecipientKind::To, status, at);
    r.attempts = attempts;
    r
}

fn status_of(list: &[(MessageStatus, u32)]) -> MessageStatus {
    let recipients: Vec<Recipient> =
        list.iter().enumerate().map(|(i, (s, a))| recipient(&format!("r{i}@example.com"), *s, *a)).collect();
    aggregate_status(&recipients)
}

#[test]
fn one_recipient_is_the_message() {
    for status in MessageStatus::ALL {
        assert_eq!(status_of(&[(status, 1)]), status);
    }
}

#[test]
fn unsettled_recipients_make_queued_then_sent_or_deferred() {
    assert_eq!(status_of(&[(S::Queued, 0), (S::Queued, 0)]), S::Queued);
    assert_eq!(status_of(&[(S::Scheduled, 0), (S::Scheduled, 0)]), S::Scheduled);
    assert_eq!(status_of(&[(S::Suppressed, 0), (S::Queued, 0)]), S::Queued, "suppressed at accept is no attempt");
    assert_eq!(status_of(&[(S::Sent, 1), (S::Queued, 0)]), S::Sent);
    assert_eq!(status_of(&[(S::Deferred, 1), (S::Delivered, 1)]), S::Deferred, "every unsettled one deferred");
    assert_eq!(status_of(&[(S::Deferred, 1), (S::Sent, 1)]), S::Sent);
}

#[test]
fn settled_recipients_make_the_outcome() {
    assert_eq!(status_of(&[(S::Delivered, 1), (S::Delivered, 1)]), S::Delivered);
    assert_eq!(status_of(&[(S::Delivered, 1), (S::Complained, 1)]), S::Delivered, "a complaint was delivered");
    assert_eq!(status_of(&[(S::Delivered, 1), (S::Bounced, 1)]), S::PartiallyDelivered);
    assert_eq!(status_of(&[(S::Delivered, 1), (S::Suppressed, 0)]), S::PartiallyDelivered);
    assert_eq!(status_of(&[(S::Bounced, 1), (S::Suppressed, 0)]), S::Bounced);
    assert_eq!(status_of(&[(S::Suppressed, 0), (S::Suppressed, 0)]), S::Suppressed);
    assert_eq!(status_of(&[(S::Canceled, 0), (S::Suppressed, 0)]), S::Canceled);
    assert_eq!(status_of(&[(S::Failed, 1), (S::Suppressed, 0)]), S::Failed);
}

#[test]
fn a_repeated_address_receives_once_in_the_first_list_naming_it() {
    let mb = |s: &str| Mailbox::parse(s).unwrap();
    let out = dedupe([
        (RecipientKind::To, vec![mb("a@x.test"), mb("A@X.test")]),
        (RecipientKind::Cc, vec![mb("Bee <b@x.test>"), mb("a@x.test")]),
        (RecipientKind::Bcc, vec![mb("b@x.test"), mb("c@x.test")]),
    ]);
    let shown: Vec<(RecipientKind, String)> = out.iter().map(|(k, m)| (*k, m.to_string())).collect();
    assert_eq!(
        shown,
        [
            (RecipientKind::To, "a@x.test".to_owned()),
            (RecipientKind::Cc, "\"Bee\" <b@x.test>".to_owned()),
            (RecipientKind::Bcc, "c@x.test".to_owned()),
        ]
    );
}
