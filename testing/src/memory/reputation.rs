//! The reputation guard's standings in the [`MemoryStore`](super::MemoryStore): a map by
//! workspace and scope, changed under the store's one lock with the deliveries announcing it.

use tidings_core::ports::ReputationStore;
use tidings_core::reputation::ScopeReputation;

use super::*;

#[async_trait]
impl ReputationStore for MemoryStore {
    async fn reputation(&self, workspace: WorkspaceId) -> StoreResult<Vec<ScopeReputation>> {
        let st = self.state();
        Ok(st.reputation.values().filter(|r| r.workspace_id == workspace).cloned().collect())
    }

    async fn change_reputation(
        &self,
        next: &ScopeReputation,
        expected: u64,
        deliveries: &[WebhookDelivery],
    ) -> StoreResult<bool> {
        let mut st = self.state();
        let key = (next.workspace_id, next.scope);
        let stored = st.reputation.get(&key).map_or(0, |r| r.version);
        if stored != expected {
            return Ok(false);
        }
        if next.version != expected.saturating_add(1) {
            return Err(conflict("a reputation change must bump its version by one"));
        }
        if let Some(e) = st.deliveries_conflict(deliveries) {
            return Err(e);
        }
        st.queue_deliveries(deliveries);
        st.reputation.insert(key, next.clone());
        Ok(true)
    }
}
