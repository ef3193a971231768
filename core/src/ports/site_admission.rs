//! What the `Limits` port answers about delivery sites (contract §12, "Destinations" and
//! "Adaptive"; docs/decisions.md, "Direct delivery by site"): whether a delivery to a site
//! may start now, and the site's suspension or throttle.
//!
//! A site admits a delivery when it is not suspended, has a connection free (fewer live
//! leases than its connection limit, or the delivery brings a lease its node already holds)
//! and has a rate token. The rate is a token bucket holding about one second of the rate
//! (at least one token, at most the period's count), refilled continuously; a throttle
//! lowers it until its end. Every node sharing the limits counts against the same site.

use std::fmt;

use chrono::{DateTime, Utc};

use super::admission_rule::AdmissionRule;
use crate::ids::SiteLeaseId;
use crate::shaping::{MessageRate, SiteKey};

/// Most sites whose state [`Limits::site_states`](super::Limits::site_states) returns, and
/// most sites a store keeps state for between purges of idle ones: site keys come from the
/// MX records of recipient domains a client names, so their count must be bounded.
pub const MAX_TRACKED_SITES: usize = 10_000;

/// How long a delivery refused for want of a connection waits before asking again: about
/// one short delivery, so that a connection freed is used soon, and few enough asks that
/// the queue is not churned (each is a claim and a write of the message).
pub const CONNECTION_WAIT: chrono::TimeDelta = chrono::TimeDelta::milliseconds(250);

/// Longest text kept as a suspension's or throttle's reason.
pub const MAX_SITE_REASON_CHARS: usize = 500;

/// What one site may take, from its shaping limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteQuota {
    /// Most live leases (deliveries in flight and connections kept idle) at once.
    pub connections: u32,
    /// Most deliveries per period, before any throttle.
    pub rate: MessageRate,
}

impl SiteQuota {
    /// The site's [`AdmissionRule`]: its connections are its most in flight, its rate the
    /// rule's.
    pub fn rule(&self) -> AdmissionRule {
        AdmissionRule { in_flight: usize::try_from(self.connections).unwrap_or(usize::MAX), rate: Some(self.rate) }
    }
}

/// A connection lease a delivery asks for: its id and until when it is held (the claim's
/// lease, so that a node that dies frees it). A lease id the site already holds, not yet
/// expired, is taken over instead of counting as a new connection: that is how a node reuses
/// the lease of a connection it keeps idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteLease {
    /// The lease.
    pub id: SiteLeaseId,
    /// Until when it is held unless released.
    pub until: DateTime<Utc>,
}

/// Why a site refused a delivery for now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteWait {
    /// Suspended (by an adaptive rule or the operator), with the reason.
    Suspended(String),
    /// Every connection is taken.
    Connections,
    /// No rate token.
    Rate,
}

impl fmt::Display for SiteWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Suspended(reason) => write!(f, "suspended: {reason}"),
            Self::Connections => f.write_str("every connection is in use"),
            Self::Rate => f.write_str("at its message rate"),
        }
    }
}

/// Whether a delivery to a site may start.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum SiteAdmission {
    /// Go: a rate token is taken and the lease is held.
    Admitted,
    /// Not now; nothing was taken. `until` is when to ask again: the end of the suspension,
    /// the next rate token, or a short while for a connection to come free.
    Wait {
        /// When to ask again.
        until: DateTime<Utc>,
        /// Why.
        why: SiteWait,
    },
}

impl SiteAdmission {
    /// Whether the delivery may start.
    pub fn is_admitted(&self) -> bool {
        matches!(self, Self::Admitted)
    }
}

/// A change to a site's state: what an adaptive rule or the operator does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteChange {
    /// No delivery until `until`. A later end replaces an earlier one; an earlier one keeps
    /// the later (a rule never shortens the operator's suspension).
    Suspend {
        /// When it ends.
        until: DateTime<Utc>,
        /// Why (cut to [`MAX_SITE_REASON_CHARS`]).
        reason: String,
    },
    /// At most `rate` until `until` (the lower of it and the site's own rate applies).
    Throttle {
        /// The lowered rate.
        rate: MessageRate,
        /// When it ends.
        until: DateTime<Utc>,
        /// Why (cut to [`MAX_SITE_REASON_CHARS`]).
        reason: String,
    },
    /// Ends the suspension and the throttle now.
    Resume,
}

/// A site's state as the limits hold it, at some `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteState {
    /// The site.
    pub site: SiteKey,
    /// Live leases: deliveries in flight and connections kept idle, every node together.
    pub leases: u32,
    /// Suspended until then, if the suspension has not ended.
    pub suspended_until: Option<DateTime<Utc>>,
    /// Why it is suspended.
    pub suspend_reason: Option<String>,
    /// The lowered rate, until when, and why, if the throttle has not ended.
    pub throttle: Option<(MessageRate, DateTime<Utc>, String)>,
}

/// The reason as stored: at most [`MAX_SITE_REASON_CHARS`] characters.
pub fn bounded_reason(reason: &str) -> String {
    reason.chars().take(MAX_SITE_REASON_CHARS).collect()
}

/// The token bucket of a rate, in the GCRA form both stores keep (a "theoretical arrival
/// time" per site): each delivery moves it on by the rate's interval, and a delivery is
/// allowed while it would stay within the burst of the current time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateBucket {
    /// Nanoseconds one delivery takes of the rate.
    pub interval: i64,
    /// Deliveries that may go at once from a full bucket: about one second of the rate, at
    /// least 1, at most the period's count.
    pub burst: i64,
}

impl RateBucket {
    /// The bucket of `rate`.
    pub fn of(rate: MessageRate) -> Self {
        let interval = i64::try_from(rate.interval().as_nanos()).unwrap_or(i64::MAX).max(1);
        let per_second = (1_000_000_000 + interval - 1) / interval;
        Self { interval, burst: per_second.clamp(1, i64::from(rate.count())) }
    }

    /// With the stored arrival time `tat` (nanoseconds since the epoch; 0 for a full bucket)
    /// at `now`: `Ok(new tat)` if one delivery may go, else `Err(nanoseconds since the epoch
    /// when it may)`.
    pub fn take(&self, tat: i64, now: i64) -> Result<i64, i64> {
        let start = tat.max(now);
        let next = start.saturating_add(self.interval);
        let allowed_at = next.saturating_sub(self.interval.saturating_mul(self.burst));
        if allowed_at <= now { Ok(next) } else { Err(allowed_at) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shaping::RatePeriod;

    fn bucket(count: u32, period: RatePeriod) -> RateBucket {
        RateBucket::of(MessageRate::new(count, period).expect("a rate"))
    }

    #[test]
    fn a_bucket_holds_about_a_second_of_the_rate() {
        assert_eq!(bucket(100, RatePeriod::Second).burst, 100);
        assert_eq!(bucket(1_000, RatePeriod::Minute).burst, 17, "16.7 a second, rounded up");
        assert_eq!(bucket(50, RatePeriod::Hour).burst, 1, "at least one");
        assert_eq!(bucket(3, RatePeriod::Second).interval, 333_333_333);
    }

    #[test]
    fn a_full_bucket_lets_its_burst_through_then_one_per_interval() {
        let b = bucket(4, RatePeriod::Second);
        let now = 1_000_000_000_000;
        let mut tat = 0;
        for _ in 0..4 {
            tat = b.take(tat, now).expect("within the burst");
        }
        let wait = b.take(tat, now).expect_err("the burst is used up");
        assert_eq!(wait, now + 250_000_000, "the next token a quarter second later");
        assert!(b.take(tat, wait).is_ok());
    }
}
