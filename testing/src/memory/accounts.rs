//! Workspaces, API keys, suppressions and secrets of the [`MemoryStore`](super::MemoryStore).

use super::*;
use tidings_core::model::RateLimit;

#[async_trait]
impl WorkspaceStore for MemoryStore {
    async fn create_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<()> {
        self.state().create_workspace(workspace, first_key)
    }

    async fn create_first_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<bool> {
        let mut st = self.state();
        if !st.workspaces.is_empty() {
            return Ok(false);
        }
        st.create_workspace(workspace, first_key).map(|()| true)
    }

    async fn get_workspace(&self, id: WorkspaceId) -> StoreResult<Option<Workspace>> {
        Ok(self.state().workspaces.get(&id).cloned())
    }

    async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>> {
        Ok(self.state().workspaces.values().cloned().collect())
    }
}

#[async_trait]
impl KeyStore for MemoryStore {
    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        let mut st = self.state();
        if let Some(e) = st.key_conflict(key) {
            return Err(e);
        }
        st.keys.insert(key.id, key.clone());
        Ok(())
    }

    async fn find_api_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<ApiKey>> {
        Ok(self.state().keys.values().find(|k| k.key_hash == *hash).cloned())
    }

    async fn get_api_key(&self, workspace: WorkspaceId, id: ApiKeyId) -> StoreResult<Option<ApiKey>> {
        Ok(self.state().keys.get(&id).filter(|k| k.workspace_id == workspace).cloned())
    }

    async fn list_api_keys(&self, workspace: WorkspaceId, page: PageRequest<ApiKeyId>) -> StoreResult<Page<ApiKey>> {
        Ok(newest_first(&self.state().keys, &page, |k| k.workspace_id == workspace && k.revoked_at.is_none()))
    }

    async fn revoke_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<ApiKey> {
        let mut st = self.state();
        let key = st
            .keys
            .get_mut(&id)
            .filter(|k| k.workspace_id == workspace && k.revoked_at.is_none())
            .ok_or(StoreError::NotFound)?;
        key.revoked_at = Some(at);
        Ok(key.clone())
    }

    async fn set_api_key_rate_limit(
        &self,
        workspace: WorkspaceId,
        id: ApiKeyId,
        rate_limit: RateLimit,
    ) -> StoreResult<ApiKey> {
        let mut st = self.state();
        let key = st
            .keys
            .get_mut(&id)
            .filter(|k| k.workspace_id == workspace && k.revoked_at.is_none())
            .ok_or(StoreError::NotFound)?;
        key.rate_limit = rate_limit;
        Ok(key.clone())
    }

    async fn touch_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<()> {
        let mut st = self.state();
        if let Some(key) = st.keys.get_mut(&id).filter(|k| k.workspace_id == workspace && k.revoked_at.is_none()) {
            key.last_used_at = Some(key.last_used_at.map_or(at, |last| last.max(at)));
        }
        Ok(())
    }
}

#[async_trait]
impl SuppressionStore for MemoryStore {
    async fn insert_suppression(&self, suppression: &Suppression) -> StoreResult<(Suppression, bool)> {
        let mut st = self.state();
        if let Some(existing) = st.suppression_of(suppression.workspace_id, &suppression.email) {
            return Ok((existing.clone(), false));
        }
        if st.suppressions.contains_key(&suppression.id) {
            return Err(conflict("suppression id exists"));
        }
        st.suppressions.insert(suppression.id, suppression.clone());
        Ok((suppression.clone(), true))
    }

    async fn get_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<Option<Suppression>> {
        Ok(self.state().suppression_of(workspace, email).cloned())
    }

    async fn list_suppressions(
        &self,
        workspace: WorkspaceId,
        reason: Option<SuppressionReason>,
        page: PageRequest<SuppressionId>,
    ) -> StoreResult<Page<Suppression>> {
        Ok(newest_first(&self.state().suppressions, &page, |s| {
            s.workspace_id == workspace && reason.is_none_or(|r| s.reason == r)
        }))
    }

    async fn delete_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<()> {
        let mut st = self.state();
        let id = st.suppression_of(workspace, email).map(|s| s.id).ok_or(StoreError::NotFound)?;
        st.suppressions.remove(&id);
        Ok(())
    }
}

#[async_trait]
impl SecretStore for MemoryStore {
    async fn ensure_secret(&self, name: SecretName, candidate: &Secret<Vec<u8>>) -> StoreResult<Secret<Vec<u8>>> {
        let label = secret_label(name.as_str());
        let sealed = self
            .sealer
            .seal(&label, candidate.expose())
            .map_err(|e| StoreError::Corrupt(tidings_core::Cause::new(e)))?;
        let stored = self.state().secrets.entry(name).or_insert(sealed).clone();
        self.sealer.open(&label, &stored).map(Secret::new).map_err(|e| StoreError::Corrupt(tidings_core::Cause::new(e)))
    }
}

impl State {
    fn create_workspace(&mut self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<()> {
        if self.workspaces.contains_key(&workspace.id) {
            return Err(conflict("workspace id exists"));
        }
        if let Some(e) = self.key_conflict(first_key) {
            return Err(e);
        }
        self.workspaces.insert(workspace.id, workspace.clone());
        self.keys.insert(first_key.id, first_key.clone());
        Ok(())
    }
}
