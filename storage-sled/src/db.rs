//! The shared core of the store: the tree, the writer lock, the flusher, and the read and
//! paging helpers every resource module uses.
//!
//! Writes: a writer takes `writer` (a plain mutex, never held across an `.await`), reads
//! what it must check (including range scans, which sled transactions cannot do), fills a
//! [`Batch`] and applies it with [`apply_with_intent`]. The lock makes check-then-write
//! race-free, and costs no concurrency sled would give: sled 0.34 serialises batches and
//! transactions behind one process-wide lock anyway. Encoding happens before it is taken.

use std::ops::Bound;
use std::sync::{Mutex, PoisonError};

use serde::de::DeserializeOwned;
use sled::{IVec, Tree};
use tidings_core::ports::{Page, StoreResult};

use crate::codec::{decode, sled_error};
use crate::flusher::Flusher;
use crate::layout;

/// One open store. Shared by all clones of `SledStore`.
#[derive(Debug)]
pub struct Inner {
    /// All records and indexes (see `layout.rs`); reached through [`Inner::tree`].
    tree: Tree,
    writer: Mutex<()>,
    flusher: Flusher,
    db: sled::Db,
}

impl Inner {
    /// Wraps an open database.
    pub fn new(db: sled::Db, tree: Tree, flusher: Flusher) -> Self {
        Self { tree, writer: Mutex::new(()), flusher, db }
    }

    /// Runs `f` under the writer lock and applies the batch it fills, atomically. Nothing is
    /// written if `f` fails. Should sled fail half way through the batch (an I/O error), the
    /// redo record completes it at the next open. Not durable by itself: see
    /// [`Self::write_durable`].
    pub fn write<T>(&self, f: impl FnOnce(&Tree, &mut Batch) -> StoreResult<T>) -> StoreResult<T> {
        self.flusher.check()?;
        // The mutex guards no data of its own, so a panic elsewhere cannot leave it
        // inconsistent: recover from poisoning.
        let _guard = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let mut batch = Batch::default();
        let out = f(&self.tree, &mut batch)?;
        apply_with_intent(&self.tree, &batch)?;
        Ok(out)
    }

    /// Like [`Self::write`], then waits for the group commit. Also waits when `f` wrote
    /// nothing, so that an answer built from earlier writes (an idempotent replay, an existing
    /// suppression) is not given before those writes are durable.
    pub async fn write_durable<T>(&self, f: impl FnOnce(&Tree, &mut Batch) -> StoreResult<T>) -> StoreResult<T> {
        let out = self.write(f)?;
        self.flusher.durable().await?;
        Ok(out)
    }

    /// The tree, for reads; `Unavailable` once the store has failed (see `flusher.rs`), as
    /// memory may then hold writes that were never acknowledged.
    pub fn tree(&self) -> StoreResult<&Tree> {
        self.flusher.check()?;
        Ok(&self.tree)
    }

    /// Why the store failed, if it has (see `flusher.rs`).
    pub fn failure(&self) -> Option<std::sync::Arc<str>> {
        self.flusher.failure()
    }

    /// The number of the write being made, for the event feed (`event_feed.rs`): call only
    /// inside a write (under the writer lock), where numbers are taken in the order writes
    /// are applied. sled's generator jumps ahead after a crash, so none is given twice.
    pub fn next_commit(&self) -> StoreResult<u64> {
        self.db.generate_id().map_err(sled_error)
    }

    /// Bytes on disk.
    pub fn size_on_disk(&self) -> sled::Result<u64> {
        self.db.size_on_disk()
    }

    /// Reads and decodes one record.
    pub fn get<T: DeserializeOwned>(&self, key: &[u8], what: &str) -> StoreResult<Option<T>> {
        get(self.tree()?, key, what)
    }

    /// Whether a key exists.
    pub fn exists(&self, key: &[u8]) -> StoreResult<bool> {
        self.tree()?.contains_key(key).map_err(sled_error)
    }
}

/// The writes of one store method, applied together by [`Inner::write`].
#[derive(Debug, Default)]
pub struct Batch {
    ops: Vec<(IVec, Option<IVec>)>,
}

impl Batch {
    /// Sets `key` to `value`.
    pub fn insert(&mut self, key: impl Into<IVec>, value: impl Into<IVec>) {
        self.ops.push((key.into(), Some(value.into())));
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: impl Into<IVec>) {
        self.ops.push((key.into(), None));
    }
}

/// Key of the redo record (see [`apply_with_intent`]); sorts before every other key.
const INTENT: &[u8] = &[layout::INTENT];

/// Applies a batch atomically with respect to crashes, without sled's `apply_batch`.
///
/// `apply_batch` and sled transactions take sled's process-wide concurrency lock for
/// writing, and `db.flush()` holds it for reading until its fsync completes: every batch
/// would wait for the flush in progress, which in the benchmark cost 40 % of throughput.
/// Plain inserts only take it for reading. So the batch is first written as one redo record
/// under [`INTENT`] (one insert: atomic), then applied key by key. sled recovers a prefix of
/// its log, so after a crash either the redo record is missing (and so are all later
/// inserts) or it is there and [`recover`] applies it again. The record is overwritten by
/// the next write rather than removed, saving an insert; replaying the last write is
/// harmless because nothing came after it. Concurrent readers may see a write half applied
/// for a few microseconds; the modules order their operations and check records read
/// through an index so that this never shows (see `messages.rs`).
fn apply_with_intent(tree: &Tree, batch: &Batch) -> StoreResult<()> {
    if batch.ops.is_empty() {
        return Ok(());
    }
    tree.insert(INTENT, encode_intent(&batch.ops)).map_err(sled_error)?;
    apply_ops(tree, &batch.ops)
}

fn apply_ops(tree: &Tree, ops: &[(IVec, Option<IVec>)]) -> StoreResult<()> {
    for (key, value) in ops {
        match value {
            Some(value) => tree.insert(key, value.clone()).map(drop),
            None => tree.remove(key).map(drop),
        }
        .map_err(sled_error)?;
    }
    Ok(())
}

fn encode_intent(ops: &[(IVec, Option<IVec>)]) -> Vec<u8> {
    let size = ops.iter().map(|(k, v)| 9 + k.len() + v.as_ref().map_or(0, |v| v.len())).sum();
    let mut out = Vec::with_capacity(size);
    for (key, value) in ops {
        out.extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(key);
        match value {
            Some(value) => {
                out.push(1);
                out.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_be_bytes());
                out.extend_from_slice(value);
            }
            None => out.push(0),
        }
    }
    out
}

fn decode_intent(mut bytes: &[u8]) -> StoreResult<Vec<(IVec, Option<IVec>)>> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> StoreResult<&'a [u8]> {
        let (head, rest) = bytes.split_at_checked(n).ok_or_else(|| crate::codec::bad_key("intent"))?;
        *bytes = rest;
        Ok(head)
    }
    fn len(bytes: &mut &[u8]) -> StoreResult<usize> {
        let raw: [u8; 4] = take(bytes, 4)?.try_into().map_err(|_| crate::codec::bad_key("intent"))?;
        Ok(u32::from_be_bytes(raw) as usize)
    }
    let mut ops = Vec::new();
    while !bytes.is_empty() {
        let n = len(&mut bytes)?;
        let key = IVec::from(take(&mut bytes, n)?);
        let value = match take(&mut bytes, 1)?[0] {
            0 => None,
            _ => {
                let n = len(&mut bytes)?;
                Some(IVec::from(take(&mut bytes, n)?))
            }
        };
        ops.push((key, value));
    }
    Ok(ops)
}

/// Finishes a write cut short by a crash by applying the last redo record again.
pub fn recover(tree: &Tree) -> StoreResult<()> {
    if let Some(intent) = tree.get(INTENT).map_err(sled_error)? {
        apply_ops(tree, &decode_intent(&intent)?)?;
    }
    Ok(())
}

/// Reads and decodes one record from `tree`.
pub fn get<T: DeserializeOwned>(tree: &Tree, key: &[u8], what: &str) -> StoreResult<Option<T>> {
    match tree.get(key).map_err(sled_error)? {
        Some(bytes) => decode(&bytes, what).map(Some),
        None => Ok(None),
    }
}

/// The smallest key greater than every key starting with `prefix` (`None`: no bound).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Which way a page walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Newest (largest key) first.
    NewestFirst,
    /// Oldest first.
    OldestFirst,
}

/// Walks the keys under `prefix` in `order`, starting strictly after `prefix ‖ cursor`, and
/// collects up to `limit` items `pick` accepts (`Ok(None)` skips an entry). Looks at one
/// entry past the page to set `has_more`. The walk is O(limit) when `pick` accepts every
/// entry, and O(entries skipped) beyond that.
pub fn page<T>(
    tree: &Tree,
    prefix: &[u8],
    cursor: Option<&[u8]>,
    limit: usize,
    order: Order,
    mut pick: impl FnMut(&[u8], IVec) -> StoreResult<Option<T>>,
) -> StoreResult<Page<T>> {
    let start: Vec<u8>;
    let end = prefix_end(prefix);
    let upper = match &end {
        Some(end) => Bound::Excluded(end.as_slice()),
        None => Bound::Unbounded,
    };
    let range = match (order, cursor) {
        (_, None) => tree.range::<&[u8], _>((Bound::Included(prefix), upper)),
        (Order::NewestFirst, Some(cursor)) => {
            start = [prefix, cursor].concat();
            tree.range::<&[u8], _>((Bound::Included(prefix), Bound::Excluded(start.as_slice())))
        }
        (Order::OldestFirst, Some(cursor)) => {
            start = [prefix, cursor].concat();
            // Keys longer than `prefix ‖ cursor` that start with it sort after it; Excluded
            // skips only the cursor itself, which is what "strictly after" means for ids.
            tree.range::<&[u8], _>((Bound::Excluded(start.as_slice()), upper))
        }
    };
    let entries: Box<dyn Iterator<Item = sled::Result<(IVec, IVec)>>> = match order {
        Order::NewestFirst => Box::new(range.rev()),
        Order::OldestFirst => Box::new(range),
    };
    let mut items = Vec::with_capacity(limit.min(256));
    for entry in entries {
        let (key, value) = entry.map_err(sled_error)?;
        if let Some(item) = pick(&key, value)? {
            if items.len() == limit {
                return Ok(Page { items, has_more: true });
            }
            items.push(item);
        }
    }
    Ok(Page { items, has_more: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_completes_a_write_torn_after_its_redo_record() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        let tree = db.open_tree("t").unwrap();
        tree.insert(b"gone", &b"x"[..]).unwrap();
        let mut batch = Batch::default();
        batch.insert(&b"a"[..], &b"1"[..]);
        batch.insert(&b"b"[..], &b"2"[..]);
        batch.remove(&b"gone"[..]);
        // As if the process died right after the redo record and the first insert.
        tree.insert(INTENT, encode_intent(&batch.ops)).unwrap();
        tree.insert(b"a", &b"1"[..]).unwrap();
        recover(&tree).unwrap();
        assert_eq!(tree.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(tree.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(tree.get(b"gone").unwrap(), None);
        // Replaying the last complete write again changes nothing.
        recover(&tree).unwrap();
        assert_eq!(tree.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn intents_round_trip_including_empty_values_and_removals() {
        let ops = vec![(IVec::from(&b"k"[..]), Some(IVec::from(&b""[..]))), (IVec::from(&b"r"[..]), None)];
        assert_eq!(decode_intent(&encode_intent(&ops)).unwrap(), ops);
        assert!(decode_intent(&[0, 0, 0, 9, 1]).is_err());
    }

    #[test]
    fn prefix_end_carries_over_ff_bytes() {
        assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }
}
