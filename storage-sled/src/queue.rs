//! The due-time queues of messages and webhook deliveries: `TAG ‖ time ‖ id ‖ ws`, walked
//! from the earliest time, so a claim reads only entries it returns (plus any of the
//! current microsecond that are due a few nanoseconds after `now`).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sled::Tree;
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
}

/// Claims up to `limit` records due at or before `now`, earliest first: moves each one's
/// `next_attempt_at` and queue entry to `lease_until` in `batch` and returns them as updated.
/// Runs under the writer lock, so two claimers never get the same record.
pub fn claim_due<T: DueRecord>(
    tree: &Tree,
    batch: &mut Batch,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
    limit: usize,
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
        let (due_key, _) = entry.map_err(sled_error)?;
        let id = layout::id_at(&due_key, 9).ok_or_else(|| bad_key(T::WHAT))?;
        let ws = WorkspaceId::from_bytes(layout::id_at(&due_key, 25).ok_or_else(|| bad_key(T::WHAT))?);
        let record_key = T::record_key(ws, id);
        let Some(mut record) = get::<T>(tree, &record_key, T::WHAT)? else {
            // The record is gone (e.g. its webhook was deleted): drop the stale entry.
            batch.remove(due_key);
            continue;
        };
        let Some(at) = *record.next_attempt_at() else {
            batch.remove(due_key);
            continue;
        };
        if record.due_key(at)[..] != due_key[..] {
            batch.remove(due_key);
            continue;
        }
        if at > now {
            // Later within the same microsecond as `now`.
            continue;
        }
        *record.next_attempt_at() = Some(lease_until);
        batch.remove(due_key);
        batch.insert(record.due_key(lease_until), &[]);
        batch.insert(record_key, encode(&record)?);
        claimed.push(record);
    }
    Ok(claimed)
}
