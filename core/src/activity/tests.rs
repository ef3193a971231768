//! The delta function on known writes, the rates and levels at their edges, and a property:
//! over any sequence of events a message can take, the deltas summed equal a naive count
//! over the timeline the sequence recorded.

use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;

use super::rates::{BOUNCE_THRESHOLDS, COMPLAINT_THRESHOLDS, Level, Percent, Rate};
use super::*;
use crate::email::{EmailAddress, Mailbox};
use crate::ids::EventId;
use crate::model::{
    BounceType, EventDetails, EventType, Message, MessageEvent, MessageStatus, MessageTracking, Recipient,
    RecipientKind,
};
use crate::outbound::test_support::{message_from, proptest_cases, signing_domain};
use crate::state_machine::{Happening, apply_recipient_event};
use crate::tracking::{Engagement, TrackedUrl};

fn at(hour: u32, minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 5, hour, minute, 0).unwrap()
}

/// A `Queued` message created at 10:20 with `n` recipients (no list for one), tracking on.
fn message(n: usize) -> Message {
    let mut m = message_from(&signing_domain("example.com"));
    (m.created_at, m.updated_at, m.next_attempt_at) = (at(10, 20), at(10, 20), Some(at(10, 20)));
    m.tracking = MessageTracking { opens: true, clicks: true };
    if n > 1 {
        m.recipients = (0..n)
            .map(|i| {
                let mailbox = Mailbox::parse(&format!("r{i}@example.net")).unwrap();
                Recipient::new(mailbox, RecipientKind::To, MessageStatus::Queued, at(10, 20))
            })
            .collect();
        m.to = m.recipients[0].email.clone();
    }
    m
}

fn happening(event_type: EventType, when: DateTime<Utc>) -> Happening {
    let details = EventDetails {
        bounce_type: (event_type == EventType::Bounced).then_some(BounceType::Hard),
        url: matches!(event_type, EventType::Clicked).then(|| "https://shop.example/a".to_owned()),
        ..EventDetails::default()
    };
    Happening {
        event_id: EventId::new_at(when, &crate::ports::SystemRandom),
        event_type,
        at: when,
        details,
        provider_message_id: None,
        next_attempt_at: None,
    }
}

/// Applies an event to recipient `index` as the use cases do (opens and clicks keep the
/// tally), returning the message after it, the event and the delta.
fn record(
    m: &Message,
    index: usize,
    event_type: EventType,
    when: DateTime<Utc>,
) -> (Message, MessageEvent, ActivityDelta) {
    let (mut next, event) = apply_recipient_event(m, index, happening(event_type, when)).expect("a valid event");
    let url = TrackedUrl::parse("https://shop.example/a").unwrap();
    let engagement = match event_type {
        EventType::Opened => Some(Engagement::Open),
        EventType::Clicked => Some(Engagement::Click(&url)),
        _ => None,
    };
    if let Some(engagement) = engagement {
        next.tracking_tally = m.tracking_tally.keep(engagement, index).expect("kept");
    }
    let delta = ActivityDelta::of_events(m, std::slice::from_ref(&event));
    (next, event, delta)
}

fn totals(deltas: &[ActivityDelta]) -> ActivityCounts {
    sum_deltas(deltas).iter().fold(ActivityCounts::default(), |sum, (_, c)| sum.plus(c))
}

#[test]
fn a_send_counts_each_recipient_once_as_accepted_in_its_hour() {
    let m = message(3);
    let suppressed = MessageEvent {
        id: EventId::new_at(at(10, 20), &crate::ports::SystemRandom),
        message_id: m.id,
        event_type: EventType::Suppressed,
        provider_message_id: None,
        occurred_at: at(10, 20),
        details: EventDetails::default(),
        recipient: Some(m.recipients[2].email.clone()),
    };
    let delta = ActivityDelta::of_new_message(&m, &[suppressed]);
    let entries: Vec<_> = delta.entries().collect();
    assert_eq!(entries.len(), 1);
    let (key, counts) = entries[0];
    assert_eq!((key.workspace, key.domain, key.hour.start()), (m.workspace_id, m.domain_id, at(10, 0)));
    assert_eq!(counts, ActivityCounts { accepted: 3, suppressed: 1, ..ActivityCounts::default() });
    assert_eq!(ActivityDelta::of_new_message(&message(1), &[]).entries().next().unwrap().1.accepted, 1);
}

#[test]
fn outcomes_count_once_each_and_steps_count_nothing() {
    let m = message(1);
    let (m, _, sent) = record(&m, 0, EventType::Sent, at(10, 21));
    assert!(sent.is_empty(), "an attempt is a step, not an outcome");
    let (m, _, delivered) = record(&m, 0, EventType::Delivered, at(11, 5));
    let counts = delivered.entries().next().unwrap();
    assert_eq!(counts.0.hour.start(), at(11, 0), "in the hour it happened");
    assert_eq!(
        counts.1,
        ActivityCounts { delivered: 1, delivered_open_tracked: 1, delivered_click_tracked: 1, ..Default::default() }
    );
    let (m, _, complained) = record(&m, 0, EventType::Complained, at(12, 0));
    assert_eq!(totals(&[complained]).complained, 1);
    let soft = message(1);
    let (soft, _, _) = record(&soft, 0, EventType::Sent, at(10, 21));
    let mut h = happening(EventType::Bounced, at(10, 30));
    h.details.bounce_type = Some(BounceType::Soft);
    let (_, event) = apply_recipient_event(&soft, 0, h).unwrap();
    assert_eq!(totals(&[ActivityDelta::of_events(&soft, &[event])]).soft_bounced, 1);
    assert_eq!(m.status, MessageStatus::Complained);
}

#[test]
fn only_a_recipients_first_open_and_click_count() {
    let m = message(3);
    let (m, _, _) = record(&m, 1, EventType::Sent, at(10, 21));
    let (m, _, _) = record(&m, 1, EventType::Delivered, at(10, 22));
    let (m, _, first) = record(&m, 1, EventType::Opened, at(10, 40));
    let (m, _, again) = record(&m, 1, EventType::Opened, at(10, 41));
    let (m, _, click) = record(&m, 1, EventType::Clicked, at(10, 42));
    let (_, _, click_again) = record(&m, 1, EventType::Clicked, at(10, 43));
    assert_eq!(totals(&[first]).opened, 1);
    assert!(again.is_empty(), "a second open of the same recipient is not a first");
    assert_eq!(totals(&[click]).clicked, 1);
    assert!(click_again.is_empty());
    // Two opens of one recipient in one write: one first.
    let m2 = message(1);
    let (m2, _, _) = record(&m2, 0, EventType::Sent, at(10, 21));
    let (m2, _, _) = record(&m2, 0, EventType::Delivered, at(10, 22));
    let (_, a, _) = record(&m2, 0, EventType::Opened, at(10, 30));
    let mut b = a.clone();
    b.id = EventId::new_at(at(10, 31), &crate::ports::SystemRandom);
    assert_eq!(totals(&[ActivityDelta::of_events(&m2, &[a, b])]).opened, 1);
}

#[test]
fn a_whole_message_failure_counts_the_recipients_it_fails() {
    let m = message(3);
    let (m, _, _) = record(&m, 0, EventType::Sent, at(10, 21));
    let (m, _, _) = record(&m, 0, EventType::Delivered, at(10, 22));
    let (next, event) = crate::state_machine::apply_event(&m, happening(EventType::Failed, at(10, 30))).unwrap();
    assert_eq!(next.recipients.iter().filter(|r| r.status == MessageStatus::Failed).count(), 2);
    assert_eq!(totals(&[ActivityDelta::of_events(&m, &[event])]).failed, 2, "the delivered one does not fail");
}

#[test]
fn deltas_of_a_group_are_summed_per_row_in_key_order() {
    let a = ActivityDelta::of_new_message(&message(2), &[]);
    let b = ActivityDelta::of_new_message(&message(1), &[]);
    let summed = sum_deltas([&a, &b, &ActivityDelta::none()]);
    // Two fixtures of one domain each: different workspaces, so two rows.
    assert_eq!(summed.iter().map(|(_, c)| c.accepted).sum::<u64>(), 3);
    assert!(summed.windows(2).all(|w| w[0].0 < w[1].0), "in key order");
    let twice = sum_deltas([&a, &a]);
    assert_eq!(twice.len(), 1);
    assert_eq!(twice[0].1.accepted, 4, "one row, added once with the sum");
}

#[test]
fn an_hour_start_is_the_clock_hour() {
    assert_eq!(HourStart::of(at(10, 59)).start(), at(10, 0));
    assert_eq!(HourStart::of(at(10, 0)).plus_hours(-11).start(), at(10, 0) - Duration::hours(11));
}

#[test]
fn rates_over_nothing_have_no_level() {
    let zero = ActivityCounts::default();
    assert_eq!(Rate::bounce(&zero).percent(), None);
    assert_eq!(BOUNCE_THRESHOLDS.level(Rate::bounce(&zero)), Level::NoData);
    // Bounces but nothing delivered: a bounce rate of 100 %, no complaint rate.
    let only_bounces = ActivityCounts { hard_bounced: 2, ..zero };
    assert_eq!(Rate::bounce(&only_bounces).percent(), Some(100.0));
    assert_eq!(BOUNCE_THRESHOLDS.level(Rate::bounce(&only_bounces)), Level::Bad);
    assert_eq!(COMPLAINT_THRESHOLDS.level(Rate::complaint(&only_bounces)), Level::NoData);
    assert_eq!(Rate::open(&ActivityCounts { opened: 1, delivered: 5, ..zero }).percent(), None, "untracked");
}

#[test]
fn a_rate_at_a_threshold_is_at_its_level() {
    let c = |complained, delivered| ActivityCounts { complained, delivered, ..Default::default() };
    let level = |complained, delivered| COMPLAINT_THRESHOLDS.level(Rate::complaint(&c(complained, delivered)));
    assert_eq!(level(0, 1000), Level::Ok);
    assert_eq!(level(1, 1001), Level::Ok, "just under 0.1 %");
    assert_eq!(level(1, 1000), Level::Warn, "exactly 0.1 %");
    assert_eq!(level(2, 1000), Level::Warn);
    assert_eq!(level(3, 1000), Level::Bad, "exactly 0.3 %");
    let b = |hard, delivered| {
        BOUNCE_THRESHOLDS.level(Rate::bounce(&ActivityCounts { hard_bounced: hard, delivered, ..Default::default() }))
    };
    assert_eq!(b(3, 97), Level::Ok);
    assert_eq!(b(4, 96), Level::Warn, "4 of 100");
    assert_eq!(b(10, 90), Level::Bad, "10 of 100");
    // Soft bounces widen the base but are not counted against the sender.
    let soft = ActivityCounts { hard_bounced: 4, soft_bounced: 4, delivered: 92, ..Default::default() };
    assert_eq!(BOUNCE_THRESHOLDS.level(Rate::bounce(&soft)), Level::Warn);
    assert_eq!(Percent(300).as_f64(), 0.3);
    // Huge counts do not overflow.
    assert_eq!(COMPLAINT_THRESHOLDS.level(Rate { part: u64::MAX, whole: u64::MAX }), Level::Bad);
}

/// One step of the property test: an event for a recipient (taken modulo the count).
#[derive(Debug, Clone, Copy)]
struct Step {
    event: EventType,
    recipient: usize,
    minutes: i64,
}

fn step() -> impl Strategy<Value = Step> {
    let events = prop::sample::select(vec![
        EventType::Sent,
        EventType::Delivered,
        EventType::Deferred,
        EventType::Bounced,
        EventType::Complained,
        EventType::Opened,
        EventType::Clicked,
        EventType::Failed,
        EventType::Suppressed,
        EventType::Canceled,
    ]);
    (events, 0usize..4, 0i64..180).prop_map(|(event, recipient, minutes)| Step { event, recipient, minutes })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(256)))]

    /// Whatever events a message of 1–4 recipients takes (those the state machine and the
    /// tally admit, as the use cases write them), the deltas summed per hour equal a naive
    /// count over the recorded timeline: outcomes by type, failures per recipient, and the
    /// recipients with at least one open (click) counted once, in the hour of their first.
    #[test]
    fn summed_deltas_equal_a_naive_count_of_the_timeline(n in 1usize..=4, steps in prop::collection::vec(step(), 0..40)) {
        let mut m = message(n);
        let mut deltas = vec![ActivityDelta::of_new_message(&m, &[])];
        let mut timeline: Vec<(MessageEvent, u64)> = Vec::new();
        let mut when = at(10, 20);
        for s in steps {
            when += Duration::minutes(s.minutes);
            let index = s.recipient % n;
            let before = m.clone();
            let applied = if s.event == EventType::Failed && s.recipient == 3 {
                crate::state_machine::apply_event(&m, happening(s.event, when))
            } else {
                apply_recipient_event(&m, index, happening(s.event, when))
            };
            let Ok((mut next, event)) = applied else { continue };
            let url = TrackedUrl::parse("https://shop.example/a").unwrap();
            let engagement = match s.event {
                EventType::Opened => Some(Engagement::Open),
                EventType::Clicked => Some(Engagement::Click(&url)),
                _ => None,
            };
            if let Some(engagement) = engagement {
                match before.tracking_tally.keep(engagement, index) {
                    Some(tally) => next.tracking_tally = tally,
                    None => continue,
                }
            }
            // How many recipients a whole-message failure failed, for the naive count.
            let failed = before.recipient_list().iter().zip(next.recipient_list().iter())
                .filter(|(a, b)| a.status != MessageStatus::Failed && b.status == MessageStatus::Failed)
                .count() as u64;
            deltas.push(ActivityDelta::of_events(&before, std::slice::from_ref(&event)));
            timeline.push((event, failed));
            m = next;
        }
        let mut naive: BTreeMap<HourStart, ActivityCounts> = BTreeMap::new();
        naive.entry(HourStart::of(m.created_at)).or_default().accepted = n as u64;
        let (mut opened, mut clicked) = (std::collections::HashSet::new(), std::collections::HashSet::new());
        for (event, failed) in &timeline {
            let c = naive.entry(HourStart::of(event.occurred_at)).or_default();
            let who = event.recipient.as_ref().map(EmailAddress::normalized);
            match event.event_type {
                EventType::Delivered => {
                    c.delivered += 1;
                    c.delivered_open_tracked += 1;
                    c.delivered_click_tracked += 1;
                }
                EventType::Bounced => c.hard_bounced += 1,
                EventType::Complained => c.complained += 1,
                EventType::Suppressed => c.suppressed += 1,
                EventType::Failed => c.failed += failed,
                EventType::Opened => c.opened += u64::from(opened.insert(who)),
                EventType::Clicked => c.clicked += u64::from(clicked.insert(who)),
                _ => {}
            }
        }
        naive.retain(|_, c| !c.is_zero());
        let summed: BTreeMap<HourStart, ActivityCounts> =
            sum_deltas(&deltas).into_iter().map(|(key, counts)| (key.hour, counts)).collect();
        prop_assert_eq!(summed, naive);
    }
}
