//! [`MtaSts`]: the policy that applies to a recipient domain now, from its TXT record, the
//! cache and a fetch, following RFC 8461 §3.3 and §5.1.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::TimeDelta;
use tidings_core::domain_name::{DnsName, DomainName};
use tidings_core::ports::Clock;

use super::StsLookup;
use super::cache::{ActivePolicy, PolicyCache};
use super::fetch::PolicySource;
use super::record;

/// How [`MtaSts`] caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSettings {
    /// The most domains whose policy (or failed fetch) is remembered; past it, the domain
    /// written longest ago is forgotten. Default 10,000.
    pub capacity: usize,
    /// After a failed fetch, how long the same policy id is not fetched again (the cached
    /// policy, if any, applying meanwhile). Default 5 minutes: without it, every message to
    /// a domain whose policy host is down would wait for the fetch timeout.
    pub retry_after_failure: Duration,
}

impl Default for CacheSettings {
    fn default() -> Self {
        Self { capacity: 10_000, retry_after_failure: Duration::from_secs(300) }
    }
}

/// Finds the MTA-STS policy of recipient domains, caching each by its id for its
/// `max_age`.
///
/// For each domain: the `_mta-sts` TXT record's id is looked up; the same id as the cached
/// policy's reuses it; a new id (or nothing cached) fetches the policy. When the record is
/// missing or invalid, the lookup fails, or the fetch fails, a cached policy that has not
/// expired still applies (RFC 8461 §5.1: a valid cached policy is used when no live one
/// can be found), and otherwise the domain has no policy. The cache lives in this process
/// only, so a restart fetches again.
pub struct MtaSts {
    dns: Arc<dyn StsLookup>,
    source: Arc<dyn PolicySource>,
    clock: Arc<dyn Clock>,
    retry_after_failure: TimeDelta,
    cache: Mutex<PolicyCache>,
}

impl std::fmt::Debug for MtaSts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MtaSts").field("domains", &self.cache().len()).finish_non_exhaustive()
    }
}

impl MtaSts {
    /// Looks records up with `dns`, fetches policies from `source`, and times them with
    /// `clock`.
    pub fn new(
        dns: Arc<dyn StsLookup>,
        source: Arc<dyn PolicySource>,
        clock: Arc<dyn Clock>,
        settings: CacheSettings,
    ) -> Self {
        let retry_after_failure = TimeDelta::from_std(settings.retry_after_failure).unwrap_or(TimeDelta::MAX);
        Self { dns, source, clock, retry_after_failure, cache: Mutex::new(PolicyCache::new(settings.capacity)) }
    }

    /// The policy that applies to mail for `domain` now, or `None` when it has none (a
    /// policy in mode `none` is returned as it is: the caller treats it as no policy).
    pub async fn policy_for(&self, domain: &DomainName) -> Option<ActivePolicy> {
        let cached = self.cache().valid(domain, self.clock.now());
        let Ok(name) = DnsName::parse(&domain.with_prefix("_mta-sts")) else { return cached };
        let id = match self.dns.txt_records(&name).await.map(|records| record::select(&records)) {
            Ok(Ok(record)) => record.id,
            Ok(Err(reason)) => {
                tracing::trace!(%domain, %reason, "no MTA-STS record");
                return cached;
            }
            Err(error) => {
                tracing::debug!(%domain, %error, "MTA-STS record lookup failed");
                return cached;
            }
        };
        if cached.as_ref().is_some_and(|policy| policy.id == id) {
            return cached;
        }
        if self.cache().recently_failed(domain, &id, self.clock.now()) {
            return cached;
        }
        match self.source.fetch(domain).await {
            Ok(policy) => {
                let fetched_at = self.clock.now();
                let policy = ActivePolicy {
                    id,
                    expires: fetched_at + TimeDelta::seconds(i64::from(policy.max_age)),
                    policy: Arc::new(policy),
                    fetched_at,
                };
                self.cache().store(domain, policy.clone());
                Some(policy)
            }
            Err(error) => {
                tracing::warn!(%domain, %error, %id, "cannot fetch the MTA-STS policy");
                let until = self.clock.now().checked_add_signed(self.retry_after_failure);
                if let Some(until) = until {
                    self.cache().fetch_failed(domain, &id, until);
                }
                cached
            }
        }
    }

    fn cache(&self) -> MutexGuard<'_, PolicyCache> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;
