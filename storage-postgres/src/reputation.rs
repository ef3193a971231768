//! The reputation guard's standings (`tidings_core::reputation`) in the `reputation` table:
//! a change is an insert (no record yet) or an update guarded by the version it was made
//! from, in one transaction with the webhook deliveries that announce it, so that however
//! many nodes judge a workspace at once, each change and its event happen once.

use async_trait::async_trait;
use tidings_core::ids::WorkspaceId;
use tidings_core::model::WebhookDelivery;
use tidings_core::ports::{ReputationStore, StoreError, StoreResult};
use tidings_core::reputation::{Scope, ScopeReputation};

use crate::PgStore;
use crate::db::{db_error, decode_all, doc, execute, query, uuid};
use crate::webhooks::{Missing, insert_deliveries};

/// The `scope` column: `workspace`, or the domain's id.
fn scope_column(scope: Scope) -> String {
    match scope {
        Scope::Workspace => "workspace".to_owned(),
        Scope::Domain(id) => id.to_string(),
    }
}

/// A version as the `bigint` column holds it (versions count changes: never near 2^63).
fn version(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl ReputationStore for PgStore {
    async fn reputation(&self, workspace: WorkspaceId) -> StoreResult<Vec<ScopeReputation>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM reputation WHERE workspace_id = $1 ORDER BY scope";
        let mut records: Vec<ScopeReputation> =
            decode_all(&query(&client, sql, &[&uuid(workspace.0)]).await?, "reputation")?;
        records.sort_by_key(|r| r.scope);
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
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let (ws, scope, body) = (uuid(next.workspace_id.0), scope_column(next.scope), doc(next)?);
        let written = if expected == 0 {
            let sql = "INSERT INTO reputation (workspace_id, scope, version, doc) VALUES ($1, $2, $3, $4)
                       ON CONFLICT (workspace_id, scope) DO NOTHING";
            execute(&tx, sql, &[&ws, &scope, &version(next.version), &body]).await?
        } else {
            let sql = "UPDATE reputation SET version = $3, doc = $4
                       WHERE workspace_id = $1 AND scope = $2 AND version = $5";
            execute(&tx, sql, &[&ws, &scope, &version(next.version), &body, &version(expected)]).await?
        };
        if written == 0 {
            return Ok(false);
        }
        insert_deliveries(&tx, deliveries, Missing::Drop).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }
}
