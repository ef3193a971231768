//! [`SiteActivity`]: what this node's delivery worker sees of each site (the mail it put
//! back to wait, its deliveries in flight, what it admitted in the last minute, the last
//! reply), for the operator's view ([`super::site_control`]) and `/metrics`. Node-local:
//! each node shows its own; the leases, suspensions and throttles, which the limits hold,
//! are every node's.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, TimeDelta, Utc};

use crate::ids::{MessageId, WorkspaceId};
use crate::shaping::SiteKey;

/// Most sites remembered; past it, sites with nothing in flight or waiting are forgotten.
const MAX_SITES: usize = 10_000;
/// Most waiting messages remembered, every site together (the counts shown saturate there):
/// what a client can make the node hold by queueing mail for slow sites.
const MAX_WAITING: usize = 100_000;
/// A waiting message not seen again this long after its due time was taken elsewhere
/// (another node, a cancel): it is no longer counted.
const STALE_WAIT: TimeDelta = TimeDelta::minutes(5);
/// Longest reply kept.
const MAX_REPLY_CHARS: usize = 500;

/// The last reply a site gave this node and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastReply {
    /// The reply (code, enhanced code, text), cut to 500 characters.
    pub reply: String,
    /// When it came.
    pub at: DateTime<Utc>,
}

/// One site as this node saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteSeen {
    /// Messages put back to wait for the site and not taken since.
    pub waiting: u64,
    /// Deliveries to the site under way on this node.
    pub in_flight: u32,
    /// Deliveries admitted in the last minute (the current rate, per minute).
    pub admitted_last_minute: u64,
    /// The last reply.
    pub last_reply: Option<LastReply>,
}

#[derive(Debug, Default)]
struct Site {
    /// Messages put back, with their workspace and the time they are due again.
    waiting: HashMap<MessageId, (WorkspaceId, DateTime<Utc>)>,
    in_flight: u32,
    /// Admissions, counted per minute: (start of the minute, count), this one and the one
    /// before, to give a count over the last 60 s.
    minutes: [(i64, u64); 2],
    last_reply: Option<LastReply>,
}

impl Site {
    fn admitted_last_minute(&self, now: DateTime<Utc>) -> u64 {
        let minute = now.timestamp().div_euclid(60);
        let into = u64::try_from(now.timestamp().rem_euclid(60)).unwrap_or(0);
        let count = |m: i64| self.minutes.iter().filter(|(at, _)| *at == m).map(|(_, n)| *n).sum::<u64>();
        // The previous minute's count weighted by how much of it is within the last 60 s.
        count(minute) + count(minute - 1) * (60 - into) / 60
    }

    fn is_quiet(&self) -> bool {
        self.waiting.is_empty() && self.in_flight == 0
    }
}

/// See the module docs. Shared by the worker and whoever shows it.
#[derive(Debug, Default)]
pub struct SiteActivity {
    table: Mutex<Table>,
}

/// The sites, and how many waiting messages they hold together.
#[derive(Debug, Default)]
struct Table {
    sites: HashMap<SiteKey, Site>,
    waiting: usize,
}

impl Table {
    /// Forgets waiting messages not seen again since `STALE_WAIT` after their due time.
    fn drop_stale(&mut self, now: DateTime<Utc>) {
        for s in self.sites.values_mut() {
            s.waiting.retain(|_, (_, due)| *due + STALE_WAIT > now);
        }
        self.waiting = self.sites.values().map(|s| s.waiting.len()).sum();
    }
}

impl SiteActivity {
    fn table(&self) -> MutexGuard<'_, Table> {
        // Every change leaves a site and the count consistent.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with_site(&self, site: &SiteKey, change: impl FnOnce(&mut Site, &mut usize)) {
        let mut table = self.table();
        let Table { sites, waiting } = &mut *table;
        if !sites.contains_key(site) && sites.len() >= MAX_SITES {
            sites.retain(|_, s| !s.is_quiet());
            if sites.len() >= MAX_SITES {
                return;
            }
        }
        change(sites.entry(site.clone()).or_default(), waiting);
    }

    /// `message` of `workspace` waits for `site` until `due`, as of `now` (not remembered
    /// past [`MAX_WAITING`]). Several copies of one message (a recipient list) waiting for
    /// the site keep the earliest due time: the message's own, which a resume moves.
    pub(crate) fn waiting(
        &self,
        site: &SiteKey,
        (workspace, message): (WorkspaceId, MessageId),
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) {
        {
            let mut table = self.table();
            if table.waiting >= MAX_WAITING {
                table.drop_stale(now);
            }
        }
        self.with_site(site, |s, waiting| {
            match s.waiting.get_mut(&message) {
                // Still waiting as put back: another copy of the same claim.
                Some(kept) if kept.1 > now => kept.1 = kept.1.min(due),
                Some(kept) => *kept = (workspace, due),
                None if *waiting < MAX_WAITING => {
                    s.waiting.insert(message, (workspace, due));
                    *waiting += 1;
                }
                None => {}
            }
        });
    }

    /// The messages this node put back for `site` (workspace, message, due time), forgotten
    /// here: for a resume to make them due at once.
    pub(crate) fn take_waiting(&self, site: &SiteKey) -> Vec<(WorkspaceId, MessageId, DateTime<Utc>)> {
        let mut table = self.table();
        let Table { sites, waiting } = &mut *table;
        let Some(s) = sites.get_mut(site) else { return Vec::new() };
        *waiting -= s.waiting.len();
        s.waiting.drain().map(|(id, (ws, due))| (ws, id, due)).collect()
    }

    /// The message this node put back for `site` that is due soonest but not yet (workspace,
    /// message, due time), forgotten here: for a freed connection to take it.
    pub(crate) fn take_next_waiting(
        &self,
        site: &SiteKey,
        now: DateTime<Utc>,
    ) -> Option<(WorkspaceId, MessageId, DateTime<Utc>)> {
        let mut table = self.table();
        let Table { sites, waiting } = &mut *table;
        let s = sites.get_mut(site)?;
        // A scan of the site's waiting mail: one per delivery that ends, and what a node
        // keeps waiting is bounded (MAX_WAITING).
        let (&message, &(workspace, due)) =
            s.waiting.iter().filter(|(_, (_, due))| *due > now).min_by_key(|(_, (_, due))| *due)?;
        s.waiting.remove(&message);
        *waiting -= 1;
        Some((workspace, message, due))
    }

    /// `message` was admitted by `site` at `now`.
    pub(crate) fn admitted(&self, site: &SiteKey, message: MessageId, now: DateTime<Utc>) {
        self.with_site(site, |s, waiting| {
            if s.waiting.remove(&message).is_some() {
                *waiting -= 1;
            }
            s.in_flight = s.in_flight.saturating_add(1);
            let minute = now.timestamp().div_euclid(60);
            match s.minutes.iter_mut().find(|(at, _)| *at == minute) {
                Some((_, n)) => *n += 1,
                None => {
                    // Replace the older of the two.
                    let oldest = if s.minutes[0].0 <= s.minutes[1].0 { 0 } else { 1 };
                    s.minutes[oldest] = (minute, 1);
                }
            }
        });
    }

    /// A delivery admitted by `site` is over; `reply` is what the site said, if anything.
    pub(crate) fn finished(&self, site: &SiteKey, reply: Option<&str>, now: DateTime<Utc>) {
        self.with_site(site, |s, _| {
            s.in_flight = s.in_flight.saturating_sub(1);
            if let Some(reply) = reply {
                s.last_reply = Some(LastReply { reply: reply.chars().take(MAX_REPLY_CHARS).collect(), at: now });
            }
        });
    }

    /// Every site this node has seen something of, at `now`.
    pub fn snapshot(&self, now: DateTime<Utc>) -> HashMap<SiteKey, SiteSeen> {
        let mut table = self.table();
        table.drop_stale(now);
        table
            .sites
            .iter()
            .map(|(key, s)| {
                let seen = SiteSeen {
                    waiting: u64::try_from(s.waiting.len()).unwrap_or(u64::MAX),
                    in_flight: s.in_flight,
                    admitted_last_minute: s.admitted_last_minute(now),
                    last_reply: s.last_reply.clone(),
                };
                (key.clone(), seen)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> MessageId {
        MessageId(ulid::Ulid::from_parts(n, u128::from(n)))
    }

    #[test]
    fn waiting_messages_are_bounded_every_site_together() {
        let activity = SiteActivity::default();
        let (a, b) = (SiteKey::parse(".a.example").unwrap(), SiteKey::parse(".b.example").unwrap());
        let now = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let due = now + TimeDelta::seconds(1);
        let ws = WorkspaceId(ulid::Ulid::nil());
        for n in 0..(MAX_WAITING as u64 + 10) {
            let site = if n % 2 == 0 { &a } else { &b };
            activity.waiting(site, (ws, id(n)), due, now);
        }
        let total = |activity: &SiteActivity| activity.snapshot(now).values().map(|s| s.waiting).sum::<u64>();
        assert_eq!(total(&activity), MAX_WAITING as u64, "the rest is not remembered");
        assert_eq!(activity.take_waiting(&a).len(), MAX_WAITING / 2);
        activity.waiting(&a, (ws, id(u64::MAX)), due, now);
        assert_eq!(total(&activity), MAX_WAITING as u64 / 2 + 1, "room again once taken");
        // Stale entries (long past their due time, taken elsewhere) make room too.
        let later = due + STALE_WAIT + TimeDelta::seconds(1);
        assert_eq!(activity.snapshot(later).values().map(|s| s.waiting).sum::<u64>(), 0);
    }
}
