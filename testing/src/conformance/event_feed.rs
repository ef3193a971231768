//! The event feed (`EventFeedStore`): each workspace's events in the order their writes
//! happened (not the order of their ids), followed page by page from positions; events of
//! purged timelines leave it; and a reader that follows it while writers race never misses
//! an event nor sees one twice.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::Must;
use super::messages::{advance, put};
use super::queue::message_at;
use crate::fixtures::{new_message, now, plus_secs, ulid};
use tidings_core::ids::{EventId, MessageId, WorkspaceId};
use tidings_core::model::{EventType, MessageStatus};
use tidings_core::ports::{FeedEntry, FeedPosition, NewBatch, PageRequest, Store, SystemRandom};

/// The whole feed of `ws` after `after`, read `page` events at a time.
async fn follow<S: Store>(s: &S, ws: WorkspaceId, mut after: Option<FeedPosition>, page: usize) -> Vec<FeedEntry> {
    let mut all = Vec::new();
    loop {
        let got = s.event_feed(ws, after, page).await.must("event_feed");
        assert!(got.len() <= page, "at most the limit");
        let Some(last) = got.last() else { return all };
        after = Some(last.position);
        all.extend(got);
    }
}

/// [`follow`] until it returns at least `want` events, or 10 s have passed (then what it
/// has, for the caller's assertion to show). A read may lag the writes that returned before
/// it (on PostgreSQL a transaction open anywhere, such as another check's, holds the feed
/// back), never lose them or reorder what it returned.
async fn follow_at_least<S: Store>(
    s: &S,
    ws: WorkspaceId,
    after: Option<FeedPosition>,
    page: usize,
    want: usize,
) -> Vec<FeedEntry> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let all = follow(s, ws, after, page).await;
        if all.len() >= want || std::time::Instant::now() >= deadline {
            return all;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn ids(entries: &[FeedEntry]) -> Vec<EventId> {
    entries.iter().map(|e| e.event.id).collect()
}

pub(super) async fn the_feed_keeps_each_workspaces_events_in_write_order<S: Store + 'static>(s: Arc<S>) {
    let (ws, other) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t0 = now();
    assert!(s.event_feed(ws, None, 10).await.must("an empty feed").is_empty());
    // Ids minted first, written in the other order: the feed follows the writes.
    let (early, late) = (message_at(ws, t0), message_at(ws, t0));
    assert!(early.id < late.id);
    put(&*s, &late).await;
    put(&*s, &early).await;
    let sent = advance(&*s, &late, EventType::Sent).await;
    put(&*s, &message_at(other, t0)).await;
    let batch = [message_at(ws, t0), message_at(ws, t0)];
    let new = NewBatch { messages: batch.iter().map(new_message).collect(), idempotency: None, accepted_at: t0 };
    s.create_messages(&new).await.must("create_messages");
    advance(&*s, &sent, EventType::Delivered).await;

    let feed = follow_at_least(&*s, ws, None, 100, 6).await;
    let timeline = |m: MessageId| {
        let s = Arc::clone(&s);
        async move { s.list_events(ws, m, PageRequest::first(100)).await.must("list_events").items }
    };
    let (late_events, early_events) = (timeline(late.id).await, timeline(early.id).await);
    let mut expected = vec![late_events[0].id, early_events[0].id, late_events[1].id];
    let mut batch_queued: Vec<EventId> = Vec::new();
    for m in &batch {
        batch_queued.push(timeline(m.id).await[0].id);
    }
    batch_queued.sort();
    expected.extend(batch_queued);
    expected.push(late_events[2].id);
    assert_eq!(ids(&feed), expected, "write order; a batch's events in id order");
    assert_eq!(feed[0].event, late_events[0], "the event as the timeline keeps it");
    let positions: Vec<FeedPosition> = feed.iter().map(|e| e.position).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "positions increase along the feed");

    assert_eq!(follow(&*s, ws, None, 1).await, feed, "one at a time, the same feed");
    assert_eq!(follow(&*s, ws, Some(positions[2]), 2).await, feed[3..], "from a position: what came after it");
    assert!(s.event_feed(ws, positions.last().copied(), 10).await.must("at the end").is_empty());
    let other_feed = follow_at_least(&*s, other, None, 10, 1).await;
    assert_eq!(other_feed.len(), 1, "another workspace's feed has its own event only");
    assert_eq!(other_feed[0].event.event_type, EventType::Queued);

    // What is written later comes after every position handed out.
    let next = message_at(ws, t0);
    put(&*s, &next).await;
    let after_end = follow_at_least(&*s, ws, positions.last().copied(), 10, 1).await;
    assert_eq!(after_end.len(), 1);
    assert_eq!(after_end[0].event.message_id, next.id);
}

pub(super) async fn purged_timelines_leave_the_feed<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let t0 = now();
    let mut old = message_at(ws, t0);
    old.id = MessageId::new_at(t0, &SystemRandom);
    let mut young = message_at(ws, plus_secs(t0, 10));
    young.id = MessageId::new_at(plus_secs(t0, 10), &SystemRandom);
    for m in [&old, &young] {
        put(&*s, m).await;
        let sent = advance(&*s, m, EventType::Sent).await;
        let delivered = advance(&*s, &sent, EventType::Delivered).await;
        assert_eq!(delivered.status, MessageStatus::Delivered);
    }
    assert_eq!(follow_at_least(&*s, ws, None, 10, 6).await.len(), 6);
    assert_eq!(s.purge_message_content(plus_secs(t0, 5), 10).await.must("purge"), 1);
    let kept = follow(&*s, ws, None, 10).await;
    assert_eq!(kept.len(), 3, "the purged timeline's events are gone from the feed");
    assert!(kept.iter().all(|e| e.event.message_id == young.id));
    // Purging again (which tidies what the first purge left) changes nothing a reader sees.
    s.purge_message_content(plus_secs(t0, 5), 10).await.must("purge again");
    assert_eq!(follow(&*s, ws, None, 2).await, kept);
}

pub(super) async fn a_reader_racing_writers_misses_nothing<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let t0 = now();
    const WRITERS: usize = 8;
    const EACH: usize = 12;
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                let mut written = Vec::new();
                for _ in 0..EACH {
                    let m = message_at(ws, t0);
                    put(&*s, &m).await;
                    let sent = advance(&*s, &m, EventType::Sent).await;
                    written.push(sent.id);
                }
                written
            })
        })
        .collect();
    // Follows while the writers write, then once more after they are done.
    let mut seen: Vec<FeedEntry> = Vec::new();
    let mut after = None;
    let mut done = false;
    loop {
        let finished = writers.iter().all(tokio::task::JoinHandle::is_finished);
        let got = s.event_feed(ws, after, 7).await.must("event_feed");
        if let Some(last) = got.last() {
            after = Some(last.position);
        }
        let empty = got.is_empty();
        seen.extend(got);
        if done && empty {
            break;
        }
        done = finished;
        if empty {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
    for writer in writers {
        writer.await.expect("a writer");
    }
    // A feed read may lag the writes (on PostgreSQL a transaction still open anywhere holds
    // it back), never lose them: drain it until every event came or the check's time is up.
    while seen.len() < WRITERS * EACH * 2 {
        let more = follow(&*s, ws, after, 50).await;
        if let Some(last) = more.last() {
            after = Some(last.position);
        }
        seen.extend(more);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut distinct = BTreeSet::new();
    let twice: Vec<(FeedPosition, EventType)> =
        seen.iter().filter(|e| !distinct.insert(e.event.id)).map(|e| (e.position, e.event.event_type)).collect();
    assert!(twice.is_empty(), "no event twice; seen again: {twice:?}");
    assert_eq!(seen.len(), WRITERS * EACH * 2, "every Queued and Sent, none missed");
    assert_eq!(follow(&*s, ws, None, 100).await, seen, "what was followed is the feed");
}
