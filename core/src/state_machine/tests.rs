use chrono::{Duration, TimeZone, Utc};
use proptest::prelude::*;
use ulid::Ulid;

use super::*;
use crate::email::{EmailAddress, Mailbox};
use crate::ids::{ApiKeyId, DomainId, MessageId, WorkspaceId};

fn queued_message() -> Message {
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    Message {
        id: MessageId(Ulid::from_parts(1, 1)),
        workspace_id: WorkspaceId(Ulid::from_parts(1, 2)),
        api_key_id: ApiKeyId(Ulid::from_parts(1, 3)),
        domain_id: DomainId(Ulid::from_parts(1, 4)),
        status: MessageStatus::Queued,
        to: EmailAddress::parse("to@example.com").unwrap(),
        from: Mailbox::parse("from@example.org").unwrap(),
        subject: "s".into(),
        html: None,
        text: Some("t".into()),
        template_id: None,
        template_version_id: None,
        provider_message_id: None,
        attempts: 0,
        created_at: at,
        updated_at: at,
        next_attempt_at: Some(at),
        bounce_type: None,
        last_event_id: EventId(Ulid::from_parts(1, 0)),
        tracking: crate::model::MessageTracking::default(),
        extras: crate::model::MessageExtras::default(),
        scheduled_at: None,
        tracking_tally: Default::default(),
        recipients: Vec::new(),
        written_headers: None,
    }
}

fn happening(n: u64, event_type: EventType, at: DateTime<Utc>) -> Happening {
    Happening {
        event_id: EventId(Ulid::from_parts(at.timestamp_millis() as u64, u128::from(n))),
        event_type,
        at,
        details: EventDetails::default(),
        provider_message_id: (event_type == EventType::Sent).then(|| format!("{n}@example.org")),
        next_attempt_at: match event_type {
            EventType::Deferred => Some(at + Duration::minutes(5)),
            EventType::Scheduled => Some(at + Duration::hours(1)),
            EventType::Queued => Some(at),
            _ => None,
        },
    }
}

fn any_event() -> impl Strategy<Value = EventType> {
    proptest::sample::select(EventType::ALL.to_vec())
}

fn any_status() -> impl Strategy<Value = MessageStatus> {
    proptest::sample::select(MessageStatus::ALL.to_vec())
}

#[test]
fn the_happy_path_of_the_spec() {
    let m = queued_message();
    let at = m.created_at;
    let (m, sent) = apply_event(&m, happening(1, EventType::Sent, at)).unwrap();
    assert_eq!(m.status, MessageStatus::Sent);
    assert_eq!(m.attempts, 1);
    assert_eq!(sent.provider_message_id.as_deref(), Some("1@example.org"));
    let (m, delivered) = apply_event(&m, happening(2, EventType::Delivered, at)).unwrap();
    assert_eq!(m.status, MessageStatus::Delivered);
    assert_eq!(delivered.provider_message_id.as_deref(), Some("1@example.org"));
    assert_eq!(m.next_attempt_at, None);
}

#[test]
fn retries_then_soft_bounce() {
    let m = queued_message();
    let at = m.created_at;
    let (m, _) = apply_event(&m, happening(1, EventType::Sent, at)).unwrap();
    let (m, _) = apply_event(&m, happening(2, EventType::Deferred, at)).unwrap();
    assert_eq!(m.status, MessageStatus::Deferred);
    assert_eq!(m.next_attempt_at, Some(at + Duration::minutes(5)));
    let (m, _) = apply_event(&m, happening(3, EventType::Sent, at)).unwrap();
    assert_eq!(m.attempts, 2);
    let mut soft = happening(4, EventType::Bounced, at);
    soft.details.bounce_type = Some(BounceType::Soft);
    let (m, _) = apply_event(&m, soft).unwrap();
    assert_eq!((m.status, m.bounce_type), (MessageStatus::Bounced, Some(BounceType::Soft)));
}

#[test]
fn the_documented_table_exactly() {
    use EventType as E;
    use MessageStatus as S;
    let allowed: &[(S, E, S)] = &[
        (S::Queued, E::Sent, S::Sent),
        (S::Scheduled, E::Sent, S::Sent),
        (S::Deferred, E::Sent, S::Sent),
        (S::Sent, E::Sent, S::Sent),
        (S::Sent, E::Delivered, S::Delivered),
        (S::Sent, E::Deferred, S::Deferred),
        (S::Delivered, E::Deferred, S::Delivered),
        (S::Sent, E::Bounced, S::Bounced),
        (S::Deferred, E::Bounced, S::Bounced),
        (S::Delivered, E::Bounced, S::Bounced),
        (S::Delivered, E::Complained, S::Complained),
        (S::Queued, E::Suppressed, S::Suppressed),
        (S::Scheduled, E::Suppressed, S::Suppressed),
        (S::Deferred, E::Suppressed, S::Suppressed),
        (S::Queued, E::Failed, S::Failed),
        (S::Scheduled, E::Failed, S::Failed),
        (S::Sent, E::Failed, S::Failed),
        (S::Deferred, E::Failed, S::Failed),
        (S::Queued, E::Scheduled, S::Scheduled),
        (S::Scheduled, E::Scheduled, S::Scheduled),
        (S::Scheduled, E::Queued, S::Queued),
        (S::Queued, E::Canceled, S::Canceled),
        (S::Scheduled, E::Canceled, S::Canceled),
    ];
    for from in S::ALL {
        for event in E::ALL {
            let expected = if matches!(event, E::Opened | E::Clicked) {
                matches!(from, S::Sent | S::Deferred | S::Delivered | S::Bounced | S::Complained).then_some(from)
            } else {
                allowed.iter().find(|(f, e, _)| *f == from && *e == event).map(|(_, _, to)| *to)
            };
            assert_eq!(next_status(from, event).ok(), expected, "{from:?} + {event:?}");
        }
    }
}

proptest! {
    #[test]
    fn terminal_states_stay_terminal(from in any_status(), event in any_event()) {
        if from.is_terminal()
            && let Ok(to) = next_status(from, event)
        {
            prop_assert_eq!(to, from);
        }
    }

    #[test]
    fn open_and_click_never_change_status(from in any_status(), event in prop_oneof![Just(EventType::Opened), Just(EventType::Clicked)]) {
        if let Ok(to) = next_status(from, event) {
            prop_assert_eq!(to, from);
        }
    }

    /// A delay report after delivery is informational: the status stays Delivered and
    /// nothing becomes due, whatever retry time the event carries.
    #[test]
    fn delays_after_delivery_change_nothing_but_the_timeline(n in 0u64..1000, retry_minutes in 0i64..10_000) {
        let m = queued_message();
        let at = m.created_at;
        let (m, _) = apply_event(&m, happening(1, EventType::Sent, at)).unwrap();
        let (m, _) = apply_event(&m, happening(2, EventType::Delivered, at)).unwrap();
        let mut delay = happening(n + 3, EventType::Deferred, at);
        delay.next_attempt_at = Some(at + Duration::minutes(retry_minutes));
        let (next, event) = apply_event(&m, delay).unwrap();
        prop_assert_eq!(next.status, MessageStatus::Delivered);
        prop_assert_eq!(next.next_attempt_at, None);
        prop_assert_eq!(next.attempts, m.attempts);
        prop_assert_eq!(event.event_type, EventType::Deferred);
        prop_assert!(event.id > m.last_event_id);
    }

    /// Random event sequences: every accepted event adds exactly one timeline entry, the
    /// timeline stays ordered, refused events change nothing, and attempts count the Sents.
    #[test]
    fn random_sequences_keep_the_invariants(events in proptest::collection::vec((any_event(), 0i64..10_000), 0..40)) {
        let mut m = queued_message();
        let mut timeline = Vec::new();
        let mut at = m.created_at;
        let mut sents = 0;
        for (n, (event, step_ms)) in events.into_iter().enumerate() {
            at += Duration::milliseconds(step_ms);
            let before = m.clone();
            match apply_event(&m, happening(n as u64 + 10, event, at)) {
                Ok((next, recorded)) => {
                    prop_assert_eq!(recorded.event_type, event);
                    prop_assert_eq!(recorded.message_id, m.id);
                    prop_assert!(MessageStatus::ALL.contains(&next.status));
                    if before.status.is_terminal() {
                        prop_assert_eq!(next.status, before.status);
                    }
                    if event == EventType::Sent {
                        sents += 1;
                    }
                    if next.status.is_terminal() || next.status == MessageStatus::Delivered {
                        prop_assert_eq!(next.next_attempt_at, None);
                    }
                    // The client's events apply only before the first attempt.
                    if matches!(event, EventType::Scheduled | EventType::Canceled | EventType::Queued) {
                        prop_assert!(before.status.is_cancelable());
                        prop_assert_eq!(before.attempts, 0);
                    }
                    if next.status == MessageStatus::Scheduled {
                        prop_assert!(next.scheduled_at.is_some());
                        prop_assert_eq!(next.next_attempt_at, next.scheduled_at);
                    }
                    if event == EventType::Queued {
                        prop_assert_eq!((next.scheduled_at, next.next_attempt_at), (None, Some(at)));
                    }
                    timeline.push(recorded);
                    m = next;
                }
                Err(e) => {
                    prop_assert_eq!(e.from, before.status);
                    prop_assert_eq!(&m, &before);
                }
            }
        }
        prop_assert_eq!(m.attempts, sents);
        prop_assert!(timeline.windows(2).all(|w| w[0].occurred_at <= w[1].occurred_at && w[0].id < w[1].id));
        if !matches!(m.status, MessageStatus::Queued | MessageStatus::Scheduled | MessageStatus::Canceled) {
            prop_assert!(m.provider_message_id.is_some() || m.status == MessageStatus::Suppressed || m.status == MessageStatus::Failed);
        }
    }
}

proptest! {
    /// Scheduling and cancelling: a message rescheduled any number of times keeps the last
    /// time as both its send time and its due time; a cancel ends it with nothing due, and
    /// nothing the worker does afterwards applies.
    #[test]
    fn reschedules_keep_the_last_time_and_a_cancel_is_final(hours in proptest::collection::vec(1i64..720, 1..6)) {
        let mut m = queued_message();
        let start = m.created_at;
        for (n, h) in hours.iter().enumerate() {
            let mut ev = happening(n as u64 + 1, EventType::Scheduled, start);
            let when = start + Duration::hours(*h);
            ev.next_attempt_at = Some(when);
            ev.details.scheduled_at = Some(when);
            let (next, event) = apply_event(&m, ev).unwrap();
            prop_assert_eq!(next.status, MessageStatus::Scheduled);
            prop_assert_eq!(next.scheduled_at, Some(when));
            prop_assert_eq!(next.next_attempt_at, Some(when));
            prop_assert_eq!(event.details.scheduled_at, Some(when));
            m = next;
        }
        let (canceled, _) = apply_event(&m, happening(100, EventType::Canceled, start)).unwrap();
        prop_assert_eq!(canceled.status, MessageStatus::Canceled);
        prop_assert_eq!(canceled.next_attempt_at, None);
        for event in EventType::ALL {
            if !matches!(event, EventType::Canceled) {
                prop_assert!(apply_event(&canceled, happening(101, event, start)).is_err(), "{:?} after a cancel", event);
            }
        }
    }
}
