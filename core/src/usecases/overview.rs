//! The dashboard's overview: what became of the caller's recent messages, by
//! outcome, for the last 24 hours and 7 days and per hour; the queue; and, for a `full` key,
//! the webhook endpoints that are failing and the domains that are not verified.
//!
//! The counts come from the existing list API, newest first, read until a message older
//! than 7 days turns up or [`OVERVIEW_READ_CAP`] messages were read, whichever comes first:
//! a page view costs bounded work whatever the store holds, and a workspace that sends more
//! than the cap in a week gets lower bounds ([`Overview::complete`] is false), which the
//! page says. A message counts in the window of its creation, under its current status.
//! A `send` key counts only the messages it sent itself, as it lists only those.

use chrono::{DateTime, Duration, DurationRound, Utc};

use crate::Result;
use crate::ids::{DomainId, MessageId, WebhookId};
use crate::model::{Domain, DomainStatus, KeyScope, MessageStatus, WebhookEndpoint};
use crate::ports::{MessageQuery, PageRequest, PendingMessages};
use crate::usecases::{Principal, Tidings};

/// Most messages one overview reads; beyond it the counts are lower bounds.
pub const OVERVIEW_READ_CAP: usize = 20_000;
/// Hours the per-hour chart covers (the current, partial hour is the last).
pub const OVERVIEW_HOURS: usize = 24;
/// Most domains or webhook endpoints one overview reads to find the ones needing attention.
const RESOURCE_READ_CAP: usize = 1_000;
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

/// What the overview shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overview {
    /// When it was read.
    pub at: DateTime<Utc>,
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
    /// Messages waiting for a delivery attempt, on the whole server (the store counts no
    /// workspace apart).
    pub queue: PendingMessages,
    /// Enabled endpoints with a run of failed deliveries, and endpoints disabled
    /// automatically; `None` for a key that may not see webhooks.
    pub failing_webhooks: Option<Vec<WebhookEndpoint>>,
    /// Domains not Verified; `None` for a key that may not see domains.
    pub unverified_domains: Option<Vec<Domain>>,
}

impl Tidings {
    /// The overview for `who` (see the module docs).
    pub async fn overview(&self, who: &Principal) -> Result<Overview> {
        let at = self.clock.now();
        let day_ago = at - Duration::hours(24);
        let week_ago = at - Duration::days(7);
        let first_hour =
            at.duration_trunc(Duration::hours(1)).unwrap_or(at) - Duration::hours(OVERVIEW_HOURS as i64 - 1);
        let mut hours: Vec<HourCounts> = (0..OVERVIEW_HOURS)
            .map(|i| HourCounts { start: first_hour + Duration::hours(i as i64), counts: OutcomeCounts::default() })
            .collect();
        let (mut last_day, mut last_week) = (OutcomeCounts::default(), OutcomeCounts::default());
        let sent_by = (who.scope == KeyScope::Send).then_some(who.key_id);
        let mut cursor: Option<MessageId> = None;
        let mut read = 0;
        let complete = 'read: loop {
            let mut query = MessageQuery::page(PageRequest { limit: PAGE, cursor });
            query.sent_by = sent_by;
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
        let full = who.scope == KeyScope::Full;
        Ok(Overview {
            at,
            last_day,
            last_week,
            hours,
            complete,
            read,
            queue: self.pending_messages().await?,
            failing_webhooks: if full { Some(self.failing_webhooks(who).await?) } else { None },
            unverified_domains: if full { Some(self.unverified_domains(who).await?) } else { None },
        })
    }

    async fn failing_webhooks(&self, who: &Principal) -> Result<Vec<WebhookEndpoint>> {
        let mut found = Vec::new();
        let mut cursor: Option<WebhookId> = None;
        for _ in 0..RESOURCE_READ_CAP / PAGE {
            let page = self.store.list_webhooks(who.workspace_id, PageRequest { limit: PAGE, cursor }).await?;
            cursor = page.items.last().map(|w| w.id);
            found.extend(
                page.items
                    .into_iter()
                    .filter(|w| w.disabled_reason.is_some() || (w.enabled && w.failing_since.is_some())),
            );
            if !page.has_more {
                break;
            }
        }
        Ok(found)
    }

    async fn unverified_domains(&self, who: &Principal) -> Result<Vec<Domain>> {
        let mut found = Vec::new();
        let mut cursor: Option<DomainId> = None;
        for _ in 0..RESOURCE_READ_CAP / PAGE {
            let page = self.store.list_domains(who.workspace_id, PageRequest { limit: PAGE, cursor }).await?;
            cursor = page.items.last().map(|d| d.id);
            found.extend(page.items.into_iter().filter(|d| d.status != DomainStatus::Verified));
            if !page.has_more {
                break;
            }
        }
        Ok(found)
    }
}
