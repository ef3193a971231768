//! Workspaces: `WORKSPACE ‖ ws`, created together with their first key.

use async_trait::async_trait;
use tidings_core::ids::WorkspaceId;
use tidings_core::model::{ApiKey, Workspace};
use tidings_core::ports::{StoreError, StoreResult, WorkspaceStore};

use crate::SledStore;
use crate::api_keys::write_new_key;
use crate::codec::{decode, encode, sled_error};
use crate::layout;

#[async_trait]
impl WorkspaceStore for SledStore {
    async fn create_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<()> {
        let ws_key = layout::workspace(workspace.id).0;
        let ws_value = encode(workspace)?;
        let key_value = encode(first_key)?;
        self.inner
            .write_durable(|tree, batch| {
                if tree.contains_key(&ws_key).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("workspace {} exists", workspace.id)));
                }
                write_new_key(tree, batch, first_key, key_value)?;
                batch.insert(ws_key, ws_value);
                Ok(())
            })
            .await
    }

    async fn get_workspace(&self, id: WorkspaceId) -> StoreResult<Option<Workspace>> {
        self.inner.get(&layout::workspace(id).0, "workspace")
    }

    async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>> {
        // Oldest first, all of them: operators create few workspaces.
        self.inner
            .tree
            .scan_prefix([layout::WORKSPACE])
            .map(|entry| {
                let (_, value) = entry.map_err(sled_error)?;
                decode(&value, "workspace")
            })
            .collect()
    }
}
