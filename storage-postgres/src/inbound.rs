//! Inbound mail (`InboundStore`) in `inbound_routes`, `inbound_messages` and `inbound_usage`
//! (migration 0019).
//!
//! A route's matcher column is [`RouteMatch::normalized`](tidings_core::model::RouteMatch),
//! unique per workspace, so racing writers settle on the constraint. A message is written in
//! one transaction that first locks its workspace's usage row (creating it if missing) and
//! checks the quota against it with [`InboundUsage::admits`]: racing inserts of a workspace
//! take turns there, so none overshoots the quota, and the message, its raw bytes, its
//! webhook deliveries and the new usage commit together or not at all. Retention deletes
//! the earliest received messages and gives their usage back in one transaction, locking
//! the usage rows in workspace order so that nodes purging at once cannot deadlock.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{InboundMessageId, InboundRouteId, WorkspaceId};
use tidings_core::model::{InboundMessage, InboundRoute, WebhookDelivery};
use tidings_core::ports::{
    InboundQuery, InboundQuota, InboundStore, InboundUsage, Page, PageRequest, StoreError, StoreResult,
};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::PgStore;
use crate::db::{
    Param, db_error, decode, decode_all, doc, execute, limit as sql_limit, newest_first_where, query, query_opt, uuid,
};
use crate::webhooks::{Missing, insert_deliveries};

/// A count as the `bigint` columns hold it (quotas keep them far below 2^63).
fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn read_u64(row: &Row, column: &str) -> StoreResult<u64> {
    let n: i64 = row.try_get(column).map_err(|e| StoreError::corrupt("inbound usage", e))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The `from_address` column: compared as `InboundQuery::matches` does, ASCII
/// case-insensitively, as bytes (the address is as written and may hold a NUL).
fn from_column(address: &str) -> Vec<u8> {
    address.to_ascii_lowercase().into_bytes()
}

/// The workspace's usage row, created if missing and locked until the transaction ends.
async fn lock_usage(client: &impl GenericClient, ws: &Uuid) -> StoreResult<InboundUsage> {
    let create = "INSERT INTO inbound_usage (workspace_id, messages, bytes) VALUES ($1, 0, 0)
                  ON CONFLICT (workspace_id) DO NOTHING";
    execute(client, create, &[ws]).await?;
    let lock = "SELECT messages, bytes FROM inbound_usage WHERE workspace_id = $1 FOR UPDATE";
    let row = query_opt(client, lock, &[ws])
        .await?
        .ok_or_else(|| StoreError::Corrupt("inbound usage row vanished under its lock".into()))?;
    Ok(InboundUsage { messages: read_u64(&row, "messages")?, bytes: read_u64(&row, "bytes")? })
}

#[async_trait]
impl InboundStore for PgStore {
    async fn insert_inbound_route(&self, route: &InboundRoute) -> StoreResult<()> {
        let client = self.client().await?;
        execute(
            &client,
            "INSERT INTO inbound_routes (id, workspace_id, matcher, doc) VALUES ($1, $2, $3, $4)",
            &[&uuid(route.id.0), &uuid(route.workspace_id.0), &route.matcher.normalized(), &doc(route)?],
        )
        .await?;
        Ok(())
    }

    async fn list_inbound_routes(&self, workspace: WorkspaceId) -> StoreResult<Vec<InboundRoute>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM inbound_routes WHERE workspace_id = $1 ORDER BY id";
        decode_all(&query(&client, sql, &[&uuid(workspace.0)]).await?, "inbound route")
    }

    async fn update_inbound_route(&self, route: &InboundRoute) -> StoreResult<()> {
        let client = self.client().await?;
        let changed = execute(
            &client,
            "UPDATE inbound_routes SET matcher = $3, doc = $4 WHERE id = $1 AND workspace_id = $2",
            &[&uuid(route.id.0), &uuid(route.workspace_id.0), &route.matcher.normalized(), &doc(route)?],
        )
        .await?;
        if changed == 0 { Err(StoreError::NotFound) } else { Ok(()) }
    }

    async fn delete_inbound_route(&self, workspace: WorkspaceId, id: InboundRouteId) -> StoreResult<()> {
        let client = self.client().await?;
        let sql = "DELETE FROM inbound_routes WHERE id = $1 AND workspace_id = $2";
        let deleted = execute(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        if deleted == 0 { Err(StoreError::NotFound) } else { Ok(()) }
    }

    async fn insert_inbound(
        &self,
        message: &InboundMessage,
        raw: &[u8],
        deliveries: &[WebhookDelivery],
        quota: &InboundQuota,
    ) -> StoreResult<bool> {
        let (id, ws) = (uuid(message.id.0), uuid(message.workspace_id.0));
        let stored_bytes = message.stored_bytes();
        let recipients: Vec<String> = message.envelope.recipients.iter().map(EmailAddress::normalized).collect();
        let from = message.parsed.from.as_ref().map(|f| from_column(&f.address));
        let body = doc(message)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let usage = lock_usage(&tx, &ws).await?;
        if !usage.admits(stored_bytes, quota) {
            // A taken id is a conflict whether or not there is room, as in the reference store.
            let taken = query_opt(&tx, "SELECT 1 FROM inbound_messages WHERE id = $1", &[&id]).await?.is_some();
            return if taken {
                Err(StoreError::Conflict(format!("inbound message {} exists", message.id)))
            } else {
                Ok(false)
            };
        }
        execute(
            &tx,
            "INSERT INTO inbound_messages
                 (id, workspace_id, received_at, recipients, from_address, stored_bytes, doc, raw)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[&id, &ws, &message.received_at, &recipients, &from, &bigint(stored_bytes), &body, &raw],
        )
        .await?;
        insert_deliveries(&tx, deliveries, Missing::Drop).await?;
        execute(
            &tx,
            "UPDATE inbound_usage SET messages = $2, bytes = $3 WHERE workspace_id = $1",
            &[&ws, &bigint(usage.messages.saturating_add(1)), &bigint(usage.bytes.saturating_add(stored_bytes))],
        )
        .await?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }

    async fn get_inbound(&self, workspace: WorkspaceId, id: InboundMessageId) -> StoreResult<Option<InboundMessage>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM inbound_messages WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        row.map(|row| decode(&row, "inbound message")).transpose()
    }

    async fn inbound_raw(&self, workspace: WorkspaceId, id: InboundMessageId) -> StoreResult<Option<Vec<u8>>> {
        let client = self.client().await?;
        let sql = "SELECT raw FROM inbound_messages WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        row.map(|row| row.try_get("raw").map_err(|e| StoreError::corrupt("inbound raw bytes", e))).transpose()
    }

    async fn list_inbound(
        &self,
        workspace: WorkspaceId,
        query: &InboundQuery,
        page: PageRequest<InboundMessageId>,
    ) -> StoreResult<Page<InboundMessage>> {
        let client = self.client().await?;
        let ws = uuid(workspace.0);
        let to = query.to.as_ref().map(EmailAddress::normalized);
        let from = query.from.as_deref().map(from_column);
        let mut filters: Vec<(String, Param<'_>)> = vec![("workspace_id = {}".to_owned(), &ws)];
        if let Some(to) = &to {
            // `@>` so that the GIN index on `recipients` applies.
            filters.push(("recipients @> ARRAY[{}::text]".to_owned(), to));
        }
        if let Some(from) = &from {
            filters.push(("from_address = {}".to_owned(), from));
        }
        newest_first_where(&client, "inbound_messages", &filters, None, page.cursor.map(|c| c.0), page.limit).await
    }

    async fn inbound_usage(&self, workspace: WorkspaceId) -> StoreResult<InboundUsage> {
        let client = self.client().await?;
        let sql = "SELECT messages, bytes FROM inbound_usage WHERE workspace_id = $1";
        match query_opt(&client, sql, &[&uuid(workspace.0)]).await? {
            Some(row) => Ok(InboundUsage { messages: read_u64(&row, "messages")?, bytes: read_u64(&row, "bytes")? }),
            None => Ok(InboundUsage::default()),
        }
    }

    async fn inbound_domains(&self) -> StoreResult<Vec<tidings_core::model::Domain>> {
        // A scan of the domains, as the re-checks' are: core reads it every few seconds per
        // node, never per message. `inbound` is written only when true.
        let client = self.client().await?;
        let sql = "SELECT doc FROM domains WHERE doc->>'inbound' = 'true'";
        crate::sealing::open_rows(&self.sealer, &crate::db::query(&client, sql, &[]).await?, "domain")
    }

    async fn purge_inbound(&self, before: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // SKIP LOCKED: nodes purging at once share the work instead of waiting for each other.
        let gone = query(
            &tx,
            "DELETE FROM inbound_messages WHERE id IN (
                 SELECT id FROM inbound_messages WHERE received_at < $1
                 ORDER BY received_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
             )
             RETURNING workspace_id, stored_bytes",
            &[&before, &sql_limit(limit)],
        )
        .await?;
        if gone.is_empty() {
            return Ok(0);
        }
        let mut given_back: BTreeMap<Uuid, (i64, i64)> = BTreeMap::new();
        for row in &gone {
            let ws: Uuid = row.try_get("workspace_id").map_err(|e| StoreError::corrupt("inbound message", e))?;
            let bytes: i64 = row.try_get("stored_bytes").map_err(|e| StoreError::corrupt("inbound message", e))?;
            let back = given_back.entry(ws).or_default();
            *back = (back.0 + 1, back.1.saturating_add(bytes));
        }
        let workspaces: Vec<Uuid> = given_back.keys().copied().collect();
        let (messages, bytes): (Vec<i64>, Vec<i64>) = given_back.into_values().unzip();
        // Locked in workspace order first: an UPDATE … FROM locks its rows in no set order.
        query(
            &tx,
            "SELECT 1 FROM inbound_usage WHERE workspace_id = ANY($1) ORDER BY workspace_id FOR UPDATE",
            &[&workspaces],
        )
        .await?;
        execute(
            &tx,
            "UPDATE inbound_usage u SET messages = u.messages - g.messages, bytes = u.bytes - g.bytes
             FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS g(workspace_id, messages, bytes)
             WHERE u.workspace_id = g.workspace_id",
            &[&workspaces, &messages, &bytes],
        )
        .await?;
        tx.commit().await.map_err(db_error)?;
        Ok(gone.len())
    }
}
