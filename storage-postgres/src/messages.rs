//! Messages (`messages`, with their status, recipient, key and due time as columns), their
//! timelines (`message_events`) and idempotency records (`idempotency`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tidings_core::ids::{EventId, MessageId, WorkspaceId};
use tidings_core::model::{IdempotencyKey, IdempotencyRecord, Message, MessageEvent};
use tidings_core::ports::{
    CreateOutcome, EventWrite, MessageQuery, MessageStore, NewBatch, NewMessage, Page, PageRequest, PendingMessages,
    StoreError, StoreResult,
};

use crate::PgStore;
use crate::db::{db_error, decode, decode_all, doc, execute, limit, query, query_opt, uuid};
use crate::group_commit;
use crate::message_writes::{EventRow, NewRow};
use crate::queue;
use crate::webhooks::{Missing, insert_deliveries};

async fn insert_event(client: &impl GenericClient, workspace: WorkspaceId, event: &MessageEvent) -> StoreResult<()> {
    let sql = "INSERT INTO message_events (message_id, id, doc, workspace_id) VALUES ($1, $2, $3, $4)";
    let params = [uuid(event.message_id.0), uuid(event.id.0), uuid(workspace.0)];
    execute(client, sql, &[&params[0], &params[1], &doc(event)?, &params[2]]).await.map(drop)
}

/// Takes the idempotency key for `record`, unless it is held and unexpired at `at`: then
/// returns the holder's record. The unique key settles races: of two transactions inserting
/// one key, the second waits for the first and then sees its row.
async fn take_idempotency_key(
    client: &impl GenericClient,
    record: &IdempotencyRecord,
    at: DateTime<Utc>,
) -> StoreResult<Option<IdempotencyRecord>> {
    let ws = uuid(record.workspace_id.0);
    let taken = query_opt(
        client,
        "INSERT INTO idempotency (workspace_id, key, expires_at, doc) VALUES ($1, $2, $3, $4)
         ON CONFLICT (workspace_id, key) DO UPDATE SET expires_at = EXCLUDED.expires_at, doc = EXCLUDED.doc
         WHERE idempotency.expires_at <= $5
         RETURNING 1",
        &[&ws, &record.key.as_str(), &record.expires_at, &doc(record)?, &at],
    )
    .await?;
    if taken.is_some() {
        return Ok(None);
    }
    // The conflicting row is locked by the statement above, so it is still there.
    let sql = "SELECT doc FROM idempotency WHERE workspace_id = $1 AND key = $2";
    let row = query_opt(client, sql, &[&ws, &record.key.as_str()]).await?;
    let row = row.ok_or_else(|| StoreError::Unavailable("idempotency record vanished; retry".into()))?;
    Ok(Some(decode(&row, "idempotency record")?))
}

async fn insert_message(client: &impl GenericClient, m: &Message) -> StoreResult<()> {
    execute(
        client,
        "INSERT INTO messages (id, workspace_id, status, to_norm, api_key_id, next_attempt_at, doc)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &uuid(m.id.0),
            &uuid(m.workspace_id.0),
            &m.status.as_str(),
            &m.to.normalized(),
            &uuid(m.api_key_id.0),
            &m.next_attempt_at,
            &doc(m)?,
        ],
    )
    .await
    .map(drop)
}

/// The rows of `message_recipients` for the message's recipients beside its first.
async fn insert_other_recipients(client: &impl GenericClient, m: &Message) -> StoreResult<()> {
    let others = other_recipients(m);
    if others.is_empty() {
        return Ok(());
    }
    let sql = "INSERT INTO message_recipients (workspace_id, to_norm, message_id)
               SELECT $1, unnest($2::text[]), $3";
    execute(client, sql, &[&uuid(m.workspace_id.0), &others, &uuid(m.id.0)]).await.map(drop)
}

/// The normalized addresses of a message's recipients other than its first (`to_norm`),
/// each once.
pub(crate) fn other_recipients(m: &Message) -> Vec<String> {
    let mut seen = std::collections::HashSet::from([m.to.normalized()]);
    m.recipients.iter().map(|r| r.email.normalized()).filter(|a| seen.insert(a.clone())).collect()
}

#[async_trait]
impl MessageStore for PgStore {
    async fn create_message(&self, new: &NewMessage) -> StoreResult<CreateOutcome> {
        // One statement and one commit, shared with the creates that arrive meanwhile
        // (`message_writes.rs`, `group_commit.rs`).
        group_commit::submit(self, NewRow::of(new)?).await
    }

    async fn create_messages(&self, batch: &NewBatch) -> StoreResult<CreateOutcome> {
        // One transaction: a failed insert (an id that exists) rolls back the whole batch.
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        if let Some(record) = &batch.idempotency
            && let Some(existing) = take_idempotency_key(&tx, record, batch.accepted_at).await?
        {
            return Ok(CreateOutcome::Duplicate(existing));
        }
        for new in &batch.messages {
            insert_message(&tx, &new.message).await?;
            insert_other_recipients(&tx, &new.message).await?;
            for event in std::iter::once(&new.event).chain(&new.recipient_events) {
                insert_event(&tx, new.message.workspace_id, event).await?;
            }
            insert_deliveries(&tx, &new.webhook_deliveries, Missing::Drop).await?;
        }
        let sums = tidings_core::activity::sum_deltas(batch.messages.iter().map(|new| &new.activity));
        crate::activity::add(&tx, &sums).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(CreateOutcome::Created)
    }

    async fn get_message(&self, workspace: WorkspaceId, id: MessageId) -> StoreResult<Option<Message>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM messages WHERE id = $1 AND workspace_id = $2";
        let row = query_opt(&client, sql, &[&uuid(id.0), &uuid(workspace.0)]).await?;
        row.map(|row| decode(&row, "message")).transpose()
    }

    async fn find_message(&self, id: MessageId) -> StoreResult<Option<Message>> {
        let client = self.client().await?;
        let row = query_opt(&client, "SELECT doc FROM messages WHERE id = $1", &[&uuid(id.0)]).await?;
        row.map(|row| decode(&row, "message")).transpose()
    }

    async fn list_messages(&self, workspace: WorkspaceId, query: &MessageQuery) -> StoreResult<Page<Message>> {
        crate::message_list::list(&self.client().await?, workspace, query).await
    }

    async fn list_events(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        page: PageRequest<EventId>,
    ) -> StoreResult<Page<MessageEvent>> {
        let client = self.client().await?;
        let (id, ws) = (uuid(message.0), uuid(workspace.0));
        let sql = "SELECT 1 FROM messages WHERE id = $1 AND workspace_id = $2";
        if query_opt(&client, sql, &[&id, &ws]).await?.is_none() {
            return Err(StoreError::NotFound);
        }
        let cursor = page.cursor.map(|c| uuid(c.0));
        let rows = query(
            &client,
            "SELECT doc FROM message_events WHERE message_id = $1 AND ($2::uuid IS NULL OR id > $2)
             ORDER BY id LIMIT $3",
            &[&id, &cursor, &limit(page.limit.saturating_add(1))],
        )
        .await?;
        let mut items: Vec<MessageEvent> = decode_all(&rows, "message event")?;
        let has_more = items.len() > page.limit;
        items.truncate(page.limit);
        Ok(Page { items, has_more })
    }

    async fn record_event(&self, write: EventWrite) -> StoreResult<()> {
        // Like a create: one statement and one commit, shared (`message_writes.rs`).
        group_commit::submit(self, EventRow::of(&write)?).await
    }

    async fn claim_due_messages(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        queue::claim_due_messages(self, now, lease_until, limit).await
    }

    async fn release_message_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        queue::release_message_leases(self, now, limit).await
    }

    async fn requeue_message(
        &self,
        workspace: WorkspaceId,
        id: MessageId,
        lease: DateTime<Utc>,
        due: DateTime<Utc>,
    ) -> StoreResult<bool> {
        queue::requeue_message(self, workspace, id, lease, due).await
    }

    async fn get_idempotency(
        &self,
        workspace: WorkspaceId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        let client = self.client().await?;
        let sql = "SELECT doc FROM idempotency WHERE workspace_id = $1 AND key = $2";
        let row = query_opt(&client, sql, &[&uuid(workspace.0), &key.as_str()]).await?;
        row.map(|row| decode(&row, "idempotency record")).transpose()
    }

    async fn purge_expired_idempotency(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        queue::purge_expired_idempotency(self, now, limit).await
    }

    async fn count_pending_messages(&self, now: DateTime<Utc>) -> StoreResult<PendingMessages> {
        crate::retention::count_pending(self, now).await
    }

    async fn purge_message_content(&self, created_before: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        crate::retention::purge(self, created_before, limit).await
    }
}
