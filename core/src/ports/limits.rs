//! The `Limits` port: where the per-key send rate limits and the failed-authentication
//! throttle (docs/api.md#rate-limits, #failed-authentication-throttle) keep their counts.
//!
//! One process keeps them in memory ([`LocalLimits`](crate::usecases::LocalLimits)); nodes
//! that share a database share them through it (`tidings-storage-postgres`'s `PgLimits`), so
//! a key's limit and a client's failures count once however many nodes serve them.
//!
//! What the port answers ([`Admission`], [`RateLimitState`], [`RetryAfter`]) is defined here,
//! beside it, so that the port does not reach up into the use cases that answer with it.

use std::fmt;
use std::net::IpAddr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use super::site_admission::{SiteAdmission, SiteChange, SiteLease, SiteQuota, SiteState};
use crate::ids::{ApiKeyId, SiteLeaseId};
use crate::model::RateLimit;
use crate::shaping::SiteKey;

/// Send tokens and failed-authentication counts, with the semantics of
/// [`RateLimiter`](crate::usecases::RateLimiter) and
/// [`AuthThrottle`](crate::usecases::AuthThrottle): a token bucket of `limit` tokens refilled
/// at `limit` per second per key; per client, `max_failures` failures within a fixed window
/// block it until the window ends.
///
/// Every method takes the time as an argument. An `Err` means the counts could not be
/// reached; the front end answers 503, never grants or blocks on it.
#[async_trait]
pub trait Limits: Send + Sync {
    /// Takes one send token of `key` at `now`: `Allowed(state)` for the headers if granted;
    /// `Limited` if the bucket is empty, in which case nothing is taken.
    async fn acquire_send(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission<RateLimitState>>;

    /// Gives back a token taken by [`acquire_send`](Self::acquire_send) for a send that queued
    /// nothing (rejected, or an idempotent replay). Never fills past capacity.
    async fn refund_send(&self, key: ApiKeyId, limit: RateLimit, now: DateTime<Utc>) -> StoreResult<()>;

    /// Takes `n` send tokens at once (a batch of `n` messages), all or none: like
    /// [`acquire_send`](Self::acquire_send), `Limited` with nothing taken if fewer than
    /// `n` are available. The caller never asks for more than the capacity.
    async fn acquire_sends(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        n: u32,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission<RateLimitState>>;

    /// Gives back `n` tokens taken by [`acquire_sends`](Self::acquire_sends) for items that
    /// queued nothing. Never fills past capacity.
    async fn refund_sends(&self, key: ApiKeyId, limit: RateLimit, n: u32, now: DateTime<Utc>) -> StoreResult<()>;

    /// `Limited` if `client` has used up its failures in its current window.
    async fn check_auth(&self, client: IpAddr, now: DateTime<Utc>) -> StoreResult<Admission<()>>;

    /// Counts one failed authentication of `client` at `now` if its window has room for it;
    /// `Limited` if the client had used up its failures already (that request is then
    /// a 429, not a 401). Deciding and counting in one step is what holds a burst of
    /// concurrent failures to the allowance: a [`check_auth`](Self::check_auth) before each
    /// would let every request that checked before any was counted through.
    async fn record_auth_failure(&self, client: IpAddr, now: DateTime<Utc>) -> StoreResult<Admission<()>>;

    /// Whether one delivery to `site` may start at `now` (direct delivery's per-site limits,
    /// [`super::site_admission`]): `Admitted` takes a rate token of the site and holds
    /// `lease` until `lease.until`; `Wait` takes nothing. Checked in order: a suspension
    /// (wait for its end), a connection (a live lease of this id is taken over and extended;
    /// otherwise fewer than `quota.connections` live leases), a rate token (the lower of
    /// `quota.rate` and a throttle's rate).
    async fn admit_delivery(
        &self,
        site: &SiteKey,
        quota: SiteQuota,
        lease: SiteLease,
        now: DateTime<Utc>,
    ) -> StoreResult<SiteAdmission>;

    /// Ends `lease` of `site` (the delivery is over and its connection closed), or with
    /// `keep_until` keeps it live until then (its connection is kept idle, and a later
    /// delivery of this node takes the lease over). Nothing if the lease is gone.
    async fn release_delivery(
        &self,
        site: &SiteKey,
        lease: SiteLeaseId,
        keep_until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Suspends, throttles or resumes `site` ([`SiteChange`]).
    async fn change_site(&self, site: &SiteKey, change: SiteChange, now: DateTime<Utc>) -> StoreResult<()>;

    /// The sites with live leases, a suspension or a throttle at `now`, by site key, at most
    /// [`MAX_TRACKED_SITES`](super::site_admission::MAX_TRACKED_SITES).
    async fn site_states(&self, now: DateTime<Utc>) -> StoreResult<Vec<SiteState>>;

    /// Forgets state that no longer limits anything at `now` (full buckets, windows that are
    /// over, expired site leases and ended suspensions), at most `limit` entries; returns how
    /// many. A background task calls it.
    async fn purge(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
}

/// How long a refused client must wait: the `Retry-After` header, in whole seconds (at
/// least 1, so a client that honours it never retries immediately).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RetryAfter {
    /// Seconds to wait, ≥ 1.
    pub seconds: u64,
}

impl RetryAfter {
    /// Rounds a wait in nanoseconds up to whole seconds, at least 1.
    pub fn from_nanos(nanos: i128) -> Self {
        const NANOS_PER_SEC: i128 = 1_000_000_000;
        let seconds = (nanos.max(0) + NANOS_PER_SEC - 1) / NANOS_PER_SEC;
        Self { seconds: u64::try_from(seconds).unwrap_or(u64::MAX).max(1) }
    }
}

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.seconds)
    }
}

/// What a rate limit or the failed-authentication throttle answers: go ahead with `T`, or
/// wait. Being limited is an outcome a front end answers (429), not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Admission<T> {
    /// Let through; `T` is what the caller gets (the bucket's state, the send it made).
    Allowed(T),
    /// Refused for now; nothing was taken or done.
    Limited {
        /// When to ask again.
        retry_after: RetryAfter,
    },
}

impl<T> Admission<T> {
    /// What was let through, if it was.
    pub fn allowed(self) -> Option<T> {
        match self {
            Self::Allowed(value) => Some(value),
            Self::Limited { .. } => None,
        }
    }

    /// Whether it was let through.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Self::Allowed(_))
    }

    /// Whether it was refused for now.
    pub fn is_limited(&self) -> bool {
        matches!(self, Self::Limited { .. })
    }

    /// `Allowed(f(value))`, or the same limit.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Admission<U> {
        match self {
            Self::Allowed(value) => Admission::Allowed(f(value)),
            Self::Limited { retry_after } => Admission::Limited { retry_after },
        }
    }
}

/// The in-process limiters answer `Err(wait)` when limited.
impl<T> From<Result<T, RetryAfter>> for Admission<T> {
    fn from(answer: Result<T, RetryAfter>) -> Self {
        match answer {
            Ok(value) => Self::Allowed(value),
            Err(retry_after) => Self::Limited { retry_after },
        }
    }
}

/// The limit's state after a granted send, for the `RateLimit-Limit`, `RateLimit-Remaining`
/// and `RateLimit-Reset` response headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitState {
    /// The key's `rateLimitPerSec` (the bucket's capacity).
    pub limit: u32,
    /// Whole tokens left after this send.
    pub remaining: u32,
    /// Seconds (rounded up) until the bucket is full again; 0 if it is full.
    pub reset: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_at_least_one_second() {
        assert_eq!(RetryAfter::from_nanos(-5).seconds, 1);
        assert_eq!(RetryAfter::from_nanos(0).seconds, 1);
        assert_eq!(RetryAfter::from_nanos(1).seconds, 1);
        assert_eq!(RetryAfter::from_nanos(1_000_000_000).seconds, 1);
        assert_eq!(RetryAfter::from_nanos(1_000_000_001).seconds, 2);
        assert_eq!(RetryAfter::from_nanos(59_500_000_000).seconds, 60);
    }
}
