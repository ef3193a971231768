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
mod site_table;
mod throttle;

pub use local::LocalLimits;
pub use rate_limit::RateLimiter;
pub use site_table::SiteTable;
pub use throttle::{AuthThrottle, AuthThrottleConfig};

// What the `Limits` port answers, under the use-case paths the front ends import it from.
pub use crate::ports::{Admission, RateLimitState, RetryAfter};

use crate::model::ApiKeyPlaintext;
use crate::usecases::{Principal, Tidings};
use crate::{Error, Result};

/// How stale `last_used_at` may be: a key used again within this time is not touched again.
pub const LAST_USED_RESOLUTION: chrono::Duration = chrono::Duration::seconds(1);

impl Tidings {
    /// Authenticates a presented key (the bearer token or `X-Api-Key` value).
    ///
    /// Unknown, malformed and revoked keys all give [`Error::InvalidApiKey`], so a client
    /// cannot tell which it was. A revoked key fails from the moment `keys().revoke`
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
    fn elapsed_is_never_negative() {
        let t = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        assert_eq!(elapsed_nanos(t, t - chrono::Duration::seconds(3)), 0);
        assert_eq!(elapsed_nanos(t, t + chrono::Duration::milliseconds(1500)), 1_500_000_000);
    }
}
