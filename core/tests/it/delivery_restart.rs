//! Start-up after a crash: the messages a killed process left claimed are released and sent
//! by the first step, without waiting for their leases to end.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tidings_core::delivery::{DeliverySettings, DeliveryWorker};
use tidings_core::ids::{EventId, MessageId};
use tidings_core::model::{EventDetails, EventType, MessageStatus};
use tidings_core::ports::{Mailer, MessageStore, SystemRandom};
use tidings_core::state_machine::Happening;
use tidings_core::usecases::{CoreConfig, Tidings};
use tidings_testing::delivery::Delivery;
use tidings_testing::fixtures;
use tidings_testing::mailer::{FakeMailer, rejected};
use tidings_testing::{FakeDns, FixedClock};

use crate::mock_store::MockStore;

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
    d.t.core.record_message_event(&claimed[0], sent).await.unwrap();

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
    let now = fixtures::now();
    let mut store = MockStore::new();
    let (calls, limits) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
    let (counted, seen) = (Arc::clone(&calls), Arc::clone(&limits));
    store.expect_release_message_leases().returning(move |at, limit| {
        assert_eq!(at, now, "released to the time given");
        seen.lock().unwrap().push(limit);
        // Two full batches, then a short one.
        Ok(if counted.fetch_add(1, Ordering::SeqCst) < 2 { limit } else { 2 })
    });
    let core = Tidings::new(
        Arc::new(store),
        Arc::new(FixedClock::at(now)),
        Arc::new(SystemRandom),
        Arc::new(FakeDns::default()),
        CoreConfig::default(),
    );
    let mailer = Arc::new(FakeMailer::default()) as Arc<dyn Mailer>;
    let worker = DeliveryWorker::new(core, mailer, DeliverySettings::default());

    let released = worker.release_leases_after_restart(now).await.unwrap();

    let limits = limits.lock().unwrap().clone();
    assert_eq!(calls.load(Ordering::SeqCst), 3, "stops after the short batch");
    assert!(limits.len() == 3 && limits.iter().all(|l| *l == limits[0] && *l > 2), "one batch size: {limits:?}");
    assert_eq!(released, 2 * limits[0] + 2);
}
