//! The delivery worker when the store answers what an undisturbed in-memory store never
//! does: a write lost to a concurrent change (`Conflict`), whether injected or caused by
//! another worker taking the message over, or storage unavailable mid-attempt.

use std::sync::Arc;

use tidings_core::Error;
use tidings_core::model::{Message, MessageStatus};
use tidings_core::ports::{MessageStore, StoreError};
use tidings_testing::delivery::Delivery;
use tidings_testing::faulty::{Op, When};

/// A Verified domain with real keys, a mailer that accepts everything, and one message
/// due now.
async fn scene() -> (Delivery, Message) {
    let d = Delivery::new("1m", vec![]).await;
    let message = d.send("ann@example.net").await;
    (d, message)
}

fn conflict() -> StoreError {
    StoreError::Conflict("status changed".into())
}

#[tokio::test]
async fn a_conflict_before_sending_is_decided_again_while_the_message_is_still_ours() {
    let (d, message) = scene().await;
    d.t.faults.fail(Op::RecordEvent, When::Once, conflict());

    let report = d.step().await;

    assert_eq!((report.delivered, report.skipped), (1, 0), "{report:?}");
    assert_eq!(d.t.faults.calls(Op::RecordEvent), 3, "Sent lost, Sent again, Delivered");
    assert_eq!(d.event_types(message.id).await, ["Queued", "Sent", "Delivered"]);
    assert_eq!(d.mailer.sent().len(), 1, "sent once, after the second decision");
}

#[tokio::test]
async fn a_message_taken_over_by_someone_else_is_skipped_unsent() {
    let (d, message) = scene().await;
    // Between this worker's claim and its first write, the lease ends and another worker
    // claims the message for a minute.
    let (store, ws, id) = (Arc::clone(&d.t.store), message.workspace_id, message.id);
    d.t.faults.before(Op::RecordEvent, When::Once, move || {
        let store = Arc::clone(&store);
        async move {
            let lease_until = store.get_message(ws, id).await.unwrap().unwrap().next_attempt_at.unwrap();
            let taken = store.claim_due_messages(lease_until, lease_until + chrono::Duration::minutes(1), 10).await;
            assert_eq!(taken.unwrap().len(), 1, "taken over");
        }
    });

    let report = d.step().await;

    assert_eq!((report.skipped, report.delivered), (1, 0), "{report:?}");
    assert_eq!(d.t.faults.calls(Op::RecordEvent), 1);
    assert_eq!(d.event_types(message.id).await, ["Queued"]);
    assert!(d.mailer.sent().is_empty());
}

#[tokio::test]
async fn a_conflict_after_sending_skips_without_sending_again() {
    let (d, message) = scene().await;
    d.t.faults.fail(Op::RecordEvent, When::Nth(2), conflict());

    let report = d.step().await;

    assert_eq!((report.skipped, report.delivered), (1, 0), "{report:?}");
    assert_eq!(d.t.faults.calls(Op::RecordEvent), 2, "Sent, then the lost Delivered");
    assert_eq!(d.event_types(message.id).await, ["Queued", "Sent"]);
    assert_eq!(d.mailer.sent().len(), 1);
}

#[tokio::test]
async fn storage_failing_mid_attempt_is_reported_and_leaves_the_message_leased() {
    let (d, message) = scene().await;
    d.t.faults.fail(Op::RecordEvent, When::Nth(2), StoreError::Unavailable("disk full".into()));

    let report = d.step().await;

    assert_eq!(report.claimed, 1);
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.errors[0].1.contains("disk full"), "{report:?}");
    assert_eq!(d.message(message.id).await.status, MessageStatus::Sent);
    d.t.faults.heal();
    assert_eq!(d.step().await.claimed, 0, "still leased");
}

#[tokio::test]
async fn a_failed_claim_fails_the_step() {
    let (d, _) = scene().await;
    d.t.faults.fail(Op::ClaimDueMessages, When::Always, StoreError::Unavailable("gone".into()));

    let result = d.worker.deliver_due(d.t.now()).await;

    assert_eq!(result, Err(Error::Unavailable("gone".into())));
}
