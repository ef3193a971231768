//! Model-based property test of the state machine on messages to several recipients
//! (contract §10): random sequences of recipient events and whole-message events on
//! messages of 1–5 recipients, checked against a model kept here (each recipient's status,
//! attempts and due time) and against an oracle of the aggregate rule written from the
//! contract's text, not from `recipients::aggregate_status`.

use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use ulid::Ulid;

use super::*;
use crate::email::{DisplayName, EmailAddress, Mailbox};
use crate::ids::{ApiKeyId, DomainId, MessageId, WorkspaceId};
use crate::model::{RecipientKind, WrittenHeaders};

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

fn address(i: usize) -> EmailAddress {
    EmailAddress::parse(&format!("r{i}@example.com")).unwrap()
}

/// A `Queued` message due at [`start`] without a recipient list: the shape of every message
/// before lists existed.
fn plain_message() -> Message {
    let at = start();
    Message {
        id: MessageId(Ulid::from_parts(1, 1)),
        workspace_id: WorkspaceId(Ulid::from_parts(1, 2)),
        api_key_id: ApiKeyId(Ulid::from_parts(1, 3)),
        domain_id: DomainId(Ulid::from_parts(1, 4)),
        status: MessageStatus::Queued,
        to: address(0),
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
        last_event_id: EventId(Ulid::from_parts(at.timestamp_millis() as u64, 0)),
        tracking: crate::model::MessageTracking::default(),
        extras: crate::model::MessageExtras::default(),
        scheduled_at: None,
        tracking_tally: Default::default(),
        recipients: Vec::new(),
        written_headers: None,
    }
}

/// The same message with a recipient list of `kinds.len()` recipients (`r0@`, `r1@`, ...),
/// each `Queued` and due at [`start`], as `Messages::send` makes it.
fn listed_message(kinds: &[(RecipientKind, bool)]) -> Message {
    let mut m = plain_message();
    for (i, (kind, named)) in kinds.iter().enumerate() {
        let mailbox = Mailbox {
            display_name: named.then(|| DisplayName::parse(&format!("Recipient {i}")).unwrap()),
            address: address(i),
        };
        let mut r = Recipient::new(mailbox, *kind, MessageStatus::Queued, start());
        r.next_attempt_at = Some(start());
        m.recipients.push(r);
    }
    m.settle_from_recipients();
    m
}

fn happening(n: u64, event_type: EventType, at: DateTime<Utc>) -> Happening {
    let mut details = EventDetails::default();
    if event_type == EventType::Bounced {
        details.bounce_type = Some(if n.is_multiple_of(2) { BounceType::Hard } else { BounceType::Soft });
    }
    Happening {
        event_id: EventId(Ulid::from_parts(at.timestamp_millis() as u64, u128::from(n))),
        event_type,
        at,
        details,
        provider_message_id: (event_type == EventType::Sent).then(|| format!("{n}@example.org")),
        next_attempt_at: match event_type {
            EventType::Deferred => Some(at + Duration::minutes(5 + (n % 7) as i64)),
            EventType::Scheduled => Some(at + Duration::hours(1)),
            EventType::Queued => Some(at),
            _ => None,
        },
    }
}

/// One recipient as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Model {
    status: MessageStatus,
    attempts: u32,
    next_attempt_at: Option<DateTime<Utc>>,
}

fn settled(status: MessageStatus) -> bool {
    use MessageStatus as S;
    matches!(status, S::Delivered | S::Bounced | S::Complained | S::Failed | S::Suppressed | S::Canceled)
}

fn delivered(status: MessageStatus) -> bool {
    // A complaint is about mail that arrived; contract §10: later Complained events do not
    // change a Delivered aggregate.
    matches!(status, MessageStatus::Delivered | MessageStatus::Complained)
}

/// Contract §10, as written: "A message's `status` with one recipient is that recipient's.
/// With several: while any recipient is not final, `Queued` (or `Scheduled`) until the first
/// attempt, then `Sent`, or `Deferred` when every unfinished recipient is deferred; once all
/// are final, `Delivered` if every recipient was delivered, `PartiallyDelivered` if some
/// were, otherwise `Bounced` if any bounced, else `Suppressed` if all were suppressed, else
/// `Failed`." Canceled, where the contract is silent, is docs/decisions.md's: `Canceled` when
/// any was canceled and none delivered or bounced.
fn oracle(recipients: &[Model]) -> MessageStatus {
    use MessageStatus as S;
    if recipients.len() == 1 {
        return recipients[0].status;
    }
    let unfinished: Vec<&Model> = recipients.iter().filter(|r| !settled(r.status)).collect();
    if !unfinished.is_empty() {
        let attempted = recipients.iter().any(|r| r.attempts > 0);
        if !attempted {
            return if unfinished.iter().any(|r| r.status == S::Scheduled) { S::Scheduled } else { S::Queued };
        }
        return if unfinished.iter().all(|r| r.status == S::Deferred) { S::Deferred } else { S::Sent };
    }
    let n_delivered = recipients.iter().filter(|r| delivered(r.status)).count();
    if n_delivered == recipients.len() {
        S::Delivered
    } else if n_delivered > 0 {
        S::PartiallyDelivered
    } else if recipients.iter().any(|r| r.status == S::Bounced) {
        S::Bounced
    } else if recipients.iter().all(|r| r.status == S::Suppressed) {
        S::Suppressed
    } else if recipients.iter().any(|r| r.status == S::Canceled) {
        S::Canceled
    } else {
        S::Failed
    }
}

/// What happens next: an event about one recipient (`Some(index)`, which may name no
/// recipient) or about the whole message (`None`).
#[derive(Debug, Clone)]
struct Step {
    target: Option<usize>,
    event: EventType,
    step_ms: i64,
}

fn any_step() -> impl Strategy<Value = Step> {
    (proptest::option::weighted(0.85, 0usize..6), proptest::sample::select(EventType::ALL.to_vec()), 0i64..100_000)
        .prop_map(|(target, event, step_ms)| Step { target, event, step_ms })
}

fn any_kinds() -> impl Strategy<Value = Vec<(RecipientKind, bool)>> {
    let kind = proptest::sample::select(vec![RecipientKind::To, RecipientKind::Cc, RecipientKind::Bcc]);
    proptest::collection::vec((kind, any::<bool>()), 1..=5)
}

/// Moves the model's recipient as the documented table says a message moves.
fn model_move(r: &mut Model, event: EventType, h: &Happening) -> bool {
    let Ok(to) = next_status(r.status, event) else {
        return false;
    };
    if event == EventType::Sent {
        r.attempts += 1;
    }
    r.next_attempt_at = match (event, to) {
        (EventType::Opened | EventType::Clicked, _) => r.next_attempt_at,
        (_, MessageStatus::Queued | MessageStatus::Scheduled | MessageStatus::Deferred) => {
            h.next_attempt_at.or(r.next_attempt_at)
        }
        (EventType::Sent, MessageStatus::Sent) => r.next_attempt_at,
        _ => None,
    };
    r.status = to;
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::outbound::test_support::proptest_cases(256)))]

    /// Random event sequences on a message of 1–5 recipients: each accepted event moves what
    /// the model says and nothing else, the message's status is the contract's aggregate,
    /// terminal recipients stay terminal, `PartiallyDelivered` appears exactly when every
    /// recipient is settled and some but not all were delivered, attempts and due time
    /// follow the recipients, and every accepted event adds one timeline event naming its
    /// recipient.
    #[test]
    fn recipient_events_keep_the_aggregate_rule(kinds in any_kinds(), steps in proptest::collection::vec(any_step(), 0..60)) {
        let mut m = listed_message(&kinds);
        let n = kinds.len();
        let mut model: Vec<Model> =
            (0..n).map(|_| Model { status: MessageStatus::Queued, attempts: 0, next_attempt_at: Some(start()) }).collect();
        prop_assert_eq!(m.status, MessageStatus::Queued);
        let mut at = start();
        let mut timeline: Vec<MessageEvent> = Vec::new();
        for (k, step) in steps.iter().enumerate() {
            at += Duration::milliseconds(step.step_ms);
            let h = happening(k as u64 + 10, step.event, at);
            let before = m.clone();
            let before_model = model.clone();
            let result = match step.target {
                Some(index) => apply_recipient_event(&m, index, h.clone()),
                None => apply_event(&m, h.clone()),
            };
            // The model's answer: which recipients move.
            let accepted_by_model = match step.target {
                Some(index) if index < n => model_move(&mut model[index], step.event, &h),
                Some(_) => false,
                None => {
                    let mut any = false;
                    for r in &mut model {
                        any |= model_move(r, step.event, &h);
                    }
                    any
                }
            };
            match result {
                Err(_) => {
                    prop_assert!(!accepted_by_model, "refused {:?} that the table allows: {:?}", step, before_model);
                    prop_assert_eq!(&m, &before, "a refused event changes nothing");
                }
                Ok((next, event)) => {
                    prop_assert!(accepted_by_model, "accepted {:?} that the table refuses: {:?}", step, before_model);
                    prop_assert_eq!(event.event_type, step.event);
                    prop_assert_eq!(next.last_event_id, event.id);
                    prop_assert!(event.id > before.last_event_id, "the timeline's order is the order of acceptance");
                    let about = step.target.map(|i| next.recipients[i].email.clone());
                    prop_assert_eq!(&event.recipient, &about, "a recipient event names its recipient, a message event none");
                    timeline.push(event);
                    m = next;
                }
            }
            // The recipients are the model's.
            prop_assert_eq!(m.recipients.len(), n);
            for (r, want) in m.recipients.iter().zip(&model) {
                prop_assert_eq!((r.status, r.attempts, r.next_attempt_at), (want.status, want.attempts, want.next_attempt_at),
                    "recipient {} after {:?}", r.email, step);
                prop_assert_ne!(r.status, MessageStatus::PartiallyDelivered, "never a recipient's status");
            }
            for (b, a) in before_model.iter().zip(&model) {
                if b.status.is_terminal() {
                    prop_assert_eq!(a.status, b.status, "a terminal recipient stays terminal");
                }
            }
            // The aggregate.
            prop_assert_eq!(m.status, oracle(&model), "aggregate of {:?}", model);
            let all_settled = model.iter().all(|r| settled(r.status));
            let n_delivered = model.iter().filter(|r| delivered(r.status)).count();
            prop_assert_eq!(
                m.status == MessageStatus::PartiallyDelivered,
                n > 1 && all_settled && n_delivered > 0 && n_delivered < n,
                "PartiallyDelivered exactly when some but not all settled recipients were delivered: {:?}", model
            );
            prop_assert_eq!(m.attempts, model.iter().map(|r| r.attempts).max().unwrap_or(0));
            if m.status == MessageStatus::Bounced {
                prop_assert!(m.bounce_type.is_some(), "a bounced message has a bounce type");
            } else if n > 1 {
                prop_assert_eq!(m.bounce_type, None);
            }
            // The due time: the lease while a recipient is in flight, else the earliest wait.
            let in_flight = model.iter().any(|r| r.status == MessageStatus::Sent);
            if in_flight {
                prop_assert_eq!(m.next_attempt_at, before.next_attempt_at, "a recipient in flight keeps the message's time");
            } else {
                let waiting = model
                    .iter()
                    .filter(|r| matches!(r.status, MessageStatus::Queued | MessageStatus::Scheduled | MessageStatus::Deferred))
                    .filter_map(|r| r.next_attempt_at)
                    .min();
                prop_assert_eq!(m.next_attempt_at, waiting, "the earliest retry among the waiting recipients");
            }
            if all_settled {
                prop_assert_eq!(m.next_attempt_at, None, "a settled message is never due");
            }
        }
        prop_assert!(timeline.windows(2).all(|w| w[0].id < w[1].id));
    }

    /// A message to one plain `to` recipient stores no list and moves exactly as a message
    /// did before lists existed: `apply_recipient_event` on recipient 0 is `apply_event`,
    /// any other index is refused, `recipient_list()` is its one recipient with its own
    /// fields, and a list of one recipient (a display name, or a cc) gives the message the
    /// same status, attempts, due time, bounce type and times.
    #[test]
    fn one_recipient_without_a_list_behaves_as_before(
        steps in proptest::collection::vec((0usize..2, proptest::sample::select(EventType::ALL.to_vec()), 0i64..100_000), 0..40),
        kind in proptest::sample::select(vec![RecipientKind::To, RecipientKind::Cc, RecipientKind::Bcc]),
    ) {
        let mut plain = plain_message();
        let mut one = listed_message(&[(kind, kind == RecipientKind::To)]);
        let mut at = start();
        for (k, (index, event, step_ms)) in steps.into_iter().enumerate() {
            at += Duration::milliseconds(step_ms);
            let h = happening(k as u64 + 10, event, at);
            let by_recipient = apply_recipient_event(&plain, index, h.clone());
            if index != 0 {
                prop_assert!(by_recipient.is_err(), "a message without a list has only recipient 0");
                continue;
            }
            let by_message = apply_event(&plain, h.clone());
            prop_assert_eq!(&by_recipient, &by_message, "recipient 0 is the message itself");
            let listed = apply_recipient_event(&one, 0, h);
            prop_assert_eq!(by_message.is_ok(), listed.is_ok(), "a list of one accepts what the message does");
            if let (Ok((next_plain, event_plain)), Ok((next_one, event_one))) = (by_message, listed) {
                prop_assert!(!next_plain.has_recipient_list());
                prop_assert_eq!(event_plain.recipient, None, "no recipient on events of a message without a list");
                prop_assert_eq!(event_one.recipient, Some(address(0)));
                prop_assert_eq!(
                    (next_plain.status, next_plain.attempts, next_plain.next_attempt_at, next_plain.updated_at),
                    (next_one.status, next_one.attempts, next_one.next_attempt_at, next_one.updated_at)
                );
                if next_plain.status == MessageStatus::Bounced {
                    prop_assert_eq!(next_plain.bounce_type, next_one.bounce_type);
                }
                prop_assert_eq!(next_plain.provider_message_id.clone(), next_one.provider_message_id.clone());
                plain = next_plain;
                one = next_one;
            }
            let list = plain.recipient_list();
            prop_assert_eq!(list.len(), 1);
            let r = &list[0];
            prop_assert_eq!(
                (&r.email, r.kind, r.status, r.attempts, r.next_attempt_at, r.bounce_type),
                (&plain.to, RecipientKind::To, plain.status, plain.attempts, plain.next_attempt_at, plain.bounce_type)
            );
            prop_assert_eq!(plain.recipient_index(&plain.to.clone()), Some(0));
            prop_assert_eq!(plain.to_field(), plain.to.to_string(), "the API's to is the address as it always was");
        }
    }
}

#[test]
fn written_headers_do_not_change_the_state() {
    // A submitted message keeps its headers as written; its recipients still move alone.
    let mut m = listed_message(&[(RecipientKind::Bcc, false), (RecipientKind::Bcc, false)]);
    m.written_headers = Some(WrittenHeaders { to: vec![Mailbox::parse("list@example.com").unwrap()], cc: vec![] });
    let (m, _) = apply_recipient_event(&m, 1, happening(1, EventType::Sent, start())).unwrap();
    let (m, _) = apply_recipient_event(&m, 1, happening(2, EventType::Delivered, start())).unwrap();
    assert_eq!(m.status, MessageStatus::Sent, "one delivered, one still queued after an attempt: Sent");
    assert_eq!(m.to_field(), "list@example.com");
    let (m, _) = apply_recipient_event(&m, 0, happening(3, EventType::Suppressed, start())).unwrap();
    assert_eq!(m.status, MessageStatus::PartiallyDelivered);
    assert!(m.written_headers.is_some());
}

#[test]
fn a_message_without_a_list_is_stored_as_before() {
    // The record and the events of a one-recipient send have the fields every earlier
    // version wrote, and no other: stores keep them as JSON, so old readers and old records
    // see the same shape.
    let (m, sent) = apply_recipient_event(&plain_message(), 0, happening(1, EventType::Sent, start())).unwrap();
    let record = serde_json::to_value(&m).unwrap();
    for key in ["recipients", "written_headers"] {
        assert!(record.get(key).is_none(), "{key} in {record}");
    }
    let event = serde_json::to_value(&sent).unwrap();
    assert!(event.get("recipient").is_none(), "recipient in {event}");
    let listed = listed_message(&[(RecipientKind::To, false), (RecipientKind::Cc, false)]);
    let (_, about_one) = apply_recipient_event(&listed, 1, happening(2, EventType::Sent, start())).unwrap();
    assert_eq!(serde_json::to_value(&about_one).unwrap()["recipient"], "r1@example.com");
}
