//! Retention and the queue-depth count.
//!
//! Retention walks `MESSAGE_PURGE` (one entry per message written since its last purge, in
//! id order, which is creation order) from the start up to the cutoff's first id: each
//! message with nothing due loses its content (`content.rs`), its timeline is deleted and
//! its entry removed; messages still waiting keep their entry and are read again next time.
//! So a purge reads only messages that have something to purge or are waiting, never the
//! ones already purged. `create_message` and `record_event` write the entry.
//!
//! The queue depth counts the keys of the due queue (`MESSAGE_DUE`, keys only, no records),
//! which `record_event` and claims keep one per waiting message.

use chrono::{DateTime, Utc};
use sled::Tree;
use tidings_core::ids::{MessageId, WorkspaceId};
use tidings_core::model::Message;
use tidings_core::ports::{PendingMessages, StoreResult};

use crate::codec::{bad_key, encode, sled_error};
use crate::db::{Batch, get, prefix_end};
use crate::layout::{self, Key};

/// Marks that every message of the store was given its `MESSAGE_PURGE` entry.
const PURGE_INDEX_BUILT: &str = "message-purge-index";

/// Messages with a queue entry, and those due at `now`.
pub fn count_pending(tree: &Tree, now: DateTime<Utc>) -> StoreResult<PendingMessages> {
    let due_end = prefix_end(&Key::new(layout::MESSAGE_DUE).time(now).0);
    let mut counts = PendingMessages::default();
    for key in tree.scan_prefix([layout::MESSAGE_DUE]).keys() {
        let key = key.map_err(sled_error)?;
        counts.total += 1;
        if due_end.as_deref().is_none_or(|end| &key[..] < end) {
            counts.due += 1;
        }
    }
    Ok(counts)
}

/// Purges up to `limit` messages of the purge index minted before `created_before` that have
/// nothing due (see the module docs), in `batch`; returns how many.
pub fn purge(tree: &Tree, batch: &mut Batch, created_before: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
    let bound = layout::message_purge(MessageId::first_at(created_before)).0;
    let start = [layout::MESSAGE_PURGE];
    let mut purged = 0;
    for entry in tree.range::<&[u8], _>(&start[..]..bound.as_slice()) {
        if purged == limit {
            break;
        }
        let (key, ws) = entry.map_err(sled_error)?;
        let id = MessageId::from_bytes(layout::id_at(&key, 1).ok_or_else(|| bad_key("purge index"))?);
        let ws: [u8; 16] = ws.as_ref().try_into().map_err(|_| bad_key("purge index"))?;
        let record_key = layout::message(WorkspaceId::from_bytes(ws), id).0;
        let Some(message) = get::<Message>(tree, &record_key, "message")? else {
            batch.remove(key);
            continue;
        };
        if message.next_attempt_at.is_some() {
            continue;
        }
        for event in tree.scan_prefix(layout::events(message.workspace_id, id).0).keys() {
            batch.remove(event.map_err(sled_error)?);
        }
        // The content has its own key (`content.rs`). Records hold none since the open moved
        // it there; should one still hold some, it is rewritten without it all the same.
        batch.remove(crate::content::key(&message));
        if message.has_content() {
            batch.insert(record_key, encode(&message.without_content())?);
        }
        batch.remove(key);
        purged += 1;
    }
    Ok(purged)
}

/// Gives every message of a store made before the purge index its entry, once, at open
/// (like `messages::build_id_index`): nothing had been purged then, so every message has
/// something to purge. A crash midway leaves the marker unwritten and the next open redoes
/// it (entries are idempotent).
pub fn build_purge_index(tree: &Tree) -> StoreResult<usize> {
    crate::messages::index_every_message(tree, PURGE_INDEX_BUILT, layout::message_purge)
}

#[cfg(test)]
mod tests {
    use tidings_core::ids::{ApiKeyId, DomainId, WorkspaceId};
    use tidings_core::model::EventType;
    use tidings_core::ports::MessageStore;
    use tidings_testing::fixtures::{event_write, message, new_message, plus_secs, ulid};

    use super::*;
    use crate::SledStore;

    #[tokio::test]
    async fn a_store_from_before_the_purge_index_gets_it_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let old = message(WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()));
        {
            let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
            store.create_message(&new_message(&old)).await.unwrap();
            let sent = event_write(&old, EventType::Sent, plus_secs(old.created_at, 1), None);
            let delivered = event_write(&sent.message, EventType::Delivered, plus_secs(old.created_at, 2), None);
            store.record_event(sent).await.unwrap();
            store.record_event(delivered).await.unwrap();
            // As a store written by a build without the index: no entry, no marker.
            let tree = store.inner.tree().unwrap();
            tree.remove(layout::message_purge(old.id).0).unwrap();
            tree.remove(layout::meta(PURGE_INDEX_BUILT).0).unwrap();
            let later = plus_secs(old.created_at, 60);
            assert_eq!(store.purge_message_content(later, 10).await.unwrap(), 0, "without its entry it is not seen");
            tree.flush().unwrap();
        }
        let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
        assert_eq!(store.purge_message_content(plus_secs(old.created_at, 60), 10).await.unwrap(), 1);
        let kept = store.get_message(old.workspace_id, old.id).await.unwrap().unwrap();
        assert!(!kept.has_content(), "purged after the open built the index");
        assert_eq!(
            build_purge_index(store.inner.tree().unwrap()).unwrap(),
            0,
            "the marker makes the build happen once"
        );
    }
}
