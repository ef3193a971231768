//! Authentication (docs/api.md#authentication): turning a presented API key into a [`Principal`],
//! plus the two in-memory limiters behind [`LocalLimits`]: the failed-authentication
//! throttle per client ([`AuthThrottle`]) and the per-key send rate limiter
//! ([`RateLimiter`]).
//!
//! The limiters are pure: they take the time as an argument and never read a clock, so
//! tests drive them with fixed instants. They live in one process; nodes that share a
//! database share their counts through another [`Limits`](crate::ports::Limits)
//! implementation instead, so the limits do not multiply by the number of nodes.

mod local;
mod rate_limit;
mod throttle;

use std::fmt;

pub use local::LocalLimits;
pub use rate_limit::{RateLimitState, RateLimiter};
pub use throttle::{AuthThrottle, AuthThrottleConfig};

use crate::model::ApiKeyPlaintext;
use crate::usecases::{Principal, Tidings};
use crate::{Error, Result};

/// How stale `last_used_at` may be: a key used again within this time is not touched again.
pub const LAST_USED_RESOLUTION: chrono::Duration = chrono::Duration::seconds(1);

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

impl Tidings {
    /// Authenticates a presented key (the bearer token or `X-Api-Key` value).
    ///
    /// Unknown, malformed and revoked keys all give [`Error::InvalidApiKey`], so a client
    /// cannot tell which it was. A revoked key fails from the moment `revoke_api_key`
    /// returned, because the store answers the lookup from the same record. A store that
    /// cannot be reached is [`Error::Unavailable`], never a 401: the key may well be good.
    ///
    /// On success `last_used_at` is touched on a best-effort basis; its failure does not
    /// fail the request, since the request itself is legitimate.
    pub async fn authenticate(&self, presented: &str) -> Result<Principal> {
        let plaintext = ApiKeyPlaintext::parse(presented).ok_or(Error::InvalidApiKey)?;
        let key = self.store.find_api_key_by_hash(&plaintext.hash()).await?.ok_or(Error::InvalidApiKey)?;
        if key.revoked_at.is_some() {
            return Err(Error::InvalidApiKey);
        }
        // Touching is a store write under the writer lock; on every request it halved the
        // throughput of sends, so `last_used_at` is kept to within LAST_USED_RESOLUTION.
        // Ignored on purpose: `last_used_at` is informational and not durable anyway.
        let now = self.clock.now();
        if key.last_used_at.is_none_or(|last| now - last >= LAST_USED_RESOLUTION) {
            let _ = self.store.touch_api_key(key.workspace_id, key.id, now).await;
        }
        Ok(Principal::of_key(&key))
    }
}

/// Nanoseconds from `from` to `to`, saturating, and 0 when the clock went backwards (a
/// wall clock can be stepped back; the limiters must not grant or block on that alone).
pub(crate) fn elapsed_nanos(from: chrono::DateTime<chrono::Utc>, to: chrono::DateTime<chrono::Utc>) -> i128 {
    let delta = to.signed_duration_since(from);
    let nanos = delta
        .num_nanoseconds()
        .map_or_else(|| if delta > chrono::Duration::zero() { i128::from(i64::MAX) } else { 0 }, i128::from);
    nanos.max(0)
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

    #[test]
    fn elapsed_is_never_negative() {
        let t = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        assert_eq!(elapsed_nanos(t, t - chrono::Duration::seconds(3)), 0);
        assert_eq!(elapsed_nanos(t, t + chrono::Duration::milliseconds(1500)), 1_500_000_000);
    }
}
