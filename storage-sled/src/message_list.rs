//! `list_messages`: one walk of one key range, newest first (or oldest first for a page
//! before `endingBefore`), bounded by ids.
//!
//! Every filter that has an index gives a candidate bucket (`bucket ‖ id` keys, empty
//! values): status, normalized recipient, sending key, and for `q` up to eight of its
//! trigrams (`search_index.rs`). With one candidate a page costs O(limit). With several, each
//! is probed for up to [`PROBE`] entries within the page's id range and the one with fewest is
//! walked, so the cost is O(entries of that bucket until the page fills), there being no
//! composite indexes. Ties (every candidate has [`PROBE`] or more) go to `to`, then
//! `sent_by`, then `status`, then the trigrams, the usual order of selectivity. Probing
//! instead of keeping entry counts keeps `create_message` at the writes it needs.
//!
//! Each entry of the walked bucket is checked against the other trigram buckets with point
//! reads, which cost less than loading a record, and then the record decides (every filter
//! is checked on it): an index entry a concurrent write has not yet moved is harmless.
//!
//! The creation bounds (`createdAfter`, `createdBefore`) and the cursor are id bounds of the
//! walk: ids are ULIDs minted at creation, so a walk starts below the upper bound and stops
//! at the lower one without reading older entries.
//!
//! The `tags` and `metadata` filters have no index: they are checked on each record the walk
//! loads, so a list filtered only by them walks the workspace's messages until the page
//! fills (O(messages scanned)). Single-node stores are small; PostgreSQL indexes them.

use std::ops::Bound;

use sled::{IVec, Tree};
use tidings_core::ids::{MessageId, WorkspaceId};
use tidings_core::model::Message;
use tidings_core::ports::{MessageQuery, Page, StoreResult};

use crate::codec::{bad_key, decode, sled_error};
use crate::content;
use crate::db::{get, prefix_end};
use crate::layout::{self, Key};
use crate::search_index;

/// How many index entries within the page's range a multi-filter list reads of each
/// candidate bucket to find the most selective one.
pub const PROBE: usize = 256;

/// The ids a page may hold: at or above `.0`, below `.1`.
type IdBounds = (Option<MessageId>, Option<MessageId>);

/// The buckets of the indexed filters other than `q`, most selective first as a rule.
fn filter_buckets(ws: WorkspaceId, q: &MessageQuery) -> Vec<Vec<u8>> {
    let ws = ws.to_bytes();
    let mut out = Vec::with_capacity(3);
    if let Some(to) = &q.to {
        out.push(Key::new(layout::MESSAGE_BY_TO).id(ws).text(&to.normalized()).0);
    }
    if let Some(key) = q.sent_by {
        out.push(Key::new(layout::MESSAGE_BY_KEY).id(ws).id(key.to_bytes()).0);
    }
    if let Some(status) = q.status {
        out.push(Key::new(layout::MESSAGE_BY_STATUS).id(ws).byte(layout::status_code(status)).0);
    }
    out
}

/// Whether the record passes every filter of `q`.
fn matches(m: &Message, q: &MessageQuery) -> bool {
    q.status.is_none_or(|s| m.status == s)
        && q.to.as_ref().is_none_or(|to| m.recipient_addresses().iter().any(|r| r.normalized() == to.normalized()))
        && q.sent_by.is_none_or(|k| m.api_key_id == k)
        && q.matches_unindexed(m)
}

/// The keys of `prefix ‖ id` for ids within `bounds`.
fn key_range(prefix: &[u8], (low, high): IdBounds) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lower = Bound::Included(match low {
        Some(low) => [prefix, &low.to_bytes()].concat(),
        None => prefix.to_vec(),
    });
    let upper = match high {
        Some(high) => Bound::Excluded([prefix, &high.to_bytes()].concat()),
        None => prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded),
    };
    (lower, upper)
}

/// The entries of `prefix` within `bounds`, newest first, or oldest first if `ascending`.
fn walk(
    tree: &Tree,
    prefix: &[u8],
    bounds: IdBounds,
    ascending: bool,
) -> Box<dyn Iterator<Item = sled::Result<(IVec, IVec)>>> {
    let range = tree.range(key_range(prefix, bounds));
    if ascending { Box::new(range) } else { Box::new(range.rev()) }
}

/// Entries of `bucket` within `bounds`, counted up to [`PROBE`].
fn probe(tree: &Tree, bucket: &[u8], bounds: IdBounds, ascending: bool) -> StoreResult<usize> {
    let mut n = 0;
    for entry in walk(tree, bucket, bounds, ascending).take(PROBE) {
        entry.map_err(sled_error)?;
        n += 1;
    }
    Ok(n)
}

/// Whether every trigram bucket but the walked one holds `id`.
fn holds_every(tree: &Tree, trigrams: &[Vec<u8>], walked: Option<&Vec<u8>>, id: MessageId) -> StoreResult<bool> {
    for bucket in trigrams.iter().filter(|t| Some(*t) != walked) {
        if !search_index::holds(tree, bucket, id)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The page `query` asks for (see the module doc).
pub fn list(tree: &Tree, workspace: WorkspaceId, query: &MessageQuery) -> StoreResult<Page<Message>> {
    let bounds = query.id_bounds();
    if let (Some(low), Some(high)) = bounds
        && low >= high
    {
        return Ok(Page { items: Vec::new(), has_more: false });
    }
    let ascending = query.ending_before.is_some();
    let trigrams = query.text.as_ref().map(|t| search_index::query_buckets(workspace, t)).unwrap_or_default();
    let mut candidates = filter_buckets(workspace, query);
    candidates.extend(trigrams.iter().cloned());
    if candidates.len() > 1 {
        let mut probed = Vec::with_capacity(candidates.len());
        for bucket in candidates {
            probed.push((probe(tree, &bucket, bounds, ascending)?, bucket));
        }
        // A stable sort: on a tie the order of `filter_buckets` decides.
        probed.sort_by_key(|(n, _)| *n);
        candidates = probed.into_iter().map(|(_, bucket)| bucket).collect();
    }
    let limit = query.page.limit;
    let mut items = Vec::with_capacity(limit.min(256));
    let mut has_more = false;
    let walked = candidates.first();
    let prefix = match walked {
        Some(bucket) => bucket.clone(),
        None => Key::new(layout::MESSAGE).id(workspace.to_bytes()).0,
    };
    for entry in walk(tree, &prefix, bounds, ascending) {
        let (key, value) = entry.map_err(sled_error)?;
        let id = MessageId::from_bytes(layout::trailing_id(&key).ok_or_else(|| bad_key("message index"))?);
        if !holds_every(tree, &trigrams, walked, id)? {
            continue;
        }
        let record: Option<Message> = match walked {
            Some(_) => get(tree, &layout::message(workspace, id).0, "message")?,
            None => Some(decode(&value, "message")?),
        };
        let Some(record) = record.filter(|m| matches(m, query)) else { continue };
        if items.len() == limit {
            has_more = true;
            break;
        }
        items.push(content::attach(tree, record)?);
    }
    if ascending {
        items.reverse();
    }
    Ok(Page { items, has_more })
}
