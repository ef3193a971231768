//! Idempotency records and the delivery queue (claims under a lease).

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use super::messages::put;
use super::{Must, assert_not_found};
use crate::fixtures::{event_write, idempotency, idempotency_key, message, new_message, now, plus_secs, ulid};
use tidings_core::ids::{ApiKeyId, DomainId, MessageId, WorkspaceId};
use tidings_core::model::{EventType, Message, MessageStatus};
use tidings_core::ports::{CreateOutcome, MessageQuery, PageRequest, Store};

/// A message of `ws` created at `at` and due then.
pub(super) fn message_at(ws: WorkspaceId, at: DateTime<Utc>) -> Message {
    let mut m = message(ws, ApiKeyId(ulid()), DomainId(ulid()));
    m.created_at = at;
    m.updated_at = at;
    m.next_attempt_at = Some(at);
    m
}

/// Creates `m` under idempotency key `key` remembered for `ttl_secs`.
async fn create_keyed<S: Store>(s: &S, m: &Message, key: &str, ttl_secs: i64) -> CreateOutcome {
    let mut new = new_message(m);
    new.idempotency = Some(idempotency(m.workspace_id, key, m.id, m.created_at, plus_secs(m.created_at, ttl_secs)));
    s.create_message(&new).await.must("create_message with an idempotency key")
}

async fn message_ids<S: Store>(s: &S, ws: WorkspaceId) -> Vec<MessageId> {
    let query = MessageQuery::page(PageRequest::first(200));
    s.list_messages(ws, &query).await.must("list_messages").items.iter().map(|m| m.id).collect()
}

pub(super) async fn idempotency_keys_deduplicate_within_a_workspace<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t0 = now();
    let key = idempotency_key("order-1");
    assert_eq!(s.get_idempotency(a, &key).await.must("get_idempotency"), None, "an unused key has no record");

    let m1 = message_at(a, t0);
    assert_eq!(create_keyed(&*s, &m1, "order-1", 3600).await, CreateOutcome::Created, "first use of a key");
    let record = s.get_idempotency(a, &key).await.must("get_idempotency").expect("the key's record is stored");
    assert_eq!(record, idempotency(a, "order-1", m1.id, t0, plus_secs(t0, 3600)), "the record as written");

    let mut m2 = message_at(a, plus_secs(t0, 5));
    m2.subject = "another body".to_owned();
    let mut new = new_message(&m2);
    let mut other_request = idempotency(a, "order-1", m2.id, m2.created_at, plus_secs(m2.created_at, 3600));
    other_request.request_hash = tidings_core::model::RequestHash::of(b"another body");
    new.idempotency = Some(other_request);
    let outcome = s.create_message(&new).await.must("create_message with a used key");
    assert_eq!(outcome, CreateOutcome::Duplicate(record.clone()), "a used key answers Duplicate with its record");
    assert_eq!(s.get_message(a, m2.id).await.must("get m2"), None, "a Duplicate stores no message");
    assert_not_found(s.list_events(a, m2.id, PageRequest::first(5)).await, "a Duplicate stores no event");
    assert_eq!(s.get_idempotency(a, &key).await.must("get"), Some(record.clone()), "the record is unchanged");

    // Just before expiry the key still holds.
    let m3 = message_at(a, plus_secs(t0, 3600) - Duration::milliseconds(1));
    let outcome = create_keyed(&*s, &m3, "order-1", 3600).await;
    assert_eq!(outcome, CreateOutcome::Duplicate(record.clone()), "one millisecond before expires_at");

    let m4 = message_at(b, plus_secs(t0, 10));
    assert_eq!(create_keyed(&*s, &m4, "order-1", 3600).await, CreateOutcome::Created, "keys are per workspace");
    let in_b = s.get_idempotency(b, &key).await.must("get in b").map(|r| r.message_id);
    assert_eq!(in_b, Some(m4.id), "the other workspace has its own record");
    assert_eq!(s.get_idempotency(a, &key).await.must("get in a"), Some(record), "and this one keeps its own");

    let plain = message_at(a, plus_secs(t0, 20));
    put(&*s, &plain).await;
    assert_eq!(message_ids(&*s, a).await, [plain.id, m1.id], "only the created messages are listed");
}

pub(super) async fn expired_idempotency_keys_are_replaced<S: Store + 'static>(s: Arc<S>) {
    let a = WorkspaceId(ulid());
    let t0 = now();
    let key = idempotency_key("welcome");
    let m1 = message_at(a, t0);
    assert_eq!(create_keyed(&*s, &m1, "welcome", 10).await, CreateOutcome::Created, "first use");

    // expires_at == created_at: the old record has expired.
    let m2 = message_at(a, plus_secs(t0, 10));
    assert_eq!(create_keyed(&*s, &m2, "welcome", 10).await, CreateOutcome::Created, "a key reused at its expiry");
    let record = s.get_idempotency(a, &key).await.must("get_idempotency").expect("record");
    assert_eq!(record, idempotency(a, "welcome", m2.id, m2.created_at, plus_secs(t0, 20)), "the record is replaced");
    assert_eq!(message_ids(&*s, a).await, [m2.id, m1.id], "both messages exist");

    let m3 = message_at(a, plus_secs(t0, 11));
    assert_eq!(create_keyed(&*s, &m3, "welcome", 10).await, CreateOutcome::Duplicate(record.clone()), "new record");

    // An expired record is still reported until it is replaced or purged.
    let m4 = message_at(a, t0);
    create_keyed(&*s, &m4, "stale", 1).await;
    let stale = s.get_idempotency(a, &idempotency_key("stale")).await.must("get stale");
    assert_eq!(stale.map(|r| r.message_id), Some(m4.id), "get_idempotency returns expired records too");
}

pub(super) async fn racing_duplicates_create_exactly_one_message<S: Store + 'static>(s: Arc<S>) {
    const RACERS: usize = 16;
    let a = WorkspaceId(ulid());
    for round in 0..5 {
        let key = format!("race-{round}");
        let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..RACERS {
            let (s, barrier, key) = (Arc::clone(&s), Arc::clone(&barrier), key.clone());
            tasks.spawn(async move {
                let m = message_at(a, now());
                let mut new = new_message(&m);
                new.idempotency = Some(idempotency(a, &key, m.id, m.created_at, plus_secs(m.created_at, 3600)));
                barrier.wait().await;
                (m.id, s.create_message(&new).await)
            });
        }
        let mut winners = Vec::new();
        let mut pointed_to = BTreeSet::new();
        while let Some(joined) = tasks.join_next().await {
            let (id, outcome) = joined.unwrap_or_else(|e| panic!("racing create_message task failed: {e}"));
            match outcome.must("racing create_message") {
                CreateOutcome::Created => winners.push(id),
                CreateOutcome::Duplicate(record) => {
                    pointed_to.insert(record.message_id);
                }
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one of {RACERS} racing creates is Created");
        let winner = winners[0];
        assert!(
            pointed_to.iter().all(|id| *id == winner),
            "round {round}: every Duplicate points at the created message {winner}, got {pointed_to:?}"
        );
        let record = s.get_idempotency(a, &idempotency_key(&key)).await.must("get_idempotency");
        assert_eq!(record.map(|r| r.message_id), Some(winner), "round {round}: the record names the winner");
        let events = s.list_events(a, winner, PageRequest::first(5)).await.must("list_events");
        assert_eq!(events.items.len(), 1, "round {round}: the winner has one Queued event");
    }
    assert_eq!(message_ids(&*s, a).await.len(), 5, "one message stored per round");
}

pub(super) async fn claims_take_due_messages_earliest_first_under_a_lease<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t0 = now();
    let at = |secs| plus_secs(t0, secs);
    // Created in this order, due in another, across two workspaces.
    let mut made = Vec::new();
    for (ws, due) in [(a, 3), (b, 1), (a, 2), (a, 10)] {
        let mut m = message_at(ws, t0);
        m.next_attempt_at = Some(at(due));
        put(&*s, &m).await;
        made.push(m);
    }
    let (m1, m2, m3, m4) = (&made[0], &made[1], &made[2], &made[3]);
    assert!(s.claim_due_messages(at(0), at(60), 10).await.must("claim").is_empty(), "nothing is due yet");

    let claimed = s.claim_due_messages(at(3), at(60), 2).await.must("claim limit 2");
    let leased = |m: &Message| Message { next_attempt_at: Some(at(60)), ..m.clone() };
    assert_eq!(claimed, [leased(m2), leased(m3)], "the two earliest due, earliest first, leased until lease_until");
    let claimed = s.claim_due_messages(at(3), at(60), 2).await.must("claim again");
    assert_eq!(claimed, [leased(m1)], "claimed messages are hidden until their lease ends");
    assert_eq!(s.get_message(a, m1.id).await.must("get"), Some(leased(m1)), "get_message shows the lease");
    assert_eq!(s.get_message(b, m2.id).await.must("get"), Some(leased(m2)), "in every workspace");
    assert!(s.claim_due_messages(at(9), at(60), 10).await.must("claim").is_empty(), "all leased, m4 not due");

    let claimed = s.claim_due_messages(at(10), at(70), 10).await.must("claim m4");
    assert_eq!(claimed, [Message { next_attempt_at: Some(at(70)), ..m4.clone() }], "m4 once it is due");
    assert!(s.claim_due_messages(at(59), at(120), 10).await.must("claim").is_empty(), "leases hold until they end");

    // At the end of the lease the three are due again (at the same instant: any two of them).
    let first: BTreeSet<MessageId> =
        s.claim_due_messages(at(60), at(120), 2).await.must("claim").iter().map(|m| m.id).collect();
    let rest: BTreeSet<MessageId> =
        s.claim_due_messages(at(60), at(120), 10).await.must("claim").iter().map(|m| m.id).collect();
    assert_eq!((first.len(), rest.len()), (2, 1), "an expired lease is claimable again, limit respected");
    let all: BTreeSet<MessageId> = first.union(&rest).copied().collect();
    assert_eq!(all, [m1.id, m2.id, m3.id].into_iter().collect(), "the three whose lease ended");
}

pub(super) async fn claims_skip_finished_and_deferred_messages<S: Store + 'static>(s: Arc<S>) {
    let a = WorkspaceId(ulid());
    let t0 = now();
    let at = |secs| plus_secs(t0, secs);
    let mut made = Vec::new();
    for _ in 0..4 {
        let m = message_at(a, t0);
        put(&*s, &m).await;
        made.push(m);
    }
    let claimed = s.claim_due_messages(at(0), at(50), 10).await.must("claim all");
    assert_eq!(claimed.len(), 4, "all four are due at once");
    let mut state = std::collections::BTreeMap::new();
    for m in claimed {
        state.insert(m.id, m);
    }
    let step = |m: &Message, event_type, secs, retry: Option<i64>| event_write(m, event_type, at(secs), retry.map(at));
    let mut apply = async |id: MessageId, event_type: EventType, secs: i64, retry: Option<i64>| {
        let write = step(&state[&id], event_type, secs, retry);
        state.insert(id, write.message.clone());
        s.record_event(write).await.must("record_event");
    };
    let (delivered, bounced, deferred, sent) = (made[0].id, made[1].id, made[2].id, made[3].id);
    apply(delivered, EventType::Sent, 1, None).await;
    apply(delivered, EventType::Delivered, 2, None).await;
    apply(bounced, EventType::Sent, 1, None).await;
    apply(bounced, EventType::Bounced, 2, None).await;
    apply(deferred, EventType::Sent, 1, None).await;
    apply(deferred, EventType::Deferred, 2, Some(300)).await;
    apply(sent, EventType::Sent, 1, None).await;
    let status = |id| state[&id].status;
    assert_eq!(
        [status(delivered), status(bounced), status(deferred), status(sent)],
        [MessageStatus::Delivered, MessageStatus::Bounced, MessageStatus::Deferred, MessageStatus::Sent]
    );

    assert!(s.claim_due_messages(at(49), at(400), 10).await.must("claim").is_empty(), "nothing due before t+50");
    // A Sent message keeps its lease: if its worker dies, it is claimed again when it ends.
    let claimed: Vec<MessageId> =
        s.claim_due_messages(at(50), at(1000), 10).await.must("claim").iter().map(|m| m.id).collect();
    assert_eq!(claimed, [sent], "a Sent message whose lease ended; not the finished or Deferred ones");
    assert!(s.claim_due_messages(at(299), at(400), 10).await.must("claim").is_empty(), "Deferred waits for its retry");
    let claimed: Vec<MessageId> =
        s.claim_due_messages(at(300), at(400), 10).await.must("claim").iter().map(|m| m.id).collect();
    assert_eq!(claimed, [deferred], "the Deferred message at its retry time");
    let later = s.claim_due_messages(at(1_000_000), at(1_000_100), 10).await.must("claim far ahead");
    let later: BTreeSet<MessageId> = later.iter().map(|m| m.id).collect();
    assert_eq!(later, [deferred, sent].into_iter().collect(), "Delivered and Bounced messages are never due");
}

pub(super) async fn purge_removes_only_expired_idempotency_records<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t0 = now();
    let plan = [(a, "k1", 1), (b, "k2", 2), (a, "k3", 3), (a, "k4", 100)];
    let mut made = Vec::new();
    for (ws, key, ttl) in plan {
        let m = message_at(ws, t0);
        create_keyed(&*s, &m, key, ttl).await;
        made.push(m);
    }
    let present = async |ws, key: &str| s.get_idempotency(ws, &idempotency_key(key)).await.must("get").is_some();
    assert_eq!(s.purge_expired_idempotency(plus_secs(t0, 0), 10).await.must("purge"), 0, "nothing expired yet");
    assert_eq!(s.purge_expired_idempotency(plus_secs(t0, 3), 2).await.must("purge"), 2, "purge up to the limit");
    let left = [present(a, "k1").await, present(b, "k2").await, present(a, "k3").await, present(a, "k4").await];
    assert_eq!(left, [false, false, true, true], "the earliest expired go first");
    assert_eq!(s.purge_expired_idempotency(plus_secs(t0, 3), 10).await.must("purge"), 1, "the rest of the expired");
    assert!(!present(a, "k3").await, "expires_at == now counts as expired");
    assert_eq!(s.purge_expired_idempotency(plus_secs(t0, 3), 10).await.must("purge"), 0, "nothing left to purge");
    assert!(present(a, "k4").await, "unexpired records stay");
    assert_eq!(s.purge_expired_idempotency(plus_secs(t0, 100), 10).await.must("purge"), 1, "k4 at its expiry");
    for m in &made {
        assert!(s.get_message(m.workspace_id, m.id).await.must("get").is_some(), "purging keeps the messages");
    }
}
