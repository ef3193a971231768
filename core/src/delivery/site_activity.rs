//! [`SiteActivity`]: what this node's delivery worker sees of each site (the mail it put
//! back to wait, its deliveries in flight, what it admitted in the last minute, the last
//! reply), for the operator's view ([`super::site_control`]) and `/metrics`. Node-local:
//! each node shows its own; the leases, suspensions and throttles, which the limits hold,
//! are every node's.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
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

/// A site's waiting messages, by id and in the order they are due: a delivery ending takes
/// the soonest ([`SiteActivity::take_next_waiting`]) without a scan of the site's backlog.
#[derive(Debug, Default)]
struct Waiting {
    /// Each message's workspace and the time it is due again.
    by_id: HashMap<MessageId, (WorkspaceId, DateTime<Utc>)>,
    /// The same, ordered by due time.
    by_due: BTreeSet<(DateTime<Utc>, MessageId)>,
}

impl Waiting {
    fn len(&self) -> usize {
        self.by_id.len()
    }

    fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    fn due(&self, message: MessageId) -> Option<DateTime<Utc>> {
        self.by_id.get(&message).map(|(_, due)| *due)
    }

    /// Puts `message` in (or moves it) at `due`.
    fn insert(&mut self, message: MessageId, workspace: WorkspaceId, due: DateTime<Utc>) {
        if let Some((_, before)) = self.by_id.insert(message, (workspace, due)) {
            self.by_due.remove(&(before, message));
        }
        self.by_due.insert((due, message));
    }

    fn remove(&mut self, message: MessageId) -> bool {
        match self.by_id.remove(&message) {
            Some((_, due)) => self.by_due.remove(&(due, message)),
            None => false,
        }
    }

    /// The soonest message due after `now`, taken out.
    fn take_next_after(&mut self, now: DateTime<Utc>) -> Option<(WorkspaceId, MessageId, DateTime<Utc>)> {
        // Every id sorts at or below the largest: the range starts past everything due at `now`.
        let past_now = (now, MessageId::from_bytes([u8::MAX; 16]));
        let &(due, message) = self.by_due.range((Bound::Excluded(past_now), Bound::Unbounded)).next()?;
        let (workspace, _) = self.by_id.remove(&message)?;
        self.by_due.remove(&(due, message));
        Some((workspace, message, due))
    }

    /// Forgets the messages due before `cutoff`.
    fn forget_due_before(&mut self, cutoff: DateTime<Utc>) {
        while let Some(&(due, message)) = self.by_due.first()
            && due < cutoff
        {
            self.by_due.pop_first();
            self.by_id.remove(&message);
        }
    }

    fn drain(&mut self) -> Vec<(WorkspaceId, MessageId, DateTime<Utc>)> {
        self.by_due.clear();
        self.by_id.drain().map(|(id, (ws, due))| (ws, id, due)).collect()
    }
}

#[derive(Debug, Default)]
struct Site {
    /// Messages put back, with their workspace and the time they are due again.
    waiting: Waiting,
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
            s.waiting.forget_due_before(now - STALE_WAIT);
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
            match s.waiting.due(message) {
                // Still waiting as put back: another copy of the same claim.
                Some(kept) if kept > now => s.waiting.insert(message, workspace, kept.min(due)),
                Some(_) => s.waiting.insert(message, workspace, due),
                None if *waiting < MAX_WAITING => {
                    s.waiting.insert(message, workspace, due);
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
        s.waiting.drain()
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
        let next = s.waiting.take_next_after(now)?;
        *waiting -= 1;
        Some(next)
    }

    /// `message` was admitted by `site` at `now`.
    pub(crate) fn admitted(&self, site: &SiteKey, message: MessageId, now: DateTime<Utc>) {
        self.with_site(site, |s, waiting| {
            if s.waiting.remove(message) {
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

    #[test]
    fn the_next_waiting_is_the_soonest_still_to_come_and_moves_keep_the_order() {
        let activity = SiteActivity::default();
        let site = SiteKey::parse(".a.example").unwrap();
        let now = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let ws = WorkspaceId(ulid::Ulid::nil());
        let at = |ms| now + TimeDelta::milliseconds(ms);
        activity.waiting(&site, (ws, id(1)), at(300), now);
        activity.waiting(&site, (ws, id(2)), at(100), now);
        activity.waiting(&site, (ws, id(3)), at(0), now); // due already: being claimed
        activity.waiting(&site, (ws, id(4)), at(200), now);
        // A later copy of message 1's claim asks sooner: it keeps the earlier time.
        activity.waiting(&site, (ws, id(1)), at(50), now);
        activity.admitted(&site, id(4), now);
        let order: Vec<_> = std::iter::from_fn(|| activity.take_next_waiting(&site, now)).collect();
        assert_eq!(order, [(ws, id(1), at(50)), (ws, id(2), at(100))]);
        assert_eq!(activity.snapshot(now)[&site].waiting, 1, "the one due already stays counted");
    }
}
