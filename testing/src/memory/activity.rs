//! The activity counters of the [`MemoryStore`](super::MemoryStore): a map by key, added to
//! under the same lock as the write that counts.

use tidings_core::activity::{ActivityDelta, HourStart, HourlyActivity, sum_deltas};
use tidings_core::ports::ActivityStore;

use super::*;

impl State {
    /// Adds what the writes count; called last, once every check of the write passed.
    pub(super) fn count_activity<'a>(&mut self, deltas: impl IntoIterator<Item = &'a ActivityDelta>) {
        for (key, counts) in sum_deltas(deltas) {
            let row = self.activity.entry(key).or_default();
            *row = row.plus(&counts);
        }
    }
}

#[async_trait]
impl ActivityStore for MemoryStore {
    async fn activity(
        &self,
        workspace: WorkspaceId,
        from: HourStart,
        until: HourStart,
    ) -> StoreResult<Vec<HourlyActivity>> {
        let st = self.state();
        Ok(st
            .activity
            .iter()
            .filter(|(k, _)| k.workspace == workspace && from <= k.hour && k.hour < until)
            .map(|(k, counts)| HourlyActivity { domain: k.domain, hour: k.hour, counts: *counts })
            .collect())
    }

    async fn purge_activity(&self, before: HourStart, limit: usize) -> StoreResult<usize> {
        let mut st = self.state();
        let mut old: Vec<_> = st.activity.keys().filter(|k| k.hour < before).copied().collect();
        old.sort_by_key(|k| (k.hour, k.workspace, k.domain));
        old.truncate(limit);
        for key in &old {
            st.activity.remove(key);
        }
        Ok(old.len())
    }
}
