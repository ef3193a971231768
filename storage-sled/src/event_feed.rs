//! The event feed (`EventFeedStore`): one `EVENT_FEED ‖ ws ‖ commit ‖ event` key per event,
//! pointing at its message; the event itself stays where the timeline keeps it.
//!
//! `commit` is taken under the writer lock ([`crate::db::Inner::next_commit`]), so the feed's order is
//! the order in which writes were applied, and a write's keys are staged after its events,
//! in ascending order: a reader that sees part of a write in progress (sled applies a batch
//! key by key, `db.rs`) sees a prefix of its feed keys, each of whose events is already in
//! place, and never goes on past a key it has not seen. sled's id generator survives a
//! crash by jumping ahead, so a commit number is never given twice, even to a write the
//! crash lost after a reader saw it.
//!
//! Retention deletes timelines, not feed keys: a key whose event is gone is skipped by
//! readers and removed by [`purge_orphans`], which runs before every retention purge.

use sled::Tree;
use tidings_core::ids::{EventId, MessageId, WorkspaceId};
use tidings_core::model::MessageEvent;
use tidings_core::ports::{FeedEntry, FeedPosition, StoreResult};

use crate::codec::{bad_key, sled_error};
use crate::db::{Batch, get, prefix_end};
use crate::layout::{self, Key};

/// Offsets in a feed key.
const WS_AT: usize = 1;
const COMMIT_AT: usize = 17;
const EVENT_AT: usize = 25;

/// Stages the feed keys of one write, numbered `commit`: call after the write's events are
/// staged, from inside the write (under the lock).
pub fn stage<'a>(batch: &mut Batch, commit: u64, events: impl IntoIterator<Item = (WorkspaceId, &'a MessageEvent)>) {
    let mut keys: Vec<(Vec<u8>, MessageId)> =
        events.into_iter().map(|(ws, e)| (layout::event_feed(ws, commit, e.id).0, e.message_id)).collect();
    keys.sort_unstable();
    for (key, message) in keys {
        batch.insert(key, &message.to_bytes()[..]);
    }
}

/// Up to `limit` events of `workspace` after `after`.
pub fn read(
    tree: &Tree,
    workspace: WorkspaceId,
    after: Option<FeedPosition>,
    limit: usize,
) -> StoreResult<Vec<FeedEntry>> {
    let prefix = Key::new(layout::EVENT_FEED).id(workspace.to_bytes()).0;
    let start = match after {
        // The first key after `after`'s own.
        Some(p) => {
            let mut key = layout::event_feed(workspace, p.commit, p.event).0;
            key.push(0);
            key
        }
        None => prefix.clone(),
    };
    let end = prefix_end(&prefix).ok_or_else(|| bad_key("event feed"))?;
    let mut entries = Vec::with_capacity(limit.min(1024));
    for entry in tree.range(start..end) {
        if entries.len() == limit {
            break;
        }
        let (key, message) = entry.map_err(sled_error)?;
        let (position, message) = parse(&key, &message)?;
        // Gone with its timeline (retention): left out.
        if let Some(event) = event(tree, workspace, message, position.event)? {
            entries.push(FeedEntry { position, event });
        }
    }
    Ok(entries)
}

/// Removes up to `limit` feed keys whose event retention deleted, from the start of each
/// workspace's feed up to its first key whose event is still there (retention goes in
/// creation order, so that is where its orphans are); returns how many.
pub fn purge_orphans(tree: &Tree, batch: &mut Batch, limit: usize) -> StoreResult<usize> {
    let mut removed = 0;
    let mut start = vec![layout::EVENT_FEED];
    let end = [layout::EVENT_FEED + 1];
    while removed < limit {
        let mut next_workspace = None;
        for entry in tree.range(start.as_slice()..&end[..]) {
            let (key, message) = entry.map_err(sled_error)?;
            let (position, message) = parse(&key, &message)?;
            let ws = WorkspaceId::from_bytes(layout::id_at(&key, WS_AT).ok_or_else(|| bad_key("event feed"))?);
            if event(tree, ws, message, position.event)?.is_some() {
                next_workspace = prefix_end(&key[..COMMIT_AT]);
                break;
            }
            batch.remove(key);
            removed += 1;
            if removed == limit {
                break;
            }
        }
        match next_workspace {
            Some(next) => start = next,
            None => break,
        }
    }
    Ok(removed)
}

fn parse(key: &[u8], value: &[u8]) -> StoreResult<(FeedPosition, MessageId)> {
    let commit = key.get(COMMIT_AT..EVENT_AT).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
    let event = layout::id_at(key, EVENT_AT).map(EventId::from_bytes);
    let message = value.try_into().ok().map(MessageId::from_bytes);
    match (commit, event, message) {
        (Some(commit), Some(event), Some(message)) => Ok((FeedPosition { commit, event }, message)),
        _ => Err(bad_key("event feed")),
    }
}

fn event(tree: &Tree, ws: WorkspaceId, message: MessageId, id: EventId) -> StoreResult<Option<MessageEvent>> {
    get(tree, &layout::events(ws, message).id(id.to_bytes()).0, "event")
}

#[async_trait::async_trait]
impl tidings_core::ports::EventFeedStore for crate::SledStore {
    async fn event_feed(
        &self,
        workspace: WorkspaceId,
        after: Option<FeedPosition>,
        limit: usize,
    ) -> StoreResult<Vec<FeedEntry>> {
        read(self.inner.tree()?, workspace, after, limit)
    }
}
