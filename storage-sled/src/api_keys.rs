//! API keys: the record under `API_KEY ‖ ws ‖ id`, a global index by hash (authentication
//! comes before the workspace is known) and an index of unrevoked keys so listing them skips
//! no revoked ones.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sled::Tree;
use tidings_core::ids::{ApiKeyId, WorkspaceId};
use tidings_core::model::{ApiKey, KeyHash, RateLimit};
use tidings_core::ports::{KeyStore, Page, PageRequest, StoreError, StoreResult};

use crate::SledStore;
use crate::codec::{bad_key, decode_id, encode, sled_error};
use crate::db::{Batch, Order, get, page};
use crate::layout;

/// Adds a new key to `batch` after checking that neither its id nor its hash exists.
pub fn write_new_key(tree: &Tree, batch: &mut Batch, key: &ApiKey, value: Vec<u8>) -> StoreResult<()> {
    let record = layout::api_key(key.workspace_id, key.id).0;
    let hash = layout::api_key_hash(&key.key_hash).0;
    if tree.contains_key(&record).map_err(sled_error)? || tree.contains_key(&hash).map_err(sled_error)? {
        return Err(StoreError::Conflict("an API key with this id or hash exists".into()));
    }
    let pointer = [key.workspace_id.to_bytes(), key.id.to_bytes()].concat();
    batch.insert(hash, pointer);
    if key.revoked_at.is_none() {
        batch.insert(layout::api_key_active(key.workspace_id, key.id).0, &[]);
    }
    batch.insert(record, value);
    Ok(())
}

#[async_trait]
impl KeyStore for SledStore {
    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        let value = encode(key)?;
        self.inner.write_durable(|tree, batch| write_new_key(tree, batch, key, value)).await
    }

    async fn find_api_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<ApiKey>> {
        let Some(pointer) = self.inner.tree()?.get(layout::api_key_hash(hash).0).map_err(sled_error)? else {
            return Ok(None);
        };
        let (ws, id) = pointer.split_at_checked(16).ok_or_else(|| bad_key("key hash index value"))?;
        let ws = WorkspaceId::from_bytes(decode_id(ws, "key hash index")?);
        let id = ApiKeyId::from_bytes(decode_id(id, "key hash index")?);
        self.inner.get(&layout::api_key(ws, id).0, "API key")
    }

    async fn get_api_key(&self, workspace: WorkspaceId, id: ApiKeyId) -> StoreResult<Option<ApiKey>> {
        self.inner.get(&layout::api_key(workspace, id).0, "API key")
    }

    async fn list_api_keys(
        &self,
        workspace: WorkspaceId,
        page_req: PageRequest<ApiKeyId>,
    ) -> StoreResult<Page<ApiKey>> {
        let prefix = layout::Key::new(layout::API_KEY_ACTIVE).id(workspace.to_bytes()).0;
        let cursor = page_req.cursor.map(ApiKeyId::to_bytes);
        let tree = self.inner.tree()?;
        page(tree, &prefix, cursor.as_ref().map(|c| &c[..]), page_req.limit, Order::NewestFirst, |key, _| {
            let id = ApiKeyId::from_bytes(layout::trailing_id(key).ok_or_else(|| bad_key("active key"))?);
            // A key revoked between the index read and this one is skipped.
            let key: Option<ApiKey> = get(tree, &layout::api_key(workspace, id).0, "API key")?;
            Ok(key.filter(|k| k.revoked_at.is_none()))
        })
    }

    async fn revoke_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<ApiKey> {
        let record = layout::api_key(workspace, id).0;
        self.inner
            .write_durable(|tree, batch| {
                let mut key: ApiKey = get(tree, &record, "API key")?.ok_or(StoreError::NotFound)?;
                if key.revoked_at.is_some() {
                    return Err(StoreError::NotFound);
                }
                key.revoked_at = Some(at);
                batch.insert(record.clone(), encode(&key)?);
                batch.remove(layout::api_key_active(workspace, id).0);
                Ok(key)
            })
            .await
    }

    async fn set_api_key_rate_limit(
        &self,
        workspace: WorkspaceId,
        id: ApiKeyId,
        rate_limit: RateLimit,
    ) -> StoreResult<ApiKey> {
        let record = layout::api_key(workspace, id).0;
        self.inner
            .write_durable(|tree, batch| {
                let mut key: ApiKey = get(tree, &record, "API key")?.ok_or(StoreError::NotFound)?;
                if key.revoked_at.is_some() {
                    return Err(StoreError::NotFound);
                }
                key.rate_limit = rate_limit;
                batch.insert(record.clone(), encode(&key)?);
                Ok(key)
            })
            .await
    }

    async fn touch_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<()> {
        let record = layout::api_key(workspace, id).0;
        // Under the writer lock, so a touch can never overwrite a concurrent revocation.
        // Not waited for: losing the last half second of `last_used_at` on a crash is fine.
        self.inner.write(|tree, batch| {
            if let Some(mut key) = get::<ApiKey>(tree, &record, "API key")?
                && key.revoked_at.is_none()
                && key.last_used_at.is_none_or(|last| last < at)
            {
                // Touches may arrive out of order: keep the latest.
                key.last_used_at = Some(at);
                batch.insert(record.clone(), encode(&key)?);
            }
            Ok(())
        })
    }
}
