//! A message's content (bodies, custom headers, attachments: core's `MessageContent`) is
//! kept apart from its record.
//!
//! The record is rewritten at every change (the claim, `Sent`, the outcome, opens and
//! clicks), while the content never changes after the send. Kept inline, every rewrite
//! decoded and encoded the bodies again, wrote them twice (the redo record and the record)
//! and made sled copy leaves that held them; in the delivery benchmark that was most of
//! what a delivery cost the store besides the fsync. So the `MESSAGE` record holds what
//! happened to the message and `MESSAGE_CONTENT` what it said: written once by the create,
//! before the record (so a reader never finds a record without its content), and removed by
//! retention. Every read of a whole message goes through [`attach`].
//!
//! Stores made before this kept the content inline; [`move_content_apart`] moves it once,
//! at open.

use sled::Tree;
use tidings_core::model::{Message, MessageContent};
use tidings_core::ports::StoreResult;

use crate::codec::{bad_key, decode, encode, sled_error};
use crate::db::get;
use crate::layout;

/// Marks that no message record holds its content inline any more.
const CONTENT_APART: &str = "message-content-apart";

/// The key of `message`'s content.
pub fn key(message: &Message) -> Vec<u8> {
    layout::message_content(message.workspace_id, message.id).0
}

/// Encodes the content for its own key; `None` when there is none to keep.
pub fn encode_content(content: &MessageContent) -> StoreResult<Option<Vec<u8>>> {
    if content.is_empty() { Ok(None) } else { encode(content).map(Some) }
}

/// The message as stored in its record: a copy without the content, and the content.
pub fn split(message: &Message) -> (Message, MessageContent) {
    let mut record = message.clone();
    let content = record.take_content();
    (record, content)
}

/// The whole message: `record` with its content put back, if it has any left.
pub fn attach(tree: &Tree, mut record: Message) -> StoreResult<Message> {
    if let Some(content) = get::<MessageContent>(tree, &key(&record), "message content")? {
        record.put_content(content);
    }
    Ok(record)
}

/// Moves the content of every message whose record still holds it inline to its own key,
/// once: at open, before anything else can write, so no lock is needed. Each message's
/// content is written before its record is rewritten, and the marker last; sled recovers a
/// prefix of its log, so after a crash midway the next open starts over, and a message
/// caught between the two writes reads the same either way ([`attach`] prefers the content
/// key, which holds what the record held). Returns how many messages were rewritten.
pub fn move_content_apart(tree: &Tree) -> StoreResult<usize> {
    let marker = layout::meta(CONTENT_APART).0;
    if tree.contains_key(&marker).map_err(sled_error)? {
        return Ok(0);
    }
    let mut moved = 0;
    for entry in tree.scan_prefix([layout::MESSAGE]) {
        let (record_key, value) = entry.map_err(sled_error)?;
        if layout::id_at(&record_key, 17).is_none() {
            return Err(bad_key("message"));
        }
        let mut record: Message = decode(&value, "message")?;
        let content = record.take_content();
        if let Some(bytes) = encode_content(&content)? {
            tree.insert(key(&record), bytes).map_err(sled_error)?;
            tree.insert(&record_key, encode(&record)?).map_err(sled_error)?;
            moved += 1;
        }
    }
    tree.insert(marker, &[][..]).map_err(sled_error)?;
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use tidings_core::ids::{ApiKeyId, DomainId, WorkspaceId};
    use tidings_core::ports::MessageStore;
    use tidings_testing::fixtures::{event_write, message, new_message, plus_secs, sealer, ulid};

    use super::*;
    use crate::SledStore;

    fn record(tree: &Tree, m: &Message) -> Message {
        get(tree, &layout::message(m.workspace_id, m.id).0, "message").unwrap().unwrap()
    }

    #[tokio::test]
    async fn the_record_never_holds_the_content_and_reads_give_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), sealer()).unwrap();
        let m = message(WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()));
        assert!(m.has_content());
        store.create_message(&new_message(&m)).await.unwrap();
        let sent = event_write(&m, tidings_core::model::EventType::Sent, plus_secs(m.created_at, 1), None);
        let expected = sent.message.clone();
        store.record_event(sent).await.unwrap();
        let tree = store.inner.tree().unwrap();
        assert!(!record(tree, &m).has_content(), "the event rewrote the record alone");
        assert_eq!(store.get_message(m.workspace_id, m.id).await.unwrap(), Some(expected.clone()));
        assert_eq!(store.find_message(m.id).await.unwrap(), Some(expected));
    }

    #[tokio::test]
    async fn a_store_with_content_inline_has_it_moved_apart_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let m = message(WorkspaceId(ulid()), ApiKeyId(ulid()), DomainId(ulid()));
        {
            let store = SledStore::open(dir.path(), sealer()).unwrap();
            store.create_message(&new_message(&m)).await.unwrap();
            // As a store written by a build that kept the content inline: no content key,
            // no marker.
            let tree = store.inner.tree().unwrap();
            tree.insert(layout::message(m.workspace_id, m.id).0, encode(&m).unwrap()).unwrap();
            tree.remove(key(&m)).unwrap();
            tree.remove(layout::meta(CONTENT_APART).0).unwrap();
            tree.flush().unwrap();
        }
        let store = SledStore::open(dir.path(), sealer()).unwrap();
        let tree = store.inner.tree().unwrap();
        assert!(!record(tree, &m).has_content(), "the open moved the content out of the record");
        assert!(tree.contains_key(key(&m)).unwrap());
        assert_eq!(store.get_message(m.workspace_id, m.id).await.unwrap(), Some(m.clone()), "reads unchanged");
        assert_eq!(move_content_apart(tree).unwrap(), 0, "the marker makes the move happen once");
    }
}
