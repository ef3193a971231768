//! The delivery queues: claims under a lease, requeues without an attempt, lease releases at
//! start-up, and the purge of expired idempotency records. Claims lock the due rows they take with `FOR UPDATE SKIP
//! LOCKED`, so concurrent claimers on any node never take one row twice and never wait for
//! each other, and move them to the lease in the same short transaction.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use tidings_core::ids::{MessageId, WorkspaceId};
use tidings_core::model::{DeliveryStatus, Message, MessageStatus, WebhookDelivery};
use tidings_core::ports::{EndpointQuota, StoreError, StoreResult};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::PgStore;
use crate::db::{count, db_error, decode, execute, json_time, limit as sql_limit, query, tag, uuid};

/// Rows claimed, in the order the `Store` trait asks for: earliest due first, then lower id.
fn in_due_order<T: serde::de::DeserializeOwned>(rows: &[Row], what: &str) -> StoreResult<Vec<T>> {
    let mut keyed = rows
        .iter()
        .map(|row| {
            let due: DateTime<Utc> = row.try_get("due_at").map_err(|e| StoreError::corrupt(what, e))?;
            let id: Uuid = row.try_get("id").map_err(|e| StoreError::corrupt(what, e))?;
            Ok(((due, id), decode(row, what)?))
        })
        .collect::<StoreResult<Vec<((DateTime<Utc>, Uuid), T)>>>()?;
    keyed.sort_by_key(|(key, _)| *key);
    Ok(keyed.into_iter().map(|(_, t)| t).collect())
}

pub(crate) async fn claim_due_messages(
    store: &PgStore,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
    limit: usize,
) -> StoreResult<Vec<Message>> {
    let client = store.client().await?;
    let rows = query(
        &client,
        "WITH due AS (
             SELECT id, next_attempt_at AS due_at FROM messages
             WHERE next_attempt_at <= $1 ORDER BY next_attempt_at, id LIMIT $3
             FOR UPDATE SKIP LOCKED
         )
         UPDATE messages m SET next_attempt_at = $2, doc = jsonb_set(m.doc, '{next_attempt_at}', $4)
         FROM due WHERE m.id = due.id
         RETURNING m.id, m.doc, due.due_at",
        &[&now, &lease_until, &sql_limit(limit), &json_time(lease_until)?],
    )
    .await?;
    in_due_order(&rows, "message")
}

pub(crate) async fn release_message_leases(store: &PgStore, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
    let leased: Vec<&str> =
        MessageStatus::ALL.into_iter().filter(|s| s.next_attempt_is_lease()).map(MessageStatus::as_str).collect();
    let client = store.client().await?;
    let released = execute(
        &client,
        "WITH leased AS (
             SELECT id FROM messages WHERE status = ANY($3) AND next_attempt_at > $1
             ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE
         )
         UPDATE messages m SET next_attempt_at = $1, doc = jsonb_set(m.doc, '{next_attempt_at}', $4)
         FROM leased WHERE m.id = leased.id",
        &[&now, &sql_limit(limit), &leased, &json_time(now)?],
    )
    .await?;
    Ok(count(released))
}

/// Puts a claimed message back at `due` if its `next_attempt_at` is still the claim's
/// `lease`. The column keeps microseconds where the lease may carry nanoseconds; the lease
/// is compared as a `timestamptz` parameter, truncated as the claim's write of it was, which
/// is how `record_event` checks its `expected_next_attempt_at`: both match exactly the same
/// claims. The document keeps `due` in full, as the claim's `jsonb_set` does.
pub(crate) async fn requeue_message(
    store: &PgStore,
    workspace: WorkspaceId,
    id: MessageId,
    lease: DateTime<Utc>,
    due: DateTime<Utc>,
) -> StoreResult<bool> {
    let client = store.client().await?;
    let moved = execute(
        &client,
        "UPDATE messages SET next_attempt_at = $4, doc = jsonb_set(doc, '{next_attempt_at}', $5)
         WHERE id = $1 AND workspace_id = $2 AND next_attempt_at = $3",
        &[&uuid(id.0), &uuid(workspace.0), &lease, &due, &json_time(due)?],
    )
    .await?;
    Ok(moved == 1)
}

pub(crate) async fn purge_expired_idempotency(store: &PgStore, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
    let client = store.client().await?;
    let purged = execute(
        &client,
        "DELETE FROM idempotency i USING (
             SELECT workspace_id, key FROM idempotency WHERE expires_at <= $1
             ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
         ) e
         WHERE i.workspace_id = e.workspace_id AND i.key = e.key",
        &[&now, &sql_limit(limit)],
    )
    .await?;
    Ok(count(purged))
}

/// Every delivery status (the match makes a new one a compile error here).
fn delivery_statuses() -> [DeliveryStatus; 4] {
    let every = |s: DeliveryStatus| match s {
        DeliveryStatus::Pending | DeliveryStatus::Retrying | DeliveryStatus::Delivered | DeliveryStatus::Failed => s,
    };
    [DeliveryStatus::Pending, DeliveryStatus::Retrying, DeliveryStatus::Delivered, DeliveryStatus::Failed].map(every)
}

pub(crate) async fn release_webhook_delivery_leases(
    store: &PgStore,
    now: DateTime<Utc>,
    limit: usize,
) -> StoreResult<usize> {
    let leased = delivery_statuses()
        .into_iter()
        .filter(|s| s.next_attempt_is_lease())
        .map(|s| tag(&s))
        .collect::<StoreResult<Vec<String>>>()?;
    let client = store.client().await?;
    let released = execute(
        &client,
        "WITH leased AS (
             SELECT id FROM webhook_deliveries WHERE status = ANY($3) AND next_attempt_at > $1
             ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE
         )
         UPDATE webhook_deliveries d SET next_attempt_at = $1, doc = jsonb_set(d.doc, '{next_attempt_at}', $4)
         FROM leased WHERE d.id = leased.id",
        &[&now, &sql_limit(limit), &leased, &json_time(now)?],
    )
    .await?;
    Ok(count(released))
}

/// Claims due deliveries within the endpoint and workspace quota. Due rows are read earliest
/// first in batches from the due index (which carries `endpoint_id`, so no document is
/// decoded to find its endpoint), each batch locked with `SKIP LOCKED`; the quota picks which
/// to take, and endpoints and workspaces already full are left out of the next batch's scan
/// (`workspace_id` is read from the row, which the lock visits anyway). Rows read but not
/// taken stay untouched; the lock on them ends with the transaction.
pub(crate) async fn claim_due_webhook_deliveries(
    store: &PgStore,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
    limit: usize,
    quota: &EndpointQuota,
) -> StoreResult<Vec<WebhookDelivery>> {
    if limit == 0 || quota.admits_none() {
        return Ok(Vec::new());
    }
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let mut taken = quota.start();
    let mut full: HashSet<Uuid> =
        quota.in_flight.keys().filter(|endpoint| quota.remaining(**endpoint) == 0).map(|e| uuid(e.0)).collect();
    let mut full_workspaces: HashSet<Uuid> = quota
        .workspace_in_flight
        .keys()
        .filter(|ws| quota.remaining_in_workspace(**ws) == 0)
        .map(|ws| uuid(ws.0))
        .collect();
    let mut chosen: Vec<Uuid> = Vec::with_capacity(limit.min(1024));
    let mut after: Option<(DateTime<Utc>, Uuid)> = None;
    let batch = limit.saturating_mul(2).clamp(32, 1000);
    'scan: loop {
        let excluded: Vec<Uuid> = full.iter().copied().collect();
        let excluded_workspaces: Vec<Uuid> = full_workspaces.iter().copied().collect();
        let rows = match after {
            None => {
                let sql = "SELECT id, endpoint_id, next_attempt_at, workspace_id FROM webhook_deliveries
                     WHERE next_attempt_at <= $1 AND NOT (endpoint_id = ANY($2))
                       AND NOT (workspace_id = ANY($4))
                     ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED";
                query(&tx, sql, &[&now, &excluded, &sql_limit(batch), &excluded_workspaces]).await?
            }
            Some((at, id)) => {
                let sql = "SELECT id, endpoint_id, next_attempt_at, workspace_id FROM webhook_deliveries
                     WHERE next_attempt_at <= $1 AND NOT (endpoint_id = ANY($2))
                       AND NOT (workspace_id = ANY($6))
                       AND (next_attempt_at, id) > ($4, $5)
                     ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED";
                query(&tx, sql, &[&now, &excluded, &sql_limit(batch), &at, &id, &excluded_workspaces]).await?
            }
        };
        for row in &rows {
            let corrupt = |e: tokio_postgres::Error| StoreError::corrupt("webhook delivery", e);
            let id: Uuid = row.try_get(0).map_err(corrupt)?;
            let endpoint: Uuid = row.try_get(1).map_err(corrupt)?;
            let due: DateTime<Utc> = row.try_get(2).map_err(corrupt)?;
            let workspace: Uuid = row.try_get(3).map_err(corrupt)?;
            after = Some((due, id));
            let endpoint_id = tidings_core::ids::WebhookId(ulid::Ulid::from_bytes(*endpoint.as_bytes()));
            let workspace_id = tidings_core::ids::WorkspaceId(ulid::Ulid::from_bytes(*workspace.as_bytes()));
            if taken.take(workspace_id, endpoint_id) {
                chosen.push(id);
                if chosen.len() == limit {
                    break 'scan;
                }
            }
            if !taken.has_room(endpoint_id) {
                full.insert(endpoint);
            }
            if !taken.workspace_has_room(workspace_id) {
                full_workspaces.insert(workspace);
            }
        }
        if rows.len() < batch {
            break;
        }
    }
    if chosen.is_empty() {
        return Ok(Vec::new());
    }
    let rows = query(
        &tx,
        "UPDATE webhook_deliveries SET next_attempt_at = $2, doc = jsonb_set(doc, '{next_attempt_at}', $3)
         WHERE id = ANY($1) RETURNING id, doc",
        &[&chosen, &lease_until, &json_time(lease_until)?],
    )
    .await?;
    tx.commit().await.map_err(db_error)?;
    let position: HashMap<Uuid, usize> = chosen.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut claimed = rows
        .iter()
        .map(|row| {
            let id: Uuid = row.try_get("id").map_err(|e| StoreError::corrupt("webhook delivery", e))?;
            Ok((position.get(&id).copied().unwrap_or(usize::MAX), decode(row, "webhook delivery")?))
        })
        .collect::<StoreResult<Vec<(usize, WebhookDelivery)>>>()?;
    claimed.sort_by_key(|(i, _)| *i);
    Ok(claimed.into_iter().map(|(_, d)| d).collect())
}
