//! Domains (`domains`, unique by name per workspace) and their senders (`senders`, unique by
//! lower-cased username per domain, deleted with their domain).
//!
//! Every send reads its domain and sender and every delivery its domain again: each node
//! keeps what it read, and every change notifies the nodes at its commit
//! (`workspace_cache.rs`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tidings_core::domain_name::DomainName;
use tidings_core::ids::{DomainId, SenderId, WorkspaceId};
use tidings_core::model::{Domain, Sender, SenderUsername};
use tidings_core::ports::{DomainStore, Page, PageRequest, StoreError, StoreResult};

use crate::PgStore;
use crate::db::{db_error, decode, doc, limit as sql_limit, newest_first, query, query_opt, uuid};
use crate::sealing::{open_page, open_row, open_rows, sealed_doc};
use crate::workspace_cache::CHANNEL;

/// The column form of a username: matched case-insensitively, as ASCII.
fn username_key(username: &SenderUsername) -> String {
    username.as_str().to_ascii_lowercase()
}

impl PgStore {
    /// Replaces a domain in one transaction, its row locked (`FOR UPDATE`) while `allowed`
    /// judges the stored version: what makes `update_domain_keys` a compare-and-swap across
    /// nodes.
    async fn replace_domain(
        &self,
        domain: &Domain,
        allowed: impl FnOnce(&Domain) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let (id, ws) = (uuid(domain.id.0), uuid(domain.workspace_id.0));
        let sql = "SELECT doc FROM domains WHERE id = $1 AND workspace_id = $2 FOR UPDATE";
        let row = query_opt(&tx, sql, &[&id, &ws]).await?.ok_or(StoreError::NotFound)?;
        let stored: Domain = open_row(&self.sealer, &row, "domain")?;
        allowed(&stored)?;
        query(
            &tx,
            "WITH changed AS (
                 UPDATE domains SET settled = $2, checked_at = $3, doc = $4, rotation_due_from = $6
                 WHERE id = $1 RETURNING workspace_id
             )
             SELECT pg_notify($5, workspace_id::text) FROM changed",
            &[
                &id,
                &!domain.needs_recheck(),
                &domain.checked_or_created_at(),
                &sealed_doc(&self.sealer, domain)?,
                &CHANNEL,
                &domain.rotation_due_from(),
            ],
        )
        .await?;
        tx.commit().await.map_err(db_error)?;
        self.cache.invalidate(Some(ws));
        Ok(())
    }
}

#[async_trait]
impl DomainStore for PgStore {
    async fn insert_domain(&self, domain: &Domain) -> StoreResult<()> {
        let client = self.client().await?;
        query(
            &client,
            "WITH changed AS (
                 INSERT INTO domains (id, workspace_id, name, settled, checked_at, doc, rotation_due_from)
                 VALUES ($1, $2, $3, $4, $5, $6, $8) RETURNING workspace_id
             )
             SELECT pg_notify($7, workspace_id::text) FROM changed",
            &[
                &uuid(domain.id.0),
                &uuid(domain.workspace_id.0),
                &domain.name.as_str(),
                &!domain.needs_recheck(),
                &domain.checked_or_created_at(),
                &sealed_doc(&self.sealer, domain)?,
                &CHANNEL,
                &domain.rotation_due_from(),
            ],
        )
        .await?;
        self.cache.invalidate(Some(uuid(domain.workspace_id.0)));
        Ok(())
    }

    async fn get_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<Option<Domain>> {
        let key = uuid(id.0);
        let ticket = match self.cache.get(workspace, |kept| kept.domains.get(&key).cloned()) {
            Ok(kept) => return Ok(kept),
            Err(ticket) => ticket,
        };
        let client = self.client().await?;
        let sql = "SELECT doc FROM domains WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&key, &uuid(workspace.0)]).await?;
        let domain: Option<Domain> = row.map(|row| open_row(&self.sealer, &row, "domain")).transpose()?;
        if let Some(ticket) = ticket {
            self.cache.keep(workspace, ticket, |kept| drop(kept.domains.insert(key, domain.clone())));
        }
        Ok(domain)
    }

    async fn find_domain_by_name(&self, workspace: WorkspaceId, name: &DomainName) -> StoreResult<Option<Domain>> {
        let ticket = match self.cache.get(workspace, |kept| kept.domains_by_name.get(name.as_str()).cloned()) {
            Ok(kept) => return Ok(kept),
            Err(ticket) => ticket,
        };
        let client = self.client().await?;
        let sql = "SELECT doc FROM domains WHERE workspace_id = $1 AND name = $2";
        let row = query_opt(&client, sql, &[&uuid(workspace.0), &name.as_str()]).await?;
        let domain: Option<Domain> = row.map(|row| open_row(&self.sealer, &row, "domain")).transpose()?;
        if let Some(ticket) = ticket {
            let name = name.as_str().to_owned();
            self.cache.keep(workspace, ticket, |kept| drop(kept.domains_by_name.insert(name, domain.clone())));
        }
        Ok(domain)
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
        self.replace_domain(domain, |stored| {
            if stored.name != domain.name || !stored.same_keys(domain) {
                return Err(StoreError::Conflict("a domain's name and keys cannot change".to_owned()));
            }
            Ok(())
        })
        .await
    }

    async fn update_domain_keys(&self, domain: &Domain, expected: &Domain) -> StoreResult<()> {
        self.replace_domain(domain, |stored| {
            if stored.name != domain.name {
                return Err(StoreError::Conflict("a domain's name cannot change".to_owned()));
            }
            if !stored.same_keys(expected) {
                return Err(StoreError::Conflict("the domain's DKIM keys changed meanwhile".to_owned()));
            }
            Ok(())
        })
        .await
    }

    async fn delete_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<()> {
        let client = self.client().await?;
        // Its senders go with it (ON DELETE CASCADE).
        let sql = "WITH changed AS (DELETE FROM domains WHERE id = $1 AND workspace_id = $2 RETURNING workspace_id)
                   SELECT pg_notify($3, workspace_id::text) FROM changed";
        let deleted = query(&client, sql, &[&uuid(id.0), &uuid(workspace.0), &CHANNEL]).await?;
        self.cache.invalidate(Some(uuid(workspace.0)));
        if deleted.is_empty() { Err(StoreError::NotFound) } else { Ok(()) }
    }

    async fn list_domains_to_recheck(&self, checked_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM domains WHERE NOT settled AND checked_at < $1 ORDER BY checked_at, id LIMIT $2";
        open_rows(&self.sealer, &query(&client, sql, &[&checked_before, &sql_limit(limit)]).await?, "domain")
    }

    async fn list_domains_to_rotate(&self, made_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM domains WHERE rotation_due_from < $1 ORDER BY rotation_due_from, id LIMIT $2";
        open_rows(&self.sealer, &query(&client, sql, &[&made_before, &sql_limit(limit)]).await?, "domain")
    }

    async fn insert_sender(&self, sender: &Sender) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let sql = "SELECT 1 FROM domains WHERE id = $1 AND workspace_id = $2 FOR KEY SHARE";
        let (domain, ws) = (uuid(sender.domain_id.0), uuid(sender.workspace_id.0));
        query_opt(&tx, sql, &[&domain, &ws]).await?.ok_or(StoreError::NotFound)?;
        query(
            &tx,
            "WITH changed AS (
                 INSERT INTO senders (id, workspace_id, domain_id, username_lower, doc)
                 VALUES ($1, $2, $3, $4, $5) RETURNING workspace_id
             )
             SELECT pg_notify($6, workspace_id::text) FROM changed",
            &[&uuid(sender.id.0), &ws, &domain, &username_key(&sender.username), &doc(sender)?, &CHANNEL],
        )
        .await?;
        tx.commit().await.map_err(db_error)?;
        self.cache.invalidate(Some(ws));
        Ok(())
    }

    async fn get_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<Option<Sender>> {
        let key = (uuid(domain.0), username_key(username));
        let ticket = match self.cache.get(workspace, |kept| kept.senders.get(&key).cloned()) {
            Ok(kept) => return Ok(kept),
            Err(ticket) => ticket,
        };
        let client = self.client().await?;
        let sql = "SELECT doc FROM senders WHERE domain_id = $1 AND username_lower = $2 AND workspace_id = $3";
        let row = query_opt(&client, sql, &[&key.0, &key.1, &uuid(workspace.0)]).await?;
        let sender: Option<Sender> = row.map(|row| decode(&row, "sender")).transpose()?;
        if let Some(ticket) = ticket {
            self.cache.keep(workspace, ticket, |kept| drop(kept.senders.insert(key, sender.clone())));
        }
        Ok(sender)
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
        let sql = "WITH changed AS (
                       DELETE FROM senders WHERE domain_id = $1 AND username_lower = $2 AND workspace_id = $3
                       RETURNING workspace_id
                   )
                   SELECT pg_notify($4, workspace_id::text) FROM changed";
        let deleted =
            query(&client, sql, &[&uuid(domain.0), &username_key(username), &uuid(workspace.0), &CHANNEL]).await?;
        self.cache.invalidate(Some(uuid(workspace.0)));
        if deleted.is_empty() { Err(StoreError::NotFound) } else { Ok(()) }
    }
}
