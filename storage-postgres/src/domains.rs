//! Domains (`domains`, unique by name per workspace) and their senders (`senders`, unique by
//! lower-cased username per domain, deleted with their domain).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tidings_core::domain_name::DomainName;
use tidings_core::ids::{DomainId, SenderId, WorkspaceId};
use tidings_core::model::{Domain, DomainStatus, Sender, SenderUsername};
use tidings_core::ports::{DomainStore, Page, PageRequest, StoreError, StoreResult};

use crate::PgStore;
use crate::db::{db_error, decode, doc, execute, limit as sql_limit, newest_first, query, query_opt, uuid};
use crate::sealing::{open_page, open_row, open_rows, sealed_doc};

/// The column form of a username: matched case-insensitively, as ASCII.
fn username_key(username: &SenderUsername) -> String {
    username.as_str().to_ascii_lowercase()
}

#[async_trait]
impl DomainStore for PgStore {
    async fn insert_domain(&self, domain: &Domain) -> StoreResult<()> {
        let client = self.client().await?;
        execute(
            &client,
            "INSERT INTO domains (id, workspace_id, name, verified, checked_at, doc) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &uuid(domain.id.0),
                &uuid(domain.workspace_id.0),
                &domain.name.as_str(),
                &(domain.status == DomainStatus::Verified),
                &domain.checked_or_created_at(),
                &sealed_doc(&self.sealer, domain)?,
            ],
        )
        .await
        .map(drop)
    }

    async fn get_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<Option<Domain>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM domains WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        row.map(|row| open_row(&self.sealer, &row, "domain")).transpose()
    }

    async fn find_domain_by_name(&self, workspace: WorkspaceId, name: &DomainName) -> StoreResult<Option<Domain>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM domains WHERE workspace_id = $1 AND name = $2";
        let row = query_opt(&client, sql, &[&uuid(workspace.0), &name.as_str()]).await?;
        row.map(|row| open_row(&self.sealer, &row, "domain")).transpose()
    }

    async fn list_domains(&self, workspace: WorkspaceId, page: PageRequest<DomainId>) -> StoreResult<Page<Domain>> {
        let client = self.client().await?;
        let ws = uuid(workspace.0);
        let page =
            newest_first(&client, "domains", &[("workspace_id", &ws)], None, page.cursor.map(|c| c.0), page.limit)
                .await?;
        open_page(&self.sealer, page)
    }

    async fn update_domain(&self, domain: &Domain) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let (id, ws) = (uuid(domain.id.0), uuid(domain.workspace_id.0));
        let sql = "SELECT doc FROM domains WHERE id = $1 AND workspace_id = $2 FOR UPDATE";
        let row = query_opt(&tx, sql, &[&id, &ws]).await?.ok_or(StoreError::NotFound)?;
        let stored: Domain = open_row(&self.sealer, &row, "domain")?;
        if stored.name != domain.name || stored.dkim != domain.dkim {
            return Err(StoreError::Conflict("a domain's name and keys cannot change".to_owned()));
        }
        execute(
            &tx,
            "UPDATE domains SET verified = $2, checked_at = $3, doc = $4 WHERE id = $1",
            &[
                &id,
                &(domain.status == DomainStatus::Verified),
                &domain.checked_or_created_at(),
                &sealed_doc(&self.sealer, domain)?,
            ],
        )
        .await?;
        tx.commit().await.map_err(db_error)
    }

    async fn delete_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<()> {
        let client = self.client().await?;
        // Its senders go with it (ON DELETE CASCADE).
        let sql = "DELETE FROM domains WHERE id = $1 AND workspace_id = $2";
        let deleted = execute(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        if deleted == 0 { Err(StoreError::NotFound) } else { Ok(()) }
    }

    async fn list_domains_to_recheck(&self, checked_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM domains WHERE NOT verified AND checked_at < $1 ORDER BY checked_at, id LIMIT $2";
        open_rows(&self.sealer, &query(&client, sql, &[&checked_before, &sql_limit(limit)]).await?, "domain")
    }

    async fn insert_sender(&self, sender: &Sender) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let sql = "SELECT 1 FROM domains WHERE id = $1 AND workspace_id = $2 FOR KEY SHARE";
        let (domain, ws) = (uuid(sender.domain_id.0), uuid(sender.workspace_id.0));
        query_opt(&tx, sql, &[&domain, &ws]).await?.ok_or(StoreError::NotFound)?;
        execute(
            &tx,
            "INSERT INTO senders (id, workspace_id, domain_id, username_lower, doc) VALUES ($1, $2, $3, $4, $5)",
            &[&uuid(sender.id.0), &ws, &domain, &username_key(&sender.username), &doc(sender)?],
        )
        .await?;
        tx.commit().await.map_err(db_error)
    }

    async fn get_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<Option<Sender>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM senders WHERE domain_id = $1 AND username_lower = $2 AND workspace_id = $3";
        let row = query_opt(&client, sql, &[&uuid(domain.0), &username_key(username), &uuid(workspace.0)]).await?;
        row.map(|row| decode(&row, "sender")).transpose()
    }

    async fn list_senders(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        page: PageRequest<SenderId>,
    ) -> StoreResult<Page<Sender>> {
        let client = self.client().await?;
        let (ws, domain) = (uuid(workspace.0), uuid(domain.0));
        let filters = [("workspace_id", &ws as _), ("domain_id", &domain as _)];
        newest_first(&client, "senders", &filters, None, page.cursor.map(|c| c.0), page.limit).await
    }

    async fn delete_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<()> {
        let client = self.client().await?;
        let sql = "DELETE FROM senders WHERE domain_id = $1 AND username_lower = $2 AND workspace_id = $3";
        let deleted = execute(&client, sql, &[&uuid(domain.0), &username_key(username), &uuid(workspace.0)]).await?;
        if deleted == 0 { Err(StoreError::NotFound) } else { Ok(()) }
    }
}
