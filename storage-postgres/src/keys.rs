//! Workspaces (`workspaces`) and API keys (`api_keys`, unique by hash).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tidings_core::ids::{ApiKeyId, WorkspaceId};
use tidings_core::model::{ApiKey, KeyHash, RateLimit, Workspace};
use tidings_core::ports::{KeyStore, Page, PageRequest, StoreError, StoreResult, WorkspaceStore};

use crate::PgStore;
use crate::db::{db_error, decode, decode_all, doc, execute, json_time, newest_first, query, query_opt, uuid};

async fn insert_key(client: &impl GenericClient, key: &ApiKey) -> StoreResult<()> {
    execute(
        client,
        "INSERT INTO api_keys (id, workspace_id, key_hash, revoked, doc) VALUES ($1, $2, $3, $4, $5)",
        &[
            &uuid(key.id.0),
            &uuid(key.workspace_id.0),
            &key.key_hash.0.as_slice(),
            &key.revoked_at.is_some(),
            &doc(key)?,
        ],
    )
    .await
    .map(drop)
}

/// Inserts a workspace and its first key (in the caller's transaction).
async fn insert_workspace(client: &impl GenericClient, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<()> {
    let sql = "INSERT INTO workspaces (id, doc) VALUES ($1, $2)";
    execute(client, sql, &[&uuid(workspace.id.0), &doc(workspace)?]).await?;
    insert_key(client, first_key).await
}

/// Revokes a live key of the workspace at `at`; `None` if it is absent or already revoked.
async fn revoke_live_key(
    store: &PgStore,
    workspace: WorkspaceId,
    id: ApiKeyId,
    at: DateTime<Utc>,
) -> StoreResult<Option<ApiKey>> {
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let row = query_opt(
        &tx,
        "SELECT doc FROM api_keys WHERE id = $1 AND workspace_id = $2 AND NOT revoked FOR UPDATE",
        &[&uuid(id.0), &uuid(workspace.0)],
    )
    .await?;
    let Some(row) = row else { return Ok(None) };
    let mut key: ApiKey = decode(&row, "api key")?;
    key.revoked_at = Some(at);
    execute(
        &tx,
        "UPDATE api_keys SET revoked = $2, doc = $3 WHERE id = $1",
        &[&uuid(id.0), &key.revoked_at.is_some(), &doc(&key)?],
    )
    .await?;
    tx.commit().await.map_err(db_error)?;
    Ok(Some(key))
}

#[async_trait]
impl WorkspaceStore for PgStore {
    async fn create_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        insert_workspace(&tx, workspace, first_key).await?;
        tx.commit().await.map_err(db_error)
    }

    async fn create_first_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // SHARE ROW EXCLUSIVE conflicts with itself and with the ROW EXCLUSIVE lock every
        // INSERT takes, but not with reads: until this commits, no other node can add a
        // workspace, and the check below (a fresh snapshot in READ COMMITTED, taken after the
        // lock is granted) sees every workspace committed before. A table lock rather than
        // an advisory lock, because it also holds off a plain `create_workspace` and is
        // scoped to this schema's table.
        tx.batch_execute("LOCK TABLE workspaces IN SHARE ROW EXCLUSIVE MODE").await.map_err(db_error)?;
        if query_opt(&tx, "SELECT 1 FROM workspaces LIMIT 1", &[]).await?.is_some() {
            return Ok(false);
        }
        insert_workspace(&tx, workspace, first_key).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }

    async fn get_workspace(&self, id: WorkspaceId) -> StoreResult<Option<Workspace>> {
        let client = self.client().await?;
        let row = query_opt(&client, "SELECT doc FROM workspaces WHERE id = $1", &[&uuid(id.0)]).await?;
        row.map(|row| decode(&row, "workspace")).transpose()
    }

    async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>> {
        let client = self.client().await?;
        decode_all(&query(&client, "SELECT doc FROM workspaces ORDER BY id", &[]).await?, "workspace")
    }
}

#[async_trait]
impl KeyStore for PgStore {
    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        insert_key(&self.client().await?, key).await
    }

    async fn find_api_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<ApiKey>> {
        let client = self.client().await?;
        let row = query_opt(&client, "SELECT doc FROM api_keys WHERE key_hash = $1", &[&hash.0.as_slice()]).await?;
        row.map(|row| decode(&row, "api key")).transpose()
    }

    async fn get_api_key(&self, workspace: WorkspaceId, id: ApiKeyId) -> StoreResult<Option<ApiKey>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM api_keys WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        row.map(|row| decode(&row, "api key")).transpose()
    }

    async fn list_api_keys(&self, workspace: WorkspaceId, page: PageRequest<ApiKeyId>) -> StoreResult<Page<ApiKey>> {
        let client = self.client().await?;
        let ws = uuid(workspace.0);
        let cursor = page.cursor.map(|c| c.0);
        newest_first(&client, "api_keys", &[("workspace_id", &ws)], Some("NOT revoked"), cursor, page.limit).await
    }

    async fn revoke_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<ApiKey> {
        revoke_live_key(self, workspace, id, at).await?.ok_or(StoreError::NotFound)
    }

    async fn set_api_key_rate_limit(
        &self,
        workspace: WorkspaceId,
        id: ApiKeyId,
        rate_limit: RateLimit,
    ) -> StoreResult<ApiKey> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let sql = "SELECT doc FROM api_keys WHERE id = $1 AND workspace_id = $2 AND NOT revoked FOR UPDATE";
        let row = query_opt(&tx, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?.ok_or(StoreError::NotFound)?;
        let mut key: ApiKey = decode(&row, "api key")?;
        key.rate_limit = rate_limit;
        execute(&tx, "UPDATE api_keys SET doc = $2 WHERE id = $1", &[&uuid(id.0), &doc(&key)?]).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(key)
    }

    async fn touch_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<()> {
        // One statement, no read: this runs on every authenticated request. Only a later
        // time is written, so concurrent touches keep the latest.
        let client = self.client().await?;
        execute(
            &client,
            "UPDATE api_keys SET doc = jsonb_set(doc, '{last_used_at}', $3)
             WHERE id = $1 AND workspace_id = $2 AND NOT revoked
               AND (doc->>'last_used_at' IS NULL OR (doc->>'last_used_at')::timestamptz < $4)",
            &[&uuid(id.0), &uuid(workspace.0), &json_time(at)?, &at],
        )
        .await
        .map(drop)
    }
}
