//! What operators need beyond the API: the queue depth for metrics, and retention (message
//! bodies and timelines are kept for [`CoreConfig::message_retention`], then purged).
//!
//! Retention keeps the message record (status, addresses, subject, ids, times) so that
//! `GET /v1/messages/{id}` still answers what became of it; what it said
//! ([`Message::without_content`](crate::model::Message::without_content)) and its timeline
//! go. Only messages with nothing due are purged: one still waiting for an attempt (queued,
//! scheduled, deferred, in flight) keeps its body until it is delivered or given up, so
//! retention can never make a delivery impossible.
//!
//! [`CoreConfig::message_retention`]: super::CoreConfig::message_retention

use chrono::DateTime;
use chrono::Utc;

use crate::Result;
use crate::ports::PendingMessages;
use crate::usecases::Tidings;

impl Tidings {
    /// Messages waiting for a delivery attempt, and how many of them are due now.
    pub async fn pending_messages(&self) -> Result<PendingMessages> {
        Ok(self.store.count_pending_messages(self.clock.now()).await?)
    }

    /// The creation time before which messages are past retention now; `None` when
    /// retention is off.
    pub fn retention_cutoff(&self) -> Option<DateTime<Utc>> {
        self.config.message_retention.map(|keep| self.clock.now() - keep)
    }

    /// Purges the bodies and timelines of up to `limit` messages past retention that have
    /// nothing due (see the module docs); returns how many. Nothing when retention is off.
    /// The server calls this periodically, repeating while a call purges `limit`.
    pub async fn purge_expired_message_content(&self, limit: usize) -> Result<usize> {
        match self.retention_cutoff() {
            Some(cutoff) => Ok(self.store.purge_message_content(cutoff, limit).await?),
            None => Ok(0),
        }
    }
}
