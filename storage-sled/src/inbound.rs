//! Inbound mail (`InboundStore`): routes (`INBOUND_ROUTE`, with `INBOUND_ROUTE_MATCH` keeping
//! each matcher to one route of its workspace), messages as JSON (`INBOUND_MESSAGE`) with
//! their raw bytes under a key of their own (`INBOUND_RAW`), so that a list reads none, and
//! each workspace's usage (`INBOUND_USAGE`).
//!
//! The usage record holds the sums and is rewritten in the batch of every insert and purge:
//! the quota is checked against it under the writer lock, so racing inserts cannot overshoot
//! it, and replaying the redo record after a crash sets the same sums again rather than
//! adding twice. Retention walks the global `INBOUND_RECEIVED` index (receipt time, id,
//! workspace; the message's stored bytes as value) from its start to the cutoff, so it
//! reads no message to give its usage back.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sled::Tree;
use tidings_core::ids::{InboundMessageId, InboundRouteId, WorkspaceId};
use tidings_core::model::{InboundMessage, InboundRoute, WebhookDelivery};
use tidings_core::ports::{
    InboundQuery, InboundQuota, InboundStore, InboundUsage, Page, PageRequest, StoreError, StoreResult,
};

use crate::SledStore;
use crate::codec::{bad_key, decode, encode, sled_error};
use crate::db::{Batch, Order, get, page};
use crate::layout::{self, Key};
use crate::webhooks::queue_deliveries;

/// The usage record: messages, then bytes, 8 big-endian bytes each.
fn encode_usage(usage: InboundUsage) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&usage.messages.to_be_bytes());
    out[8..].copy_from_slice(&usage.bytes.to_be_bytes());
    out
}

fn decode_usage(bytes: &[u8]) -> StoreResult<InboundUsage> {
    let (messages, bytes) = bytes.split_at_checked(8).ok_or_else(|| corrupt_usage(bytes.len()))?;
    let messages = messages.try_into().map_err(|_| corrupt_usage(bytes.len()))?;
    let bytes = bytes.try_into().map_err(|_| corrupt_usage(bytes.len()))?;
    Ok(InboundUsage { messages: u64::from_be_bytes(messages), bytes: u64::from_be_bytes(bytes) })
}

fn corrupt_usage(len: usize) -> StoreError {
    StoreError::Corrupt(format!("inbound usage: expected 16 bytes, found {len}").into())
}

/// A workspace's usage; none recorded is none used.
fn usage_of(tree: &Tree, ws: WorkspaceId) -> StoreResult<InboundUsage> {
    match tree.get(layout::inbound_usage(ws).0).map_err(sled_error)? {
        Some(bytes) => decode_usage(&bytes),
        None => Ok(InboundUsage::default()),
    }
}

/// Sets a workspace's usage in `batch`; an empty one takes no key.
fn put_usage(batch: &mut Batch, ws: WorkspaceId, usage: InboundUsage) {
    let key = layout::inbound_usage(ws).0;
    if usage == InboundUsage::default() {
        batch.remove(key);
    } else {
        batch.insert(key, &encode_usage(usage)[..]);
    }
}

fn match_taken() -> StoreError {
    StoreError::Conflict("the workspace has a route with this match".to_owned())
}

#[async_trait]
impl InboundStore for SledStore {
    async fn insert_inbound_route(&self, route: &InboundRoute) -> StoreResult<()> {
        let key = layout::inbound_route(route.workspace_id, route.id).0;
        let by_match = layout::inbound_route_match(route.workspace_id, &route.matcher).0;
        let value = encode(route)?;
        self.inner
            .write_durable(|tree, batch| {
                if tree.contains_key(&key).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("inbound route {} exists", route.id)));
                }
                if tree.contains_key(&by_match).map_err(sled_error)? {
                    return Err(match_taken());
                }
                batch.insert(by_match, &route.id.to_bytes()[..]);
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn list_inbound_routes(&self, workspace: WorkspaceId) -> StoreResult<Vec<InboundRoute>> {
        let prefix = Key::new(layout::INBOUND_ROUTE).id(workspace.to_bytes()).0;
        let mut routes = Vec::new();
        for entry in self.inner.tree()?.scan_prefix(prefix) {
            let (_, value) = entry.map_err(sled_error)?;
            routes.push(decode(&value, "inbound route")?);
        }
        Ok(routes)
    }

    async fn update_inbound_route(&self, route: &InboundRoute) -> StoreResult<()> {
        let key = layout::inbound_route(route.workspace_id, route.id).0;
        let by_match = layout::inbound_route_match(route.workspace_id, &route.matcher).0;
        let value = encode(route)?;
        self.inner
            .write_durable(|tree, batch| {
                let old: InboundRoute = get(tree, &key, "inbound route")?.ok_or(StoreError::NotFound)?;
                let holder = tree.get(&by_match).map_err(sled_error)?;
                if holder.is_some_and(|holder| holder.as_ref() != route.id.to_bytes()) {
                    return Err(match_taken());
                }
                let old_match = layout::inbound_route_match(old.workspace_id, &old.matcher).0;
                if old_match != by_match {
                    batch.remove(old_match);
                    batch.insert(by_match, &route.id.to_bytes()[..]);
                }
                batch.insert(key, value);
                Ok(())
            })
            .await
    }

    async fn delete_inbound_route(&self, workspace: WorkspaceId, id: InboundRouteId) -> StoreResult<()> {
        let key = layout::inbound_route(workspace, id).0;
        self.inner
            .write_durable(|tree, batch| {
                let old: InboundRoute = get(tree, &key, "inbound route")?.ok_or(StoreError::NotFound)?;
                batch.remove(layout::inbound_route_match(workspace, &old.matcher).0);
                batch.remove(key);
                Ok(())
            })
            .await
    }

    async fn insert_inbound(
        &self,
        message: &InboundMessage,
        raw: &[u8],
        deliveries: &[WebhookDelivery],
        quota: &InboundQuota,
    ) -> StoreResult<bool> {
        let ws = message.workspace_id;
        let key = layout::inbound_message(ws, message.id).0;
        let stored_bytes = message.stored_bytes();
        let value = encode(message)?;
        let values = deliveries.iter().map(encode).collect::<StoreResult<Vec<_>>>()?;
        self.inner
            .write_durable(|tree, batch| {
                if tree.contains_key(&key).map_err(sled_error)? {
                    return Err(StoreError::Conflict(format!("inbound message {} exists", message.id)));
                }
                let usage = usage_of(tree, ws)?;
                if !usage.admits(stored_bytes, quota) {
                    return Ok(false);
                }
                queue_deliveries(tree, batch, deliveries, values)?;
                // The raw bytes before the record: a reader who finds the record finds them.
                batch.insert(layout::inbound_raw(ws, message.id).0, raw);
                batch.insert(key, value);
                let received = layout::inbound_received(message.received_at, message.id, ws).0;
                batch.insert(received, &stored_bytes.to_be_bytes()[..]);
                let grown =
                    InboundUsage { messages: usage.messages + 1, bytes: usage.bytes.saturating_add(stored_bytes) };
                put_usage(batch, ws, grown);
                Ok(true)
            })
            .await
    }

    async fn get_inbound(&self, workspace: WorkspaceId, id: InboundMessageId) -> StoreResult<Option<InboundMessage>> {
        self.inner.get(&layout::inbound_message(workspace, id).0, "inbound message")
    }

    async fn inbound_raw(&self, workspace: WorkspaceId, id: InboundMessageId) -> StoreResult<Option<Vec<u8>>> {
        let raw = self.inner.tree()?.get(layout::inbound_raw(workspace, id).0).map_err(sled_error)?;
        Ok(raw.map(|bytes| bytes.to_vec()))
    }

    async fn list_inbound(
        &self,
        workspace: WorkspaceId,
        query: &InboundQuery,
        page_req: PageRequest<InboundMessageId>,
    ) -> StoreResult<Page<InboundMessage>> {
        let prefix = Key::new(layout::INBOUND_MESSAGE).id(workspace.to_bytes()).0;
        let cursor = page_req.cursor.map(InboundMessageId::to_bytes);
        page(
            self.inner.tree()?,
            &prefix,
            cursor.as_ref().map(|c| &c[..]),
            page_req.limit,
            Order::NewestFirst,
            |_, v| {
                let message: InboundMessage = decode(&v, "inbound message")?;
                Ok(query.matches(&message).then_some(message))
            },
        )
    }

    async fn inbound_usage(&self, workspace: WorkspaceId) -> StoreResult<InboundUsage> {
        usage_of(self.inner.tree()?, workspace)
    }

    async fn inbound_domains(&self) -> StoreResult<Vec<tidings_core::model::Domain>> {
        // A scan of every domain record, as the re-checks do: core reads it every few
        // seconds per node, never per message.
        let mut inbound = Vec::new();
        for entry in self.inner.tree()?.scan_prefix(Key::new(layout::DOMAIN).0) {
            let (_, value) = entry.map_err(sled_error)?;
            let stored: tidings_core::sealing::Sealed<tidings_core::model::Domain> = decode(&value, "domain")?;
            if stored.unopened().inbound {
                inbound.push(self.sealer.open_record(stored).map_err(crate::sealing::seal_error)?);
            }
        }
        Ok(inbound)
    }

    async fn purge_inbound(&self, before: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        // Entries received at `before` itself sort after this bound (their keys extend it).
        let end = Key::new(layout::INBOUND_RECEIVED).time(before).0;
        let start = [layout::INBOUND_RECEIVED];
        // Not waited for: a purge lost in a crash leaves the messages and their usage as
        // they were, and the next purge takes them again.
        self.inner.write(|tree, batch| {
            // Summed per workspace first: reads inside the closure see the tree before the batch.
            let mut given_back: BTreeMap<[u8; 16], InboundUsage> = BTreeMap::new();
            let mut purged = 0;
            for entry in tree.range::<&[u8], _>(&start[..]..end.as_slice()).take(limit) {
                let (key, value) = entry.map_err(sled_error)?;
                let id = layout::id_at(&key, 9).ok_or_else(|| bad_key("inbound receipt"))?;
                let ws = layout::id_at(&key, 25).ok_or_else(|| bad_key("inbound receipt"))?;
                let stored_bytes = <[u8; 8]>::try_from(value.as_ref()).map_err(|_| bad_key("inbound receipt"))?;
                let (ws_id, id) = (WorkspaceId::from_bytes(ws), InboundMessageId::from_bytes(id));
                batch.remove(layout::inbound_message(ws_id, id).0);
                batch.remove(layout::inbound_raw(ws_id, id).0);
                batch.remove(key);
                let back = given_back.entry(ws).or_default();
                back.messages += 1;
                back.bytes = back.bytes.saturating_add(u64::from_be_bytes(stored_bytes));
                purged += 1;
            }
            for (ws, back) in given_back {
                let ws = WorkspaceId::from_bytes(ws);
                let usage = usage_of(tree, ws)?;
                let left = InboundUsage {
                    messages: usage.messages.saturating_sub(back.messages),
                    bytes: usage.bytes.saturating_sub(back.bytes),
                };
                put_usage(batch, ws, left);
            }
            Ok(purged)
        })
    }
}
