//! The delivery worker when the store answers what the in-memory store never does: a write
//! lost to a concurrent change (`Conflict`), or storage unavailable mid-attempt.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tidings_core::delivery::{DeliverySettings, DeliveryWorker};
use tidings_core::dkim_keys;
use tidings_core::ids::{ApiKeyId, WorkspaceId};
use tidings_core::model::{DomainStatus, EventType, Message};
use tidings_core::ports::{EventWrite, Mailer, StoreError, SystemRandom};
use tidings_core::usecases::{CoreConfig, Tidings};
use tidings_testing::fixtures;
use tidings_testing::mailer::FakeMailer;
use tidings_testing::{FakeDns, FixedClock};

use crate::mock_store::MockStore;

/// A store holding one due message of a Verified domain with real keys. `record_event`
/// answers from `writes` in order (then succeeds) and remembers the event types it got;
/// `get_message` answers with the message, leased until `reread_lease(lease_until)`.
struct Scene {
    store: MockStore,
    written: Arc<Mutex<Vec<EventType>>>,
}

fn scene(writes: Vec<Result<(), StoreError>>, reread_lease: fn(DateTime<Utc>) -> DateTime<Utc>) -> Scene {
    let ws = WorkspaceId(fixtures::ulid());
    let mut domain = fixtures::domain(ws, "acme.example.com");
    domain.dkim = dkim_keys::generate(&SystemRandom).unwrap();
    domain.status = DomainStatus::Verified;
    let mut message = fixtures::message(ws, ApiKeyId(fixtures::ulid()), domain.id);
    message.from.address = fixtures::email("billing@acme.example.com");
    let lease = Arc::new(Mutex::new(None));

    let mut store = MockStore::new();
    let (claimed, seen) = (message.clone(), Arc::clone(&lease));
    store.expect_claim_due_messages().times(1).returning(move |_, lease_until, _| {
        *seen.lock().unwrap() = Some(lease_until);
        Ok(vec![Message { next_attempt_at: Some(lease_until), ..claimed.clone() }])
    });
    store.expect_get_suppression().returning(|_, _| Ok(None));
    store.expect_get_domain().returning(move |_, _| Ok(Some(domain.clone())));
    store.expect_list_enabled_webhooks().returning(|_| Ok(vec![]));
    let (current, seen) = (message, Arc::clone(&lease));
    store.expect_get_message().returning(move |_, _| {
        let lease_until = seen.lock().unwrap().expect("claimed first");
        Ok(Some(Message { next_attempt_at: Some(reread_lease(lease_until)), ..current.clone() }))
    });
    let written = Arc::new(Mutex::new(Vec::new()));
    let (log, calls, writes) = (Arc::clone(&written), AtomicUsize::new(0), Arc::new(writes));
    store.expect_record_event().returning(move |write: EventWrite| {
        log.lock().unwrap().push(write.event.event_type);
        writes.get(calls.fetch_add(1, Ordering::SeqCst)).cloned().unwrap_or(Ok(()))
    });
    Scene { store, written }
}

fn worker(store: MockStore, mailer: &Arc<FakeMailer>) -> DeliveryWorker {
    let clock = Arc::new(FixedClock::at(fixtures::now()));
    let random = Arc::new(SystemRandom);
    let core = Tidings::new(Arc::new(store), clock, random, Arc::new(FakeDns::default()), CoreConfig::default());
    DeliveryWorker::new(core, Arc::clone(mailer) as Arc<dyn Mailer>, DeliverySettings::default())
}

fn conflict() -> Result<(), StoreError> {
    Err(StoreError::Conflict("status changed".into()))
}

#[tokio::test]
async fn a_conflict_before_sending_is_decided_again_while_the_message_is_still_ours() {
    let Scene { store, written } = scene(vec![conflict()], |lease_until| lease_until);
    let mailer = Arc::new(FakeMailer::default());

    let report = worker(store, &mailer).deliver_due(fixtures::now()).await.unwrap();

    assert_eq!((report.delivered, report.skipped), (1, 0), "{report:?}");
    assert_eq!(*written.lock().unwrap(), [EventType::Sent, EventType::Sent, EventType::Delivered]);
    assert_eq!(mailer.sent().len(), 1, "sent once, after the second decision");
}

#[tokio::test]
async fn a_message_taken_over_by_someone_else_is_skipped_unsent() {
    let Scene { store, written } = scene(vec![conflict()], |lease_until| lease_until + chrono::Duration::minutes(1));
    let mailer = Arc::new(FakeMailer::default());

    let report = worker(store, &mailer).deliver_due(fixtures::now()).await.unwrap();

    assert_eq!((report.skipped, report.delivered), (1, 0), "{report:?}");
    assert_eq!(*written.lock().unwrap(), [EventType::Sent]);
    assert!(mailer.sent().is_empty());
}

#[tokio::test]
async fn a_conflict_after_sending_skips_without_sending_again() {
    let Scene { store, written } = scene(vec![Ok(()), conflict()], |lease_until| lease_until);
    let mailer = Arc::new(FakeMailer::default());

    let report = worker(store, &mailer).deliver_due(fixtures::now()).await.unwrap();

    assert_eq!((report.skipped, report.delivered), (1, 0), "{report:?}");
    assert_eq!(*written.lock().unwrap(), [EventType::Sent, EventType::Delivered]);
    assert_eq!(mailer.sent().len(), 1);
}

#[tokio::test]
async fn storage_failing_mid_attempt_is_reported_and_leaves_the_message_leased() {
    let unavailable = Err(StoreError::Unavailable("disk full".into()));
    let Scene { store, .. } = scene(vec![Ok(()), unavailable], |lease_until| lease_until);
    let mailer = Arc::new(FakeMailer::default());

    let report = worker(store, &mailer).deliver_due(fixtures::now()).await.unwrap();

    assert_eq!(report.claimed, 1);
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.errors[0].1.contains("disk full"), "{report:?}");
}

#[tokio::test]
async fn a_failed_claim_fails_the_step() {
    let mut store = MockStore::new();
    store.expect_claim_due_messages().returning(|_, _, _| Err(StoreError::Unavailable("gone".into())));
    let mailer = Arc::new(FakeMailer::default());

    let result = worker(store, &mailer).deliver_due(fixtures::now()).await;

    assert_eq!(result, Err(tidings_core::Error::Unavailable("gone".into())));
}
