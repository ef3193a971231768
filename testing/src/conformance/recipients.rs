//! Messages to several recipients (contract §10, docs/decisions.md "Several recipients"): the
//! recipient list and the events written with the message round-trip, a `to` filter finds a
//! message by any of its recipients and once, the aggregate status and due time of the
//! message are what the store indexes, and events about two recipients of one message never
//! overwrite each other (every such write expects the last event it read).

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{Lister, Must, assert_conflict, walk_all_sizes};
use crate::fixtures::{
    email, message, message_to_several, new_message, new_message_suppressing, now, plus_secs, recipient_event_write,
    ulid,
};
use tidings_core::email::Mailbox;
use tidings_core::ids::{ApiKeyId, DomainId, MessageId, WorkspaceId};
use tidings_core::model::{EventType, Message, MessageEvent, MessageStatus, WrittenHeaders};
use tidings_core::ports::{CreateOutcome, MessageQuery, NewBatch, PageRequest, Store, StoreError};

fn ids() -> (WorkspaceId, ApiKeyId, DomainId) {
    (WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()))
}

async fn create<S: Store>(s: &S, new: &tidings_core::ports::NewMessage) {
    assert_eq!(s.create_message(new).await.must("create_message"), CreateOutcome::Created, "create_message");
}

async fn stored<S: Store>(s: &S, m: &Message) -> Message {
    s.get_message(m.workspace_id, m.id).await.must("get_message").expect("the message is stored")
}

async fn timeline<S: Store>(s: &S, m: &Message) -> Vec<MessageEvent> {
    s.list_events(m.workspace_id, m.id, PageRequest::first(200)).await.must("list_events").items
}

/// Records the event about recipient `index` on the message as stored, as the worker does
/// (expecting the last event it read), and returns the message after it.
async fn recipient_event<S: Store>(
    s: &S,
    m: &Message,
    index: usize,
    event_type: EventType,
    next_attempt_at: Option<DateTime<Utc>>,
) -> Message {
    let read = stored(s, m).await;
    let write = recipient_event_write(&read, index, event_type, plus_secs(read.updated_at, 1), next_attempt_at);
    let after = write.message.clone();
    s.record_event(write).await.must(&format!("record_event {event_type:?} of recipient {index}"));
    assert_eq!(stored(s, m).await, after, "the message after {event_type:?} of recipient {index}");
    after
}

fn query(status: Option<MessageStatus>, to: Option<&str>, limit: usize) -> MessageQuery {
    MessageQuery { status, to: to.map(email), ..MessageQuery::page(PageRequest::first(limit)) }
}

async fn listed<S: Store>(s: &S, ws: WorkspaceId, status: Option<MessageStatus>, to: Option<&str>) -> Vec<MessageId> {
    s.list_messages(ws, &query(status, to, 200)).await.must("list_messages").items.iter().map(|m| m.id).collect()
}

fn to_lister<S: Store + 'static>(s: &Arc<S>, ws: WorkspaceId, to: &'static str) -> Lister<MessageId, Message> {
    let s = Arc::clone(s);
    Box::new(move |page| {
        let s = Arc::clone(&s);
        Box::pin(
            async move { s.list_messages(ws, &MessageQuery { to: Some(email(to)), ..MessageQuery::page(page) }).await },
        )
    })
}

pub(super) async fn messages_with_recipients_round_trip_with_their_events<S: Store + 'static>(s: Arc<S>) {
    let (ws, key, dom) = ids();
    let m = message_to_several(
        ws,
        key,
        dom,
        &["Ann Example <ann@example.com>", "bob@example.com"],
        &["Carol <Carol@Example.org>"],
        &["dave@example.net", "erin@example.net"],
    );
    let mut m = m;
    m.written_headers = Some(WrittenHeaders {
        to: vec![Mailbox::parse("Team <team@example.com>").expect("mailbox")],
        cc: vec![Mailbox::parse("undisclosed@example.com").expect("mailbox")],
    });
    // bob and erin are suppressed: their `Suppressed` events follow the `Queued` one.
    let new = new_message_suppressing(&m, &[1, 4]);
    create(&*s, &new).await;
    let written = &new.message;
    assert_eq!(written.status, MessageStatus::Queued, "the fixture: the others are still queued");
    assert_eq!(stored(&*s, written).await, *written, "get_message gives the recipients and written headers back");
    assert_eq!(s.find_message(written.id).await.must("find_message"), Some(written.clone()), "find_message");
    let listed = s.list_messages(ws, &query(None, None, 10)).await.must("list_messages").items;
    assert_eq!(listed, vec![written.clone()], "list_messages gives the recipients back");
    let mut expected = vec![new.event.clone()];
    expected.extend(new.recipient_events.iter().cloned());
    assert_eq!(timeline(&*s, written).await, expected, "Queued, then each recipient's Suppressed, in order");
    let about: Vec<_> = expected.iter().map(|e| e.recipient.as_ref().map(ToString::to_string)).collect();
    assert_eq!(
        about,
        [None, Some("bob@example.com".to_owned()), Some("erin@example.net".to_owned())],
        "the recipient events name their recipient"
    );
    let page = s.list_events(ws, written.id, PageRequest { limit: 1, cursor: Some(new.event.id) }).await;
    assert_eq!(page.must("list_events after the Queued").items, expected[1..2], "the timeline pages past the Queued");

    // A batch writes the recipient events of each of its messages too.
    let plain = message(ws, key, dom);
    let several = message_to_several(ws, key, dom, &["fay@example.com", "gus@example.com"], &[], &[]);
    let batch = NewBatch {
        messages: vec![new_message(&plain), new_message_suppressing(&several, &[0])],
        idempotency: None,
        accepted_at: now(),
    };
    assert_eq!(s.create_messages(&batch).await.must("create_messages"), CreateOutcome::Created, "create_messages");
    for new in &batch.messages {
        assert_eq!(stored(&*s, &new.message).await, new.message, "a batch message round-trips");
        let mut expected = vec![new.event.clone()];
        expected.extend(new.recipient_events.iter().cloned());
        assert_eq!(timeline(&*s, &new.message).await, expected, "a batch message's timeline");
    }
    assert_eq!(
        listed_ids(&*s, ws, Some("gus@example.com")).await,
        vec![several.id],
        "a batch message is found by its second recipient"
    );
}

async fn listed_ids<S: Store>(s: &S, ws: WorkspaceId, to: Option<&str>) -> Vec<MessageId> {
    listed(s, ws, None, to).await
}

pub(super) async fn recipients_are_found_by_any_address_once<S: Store + 'static>(s: Arc<S>) {
    let (ws, key, dom) = ids();
    let other_ws = WorkspaceId(ulid());
    // Oldest first; lists are newest first.
    let plain = {
        let mut m = message(ws, key, dom);
        m.to = email("Ann@Example.com");
        m
    };
    let several = message_to_several(
        ws,
        key,
        dom,
        &["ann@example.com", "Bob <BOB@example.com>"],
        &["carol@example.org"],
        &["Dave@Example.NET"],
    );
    let only_cc = message_to_several(ws, key, dom, &["erin@example.com"], &["carol@example.org"], &[]);
    let named_alone = message_to_several(ws, key, dom, &["Fay <fay@example.com>"], &[], &[]);
    let elsewhere = message_to_several(other_ws, key, dom, &["zed@example.com"], &["carol@example.org"], &[]);
    for m in [&plain, &several, &only_cc, &named_alone, &elsewhere] {
        create(&*s, &new_message(m)).await;
    }
    let cases: [(&str, Vec<MessageId>); 9] = [
        ("ann@example.com", vec![several.id, plain.id]),
        ("ANN@EXAMPLE.COM", vec![several.id, plain.id]),
        ("bob@example.com", vec![several.id]),
        ("Carol@Example.org", vec![only_cc.id, several.id]),
        ("dave@example.net", vec![several.id]),
        ("DAVE@example.net", vec![several.id]),
        ("erin@example.com", vec![only_cc.id]),
        ("fay@example.com", vec![named_alone.id]),
        ("nobody@example.com", vec![]),
    ];
    for (to, expected) in cases {
        assert_eq!(listed(&*s, ws, None, Some(to)).await, expected, "to={to}: each message with it, once");
    }
    walk_all_sizes(
        "list_messages to=carol",
        &to_lister(&s, ws, "carol@example.org"),
        |m| m.id,
        &[only_cc.id, several.id],
    )
    .await;
    walk_all_sizes("list_messages to=ann", &to_lister(&s, ws, "ann@example.com"), |m| m.id, &[several.id, plain.id])
        .await;
    assert_eq!(listed(&*s, other_ws, None, Some("carol@example.org")).await, vec![elsewhere.id], "other workspace");
    assert_eq!(listed(&*s, other_ws, None, Some("ann@example.com")).await, vec![], "workspaces stay apart");

    // Combined with other filters, and after the status moved.
    let moved = recipient_event(&*s, &several, 3, EventType::Sent, None).await;
    assert_eq!(moved.status, MessageStatus::Sent, "a first attempt makes the message Sent");
    assert_eq!(listed(&*s, ws, Some(MessageStatus::Sent), Some("carol@example.org")).await, vec![several.id], "Sent");
    assert_eq!(
        listed(&*s, ws, Some(MessageStatus::Queued), Some("carol@example.org")).await,
        vec![only_cc.id],
        "Queued"
    );
    assert_eq!(listed(&*s, ws, Some(MessageStatus::Queued), Some("dave@example.net")).await, vec![], "moved on");
    let by_key = MessageQuery { sent_by: Some(key), ..query(None, Some("bob@example.com"), 10) };
    let items = s.list_messages(ws, &by_key).await.must("list by key and to").items;
    assert_eq!(items, vec![moved], "to and sent_by together");
    let by_other_key = MessageQuery { sent_by: Some(ApiKeyId(ulid())), ..query(None, Some("bob@example.com"), 10) };
    assert!(s.list_messages(ws, &by_other_key).await.must("list by key").items.is_empty(), "another key");
}

pub(super) async fn partial_outcomes_make_the_aggregate_status<S: Store + 'static>(s: Arc<S>) {
    let (ws, key, dom) = ids();
    // (what happens to each of two recipients after Sent, the message's status in the end)
    let plans = [
        ([EventType::Delivered, EventType::Bounced], MessageStatus::PartiallyDelivered),
        ([EventType::Delivered, EventType::Delivered], MessageStatus::Delivered),
        ([EventType::Bounced, EventType::Bounced], MessageStatus::Bounced),
        ([EventType::Bounced, EventType::Delivered], MessageStatus::PartiallyDelivered),
    ];
    let mut ends = Vec::new();
    for (outcomes, end) in plans {
        let m = message_to_several(ws, key, dom, &["ann@example.com"], &["bob@example.com"], &[]);
        create(&*s, &new_message(&m)).await;
        let m = recipient_event(&*s, &m, 0, EventType::Sent, None).await;
        let m = recipient_event(&*s, &m, 1, EventType::Sent, None).await;
        let m = recipient_event(&*s, &m, 0, outcomes[0], None).await;
        assert_eq!(m.status, MessageStatus::Sent, "one recipient settled, one in flight: Sent");
        assert_eq!(listed(&*s, ws, Some(MessageStatus::Sent), Some("bob@example.com")).await[0], m.id, "indexed Sent");
        let m = recipient_event(&*s, &m, 1, outcomes[1], None).await;
        assert_eq!(m.status, end, "{outcomes:?}");
        assert_eq!(m.next_attempt_at, None, "a settled message is not due");
        let events: Vec<_> = timeline(&*s, &m).await.iter().map(|e| e.event_type).collect();
        let expected = [EventType::Queued, EventType::Sent, EventType::Sent, outcomes[0], outcomes[1]];
        assert_eq!(events, expected, "every recipient event is on the timeline");
        ends.push((m.id, end));
    }
    for status in MessageStatus::ALL {
        let expected: Vec<MessageId> = ends.iter().rev().filter(|(_, s)| *s == status).map(|(id, _)| *id).collect();
        assert_eq!(listed(&*s, ws, Some(status), None).await, expected, "status={status:?}: the aggregates");
    }
    let far = plus_secs(now(), 86_400 * 365);
    assert!(s.claim_due_messages(far, plus_secs(far, 60), 10).await.must("claim").is_empty(), "nothing is due");
    // Settled, so retention purges them, PartiallyDelivered ones included.
    assert_eq!(s.purge_message_content(far, 10).await.must("purge_message_content"), ends.len(), "all purged");
    for (id, status) in ends {
        let m = s.get_message(ws, id).await.must("get_message").expect("the message stays");
        assert_eq!((m.status, m.recipients.len()), (status, 2), "the record stays, recipients included");
        assert!(!m.has_content(), "the bodies are purged");
        assert!(timeline(&*s, &m).await.is_empty(), "the timeline is purged");
    }
}

pub(super) async fn racing_recipient_events_are_all_kept<S: Store + 'static>(s: Arc<S>) {
    let (ws, key, dom) = ids();
    let m = message_to_several(ws, key, dom, &["ann@example.com", "bob@example.com"], &[], &[]);
    create(&*s, &new_message(&m)).await;
    let m = recipient_event(&*s, &m, 0, EventType::Sent, None).await;
    let read = recipient_event(&*s, &m, 1, EventType::Sent, None).await;

    // Two writers read the same message; each records an outcome for its own recipient.
    let first = recipient_event_write(&read, 0, EventType::Delivered, plus_secs(read.updated_at, 1), None);
    let second = recipient_event_write(&read, 1, EventType::Bounced, plus_secs(read.updated_at, 1), None);
    s.record_event(first.clone()).await.must("the first write");
    let lost = s.record_event(second.clone()).await;
    assert_conflict(lost, "the second write from the same read");
    assert_eq!(stored(&*s, &read).await, first.message, "the refused write changed nothing");
    // The loser reads again and applies its event to what it finds.
    let fresh = stored(&*s, &read).await;
    let retry = recipient_event_write(&fresh, 1, EventType::Bounced, plus_secs(fresh.updated_at, 1), None);
    s.record_event(retry.clone()).await.must("the retry");
    let end = stored(&*s, &read).await;
    assert_eq!(end, retry.message, "the retry's message");
    let statuses: Vec<_> = end.recipients.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [MessageStatus::Delivered, MessageStatus::Bounced], "both recipients' outcomes are kept");
    assert_eq!(end.status, MessageStatus::PartiallyDelivered, "the aggregate of both");
    let events = timeline(&*s, &end).await;
    let tail: Vec<_> = events[events.len() - 2..].iter().map(|e| (e.event_type, e.id)).collect();
    assert_eq!(
        tail,
        [(EventType::Delivered, first.event.id), (EventType::Bounced, retry.event.id)],
        "both events end the timeline, the loser's after"
    );
    assert!(!events.iter().any(|e| e.id == second.event.id), "the refused event was not written");
    assert_eq!(listed(&*s, ws, Some(MessageStatus::PartiallyDelivered), None).await, vec![end.id], "status index");

    // The same, the two writes sent at once from two tasks: exactly one wins.
    let m = message_to_several(ws, key, dom, &["ann@example.com", "bob@example.com"], &[], &[]);
    create(&*s, &new_message(&m)).await;
    let m = recipient_event(&*s, &m, 0, EventType::Sent, None).await;
    let read = recipient_event(&*s, &m, 1, EventType::Sent, None).await;
    let writes = [
        recipient_event_write(&read, 0, EventType::Delivered, plus_secs(read.updated_at, 1), None),
        recipient_event_write(&read, 1, EventType::Bounced, plus_secs(read.updated_at, 1), None),
    ];
    let tasks = writes.clone().map(|write| {
        let s = Arc::clone(&s);
        tokio::spawn(async move { s.record_event(write).await })
    });
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.expect("a writer task"));
    }
    let won: Vec<usize> = (0..2).filter(|i| outcomes[*i].is_ok()).collect();
    assert_eq!(won.len(), 1, "exactly one of two writes from one read wins: {outcomes:?}");
    let lost = 1 - won[0];
    assert_conflict(outcomes[lost].clone(), "the other write");
    assert_eq!(stored(&*s, &read).await, writes[won[0]].message, "the winner's message");
    let fresh = stored(&*s, &read).await;
    let retry =
        recipient_event_write(&fresh, lost, writes[lost].event.event_type, plus_secs(fresh.updated_at, 1), None);
    s.record_event(retry).await.must("the loser's retry");
    let end = stored(&*s, &read).await;
    let statuses: Vec<_> = end.recipients.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [MessageStatus::Delivered, MessageStatus::Bounced], "both outcomes are kept");
    let types: Vec<_> = timeline(&*s, &end).await.iter().map(|e| e.event_type).collect();
    assert_eq!(types.len(), 5, "Queued, two Sent and both outcomes: {types:?}");
    assert!(types.contains(&EventType::Delivered) && types.contains(&EventType::Bounced), "{types:?}");
}

pub(super) async fn concurrent_recipient_events_are_all_kept<S: Store + 'static>(s: Arc<S>) {
    const RECIPIENTS: usize = 5;
    let (ws, key, dom) = ids();
    let to: Vec<String> = (0..RECIPIENTS).map(|i| format!("r{i}@example.com")).collect();
    let to: Vec<&str> = to.iter().map(String::as_str).collect();
    let m = message_to_several(ws, key, dom, &to, &[], &[]);
    create(&*s, &new_message(&m)).await;
    // Every recipient gets its attempt and its outcome from a task of its own, all at once:
    // each write expects the last event it read and, on a conflict, reads again.
    let mut tasks = Vec::new();
    for index in 0..RECIPIENTS {
        let (s, m) = (Arc::clone(&s), m.clone());
        tasks.push(tokio::spawn(async move {
            let outcome = expected_event(index);
            let mut conflicts = 0;
            for event_type in [EventType::Sent, outcome] {
                loop {
                    let read = stored(&*s, &m).await;
                    let write = recipient_event_write(&read, index, event_type, now(), None);
                    // Let the others read the same message before this one writes.
                    tokio::task::yield_now().await;
                    match s.record_event(write).await {
                        Ok(()) => break,
                        Err(StoreError::Conflict(_)) => conflicts += 1,
                        Err(e) => panic!("record_event of recipient {index}: {e:?}"),
                    }
                    assert!(conflicts < 1000, "recipient {index}: the conflicts do not end");
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("a writer task");
    }
    let end = stored(&*s, &m).await;
    let statuses: Vec<_> = end.recipients.iter().map(|r| r.status).collect();
    let expected: Vec<_> = (0..RECIPIENTS)
        .map(|i| if i.is_multiple_of(2) { MessageStatus::Delivered } else { MessageStatus::Bounced })
        .collect();
    assert_eq!(statuses, expected, "every recipient's outcome is kept");
    assert!(end.recipients.iter().all(|r| r.attempts == 1), "one attempt each: {:?}", end.recipients);
    assert_eq!(end.status, MessageStatus::PartiallyDelivered, "the aggregate");
    let events = timeline(&*s, &end).await;
    assert_eq!(events.len(), 1 + 2 * RECIPIENTS, "Queued, then a Sent and an outcome per recipient");
    assert!(events.windows(2).all(|w| w[0].id < w[1].id), "the timeline is in id order");
    assert_eq!(events.last().map(|e| e.id), Some(end.last_event_id), "the message's last event ends the timeline");
    for (index, address) in to.iter().enumerate() {
        let mine: Vec<_> =
            events.iter().filter(|e| e.recipient == Some(email(address))).map(|e| e.event_type).collect();
        assert_eq!(mine, [EventType::Sent, expected_event(index)], "recipient {index}'s events, in order");
    }
}

fn expected_event(index: usize) -> EventType {
    if index.is_multiple_of(2) { EventType::Delivered } else { EventType::Bounced }
}

pub(super) async fn a_suppressed_recipient_is_settled_and_the_others_stay_due<S: Store + 'static>(s: Arc<S>) {
    let (ws, key, dom) = ids();
    let m = message_to_several(ws, key, dom, &["ann@example.com", "bob@example.com"], &["carol@example.org"], &[]);
    let new = new_message_suppressing(&m, &[1]);
    create(&*s, &new).await;
    let m = new.message.clone();
    assert_eq!(m.recipients[1].status, MessageStatus::Suppressed, "the fixture");
    assert_eq!(m.status, MessageStatus::Queued, "the others are still to go");
    assert_eq!(listed(&*s, ws, Some(MessageStatus::Queued), Some("bob@example.com")).await, vec![m.id], "indexed");
    let events = timeline(&*s, &m).await;
    assert_eq!(events.len(), 2, "Queued and Suppressed");
    assert_eq!(
        (events[1].event_type, events[1].recipient.clone()),
        (EventType::Suppressed, Some(email("bob@example.com")))
    );

    let at = m.next_attempt_at.expect("a queued message is due");
    let lease = plus_secs(at, 600);
    let claimed = s.claim_due_messages(at, lease, 10).await.must("claim");
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), vec![m.id], "the message is due for the others");
    assert_eq!(claimed[0].recipients, m.recipients, "the claim leaves the recipients as they are");
    let mut current = claimed[0].clone();
    for index in [0, 2] {
        current = recipient_event(&*s, &current, index, EventType::Sent, None).await;
        current = recipient_event(&*s, &current, index, EventType::Delivered, None).await;
    }
    assert_eq!(current.status, MessageStatus::PartiallyDelivered, "two delivered, one suppressed");
    assert_eq!(current.next_attempt_at, None, "nothing is due any more");
    assert!(s.claim_due_messages(plus_secs(lease, 1), plus_secs(lease, 60), 10).await.must("claim").is_empty());
}

pub(super) async fn the_due_index_follows_the_aggregate_next_attempt<S: Store + 'static>(s: Arc<S>) {
    let (ws, key, dom) = ids();
    let m = message_to_several(ws, key, dom, &["ann@example.com", "bob@example.com"], &[], &[]);
    create(&*s, &new_message(&m)).await;
    let t0 = m.next_attempt_at.expect("due at creation");
    let at = |secs: i64| plus_secs(t0, secs);
    let claim = |now: DateTime<Utc>| {
        let s = Arc::clone(&s);
        async move {
            s.claim_due_messages(now, plus_secs(now, 100), 10)
                .await
                .must("claim")
                .into_iter()
                .map(|c| c.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(s.count_pending_messages(t0).await.must("count").due, 1, "due at creation");
    let claimed = claim(at(0)).await;
    assert_eq!(claimed, vec![m.id], "claimed at its time");
    let lease = at(100);
    let current = stored(&*s, &m).await;
    assert_eq!(current.next_attempt_at, Some(lease), "leased");

    let current = recipient_event(&*s, &current, 0, EventType::Sent, None).await;
    let current = recipient_event(&*s, &current, 1, EventType::Sent, None).await;
    let current = recipient_event(&*s, &current, 0, EventType::Deferred, Some(at(1000))).await;
    assert_eq!(current.status, MessageStatus::Sent, "one deferred, one in flight: Sent");
    assert_eq!(current.next_attempt_at, Some(lease), "a recipient in flight keeps the lease");
    let current = recipient_event(&*s, &current, 1, EventType::Deferred, Some(at(500))).await;
    assert_eq!(current.status, MessageStatus::Deferred, "every unsettled recipient deferred");
    assert_eq!(current.next_attempt_at, Some(at(500)), "the earliest retry among the recipients");
    assert_eq!(listed(&*s, ws, Some(MessageStatus::Deferred), None).await, vec![m.id], "indexed Deferred");

    assert!(claim(at(499)).await.is_empty(), "not due before the earliest retry (nor under the old lease)");
    let pending = s.count_pending_messages(at(499)).await.must("count");
    assert_eq!((pending.total, pending.due), (1, 0), "pending, not yet due");
    assert_eq!(claim(at(500)).await, vec![m.id], "due at the earliest retry");
    let current = stored(&*s, &m).await;
    let current = recipient_event(&*s, &current, 1, EventType::Sent, None).await;
    let current = recipient_event(&*s, &current, 1, EventType::Delivered, None).await;
    assert_eq!(current.next_attempt_at, Some(at(1000)), "then the other recipient's retry time");
    assert!(claim(at(999)).await.is_empty(), "not due before it");
    assert_eq!(claim(at(1000)).await, vec![m.id], "due at it");
    let current = stored(&*s, &m).await;
    let current = recipient_event(&*s, &current, 0, EventType::Sent, None).await;
    let current = recipient_event(&*s, &current, 0, EventType::Bounced, None).await;
    assert_eq!((current.status, current.next_attempt_at), (MessageStatus::PartiallyDelivered, None), "settled");
    assert!(claim(at(100_000)).await.is_empty(), "a settled message is never due");
    assert_eq!(s.count_pending_messages(at(100_000)).await.must("count").total, 0, "nothing pending");
}
