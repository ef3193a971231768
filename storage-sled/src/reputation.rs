//! The reputation guard's standings (`tidings_core::reputation`): one JSON record per
//! workspace and scope (`layout::REPUTATION`). A change is a compare-and-swap on the
//! record's version under the writer lock, in one durable batch with the webhook
//! deliveries that announce it.

use async_trait::async_trait;
use tidings_core::ids::WorkspaceId;
use tidings_core::model::WebhookDelivery;
use tidings_core::ports::{ReputationStore, StoreError, StoreResult};
use tidings_core::reputation::ScopeReputation;

use crate::SledStore;
use crate::codec::{decode, encode, sled_error};
use crate::layout::{self, Key};
use crate::webhooks::queue_deliveries;

#[async_trait]
impl ReputationStore for SledStore {
    async fn reputation(&self, workspace: WorkspaceId) -> StoreResult<Vec<ScopeReputation>> {
        let prefix = Key::new(layout::REPUTATION).id(workspace.to_bytes()).0;
        let mut records = Vec::new();
        for entry in self.inner.tree()?.scan_prefix(prefix) {
            let (_, value) = entry.map_err(sled_error)?;
            records.push(decode(&value, "reputation")?);
        }
        Ok(records)
    }

    async fn change_reputation(
        &self,
        next: &ScopeReputation,
        expected: u64,
        deliveries: &[WebhookDelivery],
    ) -> StoreResult<bool> {
        if next.version != expected.saturating_add(1) {
            return Err(StoreError::Conflict("a reputation change must bump its version by one".to_owned()));
        }
        let key = layout::reputation(next.workspace_id, next.scope).0;
        let value = encode(next)?;
        let values = deliveries.iter().map(encode).collect::<StoreResult<Vec<_>>>()?;
        self.inner
            .write_durable(|tree, batch| {
                let stored = match tree.get(&key).map_err(sled_error)? {
                    Some(bytes) => decode::<ScopeReputation>(&bytes, "reputation")?.version,
                    None => 0,
                };
                if stored != expected {
                    return Ok(false);
                }
                queue_deliveries(tree, batch, deliveries, values)?;
                batch.insert(key, value);
                Ok(true)
            })
            .await
    }
}
