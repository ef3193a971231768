//! [`LocalLimits`]: the [`Limits`] of one process, in memory.

use std::net::IpAddr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Admission, AuthThrottle, AuthThrottleConfig, RateLimitState, RateLimiter, SiteTable};
use crate::ids::{ApiKeyId, SiteLeaseId};
use crate::model::RateLimit;
use crate::ports::{Limits, SiteAdmission, SiteChange, SiteLease, SiteQuota, SiteState, StoreResult};
use crate::shaping::SiteKey;

/// The rate limiter and the failed-auth throttle of this process. Right for one node (the
/// sled store allows only one); nodes sharing a database share their limits through it
/// instead, or each would grant a key its full limit.
#[derive(Debug)]
pub struct LocalLimits {
    rate: RateLimiter,
    throttle: AuthThrottle,
    sites: SiteTable,
}

impl LocalLimits {
    /// Limits with this throttle's settings and the default rate limiter.
    pub fn new(throttle: AuthThrottleConfig) -> Self {
        Self { rate: RateLimiter::default(), throttle: AuthThrottle::new(throttle), sites: SiteTable::default() }
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

    async fn admit_delivery(
        &self,
        site: &SiteKey,
        quota: SiteQuota,
        lease: SiteLease,
        now: DateTime<Utc>,
    ) -> StoreResult<SiteAdmission> {
        Ok(self.sites.admit(site, quota, lease, now))
    }

    async fn release_delivery(
        &self,
        site: &SiteKey,
        lease: SiteLeaseId,
        keep_until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.sites.release(site, lease, keep_until, now);
        Ok(())
    }

    async fn change_site(&self, site: &SiteKey, change: SiteChange, now: DateTime<Utc>) -> StoreResult<()> {
        self.sites.change(site, change, now);
        Ok(())
    }

    async fn site_states(&self, now: DateTime<Utc>) -> StoreResult<Vec<SiteState>> {
        Ok(self.sites.states(now))
    }

    /// The key and client tables bound themselves as they go; idle sites are forgotten here.
    async fn purge(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        Ok(self.sites.purge(now, limit))
    }
}
