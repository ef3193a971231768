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
/// Most waiting messages remembered per site (the count shown saturates there).
const MAX_WAITING_PER_SITE: usize = 100_000;
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
    sites: Mutex<HashMap<SiteKey, Site>>,
}

impl SiteActivity {
    fn sites(&self) -> MutexGuard<'_, HashMap<SiteKey, Site>> {
        // Every change leaves a site consistent.
        self.sites.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with_site(&self, site: &SiteKey, change: impl FnOnce(&mut Site)) {
        let mut sites = self.sites();
        if !sites.contains_key(site) && sites.len() >= MAX_SITES {
            sites.retain(|_, s| !s.is_quiet());
            if sites.len() >= MAX_SITES {
                return;
            }
        }
        change(sites.entry(site.clone()).or_default());
    }

    /// `message` of `workspace` waits for `site` until `due`.
    pub(crate) fn waiting(&self, site: &SiteKey, workspace: WorkspaceId, message: MessageId, due: DateTime<Utc>) {
        self.with_site(site, |s| {
            if s.waiting.len() < MAX_WAITING_PER_SITE || s.waiting.contains_key(&message) {
                s.waiting.insert(message, (workspace, due));
            }
        });
    }

    /// The messages this node put back for `site` (workspace, message, due time), forgotten
    /// here: for a resume to make them due at once.
    pub(crate) fn take_waiting(&self, site: &SiteKey) -> Vec<(WorkspaceId, MessageId, DateTime<Utc>)> {
        let mut sites = self.sites();
        let Some(s) = sites.get_mut(site) else { return Vec::new() };
        s.waiting.drain().map(|(id, (ws, due))| (ws, id, due)).collect()
    }

    /// `message` was admitted by `site` at `now`.
    pub(crate) fn admitted(&self, site: &SiteKey, message: MessageId, now: DateTime<Utc>) {
        self.with_site(site, |s| {
            s.waiting.remove(&message);
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
        self.with_site(site, |s| {
            s.in_flight = s.in_flight.saturating_sub(1);
            if let Some(reply) = reply {
                s.last_reply = Some(LastReply { reply: reply.chars().take(MAX_REPLY_CHARS).collect(), at: now });
            }
        });
    }

    /// Every site this node has seen something of, at `now`.
    pub fn snapshot(&self, now: DateTime<Utc>) -> HashMap<SiteKey, SiteSeen> {
        let mut sites = self.sites();
        sites
            .iter_mut()
            .map(|(key, s)| {
                s.waiting.retain(|_, (_, due)| *due + STALE_WAIT > now);
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
