//! Activity counters: what happened to a workspace's mail, per sending domain and UTC hour,
//! counted per recipient as mailbox providers count it (docs/decisions.md, "Activity
//! counters").
//!
//! The overview's rates (bounce %, complaint %, opens, clicks over 24 hours to 30 days) and,
//! later, the reputation guard (contract §12) read these instead of the messages: a month of
//! a busy workspace is millions of messages, but only `domains × hours` counter rows.
//!
//! Core decides what a write counts ([`ActivityDelta::of_new_message`],
//! [`ActivityDelta::of_events`], pure functions of what is written) and puts it on the write
//! (`NewMessage::activity`, `EventWrite::activity`); a store adds it to its counters in the
//! same durable write as the events, and only if that write happens, so the counters never
//! disagree with the timelines, crash or conflict. Counters older than
//! [`CoreConfig::activity_retention`](crate::usecases::CoreConfig::activity_retention) are
//! purged.

mod delta;
pub mod rates;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, DurationRound, Utc};

use crate::ids::{DomainId, WorkspaceId};

/// The start of a UTC clock hour: the unit of the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HourStart(DateTime<Utc>);

impl HourStart {
    /// The hour `at` falls in.
    pub fn of(at: DateTime<Utc>) -> Self {
        // Truncation fails only for times outside chrono's nanosecond range (after 2262),
        // which no clock gives; the second-based fallback is exact for every other time.
        let start = at
            .duration_trunc(Duration::hours(1))
            .unwrap_or_else(|_| DateTime::from_timestamp(at.timestamp().div_euclid(3600) * 3600, 0).unwrap_or(at));
        Self(start)
    }

    /// The hour's first instant.
    pub fn start(self) -> DateTime<Utc> {
        self.0
    }

    /// `n` hours later (earlier if negative).
    pub fn plus_hours(self, n: i64) -> Self {
        Self(self.0 + Duration::hours(n))
    }
}

/// How many recipients something happened to. Every field counts recipients (a message to
/// three people counts three), never messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ActivityCounts {
    /// Recipients of sends the API (or SMTP submission) accepted, suppressed ones included.
    pub accepted: u64,
    /// Accepted by the receiving server (`Delivered` events).
    pub delivered: u64,
    /// Of `delivered`, to messages with open tracking: the base of the open rate.
    pub delivered_open_tracked: u64,
    /// Of `delivered`, to messages with click tracking: the base of the click rate.
    pub delivered_click_tracked: u64,
    /// Refused permanently (`Bounced`, hard).
    pub hard_bounced: u64,
    /// Retries exhausted (`Bounced`, soft).
    pub soft_bounced: u64,
    /// Reported as spam.
    pub complained: u64,
    /// Recipients who opened for the first time (their first kept `Opened`).
    pub opened: u64,
    /// Recipients who clicked for the first time (their first kept `Clicked`).
    pub clicked: u64,
    /// Skipped because the address is suppressed.
    pub suppressed: u64,
    /// Could not be sent at all.
    pub failed: u64,
}

impl ActivityCounts {
    /// The names of the counters, in the order of [`Self::to_array`]: stores use them for
    /// their columns. Never reorder (sled stores the array in this order); add at the end.
    pub const NAMES: [&'static str; 11] = [
        "accepted",
        "delivered",
        "delivered_open_tracked",
        "delivered_click_tracked",
        "hard_bounced",
        "soft_bounced",
        "complained",
        "opened",
        "clicked",
        "suppressed",
        "failed",
    ];

    /// The counters in the order of [`Self::NAMES`].
    pub fn to_array(&self) -> [u64; 11] {
        [
            self.accepted,
            self.delivered,
            self.delivered_open_tracked,
            self.delivered_click_tracked,
            self.hard_bounced,
            self.soft_bounced,
            self.complained,
            self.opened,
            self.clicked,
            self.suppressed,
            self.failed,
        ]
    }

    /// The counters from an array in the order of [`Self::NAMES`].
    pub fn from_array(a: [u64; 11]) -> Self {
        let [
            accepted,
            delivered,
            delivered_open_tracked,
            delivered_click_tracked,
            hard_bounced,
            soft_bounced,
            complained,
            opened,
            clicked,
            suppressed,
            failed,
        ] = a;
        Self {
            accepted,
            delivered,
            delivered_open_tracked,
            delivered_click_tracked,
            hard_bounced,
            soft_bounced,
            complained,
            opened,
            clicked,
            suppressed,
            failed,
        }
    }

    /// Both added, counter by counter (saturating: a counter cannot realistically reach
    /// 2^64, and wrapping would turn a rate upside down).
    pub fn plus(&self, other: &Self) -> Self {
        let (a, b) = (self.to_array(), other.to_array());
        Self::from_array(std::array::from_fn(|i| a[i].saturating_add(b[i])))
    }

    /// Nothing counted.
    pub fn is_zero(&self) -> bool {
        self.to_array() == [0; 11]
    }

    /// Hard and soft bounces together.
    pub fn bounced(&self) -> u64 {
        self.hard_bounced.saturating_add(self.soft_bounced)
    }
}

/// What one write adds to the counters of one message's workspace and sending domain, by
/// the hour each event happened in. Empty for most event writes (an attempt starting, a
/// retry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActivityDelta {
    /// Non-zero counts by hour, each hour once, earliest first.
    hours: Vec<(HourStart, ActivityCounts)>,
    /// Whose counters; meaningless while `hours` is empty.
    workspace: Option<(WorkspaceId, DomainId)>,
}

impl ActivityDelta {
    /// Nothing to count.
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether it adds nothing.
    pub fn is_empty(&self) -> bool {
        self.hours.is_empty()
    }

    /// The counters it adds to, with what it adds, by key order.
    pub fn entries(&self) -> impl Iterator<Item = (ActivityKey, ActivityCounts)> + '_ {
        self.hours.iter().filter_map(|(hour, counts)| {
            let (workspace, domain) = self.workspace?;
            Some((ActivityKey { workspace, hour: *hour, domain }, *counts))
        })
    }

    /// Adds `counts` in `hour` to the counters of `workspace` and `domain`.
    fn add(&mut self, workspace: WorkspaceId, domain: DomainId, hour: HourStart, counts: ActivityCounts) {
        if counts.is_zero() {
            return;
        }
        self.workspace = Some((workspace, domain));
        match self.hours.binary_search_by_key(&hour, |(h, _)| *h) {
            Ok(i) => self.hours[i].1 = self.hours[i].1.plus(&counts),
            Err(i) => self.hours.insert(i, (hour, counts)),
        }
    }
}

/// One counter row: a workspace's sending domain in one hour. Orders by workspace, then
/// hour, then domain, the order stores keep and lock rows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActivityKey {
    /// The workspace.
    pub workspace: WorkspaceId,
    /// The hour.
    pub hour: HourStart,
    /// The sending domain (`Message::domain_id`).
    pub domain: DomainId,
}

/// The deltas of several writes summed per counter row, in key order: what a store that
/// writes a group of writes at once (PostgreSQL's group commit, a batch of sends) adds to
/// each row, once.
pub fn sum_deltas<'a>(deltas: impl IntoIterator<Item = &'a ActivityDelta>) -> Vec<(ActivityKey, ActivityCounts)> {
    let mut sums: BTreeMap<ActivityKey, ActivityCounts> = BTreeMap::new();
    for (key, counts) in deltas.into_iter().flat_map(ActivityDelta::entries) {
        let sum = sums.entry(key).or_default();
        *sum = sum.plus(&counts);
    }
    sums.into_iter().collect()
}

/// One counter row as read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourlyActivity {
    /// The sending domain.
    pub domain: DomainId,
    /// The hour.
    pub hour: HourStart,
    /// What happened in it.
    pub counts: ActivityCounts,
}
