//! Retention and the queue-depth count.
//!
//! Retention takes, in one short transaction, up to `limit` messages from the partial index
//! `messages_purge_pending` (messages written since their last purge, in id = creation
//! order) that are older than the cutoff and have nothing due, locked with `FOR UPDATE SKIP
//! LOCKED` so that nodes purging at once share the work; it writes each one's content-less
//! document (computed by core, [`Message::without_content`]), clears `purge_pending` and
//! deletes their timelines. A `record_event` racing it waits for the lock and then sets
//! `purge_pending` again. The queue depth is a count over the partial index `messages_due`.

use chrono::{DateTime, Utc};
use tidings_core::ids::MessageId;
use tidings_core::model::Message;
use tidings_core::ports::{PendingMessages, StoreError, StoreResult};
use uuid::Uuid;

use crate::PgStore;
use crate::db::{db_error, decode, doc, execute, limit as sql_limit, query, query_opt, uuid};

pub(crate) async fn count_pending(store: &PgStore, now: DateTime<Utc>) -> StoreResult<PendingMessages> {
    let client = store.client().await?;
    let row = query_opt(
        &client,
        "SELECT count(*), count(*) FILTER (WHERE next_attempt_at <= $1)
         FROM messages WHERE next_attempt_at IS NOT NULL",
        &[&now],
    )
    .await?
    .ok_or_else(|| StoreError::Corrupt("count returned no row".into()))?;
    let read = |i: usize| -> StoreResult<u64> {
        let n: i64 = row.try_get(i).map_err(|e| StoreError::corrupt("pending count", e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    Ok(PendingMessages { total: read(0)?, due: read(1)? })
}

pub(crate) async fn purge(store: &PgStore, created_before: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let bound = uuid(MessageId::first_at(created_before).0);
    let rows = query(
        &tx,
        "SELECT id, doc FROM messages
         WHERE purge_pending AND id < $1 AND next_attempt_at IS NULL
         ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED",
        &[&bound, &sql_limit(limit)],
    )
    .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let mut ids = Vec::with_capacity(rows.len());
    let mut docs = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: Uuid = row.try_get("id").map_err(|e| StoreError::corrupt("message id", e))?;
        let message: Message = decode(row, "message")?;
        ids.push(id);
        docs.push(doc(&message.without_content())?);
    }
    execute(
        &tx,
        "UPDATE messages m SET doc = u.doc, purge_pending = false
         FROM unnest($1::uuid[], $2::jsonb[]) AS u(id, doc) WHERE m.id = u.id",
        &[&ids, &docs],
    )
    .await?;
    execute(&tx, "DELETE FROM message_events WHERE message_id = ANY($1)", &[&ids]).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(ids.len())
}
