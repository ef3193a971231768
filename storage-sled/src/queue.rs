//! The due-time queues of messages and webhook deliveries: `TAG ‖ time ‖ id ‖ ws`, walked
//! from the earliest time, so a claim reads only entries it returns (plus any of the
//! current microsecond that are due a few nanoseconds after `now`, and the entries its
//! [`Admit`] refuses, which a delivery's queue entry lets it refuse unread). Releasing leases walks
//! the other end, from `now` on.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sled::{IVec, Tree};
use tidings_core::ids::WorkspaceId;
use tidings_core::ports::StoreResult;

use crate::codec::{bad_key, encode, sled_error};
use crate::db::{Batch, get, prefix_end};
use crate::layout::{self, Key};

/// A record with a `next_attempt_at` indexed in a queue.
pub trait DueRecord: Serialize + DeserializeOwned {
    /// Tag of the queue.
    const DUE_TAG: u8;
    /// Name for errors.
    const WHAT: &'static str;
    /// The record's key from the ids in a queue entry.
    fn record_key(ws: WorkspaceId, id: [u8; 16]) -> Vec<u8>;
    /// The record's queue entry for time `at`.
    fn due_key(&self, at: DateTime<Utc>) -> Vec<u8>;
    /// The indexed field.
    fn next_attempt_at(&mut self) -> &mut Option<DateTime<Utc>>;
    /// The value of the record's queue entry: what a claim may need to know before reading
    /// the record (see [`Admit::refuses_entry`]). Empty by default.
    fn due_value(&self) -> Vec<u8> {
        Vec::new()
    }
}

/// Which due records a claim takes.
pub trait Admit<T> {
    /// Whether the queue entry alone (the record's workspace, which its key holds, and the
    /// entry's value) shows that the record would be refused, so that the claim skips it
    /// without reading it.
    fn refuses_entry(&self, _ws: WorkspaceId, _value: &[u8]) -> bool {
        false
    }
    /// Whether to take `record`, counting it as taken if so.
    fn take(&mut self, record: &T) -> bool;
}

/// Takes every due record.
pub struct TakeAll;

impl<T> Admit<T> for TakeAll {
    fn take(&mut self, _record: &T) -> bool {
        true
    }
}

/// Claims up to `limit` records due at or before `now` that `admit` takes, earliest first:
/// moves each one's `next_attempt_at` and queue entry to `lease_until` in `batch` and returns
/// them as updated. Records `admit` refuses are left as they are and the walk goes on past
/// them. Runs under the writer lock, so two claimers never get the same record.
pub fn claim_due<T: DueRecord>(
    tree: &Tree,
    batch: &mut Batch,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
    limit: usize,
    admit: &mut impl Admit<T>,
) -> StoreResult<Vec<T>> {
    let start = [T::DUE_TAG];
    let end = prefix_end(&Key::new(T::DUE_TAG).time(now).0);
    let range = match &end {
        Some(end) => tree.range::<&[u8], _>(&start[..]..end.as_slice()),
        None => tree.range::<&[u8], _>(&start[..]..),
    };
    let mut claimed = Vec::new();
    for entry in range {
        if claimed.len() == limit {
            break;
        }
        let (due_key, value) = entry.map_err(sled_error)?;
        let ws = layout::id_at(&due_key, 25).ok_or_else(|| bad_key(T::WHAT))?;
        if admit.refuses_entry(WorkspaceId::from_bytes(ws), &value) {
            continue;
        }
        let Some(Entry { record_key, mut record, at }) = load::<T>(tree, batch, due_key)? else { continue };
        // `at > now`: later within the same microsecond as `now`.
        if at > now || !admit.take(&record) {
            continue;
        }
        move_entry(batch, record_key, &mut record, at, lease_until)?;
        claimed.push(record);
    }
    Ok(claimed)
}

/// Releases up to `limit` leases, earliest first: records due after `now` that `leased`
/// accepts get `next_attempt_at = now`, their queue entry moved to `now`, in `batch`.
/// Returns how many. Walks the queue from `now` on only, reading every entry up to the
/// `limit`-th release, the ones `leased` refuses included (repeated calls read those again).
pub fn release_leases<T: DueRecord>(
    tree: &Tree,
    batch: &mut Batch,
    now: DateTime<Utc>,
    limit: usize,
    leased: impl Fn(&T) -> bool,
) -> StoreResult<usize> {
    // From the start of `now`'s microsecond: entries in it may be a few nanoseconds later.
    let start = Key::new(T::DUE_TAG).time(now).0;
    let end = prefix_end(&[T::DUE_TAG]);
    let range = match &end {
        Some(end) => tree.range::<&[u8], _>(start.as_slice()..end.as_slice()),
        None => tree.range::<&[u8], _>(start.as_slice()..),
    };
    let mut released = 0;
    for entry in range {
        if released == limit {
            break;
        }
        let (due_key, _) = entry.map_err(sled_error)?;
        let Some(Entry { record_key, mut record, at }) = load::<T>(tree, batch, due_key)? else { continue };
        if at <= now || !leased(&record) {
            continue;
        }
        move_entry(batch, record_key, &mut record, at, now)?;
        released += 1;
    }
    Ok(released)
}

/// Moves the record `id` of `ws` from its queue entry at `lease` to one at `due`, in `batch`,
/// if its `next_attempt_at` is exactly `lease`; `false` (nothing changed) if not or if it is
/// gone.
pub fn requeue<T: DueRecord>(
    tree: &Tree,
    batch: &mut Batch,
    ws: WorkspaceId,
    id: [u8; 16],
    lease: DateTime<Utc>,
    due: DateTime<Utc>,
) -> StoreResult<bool> {
    let record_key = T::record_key(ws, id);
    let Some(mut record) = get::<T>(tree, &record_key, T::WHAT)? else { return Ok(false) };
    if *record.next_attempt_at() != Some(lease) {
        return Ok(false);
    }
    move_entry(batch, record_key, &mut record, lease, due)?;
    Ok(true)
}

/// A queue entry's record, as stored.
struct Entry<T> {
    record_key: Vec<u8>,
    record: T,
    /// Its `next_attempt_at`, which the entry matches.
    at: DateTime<Utc>,
}

/// The record a queue entry names, or `None` after removing the entry in `batch` if it is
/// stale: the record is gone (e.g. its webhook was deleted) or is due at another time.
fn load<T: DueRecord>(tree: &Tree, batch: &mut Batch, due_key: IVec) -> StoreResult<Option<Entry<T>>> {
    let id = layout::id_at(&due_key, 9).ok_or_else(|| bad_key(T::WHAT))?;
    let ws = WorkspaceId::from_bytes(layout::id_at(&due_key, 25).ok_or_else(|| bad_key(T::WHAT))?);
    let record_key = T::record_key(ws, id);
    let current = get::<T>(tree, &record_key, T::WHAT)?
        .and_then(|mut record| (*record.next_attempt_at()).map(|at| (record, at)))
        .filter(|(record, at)| record.due_key(*at)[..] == due_key[..]);
    match current {
        Some((record, at)) => Ok(Some(Entry { record_key, record, at })),
        None => {
            batch.remove(due_key);
            Ok(None)
        }
    }
}

/// Moves `record` from its queue entry at `from` to one at `to`, in `batch`.
fn move_entry<T: DueRecord>(
    batch: &mut Batch,
    record_key: Vec<u8>,
    record: &mut T,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> StoreResult<()> {
    *record.next_attempt_at() = Some(to);
    // Removed before the insert: both keys are the same when `from` and `to` share a
    // microsecond.
    batch.remove(record.due_key(from));
    batch.insert(record.due_key(to), record.due_value());
    batch.insert(record_key, encode(record)?);
    Ok(())
}
