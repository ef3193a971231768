//! The dashboard's overview: for a `full` key, what happened to the workspace's mail over a
//! range (24 hours, 7 days or 30 days) from the activity counters (`crate::activity`), in
//! total, per sending domain and per hour or day, with the rates mailbox providers judge a
//! sender by (`crate::activity::rates`); the queue; the webhook endpoints that are failing
//! and the domains that are not verified.
//!
//! A `send` key sees only the messages it sent itself (`own_messages`): the counters are
//! the workspace's, so it gets no rates.
//!
//! The ranges are whole UTC hours (24 h: the last 24 clock hours, the current one last) or
//! whole UTC days (7 d and 30 d: the last 7 or 30 days, today last), so that each bar of
//! the chart is a period a link to the messages list can name exactly.

mod own_messages;

use chrono::{DateTime, Duration, DurationRound, Utc};

pub use own_messages::*;

use crate::Result;
use crate::activity::{ActivityCounts, HourStart};
use crate::domain_name::DomainName;
use crate::ids::{DomainId, WebhookId};
use crate::model::{Domain, DomainStatus, KeyScope, WebhookEndpoint};
use crate::ports::{PageRequest, PendingMessages};
use crate::usecases::{Principal, Tidings};

/// Most domains or webhook endpoints one overview reads to find the ones needing attention
/// and to name the domains of the counters.
const RESOURCE_READ_CAP: usize = 1_000;
/// Page size of those reads.
const PAGE: usize = 200;

/// How far back the overview looks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum OverviewRange {
    /// The last 24 clock hours, by hour.
    Day,
    /// The last 7 UTC days, today included, by day.
    #[default]
    Week,
    /// The last 30 UTC days, today included, by day.
    Month,
}

impl OverviewRange {
    /// Every range, shortest first.
    pub const ALL: [Self; 3] = [Self::Day, Self::Week, Self::Month];
    /// The longest range: counters are kept at least this long.
    pub const LONGEST: Duration = Duration::days(30);

    /// The name in the page's address: `24h`, `7d`, `30d`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Day => "24h",
            Self::Week => "7d",
            Self::Month => "30d",
        }
    }

    /// Parses [`Self::as_str`].
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// In words: "24 hours", "7 days", "30 days".
    pub fn words(self) -> &'static str {
        match self {
            Self::Day => "24 hours",
            Self::Week => "7 days",
            Self::Month => "30 days",
        }
    }

    /// The periods of the chart at `now`, oldest first, each `[start, end)`: 24 hours or
    /// 7 or 30 UTC days, the one holding `now` last.
    pub fn periods(self, now: DateTime<Utc>) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
        let (step, count) = match self {
            Self::Day => (Duration::hours(1), 24),
            Self::Week => (Duration::days(1), 7),
            Self::Month => (Duration::days(1), 30),
        };
        let current = now.duration_trunc(step).unwrap_or_else(|_| HourStart::of(now).start());
        (0..count).rev().map(|back| current - step * back).map(|start| (start, start + step)).collect()
    }
}

/// One bar of the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    /// Its first instant.
    pub start: DateTime<Utc>,
    /// The first instant after it.
    pub end: DateTime<Utc>,
    /// What happened in it.
    pub counts: ActivityCounts,
}

/// What happened to the mail of one sending domain over the range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainActivity {
    /// The domain.
    pub domain: DomainId,
    /// Its name; `None` if it was deleted since (its counters stay).
    pub name: Option<DomainName>,
    /// Its counts.
    pub counts: ActivityCounts,
}

/// The workspace's activity over a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    /// Everything, all domains together.
    pub totals: ActivityCounts,
    /// Per sending domain with anything counted, busiest (most accepted, then delivered)
    /// first.
    pub domains: Vec<DomainActivity>,
    /// The chart's bars, oldest first ([`OverviewRange::periods`]).
    pub periods: Vec<Period>,
}

/// What the overview shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overview {
    /// When it was read.
    pub at: DateTime<Utc>,
    /// The range asked for.
    pub range: OverviewRange,
    /// The workspace's activity over the range; `None` for a key that may not see the
    /// whole workspace's mail (`send`).
    pub activity: Option<Activity>,
    /// The messages a `send` key sent; `None` for a `full` key.
    pub own: Option<OwnMessages>,
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
    /// The overview for `who` over `range` (see the module docs).
    pub async fn overview(&self, who: &Principal, range: OverviewRange) -> Result<Overview> {
        let at = self.clock.now();
        let queue = self.operations().pending_messages().await?;
        if who.scope != KeyScope::Full {
            let own = Some(self.own_messages(who, at).await?);
            let (activity, failing_webhooks, unverified_domains) = (None, None, None);
            return Ok(Overview { at, range, activity, own, queue, failing_webhooks, unverified_domains });
        }
        let domains = self.all_domains(who).await?;
        let activity = self.activity(who, range, at, &domains).await?;
        let unverified = domains.into_iter().filter(|d| d.status != DomainStatus::Verified).collect();
        Ok(Overview {
            at,
            range,
            activity: Some(activity),
            own: None,
            queue,
            failing_webhooks: Some(self.failing_webhooks(who).await?),
            unverified_domains: Some(unverified),
        })
    }

    /// The counters of `range` at `at`, summed per period and per domain.
    async fn activity(
        &self,
        who: &Principal,
        range: OverviewRange,
        at: DateTime<Utc>,
        domains: &[Domain],
    ) -> Result<Activity> {
        let mut periods: Vec<Period> = range
            .periods(at)
            .into_iter()
            .map(|(start, end)| Period { start, end, counts: ActivityCounts::default() })
            .collect();
        let (Some(first), Some(last)) = (periods.first(), periods.last()) else {
            return Ok(Activity { totals: ActivityCounts::default(), domains: Vec::new(), periods });
        };
        let (from, until) = (HourStart::of(first.start), HourStart::of(last.end));
        let rows = self.store.activity(who.workspace_id, from, until).await?;
        let mut totals = ActivityCounts::default();
        let mut per_domain: std::collections::BTreeMap<DomainId, ActivityCounts> = Default::default();
        for row in rows {
            let start = row.hour.start();
            // Rows outside the range asked for are the store's mistake; not counting them
            // keeps the page consistent with its links.
            let Some(period) = periods.iter_mut().find(|p| p.start <= start && start < p.end) else {
                continue;
            };
            period.counts = period.counts.plus(&row.counts);
            totals = totals.plus(&row.counts);
            let domain = per_domain.entry(row.domain).or_default();
            *domain = domain.plus(&row.counts);
        }
        let mut domains: Vec<DomainActivity> = per_domain
            .into_iter()
            .map(|(id, counts)| DomainActivity {
                domain: id,
                name: domains.iter().find(|d| d.id == id).map(|d| d.name.clone()),
                counts,
            })
            .collect();
        domains.sort_by_key(|d| std::cmp::Reverse((d.counts.accepted, d.counts.delivered)));
        Ok(Activity { totals, domains, periods })
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

    /// The workspace's domains, up to [`RESOURCE_READ_CAP`].
    async fn all_domains(&self, who: &Principal) -> Result<Vec<Domain>> {
        let mut found = Vec::new();
        let mut cursor: Option<DomainId> = None;
        for _ in 0..RESOURCE_READ_CAP / PAGE {
            let page = self.store.list_domains(who.workspace_id, PageRequest { limit: PAGE, cursor }).await?;
            cursor = page.items.last().map(|d| d.id);
            found.extend(page.items);
            if !page.has_more {
                break;
            }
        }
        Ok(found)
    }
}
