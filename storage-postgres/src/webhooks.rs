//! Webhook endpoints (`webhooks`) and deliveries (`webhook_deliveries`, which cascade with
//! their endpoint and carry their due time and status as columns for the queue).

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tidings_core::ids::{DeliveryId, MessageId, WebhookId, WorkspaceId};
use tidings_core::model::{WebhookDelivery, WebhookEndpoint};
use tidings_core::ports::{EndpointQuota, Page, PageRequest, StoreError, StoreResult, WebhookStore};
use uuid::Uuid;

use crate::PgStore;
use crate::db::{db_error, decode, doc, execute, newest_first, query, query_opt, tag, uuid};
use crate::queue;
use crate::sealing::{open_page, open_row, open_rows, sealed_doc};
use crate::workspace_cache::CHANNEL;

/// What to do with a delivery whose endpoint does not exist (in its workspace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// Drop it: it was written with a message or an event after the endpoint was deleted,
    /// and nobody wants it (as the reference store does).
    Drop,
    /// Refuse the whole write with `NotFound`.
    Refuse,
}

/// Inserts deliveries in the caller's transaction. The endpoints are read `FOR KEY SHARE`,
/// so none can be deleted between the check and the insert.
pub(crate) async fn insert_deliveries(
    client: &impl GenericClient,
    deliveries: &[WebhookDelivery],
    missing: Missing,
) -> StoreResult<()> {
    if deliveries.is_empty() {
        return Ok(());
    }
    let endpoints: Vec<Uuid> = deliveries.iter().map(|d| uuid(d.endpoint_id.0)).collect();
    let rows = query(
        client,
        "SELECT id, workspace_id FROM webhooks WHERE id = ANY($1) ORDER BY id FOR KEY SHARE",
        &[&endpoints],
    )
    .await?;
    let existing = rows
        .iter()
        .map(|row| Ok((row.try_get::<_, Uuid>(0)?, row.try_get::<_, Uuid>(1)?)))
        .collect::<Result<HashSet<(Uuid, Uuid)>, tokio_postgres::Error>>()
        .map_err(|e| StoreError::corrupt("webhook", e))?;
    let exists = |d: &WebhookDelivery| existing.contains(&(uuid(d.endpoint_id.0), uuid(d.workspace_id.0)));
    if missing == Missing::Refuse && !deliveries.iter().all(exists) {
        return Err(StoreError::NotFound);
    }
    for d in deliveries.iter().filter(|d| exists(d)) {
        execute(
            client,
            "INSERT INTO webhook_deliveries (id, workspace_id, endpoint_id, status, next_attempt_at, doc)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &uuid(d.id.0),
                &uuid(d.workspace_id.0),
                &uuid(d.endpoint_id.0),
                &tag(&d.status)?,
                &d.next_attempt_at,
                &doc(d)?,
            ],
        )
        .await?;
    }
    Ok(())
}

#[async_trait]
impl WebhookStore for PgStore {
    async fn insert_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()> {
        let client = self.client().await?;
        // Every change notifies the nodes' caches at commit (`workspace_cache.rs`).
        query(
            &client,
            "WITH changed AS (
                 INSERT INTO webhooks (id, workspace_id, enabled, doc) VALUES ($1, $2, $3, $4) RETURNING workspace_id
             )
             SELECT pg_notify($5, workspace_id::text) FROM changed",
            &[
                &uuid(endpoint.id.0),
                &uuid(endpoint.workspace_id.0),
                &endpoint.enabled,
                &sealed_doc(&self.sealer, endpoint)?,
                &CHANNEL,
            ],
        )
        .await?;
        self.cache.invalidate(Some(uuid(endpoint.workspace_id.0)));
        Ok(())
    }

    async fn get_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<Option<WebhookEndpoint>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM webhooks WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        row.map(|row| open_row(&self.sealer, &row, "webhook")).transpose()
    }

    async fn list_webhooks(
        &self,
        workspace: WorkspaceId,
        page: PageRequest<WebhookId>,
    ) -> StoreResult<Page<WebhookEndpoint>> {
        let client = self.client().await?;
        let ws = uuid(workspace.0);
        let page =
            newest_first(&client, "webhooks", &[("workspace_id", &ws)], None, page.cursor.map(|c| c.0), page.limit)
                .await?;
        open_page(&self.sealer, page)
    }

    async fn list_enabled_webhooks(&self, workspace: WorkspaceId) -> StoreResult<Vec<WebhookEndpoint>> {
        let ticket = match self.cache.get(workspace, |kept| kept.webhooks.clone()) {
            Ok(kept) => return Ok(kept),
            Err(ticket) => ticket,
        };
        let client = self.client().await?;
        let sql = "SELECT doc FROM webhooks WHERE workspace_id = $1 AND enabled ORDER BY id";
        let list = open_rows(&self.sealer, &query(&client, sql, &[&uuid(workspace.0)]).await?, "webhook")?;
        if let Some(ticket) = ticket {
            self.cache.keep(workspace, ticket, |kept| kept.webhooks = Some(list.clone()));
        }
        Ok(list)
    }

    async fn update_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()> {
        let client = self.client().await?;
        let changed = query(
            &client,
            "WITH changed AS (
                 UPDATE webhooks SET enabled = $3, doc = $4 WHERE id = $1 AND workspace_id = $2 RETURNING workspace_id
             )
             SELECT pg_notify($5, workspace_id::text) FROM changed",
            &[
                &uuid(endpoint.id.0),
                &uuid(endpoint.workspace_id.0),
                &endpoint.enabled,
                &sealed_doc(&self.sealer, endpoint)?,
                &CHANNEL,
            ],
        )
        .await?;
        self.cache.invalidate(Some(uuid(endpoint.workspace_id.0)));
        if changed.is_empty() { Err(StoreError::NotFound) } else { Ok(()) }
    }

    async fn delete_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<()> {
        let client = self.client().await?;
        // Its deliveries go with it (ON DELETE CASCADE).
        let sql = "WITH changed AS (DELETE FROM webhooks WHERE id = $1 AND workspace_id = $2 RETURNING workspace_id)
                   SELECT pg_notify($3, workspace_id::text) FROM changed";
        let deleted = query(&client, sql, &[&uuid(id.0), &uuid(workspace.0), &CHANNEL]).await?;
        self.cache.invalidate(Some(uuid(workspace.0)));
        if deleted.is_empty() { Err(StoreError::NotFound) } else { Ok(()) }
    }

    async fn insert_webhook_deliveries(&self, deliveries: &[WebhookDelivery]) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        insert_deliveries(&tx, deliveries, Missing::Refuse).await?;
        tx.commit().await.map_err(db_error)
    }

    async fn get_webhook_delivery(
        &self,
        workspace: WorkspaceId,
        id: DeliveryId,
    ) -> StoreResult<Option<WebhookDelivery>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM webhook_deliveries WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        row.map(|row| decode(&row, "webhook delivery")).transpose()
    }

    async fn list_webhook_deliveries(
        &self,
        workspace: WorkspaceId,
        endpoint: WebhookId,
        page: PageRequest<DeliveryId>,
    ) -> StoreResult<Page<WebhookDelivery>> {
        let client = self.client().await?;
        let (ws, endpoint) = (uuid(workspace.0), uuid(endpoint.0));
        let filters = [("workspace_id", &ws as _), ("endpoint_id", &endpoint as _)];
        newest_first(&client, "webhook_deliveries", &filters, None, page.cursor.map(|c| c.0), page.limit).await
    }

    async fn list_message_webhook_deliveries(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        limit: usize,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        let client = self.client().await?;
        // `deliveries_by_message` (migration 0011) indexes this expression.
        let sql = "SELECT doc FROM webhook_deliveries WHERE workspace_id = $1 AND (doc->>'message_id') = $2
                   ORDER BY id DESC LIMIT $3";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = query(&client, sql, &[&uuid(workspace.0), &message.to_string(), &limit]).await?;
        rows.iter().map(|row| decode(row, "webhook delivery")).collect()
    }

    async fn update_webhook_delivery(&self, delivery: &WebhookDelivery) -> StoreResult<()> {
        let client = self.client().await?;
        let changed = execute(
            &client,
            "UPDATE webhook_deliveries SET endpoint_id = $3, status = $4, next_attempt_at = $5, doc = $6
             WHERE id = $1 AND workspace_id = $2",
            &[
                &uuid(delivery.id.0),
                &uuid(delivery.workspace_id.0),
                &uuid(delivery.endpoint_id.0),
                &tag(&delivery.status)?,
                &delivery.next_attempt_at,
                &doc(delivery)?,
            ],
        )
        .await?;
        if changed == 0 { Err(StoreError::NotFound) } else { Ok(()) }
    }

    async fn claim_due_webhook_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
        quota: &EndpointQuota,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        queue::claim_due_webhook_deliveries(self, now, lease_until, limit, quota).await
    }

    async fn release_webhook_delivery_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        queue::release_webhook_delivery_leases(self, now, limit).await
    }
}
