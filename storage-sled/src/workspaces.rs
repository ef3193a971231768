//! Workspaces: `WORKSPACE ‖ ws`, created together with their first key.

use async_trait::async_trait;
use sled::Tree;
use tidings_core::ids::WorkspaceId;
use tidings_core::model::{ApiKey, Workspace};
use tidings_core::ports::{StoreError, StoreResult, WorkspaceStore};

use crate::SledStore;
use crate::api_keys::write_new_key;
use crate::codec::{decode, encode, sled_error};
use crate::db::Batch;
use crate::layout;

/// A workspace and its first key, encoded before the writer lock is taken.
struct NewWorkspace<'a> {
    workspace: &'a Workspace,
    first_key: &'a ApiKey,
    workspace_value: Vec<u8>,
    key_value: Vec<u8>,
}

impl<'a> NewWorkspace<'a> {
    fn encode(workspace: &'a Workspace, first_key: &'a ApiKey) -> StoreResult<Self> {
        Ok(Self { workspace, first_key, workspace_value: encode(workspace)?, key_value: encode(first_key)? })
    }

    /// Adds the workspace and its key to `batch` after checking that neither exists.
    fn write(self, tree: &Tree, batch: &mut Batch) -> StoreResult<()> {
        let ws_key = layout::workspace(self.workspace.id).0;
        if tree.contains_key(&ws_key).map_err(sled_error)? {
            return Err(StoreError::Conflict(format!("workspace {} exists", self.workspace.id)));
        }
        write_new_key(tree, batch, self.first_key, self.key_value)?;
        batch.insert(ws_key, self.workspace_value);
        Ok(())
    }
}

#[async_trait]
impl WorkspaceStore for SledStore {
    async fn create_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<()> {
        let new = NewWorkspace::encode(workspace, first_key)?;
        self.inner.write_durable(|tree, batch| new.write(tree, batch)).await
    }

    async fn create_first_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<bool> {
        let new = NewWorkspace::encode(workspace, first_key)?;
        // Under the writer lock, so no workspace can be written between the look and the write.
        self.inner
            .write_durable(|tree, batch| {
                if tree.scan_prefix([layout::WORKSPACE]).next().transpose().map_err(sled_error)?.is_some() {
                    return Ok(false);
                }
                new.write(tree, batch).map(|()| true)
            })
            .await
    }

    async fn get_workspace(&self, id: WorkspaceId) -> StoreResult<Option<Workspace>> {
        self.inner.get(&layout::workspace(id).0, "workspace")
    }

    async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>> {
        // Oldest first, all of them: operators create few workspaces.
        self.inner
            .tree()?
            .scan_prefix([layout::WORKSPACE])
            .map(|entry| {
                let (_, value) = entry.map_err(sled_error)?;
                decode(&value, "workspace")
            })
            .collect()
    }
}
