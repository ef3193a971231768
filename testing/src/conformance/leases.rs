//! Releasing the delivery leases of a dead process (`release_message_leases`).

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use super::Must;
use super::messages::put;
use super::queue::message_at;
use crate::fixtures::{event_write, now, plus_secs, ulid};
use tidings_core::ids::{MessageId, WorkspaceId};
use tidings_core::model::{EventType, Message};
use tidings_core::ports::{EndpointQuota, Store};

/// Applies `event_type` at `at` to `m` (as stored) and returns the message as now stored.
async fn apply<S: Store>(
    s: &S,
    m: &Message,
    event_type: EventType,
    at: DateTime<Utc>,
    retry: Option<DateTime<Utc>>,
) -> Message {
    let write = event_write(m, event_type, at, retry);
    s.record_event(write.clone()).await.must("record_event");
    write.message
}

async fn ids_claimed<S: Store>(s: &S, now: DateTime<Utc>, until: DateTime<Utc>) -> Vec<MessageId> {
    s.claim_due_messages(now, until, 20).await.must("claim").iter().map(|m| m.id).collect()
}

pub(super) async fn released_leases_are_due_at_once_and_retry_times_stay<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t0 = now();
    let at = |secs| plus_secs(t0, secs);
    let mut made = Vec::new();
    for _ in 0..6 {
        let m = message_at(a, t0);
        put(&*s, &m).await;
        made.push(m);
    }
    let claimed = s.claim_due_messages(at(0), at(60), 10).await.must("claim the six");
    assert_eq!(claimed.len(), 6, "all six are due at t0");
    let [queued_a, sent, deferred, deferred_claimed, delivered, bounced] =
        <[Message; 6]>::try_from(claimed).unwrap_or_else(|_| unreachable!("six claimed"));
    // Another workspace, leased later.
    let queued_b = message_at(b, at(2));
    put(&*s, &queued_b).await;
    let claimed = s.claim_due_messages(at(2), at(90), 10).await.must("claim queued_b");
    assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), [queued_b.id], "only queued_b is due at t+2");
    let queued_b = claimed.into_iter().next().unwrap_or_else(|| unreachable!("one claimed"));

    let sent = apply(&*s, &sent, EventType::Sent, at(1), None).await;
    let deferred = apply(&*s, &deferred, EventType::Sent, at(1), None).await;
    let deferred = apply(&*s, &deferred, EventType::Deferred, at(2), Some(at(300))).await;
    let deferred_claimed = apply(&*s, &deferred_claimed, EventType::Sent, at(1), None).await;
    let deferred_claimed = apply(&*s, &deferred_claimed, EventType::Deferred, at(2), Some(at(5))).await;
    let delivered = apply(&*s, &delivered, EventType::Sent, at(1), None).await;
    let delivered = apply(&*s, &delivered, EventType::Delivered, at(2), None).await;
    let bounced = apply(&*s, &bounced, EventType::Sent, at(1), None).await;
    let bounced = apply(&*s, &bounced, EventType::Bounced, at(2), None).await;
    // A Deferred message claimed at its retry time, not yet recorded Sent again.
    assert_eq!(ids_claimed(&*s, at(5), at(70)).await, [deferred_claimed.id], "the retry at t+5");
    let deferred_claimed = Message { next_attempt_at: Some(at(70)), ..deferred_claimed };
    let waiting = message_at(a, at(1));
    put(&*s, &waiting).await;

    let before = [&queued_a, &queued_b, &sent, &deferred, &deferred_claimed, &delivered, &bounced, &waiting];
    let statuses: Vec<&str> = before.iter().map(|m| m.status.as_str()).collect();
    let expected = ["Queued", "Queued", "Sent", "Deferred", "Deferred", "Delivered", "Bounced", "Queued"];
    assert_eq!(statuses, expected, "the scene as arranged");
    for m in before {
        let stored = s.get_message(m.workspace_id, m.id).await.must("get");
        assert_eq!(stored.as_ref(), Some(m), "the scene as stored");
    }

    let now = at(10);
    let released = |m: &Message| Message { next_attempt_at: Some(now), ..m.clone() };
    assert_eq!(s.release_message_leases(now, 2).await.must("release"), 2, "up to the limit");
    let got = async |m: &Message| s.get_message(m.workspace_id, m.id).await.must("get");
    assert_eq!(got(&queued_a).await, Some(released(&queued_a)), "a leased Queued message is due at now");
    assert_eq!(got(&sent).await, Some(released(&sent)), "a leased Sent message is due at now");
    assert_eq!(got(&queued_b).await, Some(queued_b.clone()), "the later lease waits for the next call");
    assert_eq!(s.release_message_leases(now, 2).await.must("release"), 1, "the rest");
    assert_eq!(s.release_message_leases(now, 2).await.must("release"), 0, "nothing is left: the loop ends");
    assert_eq!(got(&queued_b).await, Some(released(&queued_b)), "in every workspace");
    for m in [&deferred, &deferred_claimed, &delivered, &bounced, &waiting] {
        assert_eq!(got(m).await.as_ref(), Some(m), "{:?} with no lease to release is untouched", m.status);
    }

    // The queue agrees: exactly the released ones are due, after the one due earlier.
    let claimed = ids_claimed(&*s, now, at(1000)).await;
    assert_eq!(claimed.first(), Some(&waiting.id), "the message due at t+1 comes first: {claimed:?}");
    let rest: BTreeSet<MessageId> = claimed.iter().skip(1).copied().collect();
    let want: BTreeSet<MessageId> = [queued_a.id, sent.id, queued_b.id].into_iter().collect();
    assert_eq!((claimed.len(), rest), (4, want), "then the three released, each once");
    assert!(ids_claimed(&*s, at(69), at(1000)).await.is_empty(), "retry times and the Deferred lease hold");
    assert_eq!(ids_claimed(&*s, at(70), at(1000)).await, [deferred_claimed.id], "a claimed Deferred keeps its lease");
    assert_eq!(ids_claimed(&*s, at(300), at(1000)).await, [deferred.id], "and a Deferred its retry time");
}

/// `release_webhook_delivery_leases`: claimed `Pending` deliveries become due at `now`;
/// a `Retrying` delivery keeps its retry time and finished ones are untouched.
pub(super) async fn released_delivery_leases_are_due_at_once<S: Store + 'static>(s: Arc<S>) {
    use crate::fixtures::{delivery, webhook};
    use tidings_core::model::{DeliveryStatus, WebhookDelivery};

    let ws = WorkspaceId(ulid());
    let endpoint = webhook(ws);
    s.insert_webhook(&endpoint).await.must("insert_webhook");
    let t0 = now();
    let at = |secs| plus_secs(t0, secs);
    // Due exactly at t0: the fixture's own clock reading may fall in the next millisecond.
    let made: Vec<WebhookDelivery> = (0..4)
        .map(|_| WebhookDelivery { next_attempt_at: Some(t0), created_at: t0, ..delivery(ws, endpoint.id) })
        .collect();
    s.insert_webhook_deliveries(&made).await.must("insert_webhook_deliveries");
    let claimed =
        s.claim_due_webhook_deliveries(t0, at(70), 10, &EndpointQuota::unlimited()).await.must("claim the four");
    assert_eq!(claimed.len(), 4, "all four are due at t0");
    let [pending_a, pending_b, retrying, delivered] =
        <[WebhookDelivery; 4]>::try_from(claimed).unwrap_or_else(|_| unreachable!("four claimed"));
    let retrying =
        WebhookDelivery { status: DeliveryStatus::Retrying, attempts: 1, next_attempt_at: Some(at(300)), ..retrying };
    s.update_webhook_delivery(&retrying).await.must("update retrying");
    let delivered =
        WebhookDelivery { status: DeliveryStatus::Delivered, attempts: 1, next_attempt_at: None, ..delivered };
    s.update_webhook_delivery(&delivered).await.must("update delivered");

    let now = at(10);
    assert_eq!(s.release_webhook_delivery_leases(now, 1).await.must("release"), 1, "up to the limit");
    assert_eq!(s.release_webhook_delivery_leases(now, 10).await.must("release"), 1, "the other one");
    assert_eq!(s.release_webhook_delivery_leases(now, 10).await.must("release"), 0, "nothing left");

    let mut due: Vec<_> = s
        .claim_due_webhook_deliveries(now, at(80), 10, &EndpointQuota::unlimited())
        .await
        .must("claim again")
        .iter()
        .map(|d| d.id)
        .collect();
    due.sort();
    let mut expected = vec![pending_a.id, pending_b.id];
    expected.sort();
    assert_eq!(due, expected, "exactly the released Pending deliveries are due at once");
    for (kept, what) in [(&retrying, "the retry time"), (&delivered, "a finished delivery")] {
        let page = s
            .list_webhook_deliveries(ws, endpoint.id, tidings_core::ports::PageRequest { limit: 10, cursor: None })
            .await
            .must("list deliveries");
        let stored = page.items.iter().find(|d| d.id == kept.id).cloned();
        assert_eq!(stored.as_ref(), Some(kept), "{what} stays");
    }
    // At t+299 the released ones' new leases (until t+80) are over; the retry is not due.
    let due = s.claim_due_webhook_deliveries(at(299), at(400), 10, &EndpointQuota::unlimited()).await.must("claim");
    assert!(due.iter().all(|d| d.id != retrying.id), "the Retrying delivery waits for its retry: {due:?}");
    let due = s.claim_due_webhook_deliveries(at(300), at(400), 10, &EndpointQuota::unlimited()).await.must("claim");
    assert_eq!(due.iter().map(|d| d.id).collect::<Vec<_>>(), [retrying.id], "and is due at its retry time");
}

/// A claimed message put back (`requeue_message`) is due at the new time and nothing else
/// changed; a stale lease or another workspace changes nothing.
pub(super) async fn a_requeued_message_waits_without_an_attempt<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t0 = now();
    let at = |secs| plus_secs(t0, secs);
    let m = message_at(a, t0);
    put(&*s, &m).await;
    let claimed = s.claim_due_messages(at(0), at(60), 10).await.must("claim");
    assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), [m.id]);
    let claimed = claimed.into_iter().next().unwrap_or_else(|| unreachable!("one claimed"));
    assert!(!s.requeue_message(a, m.id, at(59), at(5)).await.must("requeue"), "another lease");
    assert!(!s.requeue_message(b, m.id, at(60), at(5)).await.must("requeue"), "another workspace");
    assert!(!s.requeue_message(a, MessageId(ulid()), at(60), at(5)).await.must("requeue"), "no such message");
    assert_eq!(s.get_message(a, m.id).await.must("get"), Some(claimed.clone()), "unchanged");
    assert!(s.requeue_message(a, m.id, at(60), at(5)).await.must("requeue"), "the claim's lease");
    let requeued = Message { next_attempt_at: Some(at(5)), ..claimed };
    assert_eq!(s.get_message(a, m.id).await.must("get"), Some(requeued), "only the due time moved");
    assert!(ids_claimed(&*s, at(4), at(70)).await.is_empty(), "not due before its time");
    assert_eq!(ids_claimed(&*s, at(5), at(70)).await, [m.id], "due at its time");
    assert!(!s.requeue_message(a, m.id, at(60), at(6)).await.must("requeue"), "the old claim's lease is over");

    // A lease finer than a store keeps times (PostgreSQL: microseconds) is still the
    // claim's: the requeue compares it as `record_event` compares its expected time.
    let fine = message_at(a, t0);
    put(&*s, &fine).await;
    let lease = at(60) + Duration::nanoseconds(1_999);
    assert_eq!(s.claim_due_messages(at(6), lease, 10).await.must("claim").len(), 1, "the fine one");
    let earlier = lease - Duration::microseconds(1);
    assert!(!s.requeue_message(a, fine.id, earlier, at(7)).await.must("requeue"), "a microsecond off");
    assert!(s.requeue_message(a, fine.id, lease, at(7)).await.must("requeue"), "the claim's fine lease");
    assert_eq!(ids_claimed(&*s, at(7), at(70)).await, [fine.id], "due at its time");
}
