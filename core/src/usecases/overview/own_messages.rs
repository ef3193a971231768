//! A `send` key's overview: what became of the messages this key sent, by outcome, for the
//! last 24 hours and 7 days and per hour.
//!
//! The workspace's activity counters cover every key's mail, which a `send` key may not
//! see, and keep no per-key rows (that would multiply them by the keys). So for such a key the
//! counts come from the list API, newest first, read until a message older than 7 days turns
//! up or [`OVERVIEW_READ_CAP`] messages were read, whichever comes first: a page view costs
//! bounded work whatever the store holds, and a key that sends more than the cap in a week
//! gets lower bounds ([`OwnMessages::complete`] is false), which the page says. A message
//! counts in the window of its creation, under its current status (messages, not
//! recipients: no rates are computed from these).

use chrono::{DateTime, Duration, DurationRound, Utc};

use crate::Result;
use crate::ids::MessageId;
use crate::model::MessageStatus;
use crate::ports::{MessageQuery, PageRequest};
use crate::usecases::{Principal, Tidings};

/// Most messages one overview reads; beyond it the counts are lower bounds.
pub const OVERVIEW_READ_CAP: usize = 20_000;
/// Hours the per-hour chart covers (the current, partial hour is the last).
pub const OVERVIEW_HOURS: usize = 24;
/// Page size of the reads.
const PAGE: usize = 200;

/// What became of a message, as the overview counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Accepted by the receiving server.
    Delivered,
    /// Refused, or retries exhausted.
    Bounced,
    /// Reported as spam.
    Complained,
    /// Waiting for a retry after a temporary failure.
    Deferred,
    /// Could not be sent at all.
    Failed,
    /// Anything else: queued, scheduled, in flight, suppressed or canceled.
    Other,
}

impl Outcome {
    /// Every outcome, in the order the overview shows them.
    pub const ALL: [Self; 6] =
        [Self::Delivered, Self::Bounced, Self::Complained, Self::Deferred, Self::Failed, Self::Other];

    /// The outcome of a message in `status`.
    pub fn of(status: MessageStatus) -> Self {
        match status {
            // Some recipients of it were delivered: the overview counts messages, and a
            // message that reached people is not a failure.
            MessageStatus::Delivered | MessageStatus::PartiallyDelivered => Self::Delivered,
            MessageStatus::Bounced => Self::Bounced,
            MessageStatus::Complained => Self::Complained,
            MessageStatus::Deferred => Self::Deferred,
            MessageStatus::Failed => Self::Failed,
            MessageStatus::Queued
            | MessageStatus::Scheduled
            | MessageStatus::Sent
            | MessageStatus::Suppressed
            | MessageStatus::Canceled => Self::Other,
        }
    }

    /// A lower-case word for people and for CSS classes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Bounced => "bounced",
            Self::Complained => "complained",
            Self::Deferred => "deferred",
            Self::Failed => "failed",
            Self::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Messages counted by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeCounts([u64; 6]);

impl OutcomeCounts {
    /// The count of one outcome.
    pub fn get(&self, outcome: Outcome) -> u64 {
        self.0[outcome.index()]
    }

    /// All outcomes together.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    fn add(&mut self, outcome: Outcome) {
        self.0[outcome.index()] += 1;
    }
}

/// One hour of the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourCounts {
    /// Start of the hour.
    pub start: DateTime<Utc>,
    /// Messages created in it, by outcome.
    pub counts: OutcomeCounts,
}

/// What a `send` key's overview shows of its own messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnMessages {
    /// Messages created in the last 24 hours, by outcome.
    pub last_day: OutcomeCounts,
    /// Messages created in the last 7 days, by outcome.
    pub last_week: OutcomeCounts,
    /// The last [`OVERVIEW_HOURS`] clock hours, oldest first, the current hour last.
    pub hours: Vec<HourCounts>,
    /// Whether every message of the 7 days was read; `false` when the read stopped at
    /// [`OVERVIEW_READ_CAP`], and the counts are then lower bounds.
    pub complete: bool,
    /// Messages read.
    pub read: usize,
}

impl Tidings {
    /// The messages `who` sent itself, counted at `at` (see the module docs).
    pub(super) async fn own_messages(&self, who: &Principal, at: DateTime<Utc>) -> Result<OwnMessages> {
        let day_ago = at - Duration::hours(24);
        let week_ago = at - Duration::days(7);
        let first_hour =
            at.duration_trunc(Duration::hours(1)).unwrap_or(at) - Duration::hours(OVERVIEW_HOURS as i64 - 1);
        let mut hours: Vec<HourCounts> = (0..OVERVIEW_HOURS)
            .map(|i| HourCounts { start: first_hour + Duration::hours(i as i64), counts: OutcomeCounts::default() })
            .collect();
        let (mut last_day, mut last_week) = (OutcomeCounts::default(), OutcomeCounts::default());
        let mut cursor: Option<MessageId> = None;
        let mut read = 0;
        let complete = 'read: loop {
            let mut query = MessageQuery::page(PageRequest { limit: PAGE, cursor });
            query.sent_by = Some(who.key_id);
            let page = self.store.list_messages(who.workspace_id, &query).await?;
            cursor = page.items.last().map(|m| m.id);
            for message in &page.items {
                if message.created_at <= week_ago {
                    break 'read true;
                }
                if read == OVERVIEW_READ_CAP {
                    break 'read false;
                }
                read += 1;
                let outcome = Outcome::of(message.status);
                last_week.add(outcome);
                if message.created_at > day_ago {
                    last_day.add(outcome);
                }
                if message.created_at >= first_hour {
                    let hour = ((message.created_at - first_hour).num_hours() as usize).min(OVERVIEW_HOURS - 1);
                    hours[hour].counts.add(outcome);
                }
            }
            if !page.has_more {
                break true;
            }
        };
        Ok(OwnMessages { last_day, last_week, hours, complete, read })
    }
}
