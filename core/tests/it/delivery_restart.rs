//! Start-up after a crash: the messages a killed process left claimed are released and sent
//! by the first step, without waiting for their leases to end.

use std::collections::BTreeSet;
use std::sync::Arc;

use tidings_core::delivery::{DeliverySettings, DeliveryWorker};
use tidings_core::ids::{ApiKeyId, DomainId, EventId, MessageId, WorkspaceId};
use tidings_core::model::{EventDetails, EventType, Message, MessageStatus};
use tidings_core::ports::{Mailer, MessageStore};
use tidings_core::state_machine::Happening;
use tidings_testing::TestCore;
use tidings_testing::delivery::Delivery;
use tidings_testing::faulty::Op;
use tidings_testing::fixtures;
use tidings_testing::mailer::{FakeMailer, rejected};

#[tokio::test]
async fn messages_left_claimed_by_a_killed_process_are_sent_at_once_after_a_restart() {
    let d = Delivery::new("1m", vec![rejected(451, "4.3.0 try later")]).await;
    let deferred = d.send("later@example.net").await;
    assert_eq!(d.step().await.deferred, 1, "arranged: one message waits for its retry");
    let (in_flight, claimed_only) = (d.send("first@example.net").await, d.send("second@example.net").await);
    // The killed process had claimed both and recorded one of them Sent.
    let lease = d.worker.settings().lease();
    let claimed = d.t.store.claim_due_messages(d.t.now(), d.t.now() + lease, 10).await.unwrap();
    assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), [in_flight.id, claimed_only.id]);
    let sent = Happening {
        event_id: EventId(fixtures::ulid()),
        event_type: EventType::Sent,
        at: d.t.now(),
        details: EventDetails { attempt: Some(1), ..EventDetails::default() },
        provider_message_id: Some(format!("{}@acme.example.com", in_flight.id)),
        next_attempt_at: None,
    };
    d.t.core.messages().record_event(&claimed[0], sent).await.unwrap();

    // The restart: a new worker and mailer over the same store.
    let mailer = Arc::new(FakeMailer::default());
    let restarted =
        DeliveryWorker::new(d.t.core.clone(), Arc::clone(&mailer) as Arc<dyn Mailer>, d.worker.settings().clone());
    assert_eq!(restarted.deliver_due(d.t.now()).await.unwrap().claimed, 0, "still leased to the dead process");
    let released = restarted.release_leases_after_restart(d.t.now()).await.unwrap();
    let report = restarted.deliver_due(d.t.now()).await.unwrap();

    assert_eq!(released, 2);
    assert_eq!((report.claimed, report.delivered), (2, 2), "{report:?}");
    let went_out: BTreeSet<MessageId> = mailer.sent().iter().map(|e| e.message_id).collect();
    assert_eq!(went_out, [in_flight.id, claimed_only.id].into_iter().collect());
    assert_eq!(d.event_types(in_flight.id).await, ["Queued", "Sent", "Sent", "Delivered"]);
    assert_eq!(d.event_types(claimed_only.id).await, ["Queued", "Sent", "Delivered"]);
    let waiting = d.message(deferred.id).await;
    assert_eq!(waiting.status, MessageStatus::Deferred, "a retry time is not a lease");
    assert_eq!(waiting.next_attempt_at, Some(d.t.now() + chrono::Duration::minutes(1)));
}

#[tokio::test]
async fn leases_are_released_in_batches_until_one_comes_back_short() {
    let t = TestCore::new();
    let (ws, key, domain) = (WorkspaceId(fixtures::ulid()), ApiKeyId(fixtures::ulid()), DomainId(fixtures::ulid()));
    // Two full batches of the worker's (1000) and two more.
    for _ in 0..2002 {
        let message = Message { next_attempt_at: Some(t.now()), ..fixtures::message(ws, key, domain) };
        t.store.create_message(&fixtures::new_message(&message)).await.unwrap();
    }
    let leased = t.store.claim_due_messages(t.now(), t.now() + chrono::Duration::minutes(5), 5000).await.unwrap();
    assert_eq!(leased.len(), 2002, "arranged: all left claimed by a dead process");
    let worker = DeliveryWorker::new(t.core.clone(), Arc::new(FakeMailer::default()), DeliverySettings::default());
    let later = t.now() + chrono::Duration::seconds(1);

    let released = worker.release_leases_after_restart(later).await.unwrap();

    assert_eq!(released, 2002);
    assert_eq!(t.faults.calls(Op::ReleaseMessageLeases), 3, "stops after the short batch");
    let pending = t.store.count_pending_messages(later).await.unwrap();
    assert_eq!((pending.total, pending.due), (2002, 2002), "all due again");
    let sample = t.store.get_message(ws, leased[0].id).await.unwrap().unwrap();
    assert_eq!(sample.next_attempt_at, Some(later), "released to the time given");
}
