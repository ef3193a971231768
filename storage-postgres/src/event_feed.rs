//! The event feed (`EventFeedStore`) over `message_events` (migration 0014): each row names
//! its workspace and the transaction that wrote it (`feed_xid`, by default). A position is
//! (transaction id, event id), and a read returns only rows of transactions older than the
//! oldest one still running (`pg_snapshot_xmin`): a transaction still open, whose ids may be
//! lower than those already read, cannot then commit rows before a position handed out.
//! The price: a transaction left open anywhere in the database holds the feed back until it
//! ends (no message write stays open for longer than a statement or a group commit).

use async_trait::async_trait;
use tidings_core::ids::{EventId, WorkspaceId};
use tidings_core::model::MessageEvent;
use tidings_core::ports::{EventFeedStore, FeedEntry, FeedPosition, StoreError, StoreResult};
use uuid::Uuid;

use crate::PgStore;
use crate::db::{decode, limit as sql_limit, query, uuid};

#[async_trait]
impl EventFeedStore for PgStore {
    async fn event_feed(
        &self,
        workspace: WorkspaceId,
        after: Option<FeedPosition>,
        limit: usize,
    ) -> StoreResult<Vec<FeedEntry>> {
        let client = self.client().await?;
        // xid8 travels as text: tokio-postgres has no Rust type for it.
        let (xid, event) = match after {
            Some(p) => (p.commit.to_string(), uuid(p.event.0)),
            None => ("0".to_owned(), Uuid::nil()),
        };
        let sql = "SELECT feed_xid::text, id, doc FROM message_events
                   WHERE workspace_id = $1 AND (feed_xid, id) > ($2::text::xid8, $3)
                     AND feed_xid < pg_snapshot_xmin(pg_current_snapshot())
                   ORDER BY feed_xid, id LIMIT $4";
        let rows = query(&client, sql, &[&uuid(workspace.0), &xid, &event, &sql_limit(limit)]).await?;
        rows.iter()
            .map(|row| {
                let bad = |e| StoreError::corrupt("event feed", e);
                let xid: String = row.try_get(0).map_err(bad)?;
                let id: Uuid = row.try_get(1).map_err(bad)?;
                let commit = xid.parse::<u64>().map_err(|e| StoreError::corrupt("event feed position", e))?;
                let event: MessageEvent = decode(row, "event")?;
                let position = FeedPosition { commit, event: EventId(ulid::Ulid::from_bytes(*id.as_bytes())) };
                Ok(FeedEntry { position, event })
            })
            .collect()
    }
}
