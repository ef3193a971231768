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

/// Many creates and events at once, which a store may commit together (PostgreSQL writes
/// them in groups): each caller gets its own answer, as if it had written alone, and only
/// what was answered as written is stored. Among them are writes that must fail (an id
/// that exists, a wrong expected status, an unknown message, an event id that exists), and
/// writes that race for one idempotency key or one message.
pub(super) async fn concurrent_writes_each_get_their_own_answer<S: Store + 'static>(s: Arc<S>) {
    const TRIOS: usize = 16;
    let a = WorkspaceId(ulid());
    let existing = message_at(a, now());
    let existing_new = new_message(&existing);
    assert_eq!(s.create_message(&existing_new).await.must("create"), CreateOutcome::Created, "first create");

    // Creates: per trio, one without a key and two racing for one key; and the existing id again.
    let barrier = Arc::new(tokio::sync::Barrier::new(3 * TRIOS + 1));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..3 * TRIOS {
        let (s, barrier) = (Arc::clone(&s), Arc::clone(&barrier));
        tasks.spawn(async move {
            let m = message_at(a, now());
            let mut new = new_message(&m);
            if i % 3 != 0 {
                let key = format!("trio-{}", i / 3);
                new.idempotency = Some(idempotency(a, &key, m.id, m.created_at, plus_secs(m.created_at, 3600)));
            }
            barrier.wait().await;
            (i, m, s.create_message(&new).await)
        });
    }
    let again = (Arc::clone(&s), Arc::clone(&barrier), existing_new.clone());
    let again = tokio::spawn(async move {
        again.1.wait().await;
        again.0.create_message(&again.2).await
    });
    let mut created = Vec::new();
    let mut keyed: Vec<Vec<(MessageId, CreateOutcome)>> = vec![Vec::new(); TRIOS];
    while let Some(joined) = tasks.join_next().await {
        let (i, m, outcome) = joined.unwrap_or_else(|e| panic!("create task failed: {e}"));
        let outcome = outcome.must("concurrent create_message");
        if i % 3 == 0 {
            assert_eq!(outcome, CreateOutcome::Created, "a create without a key");
        } else {
            keyed[i / 3].push((m.id, outcome.clone()));
        }
        if outcome == CreateOutcome::Created {
            created.push(m);
        }
    }
    let again = again.await.unwrap_or_else(|e| panic!("create task failed: {e}"));
    assert!(matches!(again, Err(tidings_core::ports::StoreError::Conflict(_))), "an existing id again: {again:?}");
    for (trio, pair) in keyed.iter().enumerate() {
        let winners: Vec<MessageId> =
            pair.iter().filter(|(_, o)| *o == CreateOutcome::Created).map(|(id, _)| *id).collect();
        assert_eq!(winners.len(), 1, "trio {trio}: exactly one of two creates with one key is Created: {pair:?}");
        let losers_point_at_winner = pair.iter().all(|(_, o)| match o {
            CreateOutcome::Created => true,
            CreateOutcome::Duplicate(record) => record.message_id == winners[0],
        });
        assert!(losers_point_at_winner, "trio {trio}: the duplicate names the winner: {pair:?}");
    }
    assert_eq!(created.len(), 2 * TRIOS, "creates answered Created");
    assert_eq!(message_ids(&*s, a).await.len(), 2 * TRIOS + 1, "messages stored: those Created and the first");

    // Events: per message, Sent and Failed race from Queued (exactly one wins); and writes
    // that must fail: a wrong expected status, an unknown message, an event id that exists.
    let at = plus_secs(now(), 1);
    let mut racing = tokio::task::JoinSet::new();
    for m in &created {
        for event_type in [EventType::Sent, EventType::Failed] {
            let (s, write) = (Arc::clone(&s), event_write(m, event_type, at, None));
            racing.spawn(async move { (write.message.id, write.message.status, s.record_event(write).await) });
        }
    }
    let mut wrong_status = event_write(&existing, EventType::Sent, at, None);
    wrong_status.expected_status = MessageStatus::Deferred;
    let unknown = event_write(&message_at(a, now()), EventType::Sent, at, None);
    let failing = [wrong_status, unknown];
    let mut refused = tokio::task::JoinSet::new();
    for write in failing {
        let s = Arc::clone(&s);
        refused.spawn(async move { s.record_event(write).await });
    }
    let mut won = std::collections::HashMap::new();
    while let Some(joined) = racing.join_next().await {
        let (id, status, result) = joined.unwrap_or_else(|e| panic!("event task failed: {e}"));
        match result {
            Ok(()) => assert!(won.insert(id, status).is_none(), "message {id}: both racing events were written"),
            Err(tidings_core::ports::StoreError::Conflict(_)) => {}
            Err(e) => panic!("message {id}: a racing event failed with {e:?}"),
        }
    }
    let mut refusals = Vec::new();
    while let Some(joined) = refused.join_next().await {
        refusals.push(joined.unwrap_or_else(|e| panic!("event task failed: {e}")));
    }
    assert_eq!(
        refusals.iter().filter(|r| matches!(r, Err(tidings_core::ports::StoreError::Conflict(_)))).count(),
        1,
        "the wrong expected status is refused: {refusals:?}"
    );
    assert_eq!(
        refusals.iter().filter(|r| matches!(r, Err(tidings_core::ports::StoreError::NotFound))).count(),
        1,
        "the unknown message is refused: {refusals:?}"
    );
    assert_eq!(won.len(), created.len(), "one event won per message");
    for m in &created {
        let stored = s.get_message(a, m.id).await.must("get_message").unwrap_or_else(|| panic!("{} is gone", m.id));
        assert_eq!(Some(&stored.status), won.get(&m.id), "message {}: the winner's status is stored", m.id);
        let events = s.list_events(a, m.id, PageRequest::first(10)).await.must("list_events");
        assert_eq!(events.items.len(), 2, "message {}: Queued and the winner's event", m.id);
    }
    let stored = s.get_message(a, existing.id).await.must("get_message");
    assert_eq!(stored.map(|m| m.status), Some(MessageStatus::Queued), "refused events change nothing");

    // An event whose id the message has already is refused, among others that are written.
    let fresh: Vec<Message> = (0..9).map(|_| message_at(a, now())).collect();
    let mut queued_ids = Vec::new();
    for m in &fresh {
        let new = new_message(m);
        queued_ids.push(new.event.id);
        assert_eq!(s.create_message(&new).await.must("create"), CreateOutcome::Created, "create");
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (i, m) in fresh.iter().enumerate() {
        let mut write = event_write(m, EventType::Sent, at, None);
        if i == 0 {
            write.event.id = queued_ids[0];
            write.message.last_event_id = queued_ids[0];
        }
        let s = Arc::clone(&s);
        tasks.spawn(async move { (i, s.record_event(write).await) });
    }
    while let Some(joined) = tasks.join_next().await {
        let (i, result) = joined.unwrap_or_else(|e| panic!("event task failed: {e}"));
        if i == 0 {
            assert!(result.is_err(), "an event whose id the message has is refused, got {result:?}");
        } else {
            result.must("a Sent among others");
        }
    }
    let first = s.get_message(a, fresh[0].id).await.must("get_message");
    assert_eq!(first.map(|m| m.status), Some(MessageStatus::Queued), "the refused event changed nothing");
    for m in &fresh[1..] {
        let stored = s.get_message(a, m.id).await.must("get_message");
        assert_eq!(stored.map(|m| m.status), Some(MessageStatus::Sent), "the others were written");
    }
}
