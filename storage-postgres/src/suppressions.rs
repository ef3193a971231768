//! The suppression list (`suppressions`, unique by normalized address per workspace).

use async_trait::async_trait;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{SuppressionId, WorkspaceId};
use tidings_core::model::{Suppression, SuppressionReason};
use tidings_core::ports::{Page, PageRequest, StoreError, StoreResult, SuppressionStore};

use crate::PgStore;
use crate::db::{Param, decode, doc, execute, newest_first, query_opt, uuid};

#[async_trait]
impl SuppressionStore for PgStore {
    async fn insert_suppression(&self, suppression: &Suppression) -> StoreResult<(Suppression, bool)> {
        let client = self.client().await?;
        let (ws, email) = (uuid(suppression.workspace_id.0), suppression.email.normalized());
        // An entry deleted between the insert that found it and the read is retried.
        for _ in 0..3 {
            let inserted = query_opt(
                &client,
                "INSERT INTO suppressions (id, workspace_id, email_norm, reason, doc) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (workspace_id, email_norm) DO NOTHING RETURNING 1",
                &[&uuid(suppression.id.0), &ws, &email, &suppression.reason.as_str(), &doc(suppression)?],
            )
            .await?;
            if inserted.is_some() {
                return Ok((suppression.clone(), true));
            }
            let sql = "SELECT doc FROM suppressions WHERE workspace_id = $1 AND email_norm = $2";
            if let Some(row) = query_opt(&client, sql, &[&ws, &email]).await? {
                return Ok((decode(&row, "suppression")?, false));
            }
        }
        Err(StoreError::Unavailable("suppression keeps changing; retry".into()))
    }

    async fn get_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<Option<Suppression>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM suppressions WHERE workspace_id = $1 AND email_norm = $2";
        let row = query_opt(&client, sql, &[&uuid(workspace.0), &email.normalized()]).await?;
        row.map(|row| decode(&row, "suppression")).transpose()
    }

    async fn list_suppressions(
        &self,
        workspace: WorkspaceId,
        reason: Option<SuppressionReason>,
        page: PageRequest<SuppressionId>,
    ) -> StoreResult<Page<Suppression>> {
        let client = self.client().await?;
        let ws = uuid(workspace.0);
        let reason = reason.map(SuppressionReason::as_str);
        let mut filters: Vec<(&str, Param<'_>)> = vec![("workspace_id", &ws)];
        if let Some(reason) = &reason {
            filters.push(("reason", reason));
        }
        newest_first(&client, "suppressions", &filters, None, page.cursor.map(|c| c.0), page.limit).await
    }

    async fn delete_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<()> {
        let client = self.client().await?;
        let sql = "DELETE FROM suppressions WHERE workspace_id = $1 AND email_norm = $2";
        let deleted = execute(&client, sql, &[&uuid(workspace.0), &email.normalized()]).await?;
        if deleted == 0 { Err(StoreError::NotFound) } else { Ok(()) }
    }
}
