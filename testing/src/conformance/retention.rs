//! Retention (`purge_message_content`) and the queue-depth count (`count_pending_messages`).

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use super::Must;
use super::messages::{advance, put};
use super::queue::message_at;
use crate::fixtures::{event_write, now, plus_secs, ulid};
use tidings_core::ids::{MessageId, WorkspaceId};
use tidings_core::model::{EventType, Message, MessageStatus};
use tidings_core::ports::{PageRequest, PendingMessages, Store, SystemRandom};

/// A `Queued` message of `ws` whose id is minted at `at` (so retention sees it as created
/// then).
fn created_at(ws: WorkspaceId, at: DateTime<Utc>) -> Message {
    let mut m = message_at(ws, at);
    m.id = MessageId::new_at(at, &SystemRandom);
    m
}

async fn stored<S: Store>(s: &S, m: &Message) -> Message {
    s.get_message(m.workspace_id, m.id).await.must("get_message").expect("the message is kept")
}

async fn event_count<S: Store>(s: &S, m: &Message) -> usize {
    s.list_events(m.workspace_id, m.id, PageRequest::first(100)).await.must("list_events").items.len()
}

pub(super) async fn pending_messages_are_counted_with_those_due<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let t0 = now();
    assert_eq!(s.count_pending_messages(t0).await.must("count"), PendingMessages::default(), "an empty store");
    let (queued, deferred, delivered) = (message_at(ws, t0), message_at(ws, t0), message_at(ws, t0));
    for m in [&queued, &deferred, &delivered] {
        put(&*s, m).await;
    }
    let sent = advance(&*s, &deferred, EventType::Sent).await;
    let write = event_write(&sent, EventType::Deferred, plus_secs(t0, 2), Some(plus_secs(t0, 300)));
    s.record_event(write).await.must("record Deferred");
    let sent = advance(&*s, &delivered, EventType::Sent).await;
    advance(&*s, &sent, EventType::Delivered).await;

    let count = |at| s.count_pending_messages(at);
    assert_eq!(count(t0).await.must("count"), PendingMessages { total: 2, due: 1 }, "queued due, deferred later");
    assert_eq!(count(plus_secs(t0, 300)).await.must("count"), PendingMessages { total: 2, due: 2 }, "both due");
    assert_eq!(count(t0 - Duration::seconds(1)).await.must("count"), PendingMessages { total: 2, due: 0 });
}

pub(super) async fn purges_bodies_and_timelines_of_old_settled_messages_only<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let t0 = now();
    let cutoff = plus_secs(t0, 5);
    let (delivered, bounced, deferred, queued) =
        (created_at(ws, t0), created_at(ws, t0), created_at(ws, t0), created_at(ws, t0));
    let young = created_at(ws, plus_secs(t0, 10));
    for m in [&delivered, &bounced, &deferred, &queued, &young] {
        put(&*s, m).await;
    }
    for m in [&delivered, &young] {
        let sent = advance(&*s, m, EventType::Sent).await;
        advance(&*s, &sent, EventType::Delivered).await;
    }
    let sent = advance(&*s, &bounced, EventType::Sent).await;
    advance(&*s, &sent, EventType::Bounced).await;
    let sent = advance(&*s, &deferred, EventType::Sent).await;
    let retry = event_write(&sent, EventType::Deferred, plus_secs(t0, 2), Some(plus_secs(t0, 300)));
    s.record_event(retry).await.must("record Deferred");
    let before: Vec<Message> = {
        let mut all = Vec::new();
        for m in [&delivered, &bounced, &deferred, &queued, &young] {
            all.push(stored(&*s, m).await);
        }
        all
    };

    assert_eq!(s.purge_message_content(cutoff, 10).await.must("purge"), 2, "the delivered and the bounced one");
    for (i, m) in [&delivered, &bounced].into_iter().enumerate() {
        let now_stored = stored(&*s, m).await;
        assert_eq!(now_stored, before[i].without_content(), "the record stays, without its content");
        assert!(now_stored.status == MessageStatus::Delivered || now_stored.status == MessageStatus::Bounced);
        assert_eq!(event_count(&*s, m).await, 0, "the timeline is gone");
    }
    for (i, m) in [&deferred, &queued, &young].into_iter().enumerate() {
        assert_eq!(stored(&*s, m).await, before[i + 2], "waiting and young messages are untouched");
        assert!(event_count(&*s, m).await > 0, "and keep their timeline");
    }
    assert_eq!(s.purge_message_content(cutoff, 10).await.must("purge again"), 0, "nothing new to purge");

    // A late event (here with a body a racing writer read before the purge) is purged too.
    let purged = stored(&*s, &delivered).await;
    let mut late = event_write(&purged, EventType::Complained, plus_secs(t0, 20), None);
    late.message.html = delivered.html.clone();
    s.record_event(late).await.must("record a late Complained");
    assert_eq!(event_count(&*s, &delivered).await, 1);
    assert_eq!(s.purge_message_content(cutoff, 10).await.must("purge the late event"), 1);
    let after = stored(&*s, &delivered).await;
    assert_eq!(
        (after.status, after.html.as_deref(), event_count(&*s, &delivered).await),
        (MessageStatus::Complained, None, 0)
    );

    // The deferred one is purged once it is settled; the young one once the cutoff passes it.
    let sent = advance(&*s, &stored(&*s, &deferred).await, EventType::Sent).await;
    advance(&*s, &sent, EventType::Delivered).await;
    assert_eq!(s.purge_message_content(cutoff, 10).await.must("purge"), 1, "the formerly deferred one");
    assert_eq!(s.purge_message_content(plus_secs(t0, 11), 10).await.must("purge"), 1, "the young one, now old");
    assert!(!stored(&*s, &young).await.has_content());
    assert!(stored(&*s, &queued).await.has_content(), "a queued message keeps its body whatever its age");
}

pub(super) async fn purges_go_earliest_first_up_to_the_limit<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let t0 = now();
    let mut made = Vec::new();
    for i in 0..3 {
        let m = created_at(ws, plus_secs(t0, i));
        put(&*s, &m).await;
        let sent = advance(&*s, &m, EventType::Sent).await;
        advance(&*s, &sent, EventType::Delivered).await;
        made.push(m);
    }
    let cutoff = plus_secs(t0, 60);
    assert_eq!(s.purge_message_content(cutoff, 2).await.must("purge"), 2, "up to the limit");
    let mut content = Vec::new();
    for m in &made {
        content.push(stored(&*s, m).await.has_content());
    }
    assert_eq!(content, [false, false, true], "the earliest first");
    assert_eq!(s.purge_message_content(cutoff, 2).await.must("purge"), 1, "then the rest");
    assert_eq!(s.purge_message_content(t0, 2).await.must("purge"), 0, "nothing was created before t0");
}
