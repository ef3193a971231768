//! What operators need beyond the API: the queue depth for metrics, and retention (message
//! bodies and timelines are kept for [`CoreConfig::message_retention`], then purged; the
//! activity counters of an hour for [`CoreConfig::activity_retention`]).
//!
//! Retention keeps the message record (status, addresses, subject, ids, times) so that
//! `GET /v1/messages/{id}` still answers what became of it; what it said
//! ([`Message::without_content`](crate::model::Message::without_content)) and its timeline
//! go. Only messages with nothing due are purged: one still waiting for an attempt (queued,
//! scheduled, deferred, in flight) keeps its body until it is delivered or given up, so
//! retention can never make a delivery impossible.
//!
//! [`CoreConfig::message_retention`]: super::CoreConfig::message_retention
//! [`CoreConfig::activity_retention`]: super::CoreConfig::activity_retention

use chrono::DateTime;
use chrono::Utc;

use crate::Result;
use crate::activity::HourStart;
use crate::ports::PendingMessages;
use crate::usecases::Tidings;
use crate::usecases::overview::OverviewRange;

impl Tidings {
    /// The operator use cases: the queue depth and retention.
    pub fn operations(&self) -> Operations<'_> {
        Operations { core: self }
    }
}

/// The operations area of [`Tidings`] ([`Tidings::operations`]): what the server's metrics
/// and periodic purges need, the queue depth and the retention of message content and
/// activity counters.
#[derive(Clone, Copy)]
pub struct Operations<'a> {
    core: &'a Tidings,
}

impl Operations<'_> {
    /// Messages waiting for a delivery attempt, and how many of them are due now.
    pub async fn pending_messages(&self) -> Result<PendingMessages> {
        Ok(self.core.store.count_pending_messages(self.core.clock.now()).await?)
    }

    /// The creation time before which messages are past retention now; `None` when
    /// retention is off.
    pub fn retention_cutoff(&self) -> Option<DateTime<Utc>> {
        self.core.config.message_retention.map(|keep| self.core.clock.now() - keep)
    }

    /// Purges the bodies and timelines of up to `limit` messages past retention that have
    /// nothing due (see the module docs); returns how many. Nothing when retention is off.
    /// The server calls this periodically, repeating while a call purges `limit`.
    pub async fn purge_expired_message_content(&self, limit: usize) -> Result<usize> {
        match self.retention_cutoff() {
            Some(cutoff) => Ok(self.core.store.purge_message_content(cutoff, limit).await?),
            None => Ok(0),
        }
    }

    /// Deletes up to `limit` activity counter rows of hours that ended more than
    /// `activity_retention` ago (never fewer than the overview's longest range); returns how
    /// many. The server calls this periodically, repeating while a call deletes `limit`.
    pub async fn purge_expired_activity(&self, limit: usize) -> Result<usize> {
        let keep = self.core.config.activity_retention.max(OverviewRange::LONGEST);
        let before = HourStart::of(self.core.clock.now() - keep);
        Ok(self.core.store.purge_activity(before, limit).await?)
    }
}
