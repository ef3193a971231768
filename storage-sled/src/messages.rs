//! Messages, their timelines, their secondary indexes and idempotency records.
//!
//! A message is `MESSAGE ‖ ws ‖ id`, its content (bodies, custom headers, attachments) apart
//! under `MESSAGE_CONTENT ‖ ws ‖ id` (`content.rs`). Three secondary indexes name it by
//! status, normalized recipient and sending key (`bucket ‖ id`, empty values), and the
//! trigram index (`search_index.rs`) by the trigrams of its subject and recipients; how a
//! list uses them is in `message_list.rs`.
//!
//! `find_message` reads the global id index (`MESSAGE_BY_ID`), written with the message;
//! stores made before it get it built once at open ([`build_id_index`]).
//!
//! Writes are ordered so that a reader, which takes no lock, never sees a message before its
//! event and index entries exist, nor an idempotency record before its message. The trigram
//! entries go in first of all, before the writer lock is taken and outside the redo record
//! (`search_index.rs` says why that is safe).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sled::{IVec, Tree};
use tidings_core::ids::{EventId, MessageId, WorkspaceId};
use tidings_core::model::{IdempotencyKey, IdempotencyRecord, Message, MessageEvent};
use tidings_core::ports::{
    CreateOutcome, EventWrite, MessageQuery, MessageStore, NewBatch, NewMessage, Page, PageRequest, PendingMessages,
    StoreError, StoreResult,
};

use crate::SledStore;
use crate::codec::{bad_key, decode, encode, sled_error};
use crate::content;
use crate::db::{Batch, Order, get, page, prefix_end};
use crate::layout::{self, Key};
use crate::queue::{self, DueRecord};
use crate::search_index;
use crate::webhooks::queue_deliveries;

/// The index buckets a message is in: by status, by recipient, by key.
fn buckets(m: &Message) -> [Vec<u8>; 3] {
    let ws = m.workspace_id.to_bytes();
    [
        Key::new(layout::MESSAGE_BY_STATUS).id(ws).byte(layout::status_code(m.status)).0,
        Key::new(layout::MESSAGE_BY_TO).id(ws).text(&m.to.normalized()).0,
        Key::new(layout::MESSAGE_BY_KEY).id(ws).id(m.api_key_id.to_bytes()).0,
    ]
}

/// The `to` index entries of a message's other recipients (cc and bcc included), beside the
/// one [`buckets`] gives its first: written once with the message, since its recipients never
/// change, so that a `to` filter finds it by any of them.
fn other_recipient_buckets(m: &Message) -> Vec<Vec<u8>> {
    if !m.has_recipient_list() {
        return Vec::new();
    }
    let ws = m.workspace_id.to_bytes();
    let first = m.to.normalized();
    let mut seen = std::collections::HashSet::from([first]);
    m.recipients
        .iter()
        .map(|r| r.email.normalized())
        .filter(|address| seen.insert(address.clone()))
        .map(|address| Key::new(layout::MESSAGE_BY_TO).id(ws).text(&address).0)
        .collect()
}

fn entry(bucket: &[u8], id: MessageId) -> Vec<u8> {
    [bucket, &id.to_bytes()].concat()
}

impl DueRecord for Message {
    const DUE_TAG: u8 = layout::MESSAGE_DUE;
    const WHAT: &'static str = "message";

    fn record_key(ws: WorkspaceId, id: [u8; 16]) -> Vec<u8> {
        layout::message(ws, MessageId::from_bytes(id)).0
    }

    fn due_key(&self, at: DateTime<Utc>) -> Vec<u8> {
        layout::message_due(at, self.workspace_id, self.id).0
    }

    fn next_attempt_at(&mut self) -> &mut Option<DateTime<Utc>> {
        &mut self.next_attempt_at
    }
}

/// What `create_message` writes, encoded before the writer lock is taken.
struct Encoded {
    message_key: Vec<u8>,
    message: Vec<u8>,
    content: Option<(Vec<u8>, Vec<u8>)>,
    /// The first event and those about single recipients, keyed.
    events: Vec<(Vec<u8>, Vec<u8>)>,
    idempotency: Option<(Vec<u8>, Vec<u8>)>,
    deliveries: Vec<Vec<u8>>,
    /// The search index's keys (`search_index.rs`), inserted before the writer lock is taken
    /// ([`search_index::insert_entries`]).
    trigrams: Vec<Vec<u8>>,
}

fn encode_new(new: &NewMessage) -> StoreResult<Encoded> {
    let m = &new.message;
    let (record, content) = content::split(m);
    Ok(Encoded {
        message_key: layout::message(m.workspace_id, m.id).0,
        message: encode(&record)?,
        content: content::encode_content(&content)?.map(|bytes| (content::key(m), bytes)),
        events: std::iter::once(&new.event)
            .chain(&new.recipient_events)
            .map(|e| Ok((layout::events(m.workspace_id, m.id).id(e.id.to_bytes()).0, encode(e)?)))
            .collect::<StoreResult<_>>()?,
        idempotency: match &new.idempotency {
            Some(r) => Some((layout::idempotency(r.workspace_id, r.key.as_str()).0, encode(r)?)),
            None => None,
        },
        deliveries: new.webhook_deliveries.iter().map(encode).collect::<StoreResult<_>>()?,
        trigrams: search_index::entries(m),
    })
}

/// What [`take_key`] found for an idempotency key: free to take (the writes that take it,
/// staged by [`stage_key`]), or held by a record that has not expired.
enum KeyClaim {
    /// The key is free (or held by an expired record, whose expiry entry goes).
    Free(TakenKey),
    /// The key is held; nothing was staged.
    Held(IdempotencyRecord),
}

/// The writes that take an idempotency key.
struct TakenKey {
    key: Vec<u8>,
    value: Vec<u8>,
    expiry: Vec<u8>,
    stale_expiry: Option<Vec<u8>>,
}

/// Takes the idempotency key for `record` (encoded as `key`, `value`) unless it is held and
/// unexpired at `at`. Under the writer lock: of two racing requests with one key, the second
/// sees the first's record.
fn take_key(
    tree: &Tree,
    record: &IdempotencyRecord,
    key: Vec<u8>,
    value: Vec<u8>,
    at: DateTime<Utc>,
) -> StoreResult<KeyClaim> {
    let mut stale_expiry = None;
    if let Some(existing) = get::<IdempotencyRecord>(tree, &key, "idempotency record")? {
        if existing.expires_at > at {
            return Ok(KeyClaim::Held(existing));
        }
        stale_expiry =
            Some(layout::idempotency_expiry(existing.expires_at, record.workspace_id, record.key.as_str()).0);
    }
    let expiry = layout::idempotency_expiry(record.expires_at, record.workspace_id, record.key.as_str());
    Ok(KeyClaim::Free(TakenKey { key, value, expiry: expiry.0, stale_expiry }))
}

/// Stages one new message with its event, index and queue entries and webhook deliveries.
fn stage_message(tree: &Tree, batch: &mut Batch, new: &NewMessage, enc: Encoded) -> StoreResult<()> {
    let m = &new.message;
    if tree.contains_key(&enc.message_key).map_err(sled_error)? {
        return Err(StoreError::Conflict(format!("message {} exists", m.id)));
    }
    queue_deliveries(tree, batch, &new.webhook_deliveries, enc.deliveries)?;
    for (key, value) in enc.events {
        batch.insert(key, value);
    }
    batch.insert(layout::message_by_id(m.id).0, &m.workspace_id.to_bytes()[..]);
    batch.insert(layout::message_purge(m.id).0, &m.workspace_id.to_bytes()[..]);
    for bucket in buckets(m).into_iter().chain(other_recipient_buckets(m)) {
        batch.insert(entry(&bucket, m.id), &[]);
    }
    if let Some(at) = m.next_attempt_at {
        batch.insert(m.due_key(at), &[]);
    }
    if let Some((key, value)) = enc.content {
        batch.insert(key, value);
    }
    batch.insert(enc.message_key, enc.message);
    Ok(())
}

/// The events a create writes, with their workspace, for the feed.
fn written_events(new: &NewMessage) -> impl Iterator<Item = (WorkspaceId, &MessageEvent)> {
    std::iter::once(&new.event).chain(&new.recipient_events).map(|e| (new.message.workspace_id, e))
}

/// Stages the idempotency record after the messages it names.
fn stage_key(batch: &mut Batch, taken: TakenKey) {
    let TakenKey { key, value, expiry, stale_expiry } = taken;
    if let Some(stale) = stale_expiry {
        batch.remove(stale);
    }
    batch.insert(expiry, &[]);
    batch.insert(key, value);
}

#[async_trait]
impl MessageStore for SledStore {
    // sled locks its directory: one process at a time.
    fn is_exclusive(&self) -> bool {
        true
    }

    // A failed or stalled flush to disk (`flusher.rs`): only a restart mends it.
    fn failure(&self) -> Option<std::sync::Arc<str>> {
        self.inner.failure()
    }

    async fn create_message(&self, new: &NewMessage) -> StoreResult<CreateOutcome> {
        let mut enc = encode_new(new)?;
        let idempotency = enc.idempotency.take();
        let trigrams = std::mem::take(&mut enc.trigrams);
        let message_key = enc.message_key.clone();
        search_index::insert_entries(self.inner.tree()?, &trigrams)?;
        let m = &new.message;
        let outcome = self
            .inner
            .write_durable(|tree, batch| {
                let mut taken = None;
                if let (Some(record), Some((key, value))) = (&new.idempotency, idempotency) {
                    match take_key(tree, record, key, value, m.created_at)? {
                        KeyClaim::Free(t) => taken = Some(t),
                        KeyClaim::Held(existing) => return Ok(CreateOutcome::Duplicate(existing)),
                    }
                }
                stage_message(tree, batch, new, enc)?;
                let commit = self.inner.next_commit()?;
                crate::event_feed::stage(batch, commit, written_events(new));
                crate::activity::stage(tree, batch, [&new.activity])?;
                if let Some(t) = taken {
                    stage_key(batch, t);
                }
                Ok(CreateOutcome::Created)
            })
            .await?;
        if matches!(outcome, CreateOutcome::Duplicate(_)) {
            search_index::remove_entries(self.inner.tree()?, &message_key, &trigrams)?;
        }
        Ok(outcome)
    }

    async fn create_messages(&self, new: &NewBatch) -> StoreResult<CreateOutcome> {
        let mut encoded = new.messages.iter().map(encode_new).collect::<StoreResult<Vec<_>>>()?;
        let idempotency = match &new.idempotency {
            Some(r) => Some((layout::idempotency(r.workspace_id, r.key.as_str()).0, encode(r)?)),
            None => None,
        };
        let trigrams: Vec<(Vec<u8>, Vec<Vec<u8>>)> =
            encoded.iter_mut().map(|enc| (enc.message_key.clone(), std::mem::take(&mut enc.trigrams))).collect();
        for (_, entries) in &trigrams {
            search_index::insert_entries(self.inner.tree()?, entries)?;
        }
        // One writer-lock section and one sled batch, then one group commit: all or nothing.
        let outcome = self
            .inner
            .write_durable(|tree, batch| {
                let mut taken = None;
                if let (Some(record), Some((key, value))) = (&new.idempotency, idempotency) {
                    match take_key(tree, record, key, value, new.accepted_at)? {
                        KeyClaim::Free(t) => taken = Some(t),
                        KeyClaim::Held(existing) => return Ok(CreateOutcome::Duplicate(existing)),
                    }
                }
                let mut ids = std::collections::HashSet::with_capacity(new.messages.len());
                for (message, enc) in new.messages.iter().zip(encoded) {
                    if !ids.insert(message.message.id) {
                        return Err(StoreError::Conflict(format!(
                            "message {} is twice in the batch",
                            message.message.id
                        )));
                    }
                    stage_message(tree, batch, message, enc)?;
                }
                let commit = self.inner.next_commit()?;
                crate::event_feed::stage(batch, commit, new.messages.iter().flat_map(written_events));
                crate::activity::stage(tree, batch, new.messages.iter().map(|m| &m.activity))?;
                if let Some(t) = taken {
                    stage_key(batch, t);
                }
                Ok(CreateOutcome::Created)
            })
            .await?;
        if matches!(outcome, CreateOutcome::Duplicate(_)) {
            for (message_key, entries) in &trigrams {
                search_index::remove_entries(self.inner.tree()?, message_key, entries)?;
            }
        }
        Ok(outcome)
    }

    async fn get_message(&self, workspace: WorkspaceId, id: MessageId) -> StoreResult<Option<Message>> {
        let record = self.inner.get(&layout::message(workspace, id).0, "message")?;
        record.map(|record| content::attach(self.inner.tree()?, record)).transpose()
    }

    async fn find_message(&self, id: MessageId) -> StoreResult<Option<Message>> {
        let Some(ws) = self.inner.tree()?.get(layout::message_by_id(id).0).map_err(sled_error)? else {
            return Ok(None);
        };
        let ws: [u8; 16] = ws.as_ref().try_into().map_err(|_| bad_key("message id index"))?;
        self.get_message(WorkspaceId::from_bytes(ws), id).await
    }

    async fn list_messages(&self, workspace: WorkspaceId, query: &MessageQuery) -> StoreResult<Page<Message>> {
        crate::message_list::list(self.inner.tree()?, workspace, query)
    }

    async fn list_events(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        page_req: PageRequest<EventId>,
    ) -> StoreResult<Page<MessageEvent>> {
        if !self.inner.exists(&layout::message(workspace, message).0)? {
            return Err(StoreError::NotFound);
        }
        let prefix = layout::events(workspace, message).0;
        let cursor = page_req.cursor.map(EventId::to_bytes);
        let decode_event = |_: &[u8], v: IVec| decode(&v, "event").map(Some);
        page(
            self.inner.tree()?,
            &prefix,
            cursor.as_ref().map(|c| &c[..]),
            page_req.limit,
            Order::OldestFirst,
            decode_event,
        )
    }

    async fn record_event(&self, mut write: EventWrite) -> StoreResult<()> {
        // Events never change the content, which has its own key (`content.rs`): only the
        // record is written.
        write.message.take_content();
        let new = &write.message;
        let message_key = layout::message(new.workspace_id, new.id).0;
        let message_value = encode(new)?;
        let events = std::iter::once(&write.event)
            .chain(&write.more_events)
            .map(|e| Ok((layout::events(new.workspace_id, new.id).id(e.id.to_bytes()).0, encode(e)?)))
            .collect::<StoreResult<Vec<_>>>()?;
        let deliveries = write.webhook_deliveries.iter().map(encode).collect::<StoreResult<Vec<_>>>()?;
        self.inner
            .write_durable(|tree, batch| {
                let old: Message = get(tree, &message_key, "message")?.ok_or(StoreError::NotFound)?;
                if let Some(expected) = write.expected_next_attempt_at
                    && old.next_attempt_at != Some(expected)
                {
                    return Err(StoreError::Conflict(format!("message {} is no longer under this lease", new.id)));
                }
                if let Some(expected) = write.expected_last_event_id
                    && old.last_event_id != expected
                {
                    return Err(StoreError::Conflict(format!(
                        "message {}: an event was recorded since it was read",
                        new.id
                    )));
                }
                if old.status != write.expected_status {
                    return Err(StoreError::Conflict(format!(
                        "message {} is {}, not {}",
                        new.id,
                        old.status.as_str(),
                        write.expected_status.as_str()
                    )));
                }
                for (key, _) in &events {
                    if tree.contains_key(key).map_err(sled_error)? {
                        return Err(StoreError::Conflict(format!("an event of message {} exists", new.id)));
                    }
                }
                // New entries first, the record, then the old entries go: a reader sees the
                // message under its old or new status, never under none.
                queue_deliveries(tree, batch, &write.webhook_deliveries, deliveries)?;
                for (key, value) in &events {
                    batch.insert(key.clone(), value.clone());
                }
                let commit = self.inner.next_commit()?;
                let feed = std::iter::once(&write.event).chain(&write.more_events).map(|e| (new.workspace_id, e));
                crate::event_feed::stage(batch, commit, feed);
                // Retention looks at it (again) once it is old: this may be a late event. The
                // entry is written only if retention took it away: most events find the one
                // the create wrote, and an insert costs more than this read.
                let purge_key = layout::message_purge(new.id).0;
                if !tree.contains_key(&purge_key).map_err(sled_error)? {
                    batch.insert(purge_key, &new.workspace_id.to_bytes()[..]);
                }
                let moved: Vec<(Vec<u8>, Vec<u8>)> = buckets(&old)
                    .into_iter()
                    .zip(buckets(new))
                    .filter(|(old_bucket, new_bucket)| old_bucket != new_bucket)
                    .collect();
                for (_, new_bucket) in &moved {
                    batch.insert(entry(new_bucket, new.id), &[]);
                }
                let due_moved = old.next_attempt_at != new.next_attempt_at;
                if due_moved && let Some(at) = new.next_attempt_at {
                    batch.insert(new.due_key(at), &[]);
                }
                // Only writes that checked the last event (opens, clicks) may change the tally;
                // another write keeps the stored one (`EventWrite::expected_last_event_id`).
                if write.expected_last_event_id.is_none() && old.tracking_tally != new.tracking_tally {
                    let mut kept = new.clone();
                    kept.tracking_tally = old.tracking_tally.clone();
                    batch.insert(message_key, encode(&kept)?);
                } else {
                    batch.insert(message_key, message_value);
                }
                for (old_bucket, _) in &moved {
                    batch.remove(entry(old_bucket, old.id));
                }
                if due_moved && let Some(at) = old.next_attempt_at {
                    batch.remove(old.due_key(at));
                }
                crate::activity::stage(tree, batch, [&write.activity])?;
                Ok(())
            })
            .await
    }

    async fn claim_due_messages(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        // Not waited for: a claim lost in a crash only makes the message due again.
        let records = self.inner.write(|tree, batch| {
            queue::claim_due::<Message>(tree, batch, now, lease_until, limit, &mut queue::TakeAll)
        })?;
        // Outside the writer lock: a claimed message's content does not change (retention
        // leaves messages with an attempt due alone).
        let tree = self.inner.tree()?;
        records.into_iter().map(|record| content::attach(tree, record)).collect()
    }

    async fn release_message_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        // Sound here because `SledStore::open` admits one process: at its start every lease
        // belongs to a dead one. Under the writer lock like a claim, so the records and the
        // queue move together. Not waited for: a release lost in a crash leaves the leases,
        // which the next start releases.
        self.inner.write(|tree, batch| {
            queue::release_leases::<Message>(tree, batch, now, limit, |m| m.status.next_attempt_is_lease())
        })
    }

    async fn requeue_message(
        &self,
        workspace: WorkspaceId,
        id: MessageId,
        lease: DateTime<Utc>,
        due: DateTime<Utc>,
    ) -> StoreResult<bool> {
        // Under the writer lock like a claim, so the record and its queue entry move
        // together. Not waited for: a requeue lost in a crash leaves the claim's lease.
        self.inner.write(|tree, batch| queue::requeue::<Message>(tree, batch, workspace, id.to_bytes(), lease, due))
    }

    async fn count_pending_messages(&self, now: DateTime<Utc>) -> StoreResult<PendingMessages> {
        crate::retention::count_pending(self.inner.tree()?, now)
    }

    async fn purge_message_content(&self, created_before: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        // Not waited for: a purge lost in a crash leaves the index entries, and the next
        // purge does it again.
        // The feed keys of timelines an earlier purge deleted go first (`event_feed.rs`).
        self.inner.write(|tree, batch| {
            crate::event_feed::purge_orphans(tree, batch, limit)?;
            crate::retention::purge(tree, batch, created_before, limit)
        })
    }

    async fn get_idempotency(
        &self,
        workspace: WorkspaceId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        self.inner.get(&layout::idempotency(workspace, key.as_str()).0, "idempotency record")
    }

    async fn purge_expired_idempotency(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        // Not waited for: a purge lost in a crash is repeated by the next one.
        self.inner.write(|tree, batch| {
            let start = [layout::IDEMPOTENCY_EXPIRY];
            let end = prefix_end(&Key::new(layout::IDEMPOTENCY_EXPIRY).time(now).0);
            let range = match &end {
                Some(end) => tree.range::<&[u8], _>(&start[..]..end.as_slice()),
                None => tree.range::<&[u8], _>(&start[..]..),
            };
            let mut purged = 0;
            for entry in range {
                if purged == limit {
                    break;
                }
                let (expiry_key, _) = entry.map_err(sled_error)?;
                let ws = layout::id_at(&expiry_key, 9).ok_or_else(|| bad_key("idempotency expiry"))?;
                let ws = WorkspaceId::from_bytes(ws);
                let text = std::str::from_utf8(&expiry_key[25..]).map_err(|_| bad_key("idempotency expiry"))?;
                let record_key = layout::idempotency(ws, text).0;
                match get::<IdempotencyRecord>(tree, &record_key, "idempotency record")? {
                    // Same microsecond as `now` but later by nanoseconds: not expired yet.
                    Some(r) if r.expires_at > now => continue,
                    Some(r) if layout::time_bytes(r.expires_at)[..] == expiry_key[1..9] => {
                        batch.remove(record_key);
                        purged += 1;
                    }
                    // A stale entry (its record was replaced or is gone): just drop it.
                    _ => {}
                }
                batch.remove(expiry_key);
            }
            Ok(purged)
        })
    }
}

/// Marks that every message has its `MESSAGE_BY_ID` entry.
const ID_INDEX_BUILT: &str = "message-id-index";

/// Gives every message of a store made before the global id index its entry, once: at open,
/// before anything else can write, so no lock is needed. The marker is written after the
/// entries; sled recovers a prefix of its log, so a crash midway leaves the marker unwritten
/// and the next open starts over (entries are idempotent). A new store marks itself at once.
/// Falling back to a scan when an entry is missing instead would let anyone make us scan
/// every message with a report naming a random id.
pub fn build_id_index(tree: &Tree) -> StoreResult<usize> {
    index_every_message(tree, ID_INDEX_BUILT, layout::message_by_id)
}

/// Gives every message an entry `index(id)` → its workspace where it has none, once: the
/// marker `marker` (written last) says it was done. For indexes added after stores existed.
pub(crate) fn index_every_message(tree: &Tree, marker: &str, index: fn(MessageId) -> Key) -> StoreResult<usize> {
    let marker = layout::meta(marker).0;
    if tree.contains_key(&marker).map_err(sled_error)? {
        return Ok(0);
    }
    let mut added = 0;
    for entry in tree.scan_prefix([layout::MESSAGE]).keys() {
        let key = entry.map_err(sled_error)?;
        let (Some(ws), Some(id)) = (layout::id_at(&key, 1), layout::id_at(&key, 17)) else {
            return Err(bad_key("message"));
        };
        let index = index(MessageId::from_bytes(id)).0;
        if !tree.contains_key(&index).map_err(sled_error)? {
            tree.insert(index, &ws[..]).map_err(sled_error)?;
            added += 1;
        }
    }
    tree.insert(marker, &[][..]).map_err(sled_error)?;
    Ok(added)
}

#[cfg(test)]
mod tests {
    use tidings_core::ids::{ApiKeyId, DomainId, WorkspaceId};
    use tidings_core::ports::MessageStore;
    use tidings_testing::fixtures::{message, new_message, ulid};

    use super::*;

    #[tokio::test]
    async fn a_store_from_before_the_id_index_gets_it_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let old = message(WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()));
        {
            let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
            store.create_message(&new_message(&old)).await.unwrap();
            // As a store written by a build without the index: no entry, no marker.
            let tree = store.inner.tree().unwrap();
            tree.remove(layout::message_by_id(old.id).0).unwrap();
            tree.remove(layout::meta(ID_INDEX_BUILT).0).unwrap();
            assert_eq!(store.find_message(old.id).await.unwrap(), None, "without its entry the message is not found");
            tree.flush().unwrap();
        }
        let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
        assert_eq!(
            store.find_message(old.id).await.unwrap(),
            Some(old.clone()),
            "found after the open built the index"
        );
        assert_eq!(build_id_index(store.inner.tree().unwrap()).unwrap(), 0, "the marker makes the build happen once");
        let newer = message(WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()));
        store.create_message(&new_message(&newer)).await.unwrap();
        assert_eq!(store.find_message(newer.id).await.unwrap(), Some(newer), "create_message keeps the index");
    }
}
