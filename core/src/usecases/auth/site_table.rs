//! [`SiteTable`]: the delivery sites' admission state of one process (the site half of
//! [`LocalLimits`](super::LocalLimits)): per site its rate bucket, live leases, suspension
//! and throttle, with the semantics of [`Limits::admit_delivery`](crate::ports::Limits), decided
//! by the destinations' one [`AdmissionRule`](crate::ports::admission_rule::AdmissionRule).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};

use crate::ids::SiteLeaseId;
use crate::ports::admission_rule::{DestinationState, Verdict, nanos};
use crate::ports::site_admission::{
    CONNECTION_WAIT, MAX_TRACKED_SITES, SiteAdmission, SiteChange, SiteLease, SiteQuota, SiteState, SiteWait,
    bounded_reason,
};
use crate::shaping::{MessageRate, SiteKey};

/// One site's state.
#[derive(Debug, Default)]
struct Site {
    /// The bucket's theoretical arrival time, ns since the epoch (0: full).
    tat: i64,
    /// Live leases and until when each is held.
    leases: HashMap<SiteLeaseId, DateTime<Utc>>,
    suspended: Option<(DateTime<Utc>, String)>,
    throttle: Option<(MessageRate, DateTime<Utc>, String)>,
}

impl Site {
    /// Drops what ended by `now`.
    fn expire(&mut self, now: DateTime<Utc>) {
        self.leases.retain(|_, until| *until > now);
        if self.suspended.as_ref().is_some_and(|(until, _)| *until <= now) {
            self.suspended = None;
        }
        if self.throttle.as_ref().is_some_and(|(_, until, _)| *until <= now) {
            self.throttle = None;
        }
    }

    /// Nothing here limits anything at `now`: forgetting it changes no answer.
    fn is_idle(&self, now: DateTime<Utc>) -> bool {
        self.leases.is_empty() && self.suspended.is_none() && self.throttle.is_none() && self.tat <= nanos(now)
    }
}

/// The sites of one process, at most [`MAX_TRACKED_SITES`] of them.
#[derive(Debug, Default)]
pub struct SiteTable {
    sites: Mutex<BTreeMap<SiteKey, Site>>,
}

impl SiteTable {
    fn sites(&self) -> std::sync::MutexGuard<'_, BTreeMap<SiteKey, Site>> {
        // Every change below leaves a site consistent between statements.
        self.sites.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// [`Limits::admit_delivery`](crate::ports::Limits::admit_delivery).
    pub fn admit(&self, key: &SiteKey, quota: SiteQuota, lease: SiteLease, now: DateTime<Utc>) -> SiteAdmission {
        let mut sites = self.sites();
        if !sites.contains_key(key) && sites.len() >= MAX_TRACKED_SITES {
            sites.retain(|_, site| {
                site.expire(now);
                !site.is_idle(now)
            });
            if sites.len() >= MAX_TRACKED_SITES {
                // More sites busy at once than the table holds: this one waits its turn
                // rather than going unlimited.
                return SiteAdmission::Wait { until: now + CONNECTION_WAIT, why: SiteWait::Connections };
            }
        }
        let site = sites.entry(key.clone()).or_default();
        site.expire(now);
        let state = DestinationState {
            suspended: site.suspended.as_ref().map(|(until, reason)| (*until, reason.as_str())),
            in_flight: site.leases.len(),
            holds: site.leases.contains_key(&lease.id),
            soonest_end: site.leases.values().min().copied(),
            throttle: site.throttle.as_ref().map(|(rate, _, _)| *rate),
            tat: site.tat,
        };
        match quota.rule().decide(&state, now) {
            Verdict::Admitted { tat } => {
                site.tat = tat;
                site.leases.insert(lease.id, lease.until);
                SiteAdmission::Admitted
            }
            Verdict::Wait { until, why } => SiteAdmission::Wait { until, why },
        }
    }

    /// [`Limits::release_delivery`](crate::ports::Limits::release_delivery).
    pub fn release(&self, key: &SiteKey, lease: SiteLeaseId, keep_until: Option<DateTime<Utc>>, now: DateTime<Utc>) {
        let mut sites = self.sites();
        let Some(site) = sites.get_mut(key) else { return };
        match keep_until {
            Some(until) if until > now => {
                // A lease that has ended is gone even before `expire` drops it: keeping it
                // would bring it back to life.
                if let Some(held) = site.leases.get_mut(&lease).filter(|held| **held > now) {
                    *held = until;
                }
            }
            _ => {
                site.leases.remove(&lease);
            }
        }
    }

    /// [`Limits::change_site`](crate::ports::Limits::change_site).
    pub fn change(&self, key: &SiteKey, change: SiteChange, now: DateTime<Utc>) {
        let mut sites = self.sites();
        if !sites.contains_key(key) && sites.len() >= MAX_TRACKED_SITES {
            sites.retain(|_, site| {
                site.expire(now);
                !site.is_idle(now)
            });
        }
        // A change is kept even over the bound: it is the operator's or a reply's, not a
        // stranger's, and rare.
        let site = sites.entry(key.clone()).or_default();
        site.expire(now);
        match change {
            SiteChange::Suspend { until, reason } => {
                if until > now && site.suspended.as_ref().is_none_or(|(current, _)| until > *current) {
                    site.suspended = Some((until, bounded_reason(&reason)));
                }
            }
            SiteChange::Throttle { rate, until, reason } => {
                if until > now {
                    site.throttle = Some((rate, until, bounded_reason(&reason)));
                }
            }
            SiteChange::Resume => {
                site.suspended = None;
                site.throttle = None;
            }
        }
    }

    /// [`Limits::site_states`](crate::ports::Limits::site_states).
    pub fn states(&self, now: DateTime<Utc>) -> Vec<SiteState> {
        let mut sites = self.sites();
        sites
            .iter_mut()
            .filter_map(|(key, site)| {
                site.expire(now);
                let busy = !site.leases.is_empty() || site.suspended.is_some() || site.throttle.is_some();
                busy.then(|| SiteState {
                    site: key.clone(),
                    leases: u32::try_from(site.leases.len()).unwrap_or(u32::MAX),
                    suspended_until: site.suspended.as_ref().map(|(until, _)| *until),
                    suspend_reason: site.suspended.as_ref().map(|(_, reason)| reason.clone()),
                    throttle: site.throttle.clone(),
                })
            })
            .take(MAX_TRACKED_SITES)
            .collect()
    }

    /// Forgets up to `limit` sites that limit nothing at `now`; returns how many.
    pub fn purge(&self, now: DateTime<Utc>, limit: usize) -> usize {
        let mut sites = self.sites();
        let idle: Vec<SiteKey> = sites
            .iter_mut()
            .filter_map(|(key, site)| {
                site.expire(now);
                site.is_idle(now).then(|| key.clone())
            })
            .take(limit)
            .collect();
        for key in &idle {
            sites.remove(key);
        }
        idle.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shaping::RatePeriod;
    use chrono::TimeDelta;

    #[test]
    fn a_lease_kept_idle_counts_against_new_ones() {
        let table = SiteTable::default();
        let site = SiteKey::parse(".example.net").unwrap();
        let quota = SiteQuota { connections: 1, rate: MessageRate::new(1_000, RatePeriod::Second).unwrap() };
        let now = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let first = SiteLease { id: SiteLeaseId(ulid::Ulid::from_parts(1, 1)), until: now + TimeDelta::minutes(5) };
        assert!(table.admit(&site, quota, first, now).is_admitted());
        table.release(&site, first.id, Some(now + TimeDelta::minutes(1)), now);
        let second = SiteLease { id: SiteLeaseId(ulid::Ulid::from_parts(2, 2)), until: now + TimeDelta::minutes(5) };
        assert!(!table.admit(&site, quota, second, now).is_admitted(), "the kept lease holds the one connection");
    }
}
