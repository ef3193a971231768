//! Activity counters (`tidings_core::activity`): one record per workspace, hour and sending
//! domain, `ACTIVITY ‖ ws ‖ hour ‖ domain`, so a workspace's range is one ordered scan; a
//! global `ACTIVITY_HOUR ‖ hour ‖ ws ‖ domain` entry per record lets the purge walk the
//! oldest hours without reading the rest.
//!
//! The writes of messages and events add their deltas by [`stage`], inside their own write
//! closure: a read-modify-write under the writer lock, in the same batch (and redo record)
//! as the events, so counts and timelines are applied together or not at all. The record
//! holds the sums, not a delta, so replaying the redo record after a crash sets the same
//! values again instead of adding twice. The value is binary (8 big-endian bytes a counter)
//! rather than JSON: it is read and written on every counted event.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sled::Tree;
use tidings_core::activity::{ActivityCounts, ActivityDelta, HourStart, HourlyActivity, sum_deltas};
use tidings_core::ids::{DomainId, WorkspaceId};
use tidings_core::ports::{ActivityStore, StoreResult};

use crate::SledStore;
use crate::codec::{bad_key, sled_error};
use crate::db::Batch;
use crate::layout::{self, Key};

const COUNTERS: usize = ActivityCounts::NAMES.len();

/// Adds the deltas of a write to the counters, in `batch`. Call it once per write, after
/// every check that may refuse the write: the deltas are summed per record first, since a
/// read inside the closure sees the tree before the batch.
pub(crate) fn stage<'a>(
    tree: &Tree,
    batch: &mut Batch,
    deltas: impl IntoIterator<Item = &'a ActivityDelta>,
) -> StoreResult<()> {
    for (key, counts) in sum_deltas(deltas) {
        let record = layout::activity(key.workspace, key.hour.start(), key.domain).0;
        let old = tree.get(&record).map_err(sled_error)?;
        let sum = match &old {
            Some(bytes) => decode(bytes)?.plus(&counts),
            None => {
                batch.insert(layout::activity_hour(key.hour.start(), key.workspace, key.domain).0, &[]);
                counts
            }
        };
        batch.insert(record, encode(&sum).to_vec());
    }
    Ok(())
}

fn encode(counts: &ActivityCounts) -> [u8; COUNTERS * 8] {
    let mut out = [0u8; COUNTERS * 8];
    for (chunk, n) in out.chunks_exact_mut(8).zip(counts.to_array()) {
        chunk.copy_from_slice(&n.to_be_bytes());
    }
    out
}

/// Reads a record; one written by a version with fewer counters reads its missing ones as 0
/// (counters are only ever added at the end).
fn decode(bytes: &[u8]) -> StoreResult<ActivityCounts> {
    if !bytes.len().is_multiple_of(8) {
        return Err(bad_key("activity counters"));
    }
    let mut counters = [0u64; COUNTERS];
    for (n, chunk) in counters.iter_mut().zip(bytes.chunks_exact(8)) {
        *n = u64::from_be_bytes(chunk.try_into().map_err(|_| bad_key("activity counters"))?);
    }
    Ok(ActivityCounts::from_array(counters))
}

/// The time of `layout::time_bytes`.
fn time_from(bytes: &[u8]) -> StoreResult<DateTime<Utc>> {
    let raw: [u8; 8] = bytes.try_into().map_err(|_| bad_key("activity hour"))?;
    let micros = (u64::from_be_bytes(raw) ^ (1 << 63)).cast_signed();
    DateTime::from_timestamp_micros(micros).ok_or_else(|| bad_key("activity hour"))
}

#[async_trait]
impl ActivityStore for SledStore {
    async fn activity(
        &self,
        workspace: WorkspaceId,
        from: HourStart,
        until: HourStart,
    ) -> StoreResult<Vec<HourlyActivity>> {
        let tree = self.inner.tree()?;
        let start = Key::new(layout::ACTIVITY).id(workspace.to_bytes()).time(from.start()).0;
        let end = Key::new(layout::ACTIVITY).id(workspace.to_bytes()).time(until.start()).0;
        let mut rows = Vec::new();
        for entry in tree.range(start..end) {
            let (key, value) = entry.map_err(sled_error)?;
            let hour = time_from(key.get(17..25).ok_or_else(|| bad_key("activity"))?)?;
            let domain = DomainId::from_bytes(layout::id_at(&key, 25).ok_or_else(|| bad_key("activity"))?);
            rows.push(HourlyActivity { domain, hour: HourStart::of(hour), counts: decode(&value)? });
        }
        Ok(rows)
    }

    async fn purge_activity(&self, before: HourStart, limit: usize) -> StoreResult<usize> {
        // Not waited for: a purge lost in a crash is done again by the next.
        self.inner.write(|tree, batch| {
            let start = [layout::ACTIVITY_HOUR];
            let end = Key::new(layout::ACTIVITY_HOUR).time(before.start()).0;
            let mut purged = 0;
            for entry in tree.range::<&[u8], _>(&start[..]..end.as_slice()).keys().take(limit) {
                let index = entry.map_err(sled_error)?;
                let hour = time_from(index.get(1..9).ok_or_else(|| bad_key("activity hour index"))?)?;
                let ws = layout::id_at(&index, 9).ok_or_else(|| bad_key("activity hour index"))?;
                let domain = layout::id_at(&index, 25).ok_or_else(|| bad_key("activity hour index"))?;
                batch.remove(layout::activity(WorkspaceId::from_bytes(ws), hour, DomainId::from_bytes(domain)).0);
                batch.remove(index);
                purged += 1;
            }
            Ok(purged)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_round_trip_and_shorter_records_read_as_zeros() {
        let counts = ActivityCounts { accepted: 3, failed: u64::MAX, opened: 1 << 40, ..ActivityCounts::default() };
        assert_eq!(decode(&encode(&counts)).unwrap(), counts);
        let old = &encode(&counts)[..16];
        assert_eq!(decode(old).unwrap(), ActivityCounts { accepted: 3, delivered: 0, ..ActivityCounts::default() });
        assert!(decode(&[1, 2, 3]).is_err());
    }

    #[test]
    fn hours_read_back_from_their_key_bytes() {
        let hour = HourStart::of(DateTime::from_timestamp(1_800_000_000, 0).unwrap()).start();
        assert_eq!(time_from(&layout::time_bytes(hour)).unwrap(), hour);
    }
}
