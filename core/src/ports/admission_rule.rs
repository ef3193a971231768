//! [`AdmissionRule`]: the one rule by which work waiting on a destination (a mail site, a
//! webhook endpoint) is let through (issue #33; docs/decisions.md, "One admission rule for
//! sites and endpoints"): not while the destination is suspended, not beyond its most in flight
//! at once (unless the work brings a slot it already holds), not beyond its rate. Every
//! implementation decides with [`AdmissionRule::decide`] (sites: the memory `SiteTable` and
//! PostgreSQL's site limits) or, where only the in-flight part applies, with
//! [`AdmissionRule::has_room`] (endpoints and workspaces: [`QuotaCount`](super::QuotaCount)
//! inside the webhook claim); what is in flight is counted per key with [`InFlightCounts`].
//!
//! Where the state lives differs by kind, and is not shared: a site's leases, bucket and
//! suspension are kept by the `Limits` port for every node and asked after the claim; an
//! endpoint's in-flight count is its dispatcher's, handed to the store's claim, which skips
//! a full endpoint's backlog while scanning.

use std::collections::HashMap;
use std::hash::Hash;

use chrono::{DateTime, Utc};

use super::site_admission::{CONNECTION_WAIT, RateBucket, SiteWait};
use crate::shaping::MessageRate;

/// What a destination may take: most in flight at once and, if it has one, a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionRule {
    /// Most pieces of work in flight at once (a site's connection leases, an endpoint's
    /// deliveries being posted).
    pub in_flight: usize,
    /// Most admissions per period (a token bucket, [`RateBucket`]); `None`: no rate.
    pub rate: Option<MessageRate>,
}

impl AdmissionRule {
    /// At most `in_flight` at once, at any rate.
    pub fn in_flight(in_flight: usize) -> Self {
        Self { in_flight, rate: None }
    }

    /// Whether one more may start with `in_flight` already in flight; one that `holds` a
    /// slot already (a lease taken over) always may, as it adds nothing.
    pub fn has_room(&self, in_flight: usize, holds: bool) -> bool {
        holds || in_flight < self.in_flight
    }

    /// The answer for one piece of work at `now`, checked in order: the suspension (wait for
    /// its end), the in-flight limit (wait for the soonest slot's end, at most
    /// [`CONNECTION_WAIT`]), the rate (the lower of the rule's and a throttle's; wait for the
    /// next token). Admitted, the caller counts the work in flight and keeps the new bucket.
    pub fn decide(&self, state: &DestinationState<'_>, now: DateTime<Utc>) -> Verdict {
        if let Some((until, reason)) = state.suspended.filter(|(until, _)| *until > now) {
            return Verdict::Wait { until, why: SiteWait::Suspended(reason.to_owned()) };
        }
        if !self.has_room(state.in_flight, state.holds) {
            let soonest = state.soonest_end.unwrap_or(now);
            return Verdict::Wait { until: soonest.min(now + CONNECTION_WAIT), why: SiteWait::Connections };
        }
        let rate = match (self.rate, state.throttle) {
            (Some(own), Some(lowered)) if lowered.per_second() < own.per_second() => Some(lowered),
            (own, _) => own,
        };
        let Some(rate) = rate else { return Verdict::Admitted { tat: state.tat } };
        match RateBucket::of(rate).take(state.tat, nanos(now)) {
            Ok(tat) => Verdict::Admitted { tat },
            Err(at) => Verdict::Wait { until: DateTime::from_timestamp_nanos(at), why: SiteWait::Rate },
        }
    }
}

/// What a destination holds at the moment of a decision, as its store reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DestinationState<'a> {
    /// Suspended until then, and why (ignored once ended).
    pub suspended: Option<(DateTime<Utc>, &'a str)>,
    /// Pieces of work in flight (live leases).
    pub in_flight: usize,
    /// Whether the work asking holds one of them already.
    pub holds: bool,
    /// When the soonest of them ends, if known.
    pub soonest_end: Option<DateTime<Utc>>,
    /// A lowered rate in force (it never raises the rule's).
    pub throttle: Option<MessageRate>,
    /// The bucket's theoretical arrival time, nanoseconds since the epoch (0: full).
    pub tat: i64,
}

/// What [`AdmissionRule::decide`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Verdict {
    /// Go; the bucket moves to `tat` (unchanged without a rate).
    Admitted {
        /// The bucket's new theoretical arrival time.
        tat: i64,
    },
    /// Not now; nothing is taken.
    Wait {
        /// When to ask again.
        until: DateTime<Utc>,
        /// Why (for an endpoint, `Connections` means every in-flight slot is taken).
        why: SiteWait,
    },
}

/// Nanoseconds since the epoch, as the stores keep bucket times (before 1970: 0; past 2262:
/// far in the future).
pub fn nanos(at: DateTime<Utc>) -> i64 {
    at.timestamp_nanos_opt().unwrap_or(if at.timestamp() < 0 { 0 } else { i64::MAX / 2 })
}

/// How many pieces of work are in flight per key (an endpoint, a workspace); a key with
/// none is not kept, so the map holds only what is busy.
#[derive(Debug, Clone)]
pub struct InFlightCounts<K> {
    counts: HashMap<K, usize>,
}

impl<K> Default for InFlightCounts<K> {
    fn default() -> Self {
        Self { counts: HashMap::new() }
    }
}

impl<K: Hash + Eq> InFlightCounts<K> {
    /// How many of `key` are in flight.
    pub fn of(&self, key: &K) -> usize {
        self.counts.get(key).copied().unwrap_or(0)
    }

    /// Counts one more of `key`.
    pub fn start(&mut self, key: K) {
        *self.counts.entry(key).or_default() += 1;
    }

    /// Counts one less of `key` (nothing if none is counted).
    pub fn finish(&mut self, key: &K) {
        if let Some(n) = self.counts.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                self.counts.remove(key);
            }
        }
    }

    /// The counts, busy keys only.
    pub fn counts(&self) -> &HashMap<K, usize> {
        &self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shaping::RatePeriod;
    use chrono::TimeDelta;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).expect("a time")
    }

    #[test]
    fn a_suspension_then_the_in_flight_limit_then_the_rate_refuse_in_that_order() {
        let rate = MessageRate::new(1, RatePeriod::Second).expect("a rate");
        let rule = AdmissionRule { in_flight: 1, rate: Some(rate) };
        let later = now() + TimeDelta::minutes(1);
        let spent = nanos(now()) + 1_000_000_000;
        let all = DestinationState { suspended: Some((later, "421")), in_flight: 1, tat: spent, ..Default::default() };
        assert_eq!(rule.decide(&all, now()), Verdict::Wait { until: later, why: SiteWait::Suspended("421".into()) });
        let full = DestinationState { suspended: Some((now(), "over")), ..all };
        assert_eq!(rule.decide(&full, now()), Verdict::Wait { until: now(), why: SiteWait::Connections });
        let held = DestinationState { holds: true, ..full };
        assert_eq!(
            rule.decide(&held, now()),
            Verdict::Wait { until: now() + TimeDelta::seconds(1), why: SiteWait::Rate }
        );
        let free = DestinationState { tat: 0, ..held };
        assert_eq!(rule.decide(&free, now()), Verdict::Admitted { tat: nanos(now()) + 1_000_000_000 });
    }

    #[test]
    fn without_a_rate_only_the_in_flight_limit_refuses() {
        let rule = AdmissionRule::in_flight(2);
        let busy = DestinationState { in_flight: 1, tat: 42, ..Default::default() };
        assert_eq!(rule.decide(&busy, now()), Verdict::Admitted { tat: 42 });
        let soon = now() + TimeDelta::milliseconds(10);
        let full = DestinationState { in_flight: 2, soonest_end: Some(soon), ..busy };
        assert_eq!(rule.decide(&full, now()), Verdict::Wait { until: soon, why: SiteWait::Connections });
        assert!(
            AdmissionRule::in_flight(0).decide(&DestinationState::default(), now()) != Verdict::Admitted { tat: 0 }
        );
    }

    #[test]
    fn in_flight_counts_keep_only_busy_keys() {
        let mut counts = InFlightCounts::default();
        counts.start('a');
        counts.start('a');
        counts.finish(&'a');
        counts.finish(&'b');
        assert_eq!((counts.of(&'a'), counts.of(&'b')), (1, 0));
        counts.finish(&'a');
        assert!(counts.counts().is_empty());
    }
}
