//! [`LocalLimits`]: the [`Limits`] of one process, in memory.

use std::net::IpAddr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Admission, AuthThrottle, AuthThrottleConfig, RateLimitState, RateLimiter};
use crate::ids::ApiKeyId;
use crate::model::RateLimit;
use crate::ports::{Limits, StoreResult};

/// The rate limiter and the failed-auth throttle of this process. Right for one node (the
/// sled store allows only one); nodes sharing a database share their limits through it
/// instead, or each would grant a key its full limit.
#[derive(Debug)]
pub struct LocalLimits {
    rate: RateLimiter,
    throttle: AuthThrottle,
}

impl LocalLimits {
    /// Limits with this throttle's settings and the default rate limiter.
    pub fn new(throttle: AuthThrottleConfig) -> Self {
        Self { rate: RateLimiter::default(), throttle: AuthThrottle::new(throttle) }
    }
}

impl Default for LocalLimits {
    fn default() -> Self {
        Self::new(AuthThrottleConfig::default())
    }
}

#[async_trait]
impl Limits for LocalLimits {
    async fn acquire_send(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission<RateLimitState>> {
        Ok(self.rate.try_acquire(key, limit, now).into())
    }

    async fn refund_send(&self, key: ApiKeyId, limit: RateLimit, _now: DateTime<Utc>) -> StoreResult<()> {
        self.rate.refund(key, limit);
        Ok(())
    }

    async fn acquire_sends(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        n: u32,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission<RateLimitState>> {
        Ok(self.rate.try_acquire_n(key, limit, n, now).into())
    }

    async fn refund_sends(&self, key: ApiKeyId, limit: RateLimit, n: u32, _now: DateTime<Utc>) -> StoreResult<()> {
        self.rate.refund_n(key, limit, n);
        Ok(())
    }

    async fn check_auth(&self, client: IpAddr, now: DateTime<Utc>) -> StoreResult<Admission<()>> {
        Ok(self.throttle.check(&client, now).into())
    }

    async fn record_auth_failure(&self, client: IpAddr, now: DateTime<Utc>) -> StoreResult<Admission<()>> {
        Ok(self.throttle.record_failure(client, now).into())
    }

    /// Nothing to do: both tables bound themselves as they go.
    async fn purge(&self, _now: DateTime<Utc>, _limit: usize) -> StoreResult<usize> {
        Ok(0)
    }
}
