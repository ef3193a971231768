//! Batches (`create_messages`), scheduled messages in the queue, and the lease
//! compare-and-set of `record_event` (`expected_next_attempt_at`).

use std::sync::Arc;

use super::queue::message_at;
use super::{Must, assert_conflict};
use crate::fixtures::{event_write, idempotency, new_message, now, plus_secs, ulid};
use tidings_core::ids::{MessageId, WorkspaceId};
use tidings_core::model::{BatchItemRecord, EventDetails, EventType, Message, MessageStatus, StoredError};
use tidings_core::ports::{CreateOutcome, MessageQuery, NewBatch, PageRequest, Store};

async fn message_ids<S: Store>(s: &S, ws: WorkspaceId) -> Vec<MessageId> {
    let query = MessageQuery::page(PageRequest::first(200));
    s.list_messages(ws, &query).await.must("list_messages").items.iter().map(|m| m.id).collect()
}

fn batch_of(messages: &[Message], key: Option<&str>) -> NewBatch {
    let at = messages.first().map_or_else(now, |m| m.created_at);
    let ws = messages.first().map_or_else(|| WorkspaceId(ulid()), |m| m.workspace_id);
    NewBatch {
        messages: messages.iter().map(new_message).collect(),
        idempotency: key.map(|key| {
            let mut record = idempotency(ws, key, MessageId(ulid()), at, plus_secs(at, 3_600));
            let mut items: Vec<BatchItemRecord> = messages.iter().map(|m| BatchItemRecord::Created(m.id)).collect();
            items.push(BatchItemRecord::Refused(StoredError {
                code: "validation_error".into(),
                message: "validation failed".into(),
                fields: vec![("to".into(), "is required".into())],
            }));
            record.batch = Some(items);
            record
        }),
        accepted_at: at,
    }
}

pub(super) async fn batches_are_all_or_nothing<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let t0 = now();
    let made: Vec<Message> = (0..5).map(|_| message_at(ws, t0)).collect();
    let outcome = s.create_messages(&batch_of(&made, Some("batch-1"))).await.must("create_messages");
    assert_eq!(outcome, CreateOutcome::Created);
    for m in &made {
        assert_eq!(
            s.get_message(ws, m.id).await.must("get"),
            Some(m.clone()),
            "every message of the batch is readable"
        );
        let events = s.list_events(ws, m.id, PageRequest::first(10)).await.must("list_events");
        assert_eq!(events.items.len(), 1, "with its event");
    }
    let record = s
        .get_idempotency(ws, &crate::fixtures::idempotency_key("batch-1"))
        .await
        .must("get_idempotency")
        .expect("the batch's record");
    assert_eq!(record.batch.as_ref().map(Vec::len), Some(6), "the record keeps every item's result");
    let expected = batch_of(&made, Some("batch-1")).idempotency.and_then(|r| r.batch);
    assert_eq!(record.batch, expected, "the per-item results, errors included, as written");

    // The same key again: nothing of the second batch is written.
    let again: Vec<Message> = (0..3).map(|_| message_at(ws, plus_secs(t0, 1))).collect();
    match s.create_messages(&batch_of(&again, Some("batch-1"))).await.must("a second batch with the key") {
        CreateOutcome::Duplicate(existing) => assert_eq!(existing.batch, record.batch, "the first batch's record"),
        other => panic!("a reused key must be Duplicate, got {other:?}"),
    }
    for m in &again {
        assert_eq!(s.get_message(ws, m.id).await.must("get"), None, "a duplicate batch creates none");
    }

    // One message id that exists: the whole batch is refused, nothing written.
    let mut clash: Vec<Message> = (0..3).map(|_| message_at(ws, plus_secs(t0, 2))).collect();
    clash.push(made[2].clone());
    assert_conflict(s.create_messages(&batch_of(&clash, Some("batch-2"))).await, "a batch reusing a message id");
    for m in &clash[..3] {
        assert_eq!(s.get_message(ws, m.id).await.must("get"), None, "a refused batch creates none");
    }
    assert_eq!(
        s.get_idempotency(ws, &crate::fixtures::idempotency_key("batch-2")).await.must("get"),
        None,
        "nor its idempotency record"
    );
    let mut listed = message_ids(&*s, ws).await;
    listed.sort();
    let mut expected: Vec<MessageId> = made.iter().map(|m| m.id).collect();
    expected.sort();
    assert_eq!(listed, expected, "only the first batch is stored");

    // A batch without a key, and a due claim takes its messages like any others.
    let plain: Vec<Message> = (0..2).map(|_| message_at(ws, plus_secs(t0, 3))).collect();
    assert_eq!(s.create_messages(&batch_of(&plain, None)).await.must("keyless batch"), CreateOutcome::Created);
    let claimed = s.claim_due_messages(plus_secs(t0, 3), plus_secs(t0, 60), 100).await.must("claim");
    assert_eq!(claimed.len(), 7, "all seven batch messages are due");
}

/// A `Scheduled` message with its time in `next_attempt_at`, created at `at`.
fn scheduled_at(
    ws: WorkspaceId,
    created: chrono::DateTime<chrono::Utc>,
    send_at: chrono::DateTime<chrono::Utc>,
) -> Message {
    let mut m = message_at(ws, created);
    m.status = MessageStatus::Scheduled;
    m.next_attempt_at = Some(send_at);
    m.scheduled_at = Some(send_at);
    m
}

pub(super) async fn scheduled_messages_wait_for_their_time<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let t0 = now();
    let later = scheduled_at(ws, t0, plus_secs(t0, 100));
    let mut new = new_message(&later);
    new.event.event_type = EventType::Scheduled;
    new.event.details = EventDetails { scheduled_at: later.scheduled_at, ..EventDetails::default() };
    s.create_message(&new).await.must("create a scheduled message");
    assert_eq!(s.get_message(ws, later.id).await.must("get"), Some(later.clone()), "round trip with scheduled_at");
    assert!(s.claim_due_messages(plus_secs(t0, 99), plus_secs(t0, 200), 10).await.must("claim").is_empty(), "not due");
    assert_eq!(s.release_message_leases(plus_secs(t0, 1), 10).await.must("release"), 0, "a send time is no lease");
    assert_eq!(
        s.get_message(ws, later.id).await.must("get").and_then(|m| m.next_attempt_at),
        Some(plus_secs(t0, 100)),
        "the release kept the send time"
    );
    let claimed = s.claim_due_messages(plus_secs(t0, 100), plus_secs(t0, 200), 10).await.must("claim");
    assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), [later.id], "due at its time");

    // Canceled: never due again.
    let other = scheduled_at(ws, t0, plus_secs(t0, 50));
    s.create_message(&new_message(&other)).await.must("create");
    let canceled = event_write(&other, EventType::Canceled, plus_secs(t0, 1), None);
    s.record_event(canceled.clone()).await.must("cancel");
    assert_eq!(canceled.message.status, MessageStatus::Canceled);
    let claimed = s.claim_due_messages(plus_secs(t0, 1_000), plus_secs(t0, 2_000), 10).await.must("claim");
    assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), [later.id], "only the lapsed lease, not the canceled");
}

pub(super) async fn record_event_checks_the_expected_lease<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let t0 = now();
    let m = scheduled_at(ws, t0, plus_secs(t0, 10));
    s.create_message(&new_message(&m)).await.must("create");
    let claimed = s.claim_due_messages(plus_secs(t0, 10), plus_secs(t0, 70), 10).await.must("claim");
    let claimed = claimed.into_iter().next().expect("claimed");
    // The client moves it meanwhile (the status stays Scheduled).
    let mut moved = event_write(&claimed, EventType::Scheduled, plus_secs(t0, 11), Some(plus_secs(t0, 500)));
    moved.expected_next_attempt_at = None;
    s.record_event(moved.clone()).await.must("reschedule over the claim");
    let mut sent = event_write(&claimed, EventType::Sent, plus_secs(t0, 12), None);
    sent.expected_next_attempt_at = claimed.next_attempt_at;
    assert_conflict(s.record_event(sent).await, "Sent under a lease that a reschedule replaced");
    assert_eq!(s.get_message(ws, m.id).await.must("get"), Some(moved.message.clone()), "the reschedule stands");
    // Under an intact lease the write goes through.
    let claimed = s.claim_due_messages(plus_secs(t0, 500), plus_secs(t0, 560), 10).await.must("claim");
    let claimed = claimed.into_iter().next().expect("claimed at the new time");
    let mut sent = event_write(&claimed, EventType::Sent, plus_secs(t0, 501), None);
    sent.expected_next_attempt_at = claimed.next_attempt_at;
    s.record_event(sent).await.must("Sent under its lease");
}
