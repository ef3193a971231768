//! Webhook endpoints (`WEBHOOK ‖ ws ‖ id`) and deliveries (`DELIVERY ‖ ws ‖ id`), with the
//! deliveries of each endpoint indexed for its log and a global due-time queue.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::HashSet;

use sled::Tree;
use tidings_core::ids::{DeliveryId, MessageId, WebhookId, WorkspaceId};
use tidings_core::model::{WebhookDelivery, WebhookEndpoint};
use tidings_core::ports::{EndpointQuota, Page, PageRequest, QuotaCount, StoreError, StoreResult, WebhookStore};
use tidings_core::sealing::Sealed;

use crate::SledStore;
use crate::codec::{bad_key, decode, encode, sled_error};
use crate::db::{Batch, Order, get, page};
use crate::layout::{self, Key};
use crate::queue::{self, Admit, DueRecord};
use crate::sealing::{decode_sealed, encode_sealed, seal_error};

impl DueRecord for WebhookDelivery {
    const DUE_TAG: u8 = layout::DELIVERY_DUE;
    const WHAT: &'static str = "webhook delivery";

    fn record_key(ws: WorkspaceId, id: [u8; 16]) -> Vec<u8> {
        layout::delivery(ws, DeliveryId::from_bytes(id)).0
    }

    fn due_key(&self, at: DateTime<Utc>) -> Vec<u8> {
        layout::delivery_due(at, self.workspace_id, self.id).0
    }

    fn next_attempt_at(&mut self) -> &mut Option<DateTime<Utc>> {
        &mut self.next_attempt_at
    }

    fn due_value(&self) -> Vec<u8> {
        self.endpoint_id.to_bytes().to_vec()
    }
}

/// A claim's endpoint and workspace quota: a queue entry is refused unread when its
/// workspace (in its key) has no room left, or the endpoint its value names (see
/// `layout::DELIVERY_DUE`) has none; an entry written before the endpoint was kept there
/// (empty value) is read to find out.
impl Admit<WebhookDelivery> for QuotaCount<'_> {
    fn refuses_entry(&self, ws: WorkspaceId, value: &[u8]) -> bool {
        !self.workspace_has_room(ws)
            || <[u8; 16]>::try_from(value).is_ok_and(|endpoint| !self.has_room(WebhookId::from_bytes(endpoint)))
    }

    fn take(&mut self, record: &WebhookDelivery) -> bool {
        QuotaCount::take(self, record.workspace_id, record.endpoint_id)
    }
}

/// Adds a new delivery (record, endpoint log entry, queue entry) to `batch`.
fn put_new_delivery(batch: &mut Batch, d: &WebhookDelivery, value: Vec<u8>) {
    batch.insert(layout::delivery_by_endpoint(d.workspace_id, d.endpoint_id, d.id).0, &[]);
    if let Some(message) = d.message_id {
        batch.insert(layout::delivery_by_message(d.workspace_id, message, d.id).0, &[]);
    }
    if let Some(at) = d.next_attempt_at {
        batch.insert(d.due_key(at), d.due_value());
    }
    batch.insert(layout::delivery(d.workspace_id, d.id).0, value);
}

/// Queues the deliveries written with a message or an event. `Conflict` if an id is taken
/// or repeated; deliveries to an endpoint deleted meanwhile are dropped (nobody wants them),
/// so a deleted endpoint's log never grows again.
pub fn queue_deliveries(
    tree: &Tree,
    batch: &mut Batch,
    deliveries: &[WebhookDelivery],
    values: Vec<Vec<u8>>,
) -> StoreResult<()> {
    let mut seen = HashSet::with_capacity(deliveries.len());
    for (d, value) in deliveries.iter().zip(values) {
        if !seen.insert(d.id) || tree.contains_key(layout::delivery(d.workspace_id, d.id).0).map_err(sled_error)? {
            return Err(StoreError::Conflict(format!("webhook delivery {} exists", d.id)));
        }
        if tree.contains_key(layout::webhook(d.workspace_id, d.endpoint_id).0).map_err(sled_error)? {
            put_new_delivery(batch, d, value);
        }
    }
    Ok(())
}

#[async_trait]
impl WebhookStore for SledStore {
    async fn insert_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()> {
        let key = layout::webhook(endpoint.workspace_id, endpoint.id).0;
        let value = encode_sealed(&self.sealer, endpoint)?;
        self.inner
            .write_durable(|tree, batch| {
                if tree.contains_key(&key).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("webhook {} exists", endpoint.id)));
                }
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn get_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<Option<WebhookEndpoint>> {
        let Some(bytes) = self.inner.tree()?.get(layout::webhook(workspace, id).0).map_err(sled_error)? else {
            return Ok(None);
        };
        decode_sealed(&self.sealer, &bytes, "webhook").map(Some)
    }

    async fn list_webhooks(
        &self,
        workspace: WorkspaceId,
        page_req: PageRequest<WebhookId>,
    ) -> StoreResult<Page<WebhookEndpoint>> {
        let prefix = Key::new(layout::WEBHOOK).id(workspace.to_bytes()).0;
        let cursor = page_req.cursor.map(WebhookId::to_bytes);
        page(
            self.inner.tree()?,
            &prefix,
            cursor.as_ref().map(|c| &c[..]),
            page_req.limit,
            Order::NewestFirst,
            |_, v| decode_sealed(&self.sealer, &v, "webhook").map(Some),
        )
    }

    async fn list_enabled_webhooks(&self, workspace: WorkspaceId) -> StoreResult<Vec<WebhookEndpoint>> {
        // All endpoints of the workspace: there are few, and fan-out needs every enabled one.
        let prefix = Key::new(layout::WEBHOOK).id(workspace.to_bytes()).0;
        let mut out = Vec::new();
        for entry in self.inner.tree()?.scan_prefix(prefix) {
            let (_, value) = entry.map_err(sled_error)?;
            let stored: Sealed<WebhookEndpoint> = decode(&value, "webhook")?;
            if stored.unopened().enabled {
                out.push(self.sealer.open_record(stored).map_err(seal_error)?);
            }
        }
        Ok(out)
    }

    async fn update_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()> {
        let key = layout::webhook(endpoint.workspace_id, endpoint.id).0;
        let value = encode_sealed(&self.sealer, endpoint)?;
        self.inner
            .write_durable(|tree, batch| {
                if !tree.contains_key(&key).map_err(sled_error)? {
                    return Err(StoreError::NotFound);
                }
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn delete_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<()> {
        let key = layout::webhook(workspace, id).0;
        self.inner
            .write_durable(|tree, batch| {
                if !tree.contains_key(&key).map_err(sled_error)? {
                    return Err(StoreError::NotFound);
                }
                batch.remove(key);
                // The whole log goes in the same batch: O(deliveries of this endpoint).
                let log = Key::new(layout::DELIVERY_BY_ENDPOINT).id(workspace.to_bytes()).id(id.to_bytes()).0;
                for entry in tree.scan_prefix(log) {
                    let (log_key, _) = entry.map_err(sled_error)?;
                    let delivery_id =
                        DeliveryId::from_bytes(layout::trailing_id(&log_key).ok_or_else(|| bad_key("delivery log"))?);
                    let record_key = layout::delivery(workspace, delivery_id).0;
                    if let Some(d) = get::<WebhookDelivery>(tree, &record_key, "webhook delivery")? {
                        if let Some(at) = d.next_attempt_at {
                            batch.remove(d.due_key(at));
                        }
                        if let Some(message) = d.message_id {
                            batch.remove(layout::delivery_by_message(workspace, message, d.id).0);
                        }
                    }
                    batch.remove(record_key);
                    batch.remove(log_key);
                }
                Ok(())
            })
            .await
    }

    async fn insert_webhook_deliveries(&self, deliveries: &[WebhookDelivery]) -> StoreResult<()> {
        let values = deliveries.iter().map(encode).collect::<StoreResult<Vec<_>>>()?;
        self.inner
            .write_durable(|tree, batch| {
                for d in deliveries {
                    if !tree.contains_key(layout::webhook(d.workspace_id, d.endpoint_id).0).map_err(sled_error)? {
                        return Err(StoreError::NotFound);
                    }
                }
                queue_deliveries(tree, batch, deliveries, values)
            })
            .await
    }

    async fn get_webhook_delivery(
        &self,
        workspace: WorkspaceId,
        id: DeliveryId,
    ) -> StoreResult<Option<WebhookDelivery>> {
        self.inner.get(&layout::delivery(workspace, id).0, "webhook delivery")
    }

    async fn list_webhook_deliveries(
        &self,
        workspace: WorkspaceId,
        endpoint: WebhookId,
        page_req: PageRequest<DeliveryId>,
    ) -> StoreResult<Page<WebhookDelivery>> {
        let tree = self.inner.tree()?;
        let prefix = Key::new(layout::DELIVERY_BY_ENDPOINT).id(workspace.to_bytes()).id(endpoint.to_bytes()).0;
        let cursor = page_req.cursor.map(DeliveryId::to_bytes);
        page(tree, &prefix, cursor.as_ref().map(|c| &c[..]), page_req.limit, Order::NewestFirst, |key, _| {
            let id = DeliveryId::from_bytes(layout::trailing_id(key).ok_or_else(|| bad_key("delivery log"))?);
            get(tree, &layout::delivery(workspace, id).0, "webhook delivery")
        })
    }

    async fn list_message_webhook_deliveries(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        limit: usize,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        let tree = self.inner.tree()?;
        let prefix = Key::new(layout::DELIVERY_BY_MESSAGE).id(workspace.to_bytes()).id(message.to_bytes()).0;
        let found = page(tree, &prefix, None, limit, Order::NewestFirst, |key, _| {
            let id = DeliveryId::from_bytes(layout::trailing_id(key).ok_or_else(|| bad_key("message's deliveries"))?);
            get(tree, &layout::delivery(workspace, id).0, "webhook delivery")
        })?;
        Ok(found.items)
    }

    async fn update_webhook_delivery(&self, delivery: &WebhookDelivery) -> StoreResult<()> {
        let key = layout::delivery(delivery.workspace_id, delivery.id).0;
        let value = encode(delivery)?;
        self.inner
            .write_durable(|tree, batch| {
                let old: WebhookDelivery = get(tree, &key, "webhook delivery")?.ok_or(StoreError::NotFound)?;
                // The entry names the endpoint too, so it is rewritten if that changes.
                if old.next_attempt_at != delivery.next_attempt_at || old.endpoint_id != delivery.endpoint_id {
                    if let Some(at) = old.next_attempt_at {
                        batch.remove(old.due_key(at));
                    }
                    if let Some(at) = delivery.next_attempt_at {
                        batch.insert(delivery.due_key(at), delivery.due_value());
                    }
                }
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn claim_due_webhook_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
        quota: &EndpointQuota,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        // Not waited for: a claim lost in a crash only makes the delivery due again.
        let mut count = quota.start();
        self.inner.write(|tree, batch| queue::claim_due(tree, batch, now, lease_until, limit, &mut count))
    }

    async fn release_webhook_delivery_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        // As `release_message_leases`: sound because `SledStore::open` admits one process.
        self.inner.write(|tree, batch| {
            queue::release_leases::<WebhookDelivery>(tree, batch, now, limit, |d| d.status.next_attempt_is_lease())
        })
    }
}
