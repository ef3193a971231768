//! Stores written by an earlier version, read by this one.
//!
//! A storage crate keeps a store made by the server of commit `bb14cf0` (before recipient
//! lists: every message has one `to` and no list) and the manifest of what that server's API
//! answered about each message (`GET /v1/messages` and each message's events, as JSON; see
//! `storage-sled/tests/fixtures/bb14cf0/make.sh`). [`check_store_of_bb14cf0`] opens nothing
//! itself: given the store as this version opened it, it checks that every old message reads
//! as the old server showed it, that `to` filters still find them, and that this version
//! delivers and records events on them and stores messages to several recipients beside
//! them.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::fixtures::{event_write, message_to_several, new_message, recipient_event_write, ulid};
use tidings_core::email::EmailAddress;
use tidings_core::ids::{DomainId, MessageId, WorkspaceId};
use tidings_core::message_search::SearchText;
use tidings_core::model::{EventType, Message, MessageStatus, RecipientKind};
use tidings_core::ports::{CreateOutcome, MessageQuery, PageRequest, Store};

/// The fixtures' clock: after every send time in them, so every waiting message is due.
pub fn after_the_fixtures() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2027-01-01T00:00:00Z").map_or_else(|e| panic!("{e}"), |t| t.with_timezone(&Utc))
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn time(v: &Value, key: &str) -> Option<DateTime<Utc>> {
    text(v, key).map(|t| {
        DateTime::parse_from_rfc3339(t).map_or_else(|e| panic!("manifest {key} {t:?}: {e}"), |t| t.with_timezone(&Utc))
    })
}

fn must<T, E: std::fmt::Debug>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: {e:?}"))
}

/// One old message of the manifest and its events.
struct Old {
    id: MessageId,
    json: Value,
    events: Vec<Value>,
}

fn parse_manifest(manifest: &str) -> Vec<Old> {
    let entries: Vec<Value> = must(serde_json::from_str(manifest), "manifest JSON");
    entries
        .into_iter()
        .map(|entry| {
            let json = entry["message"].clone();
            let id = must(text(&json, "id").unwrap_or_default().parse::<MessageId>(), "manifest message id");
            let events = entry["events"].as_array().cloned().unwrap_or_default();
            Old { id, json, events }
        })
        .collect()
}

/// Checks that `m` is the message the old server described as `old`.
fn check_message(m: &Message, old: &Old) {
    let j = &old.json;
    let what = format!("old message {} ({:?})", old.id, text(j, "subject"));
    assert_eq!(Some(m.to.to_string().as_str()), text(j, "to"), "{what}: to");
    assert_eq!(Some(m.to_field().as_str()), text(j, "to"), "{what}: the API's to");
    assert_eq!(Some(m.status.as_str()), text(j, "status"), "{what}: status");
    assert_eq!(Some(u64::from(m.attempts)), j["attempts"].as_u64(), "{what}: attempts");
    assert_eq!(Some(m.subject.as_str()), text(j, "subject"), "{what}: subject");
    assert_eq!(m.provider_message_id.as_deref(), text(j, "providerMessageId"), "{what}: providerMessageId");
    assert_eq!(m.scheduled_at, time(j, "scheduledAt"), "{what}: scheduledAt");
    assert_eq!(Some(m.created_at), time(j, "createdAt"), "{what}: createdAt");
    assert_eq!(Some(m.from.address.to_string().as_str()), text(j, "fromAddress"), "{what}: from");
    let tags = j["tags"].as_array().cloned().unwrap_or_default();
    assert_eq!(m.extras.tags.len(), tags.len(), "{what}: tags");
    for tag in &tags {
        let (name, value) = (text(tag, "name").unwrap_or_default(), text(tag, "value"));
        assert!(m.extras.has_tag(name, value), "{what}: tag {name}={value:?}");
    }
    let metadata = j["metadata"].as_object().cloned().unwrap_or_default();
    for (key, value) in &metadata {
        assert_eq!(m.extras.metadata.get(key), value.as_str(), "{what}: metadata {key}");
    }
    // The shape of every message before lists: no list, its one recipient its own fields.
    assert!(!m.has_recipient_list(), "{what}: an old message has no recipient list");
    assert_eq!(m.written_headers, None, "{what}: no written headers");
    let list = m.recipient_list();
    assert_eq!(list.len(), 1, "{what}: one recipient");
    let r = &list[0];
    assert_eq!(
        (&r.email, r.kind, r.status, r.attempts, r.next_attempt_at, r.name.is_none()),
        (&m.to, RecipientKind::To, m.status, m.attempts, m.next_attempt_at, true),
        "{what}: its recipient"
    );
    assert_eq!(m.recipient_addresses(), vec![m.to.clone()], "{what}: recipient addresses");
}

/// Checks the events of `old` as the store lists them.
async fn check_events<S: Store>(store: &S, ws: WorkspaceId, old: &Old) {
    let what = format!("events of old message {}", old.id);
    let events = must(store.list_events(ws, old.id, PageRequest::first(200)).await, &what).items;
    assert_eq!(events.len(), old.events.len(), "{what}: how many");
    for (e, j) in events.iter().zip(&old.events) {
        assert_eq!(Some(e.id.to_string().as_str()), text(j, "id"), "{what}: id");
        assert_eq!(Some(format!("{:?}", e.event_type).as_str()), text(j, "type"), "{what}: type");
        assert_eq!(Some(e.occurred_at), time(j, "occurredAt"), "{what}: occurredAt");
        assert_eq!(e.provider_message_id.as_deref(), text(j, "providerMessageId"), "{what}: providerMessageId");
        let d = &j["details"];
        assert_eq!(e.details.attempt.map(u64::from), d["attempt"].as_u64(), "{what}: attempt");
        assert_eq!(e.details.next_attempt_at, time(d, "nextAttemptAt"), "{what}: nextAttemptAt");
        assert_eq!(e.details.scheduled_at, time(d, "scheduledAt"), "{what}: scheduledAt");
        assert_eq!(e.details.response.as_deref(), text(d, "response"), "{what}: response");
        assert_eq!(e.details.bounce_type.map(|b| format!("{b:?}")).as_deref(), text(d, "bounceType"), "{what}: bounce");
        assert_eq!(e.recipient, None, "{what}: an old event names no recipient");
    }
}

fn text_of(json: &serde_json::Value, field: &str) -> String {
    text(json, field).unwrap_or_default().to_owned()
}

async fn listed<S: Store>(
    store: &S,
    ws: WorkspaceId,
    status: Option<MessageStatus>,
    to: Option<&str>,
) -> Vec<MessageId> {
    let to = to.map(|t| must(EmailAddress::parse(t), "address"));
    let query = MessageQuery { status, to, ..MessageQuery::page(PageRequest::first(200)) };
    must(store.list_messages(ws, &query).await, "list_messages").items.iter().map(|m| m.id).collect()
}

/// Runs every check on `store`, which holds what the server of `bb14cf0` wrote, as
/// `manifest` (the JSON kept beside it) describes. Leaves the store changed: call it once.
pub async fn check_store_of_bb14cf0<S: Store>(store: &S, manifest: &str) {
    let old = parse_manifest(manifest);
    assert!(old.len() >= 6, "the manifest lists the old messages");
    let workspaces = must(store.list_workspaces().await, "list_workspaces");
    assert_eq!(workspaces.len(), 1, "the old server made one workspace");
    let ws = workspaces[0].id;

    // Every old message reads as the old server showed it.
    for o in &old {
        let m = must(store.get_message(ws, o.id).await, "get_message").unwrap_or_else(|| panic!("{} is there", o.id));
        check_message(&m, o);
        assert_eq!(must(store.find_message(o.id).await, "find_message").as_ref(), Some(&m), "find_message {}", o.id);
        check_events(store, ws, o).await;
    }
    let ids: Vec<MessageId> = old.iter().map(|o| o.id).collect();
    assert_eq!(listed(store, ws, None, None).await, ids, "the list, newest first, as the old server gave it");
    for o in &old {
        let to = text(&o.json, "to").unwrap_or_default();
        for asked in [to.to_owned(), to.to_uppercase(), to.to_lowercase()] {
            assert_eq!(listed(store, ws, None, Some(&asked)).await, vec![o.id], "to={asked} finds the old message");
        }
        let status = store.get_message(ws, o.id).await.ok().flatten().map(|m| m.status);
        let same: Vec<MessageId> =
            old.iter().filter(|p| text(&p.json, "status") == status.map(MessageStatus::as_str)).map(|p| p.id).collect();
        assert_eq!(listed(store, ws, status, None).await, same, "status={status:?}");
    }
    // A search finds the old messages as it finds new ones: sled indexed them at open,
    // PostgreSQL's migration 0009 at the upgrade.
    for o in &old {
        let subject = text(&o.json, "subject").unwrap_or_default();
        let to = text(&o.json, "to").unwrap_or_default();
        for part in [subject, to] {
            let chars: Vec<char> = part.chars().collect();
            if chars.len() < 3 {
                continue;
            }
            let middle: String = chars[chars.len() / 2 - 1..(chars.len() / 2 + 2).min(chars.len())].iter().collect();
            let Ok(search) = SearchText::parse(&middle.to_uppercase()) else { continue };
            if search.as_str() != middle.to_lowercase() {
                continue;
            }
            let query = MessageQuery { text: Some(search), ..MessageQuery::page(PageRequest::first(200)) };
            let found = must(store.list_messages(ws, &query).await, "list_messages q").items;
            let expected: Vec<MessageId> = old
                .iter()
                .filter(|p| {
                    let texts = [text_of(&p.json, "subject"), text_of(&p.json, "to")];
                    texts.iter().any(|t| t.to_lowercase().contains(&middle.to_lowercase()))
                })
                .map(|p| p.id)
                .collect();
            assert_eq!(found.iter().map(|m| m.id).collect::<Vec<_>>(), expected, "q={middle:?} finds the old messages");
        }
    }

    // This version delivers what waits: the scheduled one (due by now) and the deferred one,
    // the deferred one through the recipient path as the worker's write of a message without
    // a list.
    let now = after_the_fixtures();
    let lease = now + chrono::Duration::minutes(10);
    let claimed = must(store.claim_due_messages(now, lease, 10).await, "claim_due_messages");
    let waiting: Vec<MessageId> = old
        .iter()
        .filter(|o| matches!(text(&o.json, "status"), Some("Queued" | "Scheduled" | "Deferred")))
        .map(|o| o.id)
        .collect();
    let mut claimed_ids: Vec<MessageId> = claimed.iter().map(|m| m.id).collect();
    claimed_ids.sort();
    let mut expected = waiting.clone();
    expected.sort();
    assert_eq!(claimed_ids, expected, "every waiting old message is due");
    assert!(!waiting.is_empty(), "the fixtures have messages waiting");
    for (n, m) in claimed.iter().enumerate() {
        let before = must(store.list_events(ws, m.id, PageRequest::first(200)).await, "list_events").items;
        let sent = if n.is_multiple_of(2) {
            event_write(m, EventType::Sent, now, None)
        } else {
            recipient_event_write(m, 0, EventType::Sent, now, None)
        };
        let mut sent = sent;
        sent.expected_next_attempt_at = Some(lease);
        let after_sent = sent.message.clone();
        assert_eq!(sent.event.recipient, None, "an event of a message without a list names no recipient");
        must(store.record_event(sent.clone()).await, "record Sent on an old message");
        let delivered = recipient_event_write(&after_sent, 0, EventType::Delivered, now, None);
        let end = delivered.message.clone();
        must(store.record_event(delivered.clone()).await, "record Delivered on an old message");
        let read = must(store.get_message(ws, m.id).await, "get_message").unwrap_or_else(|| panic!("{}", m.id));
        assert_eq!(read, end, "an old message delivered by this version");
        assert_eq!(
            (read.status, read.attempts, read.next_attempt_at),
            (MessageStatus::Delivered, m.attempts + 1, None)
        );
        assert!(!read.has_recipient_list(), "delivering it adds no list");
        let events = must(store.list_events(ws, m.id, PageRequest::first(200)).await, "list_events").items;
        let mut expected = before;
        expected.extend([sent.event, delivered.event]);
        assert_eq!(events, expected, "the new events follow the old ones");
    }
    assert!(must(store.claim_due_messages(now, lease, 10).await, "claim").is_empty(), "nothing waits any more");

    // Messages to several recipients beside the old ones; one shares an old recipient.
    let key = must(store.list_api_keys(ws, PageRequest::first(10)).await, "list_api_keys").items[0].id;
    let first_old_to = text(&old[old.len() - 1].json, "to").unwrap_or_default().to_owned();
    let several = message_to_several(
        ws,
        key,
        DomainId(ulid()),
        &["new.one@example.com"],
        &[&first_old_to],
        &["new.two@example.com"],
    );
    let created = must(store.create_message(&new_message(&several)).await, "create a message to several");
    assert_eq!(created, CreateOutcome::Created);
    assert_eq!(must(store.get_message(ws, several.id).await, "get").as_ref(), Some(&several), "it round-trips");
    assert_eq!(
        listed(store, ws, None, Some(&first_old_to)).await,
        vec![several.id, old[old.len() - 1].id],
        "an old recipient finds the old message and the new one naming it in cc"
    );
    assert_eq!(listed(store, ws, None, Some("new.two@example.com")).await, vec![several.id], "by its bcc");
    let all = listed(store, ws, None, None).await;
    assert_eq!(all.len(), old.len() + 1, "old and new side by side");
    assert_eq!(all[0], several.id, "the new one first");
}
