//! The activity counters (`ActivityStore`): what creates and event writes add, in their
//! hour and under their workspace and domain; nothing for a write that is refused; the
//! purge; and, over a long mixed sequence of writes (several recipients, writes of several
//! events, opens and clicks kept by the tally, refused writes), counters equal to a naive
//! count over the timelines the store kept.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use super::{Must, assert_conflict, assert_not_found};
use crate::fixtures::{
    event_write, idempotency, message, message_to_several, new_message, new_message_suppressing, now, plus_secs,
    recipient_event_write, ulid,
};
use tidings_core::activity::{ActivityCounts, ActivityDelta, HourStart, HourlyActivity};
use tidings_core::email::EmailAddress;
use tidings_core::ids::{ApiKeyId, DomainId, WorkspaceId};
use tidings_core::model::{BounceType, EventType, Message, MessageStatus, MessageTracking};
use tidings_core::ports::{CreateOutcome, EventWrite, NewBatch, PageRequest, Store};
use tidings_core::tracking::{Engagement, TrackedUrl};

/// The start of an hour a few hours back, so that the checks control which hour each write
/// falls in whatever the clock says.
fn base_hour() -> DateTime<Utc> {
    HourStart::of(now()).plus_hours(-6).start()
}

/// A message of `ws` from `domain` created at `at`.
fn message_at(ws: WorkspaceId, domain: DomainId, at: DateTime<Utc>) -> Message {
    let mut m = message(ws, ApiKeyId(ulid()), domain);
    (m.created_at, m.updated_at, m.next_attempt_at) = (at, at, Some(at));
    m
}

/// Reads every row of `ws` in the 48 hours around [`base_hour`], zero rows left out.
async fn rows<S: Store>(s: &S, ws: WorkspaceId) -> Vec<HourlyActivity> {
    let from = HourStart::of(base_hour()).plus_hours(-24);
    let rows = s.activity(ws, from, from.plus_hours(48)).await.must("activity");
    rows.into_iter().filter(|r| !r.counts.is_zero()).collect()
}

/// All rows of `ws` added up.
async fn total<S: Store>(s: &S, ws: WorkspaceId) -> ActivityCounts {
    rows(s, ws).await.iter().fold(ActivityCounts::default(), |sum, r| sum.plus(&r.counts))
}

/// Records `write` and returns the message after it.
async fn record<S: Store>(s: &S, write: EventWrite) -> Message {
    let after = write.message.clone();
    s.record_event(write).await.must("record_event");
    after
}

pub(super) async fn creates_and_events_count_in_their_hour_and_domain<S: Store + 'static>(s: Arc<S>) {
    let (ws, other_ws) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let (mail, news) = (DomainId(ulid()), DomainId(ulid()));
    let h0 = base_hour();
    let h1 = h0 + Duration::hours(1);
    // One recipient: accepted at 0:10, attempted, delivered at 1:05.
    let single = message_at(ws, mail, h0 + Duration::minutes(10));
    s.create_message(&new_message(&single)).await.must("create_message");
    let sent = record(&*s, event_write(&single, EventType::Sent, h0 + Duration::minutes(11), None)).await;
    record(&*s, event_write(&sent, EventType::Delivered, h1 + Duration::minutes(5), None)).await;
    // Three recipients from the other domain, the last one suppressed at accept.
    let mut several =
        message_to_several(ws, ApiKeyId(ulid()), news, &["a@example.com", "b@example.com"], &[], &["c@example.com"]);
    (several.created_at, several.updated_at) = (h0 + Duration::minutes(20), h0 + Duration::minutes(20));
    let new = new_message_suppressing(&several, &[2]);
    s.create_message(&new).await.must("create_message with a suppressed recipient");
    // Both others attempted, then their outcomes in one write (an event and one more).
    let m = new.message.clone();
    let m = record(&*s, recipient_event_write(&m, 0, EventType::Sent, h0 + Duration::minutes(21), None)).await;
    let m = record(&*s, recipient_event_write(&m, 1, EventType::Sent, h0 + Duration::minutes(21), None)).await;
    let delivered = recipient_event_write(&m, 0, EventType::Delivered, h1 + Duration::minutes(30), None);
    let mut bounce = recipient_event_write(&delivered.message, 1, EventType::Bounced, h1 + Duration::minutes(30), None);
    bounce.event.details.bounce_type = Some(BounceType::Hard);
    let mut both = delivered;
    both.message = bounce.message;
    both.more_events = vec![bounce.event];
    both.activity = ActivityDelta::of_events(&m, &[both.event.clone(), both.more_events[0].clone()]);
    record(&*s, both).await;
    // Another workspace's send.
    s.create_message(&new_message(&message_at(other_ws, mail, h0))).await.must("create_message elsewhere");

    let hour = |h| HourStart::of(h);
    let expected = vec![
        HourlyActivity { domain: mail, hour: hour(h0), counts: ActivityCounts { accepted: 1, ..Default::default() } },
        HourlyActivity {
            domain: news,
            hour: hour(h0),
            counts: ActivityCounts { accepted: 3, suppressed: 1, ..Default::default() },
        },
        HourlyActivity { domain: mail, hour: hour(h1), counts: ActivityCounts { delivered: 1, ..Default::default() } },
        HourlyActivity {
            domain: news,
            hour: hour(h1),
            counts: ActivityCounts { delivered: 1, hard_bounced: 1, ..Default::default() },
        },
    ];
    let mut got = rows(&*s, ws).await;
    got.sort_by_key(|r| (r.hour, r.domain != mail));
    let mut want = expected;
    want.sort_by_key(|r| (r.hour, r.domain != mail));
    assert_eq!(got, want, "the rows of the workspace, by hour and domain");
    // A range is whole hours from `from` until `until`, excluded.
    let only_first = s.activity(ws, hour(h0), hour(h1)).await.must("activity of one hour");
    assert!(only_first.iter().all(|r| r.hour == hour(h0)) && only_first.len() == 2, "{only_first:?}");
    let none = s.activity(ws, hour(h1).plus_hours(1), hour(h1).plus_hours(3)).await.must("activity later");
    assert!(none.iter().all(|r| r.counts.is_zero()), "nothing happened later: {none:?}");
    assert_eq!(total(&*s, other_ws).await, ActivityCounts { accepted: 1, ..Default::default() }, "isolation");
    assert!(rows(&*s, WorkspaceId(ulid())).await.is_empty(), "an unknown workspace has nothing");

    // A batch counts every message it writes, added per row.
    let batch_ws = WorkspaceId(ulid());
    let (a, b) = (message_at(batch_ws, mail, h0), message_at(batch_ws, mail, h0 + Duration::minutes(1)));
    let batch = NewBatch { messages: vec![new_message(&a), new_message(&b)], idempotency: None, accepted_at: h0 };
    assert_eq!(s.create_messages(&batch).await.must("create_messages"), CreateOutcome::Created);
    assert_eq!(rows(&*s, batch_ws).await.len(), 1, "one row for one domain and hour");
    assert_eq!(total(&*s, batch_ws).await.accepted, 2);
}

pub(super) async fn refused_writes_count_nothing<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let dom = DomainId(ulid());
    let h0 = base_hour();
    let m = message_at(ws, dom, h0);
    let mut new = new_message(&m);
    new.idempotency = Some(idempotency(ws, "once", m.id, h0, plus_secs(now(), 3600)));
    s.create_message(&new).await.must("create_message");
    let counted = total(&*s, ws).await;
    assert_eq!(counted.accepted, 1);

    // A duplicate of the idempotency key, a message id that exists, a batch with one.
    let mut again = new_message(&message_at(ws, dom, h0));
    again.idempotency = Some(idempotency(ws, "once", again.message.id, h0, plus_secs(now(), 3600)));
    assert!(matches!(s.create_message(&again).await.must("duplicate"), CreateOutcome::Duplicate(_)));
    assert_conflict(s.create_message(&new_message(&m)).await, "create_message of an existing id");
    let batch = NewBatch {
        messages: vec![new_message(&message_at(ws, dom, h0)), new_message(&m)],
        idempotency: None,
        accepted_at: h0,
    };
    assert_conflict(s.create_messages(&batch).await, "a batch holding an existing id");

    // Event writes refused: a stale status, a lease or last event that moved, a message gone.
    let sent = record(&*s, event_write(&m, EventType::Sent, h0 + Duration::minutes(1), None)).await;
    let counted = total(&*s, ws).await;
    let mut stale = event_write(&sent, EventType::Delivered, h0 + Duration::minutes(2), None);
    stale.expected_status = MessageStatus::Queued;
    assert_conflict(s.record_event(stale).await, "Delivered expecting Queued");
    let mut moved = event_write(&sent, EventType::Delivered, h0 + Duration::minutes(2), None);
    moved.expected_last_event_id = Some(m.last_event_id);
    assert_conflict(s.record_event(moved).await, "Delivered expecting an old last event");
    let unknown = message_at(ws, dom, h0);
    let sent_unknown = event_write(&unknown, EventType::Sent, h0, None);
    let gone = event_write(&sent_unknown.message, EventType::Delivered, h0, None);
    assert_not_found(s.record_event(gone).await, "an event of a message never stored");
    assert_eq!(total(&*s, ws).await, counted, "no refused write counted");
    record(&*s, event_write(&sent, EventType::Delivered, h0 + Duration::minutes(2), None)).await;
    assert_eq!(total(&*s, ws).await.delivered, 1, "the write that went through counts");
}

pub(super) async fn purges_take_old_hours_earliest_first_up_to_the_limit<S: Store + 'static>(s: Arc<S>) {
    let h0 = base_hour();
    let (ws1, ws2) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let dom = DomainId(ulid());
    for (ws, hours_ago) in [(ws1, 3), (ws2, 2), (ws1, 1), (ws1, 0)] {
        let m = message_at(ws, dom, h0 - Duration::hours(hours_ago) + Duration::minutes(5));
        s.create_message(&new_message(&m)).await.must("create_message");
    }
    let before = HourStart::of(h0);
    assert_eq!(s.purge_activity(before, 2).await.must("purge"), 2, "the limit");
    let left: Vec<_> = rows(&*s, ws1).await.into_iter().map(|r| r.hour).collect();
    assert_eq!(left, vec![HourStart::of(h0).plus_hours(-1), HourStart::of(h0)], "the oldest went first");
    assert!(rows(&*s, ws2).await.is_empty(), "across workspaces, by hour");
    assert_eq!(s.purge_activity(before, 2).await.must("purge"), 1);
    assert_eq!(s.purge_activity(before, 2).await.must("purge"), 0, "nothing before the hour left");
    assert_eq!(rows(&*s, ws1).await.len(), 1, "the hour itself is kept");
    // Counting goes on in a purged hour's place.
    s.create_message(&new_message(&message_at(ws1, dom, h0))).await.must("create_message");
    assert_eq!(total(&*s, ws1).await.accepted, 2);
}

/// A tiny deterministic generator: the checks of `run_all` take no seed, and the model test
/// already covers random operations against the reference store.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

pub(super) async fn counters_equal_a_naive_count_of_the_timelines<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let domains = [DomainId(ulid()), DomainId(ulid())];
    let h0 = base_hour();
    let mut rng = Lcg(0x5eed);
    let url = TrackedUrl::parse("https://shop.example/offer").expect("a url");
    let mut messages: Vec<Message> = Vec::new();
    for i in 0..12 {
        let at = h0 + Duration::minutes(7 * i);
        let dom = domains[i as usize % 2];
        let mut m = if i % 3 == 0 {
            message_to_several(
                ws,
                ApiKeyId(ulid()),
                dom,
                &["p@example.com", "q@example.com", "r@example.com"],
                &[],
                &[],
            )
        } else {
            message(ws, ApiKeyId(ulid()), dom)
        };
        (m.created_at, m.updated_at, m.next_attempt_at) = (at, at, Some(at));
        m.tracking = MessageTracking { opens: i % 2 == 0, clicks: true };
        for r in &mut m.recipients {
            (r.updated_at, r.next_attempt_at) = (at, Some(at));
        }
        s.create_message(&new_message(&m)).await.must("create_message");
        messages.push(m);
    }
    let events = [
        EventType::Sent,
        EventType::Delivered,
        EventType::Deferred,
        EventType::Bounced,
        EventType::Complained,
        EventType::Opened,
        EventType::Opened,
        EventType::Clicked,
        EventType::Failed,
        EventType::Suppressed,
    ];
    let mut at = h0 + Duration::hours(2);
    for _ in 0..400 {
        at += Duration::seconds(rng.below(90) as i64);
        let index = rng.below(messages.len() as u64) as usize;
        let read = s.get_message(ws, messages[index].id).await.must("get_message").expect("stored");
        let recipients = read.recipient_list().len();
        let recipient = rng.below(recipients as u64) as usize;
        let event = events[rng.below(events.len() as u64) as usize];
        let Ok((mut next, e)) =
            tidings_core::state_machine::apply_recipient_event(&read, recipient, happening(event, at))
        else {
            continue;
        };
        let engagement = match event {
            EventType::Opened => Some(Engagement::Open),
            EventType::Clicked => Some(Engagement::Click(&url)),
            _ => None,
        };
        if let Some(engagement) = engagement {
            match read.tracking_tally.keep(engagement, recipient) {
                Some(tally) => next.tracking_tally = tally,
                None => continue,
            }
        }
        let mut write = EventWrite {
            expected_status: read.status,
            expected_next_attempt_at: None,
            expected_last_event_id: Some(read.last_event_id),
            activity: ActivityDelta::of_events(&read, std::slice::from_ref(&e)),
            message: next,
            event: e,
            more_events: vec![],
            webhook_deliveries: vec![],
        };
        // One write in eight is refused (it read before another write): it must count nothing.
        let refused = rng.below(8) == 0;
        if refused {
            write.expected_last_event_id = Some(tidings_core::ids::EventId(ulid()));
            assert_conflict(s.record_event(write).await, "a write expecting another last event");
        } else {
            s.record_event(write).await.must("record_event");
        }
    }

    // The naive count: every timeline read back, each event as what it says.
    let mut naive: BTreeMap<(HourStart, DomainId), ActivityCounts> = BTreeMap::new();
    for m in &messages {
        let stored = s.get_message(ws, m.id).await.must("get_message").expect("stored");
        let timeline = s.list_events(ws, m.id, PageRequest::first(200)).await.must("list_events").items;
        assert!(timeline.len() < 200, "the timeline fits one page");
        let (mut opened, mut clicked) = (Vec::<Option<EmailAddress>>::new(), Vec::new());
        for e in &timeline {
            let c = naive.entry((HourStart::of(e.occurred_at), m.domain_id)).or_default();
            match e.event_type {
                EventType::Queued => c.accepted += stored.recipient_list().len() as u64,
                EventType::Delivered => {
                    c.delivered += 1;
                    c.delivered_open_tracked += u64::from(m.tracking.opens);
                    c.delivered_click_tracked += u64::from(m.tracking.clicks);
                }
                EventType::Bounced if e.details.bounce_type == Some(BounceType::Soft) => c.soft_bounced += 1,
                EventType::Bounced => c.hard_bounced += 1,
                EventType::Complained => c.complained += 1,
                EventType::Suppressed => c.suppressed += 1,
                EventType::Failed => c.failed += 1,
                EventType::Opened if !opened.contains(&e.recipient) => {
                    opened.push(e.recipient.clone());
                    c.opened += 1;
                }
                EventType::Clicked if !clicked.contains(&e.recipient) => {
                    clicked.push(e.recipient.clone());
                    c.clicked += 1;
                }
                _ => {}
            }
        }
    }
    naive.retain(|_, c| !c.is_zero());
    let from = HourStart::of(h0);
    let counted: BTreeMap<(HourStart, DomainId), ActivityCounts> = s
        .activity(ws, from, from.plus_hours(48))
        .await
        .must("activity")
        .into_iter()
        .filter(|r| !r.counts.is_zero())
        .map(|r| ((r.hour, r.domain), r.counts))
        .collect();
    assert!(naive.values().any(|c| c.opened > 0 && c.delivered > 0), "the sequence opened and delivered: {naive:?}");
    assert_eq!(counted, naive, "the counters and the timelines");
}

fn happening(event_type: EventType, at: DateTime<Utc>) -> tidings_core::state_machine::Happening {
    let details = tidings_core::model::EventDetails {
        bounce_type: (event_type == EventType::Bounced).then_some(BounceType::Soft),
        url: (event_type == EventType::Clicked).then(|| "https://shop.example/offer".to_owned()),
        ..Default::default()
    };
    tidings_core::state_machine::Happening {
        event_id: tidings_core::ids::EventId(ulid()),
        event_type,
        at,
        details,
        provider_message_id: None,
        next_attempt_at: (event_type == EventType::Deferred).then_some(at),
    }
}
