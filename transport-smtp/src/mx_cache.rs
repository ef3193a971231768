//! [`MxCache`]: recipient domains' MX answers, kept for a fixed while, so that a delivery
//! looks its domain's MX records up once: the delivery worker first asks the mailer for
//! the domain's site (`Mailer::site`), then sends, and both read the same answer.
//!
//! A fixed lifetime, not the records' TTL: the resolver (`tidings_dns::HickoryDns`) hands
//! back record data without TTLs and caches nothing itself. Five minutes is short next to
//! how often MX records change, and a stale answer only routes to the hosts the domain had
//! a moment ago. Only answers are kept; failures (NXDOMAIN included) are asked again on the
//! next delivery, as without the cache.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tidings_core::domain_name::DomainName;
use tidings_core::ports::DnsError;

use crate::mx::MxLookup;

/// How long an MX answer is used.
pub(crate) const MX_ANSWER_LIFETIME: Duration = Duration::from_secs(5 * 60);

/// Most domains whose answers are kept.
pub(crate) const MAX_CACHED_DOMAINS: usize = 10_000;

/// MX records as [`MxLookup::mx_hosts`] gives them.
pub(crate) type MxRecords = Vec<(u16, String)>;

/// Recent MX answers by domain, at most `max` of them.
pub(crate) struct MxCache {
    answers: Mutex<HashMap<String, Answer>>,
    lifetime: Duration,
    max: usize,
}

struct Answer {
    records: MxRecords,
    at: Instant,
}

impl MxCache {
    /// An empty cache keeping answers for `lifetime`, for at most `max` domains.
    pub(crate) fn new(lifetime: Duration, max: usize) -> Self {
        Self { answers: Mutex::new(HashMap::new()), lifetime, max }
    }

    /// The MX records of `domain` as of `now`: the kept answer while it is fresh, else
    /// `dns`'s (kept when it is one).
    pub(crate) async fn mx_hosts(
        &self,
        dns: &dyn MxLookup,
        domain: &DomainName,
        now: Instant,
    ) -> Result<MxRecords, DnsError> {
        if let Some(records) = self.fresh(domain, now) {
            return Ok(records);
        }
        let records = dns.mx_hosts(domain).await?;
        self.keep(domain, records.clone(), now);
        Ok(records)
    }

    fn fresh(&self, domain: &DomainName, now: Instant) -> Option<MxRecords> {
        let answers = self.answers();
        let answer = answers.get(domain.as_str())?;
        (now.saturating_duration_since(answer.at) < self.lifetime).then(|| answer.records.clone())
    }

    /// Keeps `records`; when full, drops the expired answers, and if none was, the oldest.
    fn keep(&self, domain: &DomainName, records: MxRecords, now: Instant) {
        let mut answers = self.answers();
        if answers.len() >= self.max && !answers.contains_key(domain.as_str()) {
            answers.retain(|_, answer| now.saturating_duration_since(answer.at) < self.lifetime);
            if answers.len() >= self.max {
                let oldest = answers.iter().min_by_key(|(_, answer)| answer.at).map(|(name, _)| name.clone());
                if let Some(oldest) = oldest {
                    answers.remove(&oldest);
                }
            }
        }
        answers.insert(domain.as_str().to_owned(), Answer { records, at: now });
    }

    fn answers(&self) -> MutexGuard<'_, HashMap<String, Answer>> {
        self.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;

    /// Answers one MX record per domain, `mx.<domain>`, or SERVFAIL for `failing.test`;
    /// counts the questions.
    #[derive(Default)]
    struct CountingDns {
        asked: AtomicUsize,
    }

    #[async_trait]
    impl MxLookup for CountingDns {
        async fn mx_hosts(&self, domain: &DomainName) -> Result<MxRecords, DnsError> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            if domain.as_str() == "failing.test" {
                return Err(DnsError::Failed { name: domain.to_string(), reason: "SERVFAIL".to_owned() });
            }
            Ok(vec![(10, format!("mx.{domain}"))])
        }

        async fn host_addrs(&self, _host: &str) -> Result<Vec<IpAddr>, DnsError> {
            Ok(Vec::new())
        }
    }

    fn domain(text: &str) -> DomainName {
        DomainName::parse(text).unwrap()
    }

    #[tokio::test]
    async fn an_answer_is_reused_until_it_expires() {
        let dns = CountingDns::default();
        let cache = MxCache::new(Duration::from_secs(300), 10);
        let start = Instant::now();

        let first = cache.mx_hosts(&dns, &domain("acme.test"), start).await.unwrap();
        let again = cache.mx_hosts(&dns, &domain("acme.test"), start + Duration::from_secs(299)).await.unwrap();
        assert_eq!(
            (first, again.clone(), dns.asked.load(Ordering::SeqCst)),
            (again, vec![(10, "mx.acme.test".into())], 1)
        );

        cache.mx_hosts(&dns, &domain("acme.test"), start + Duration::from_secs(300)).await.unwrap();
        assert_eq!(dns.asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn failures_are_not_kept() {
        let dns = CountingDns::default();
        let cache = MxCache::new(Duration::from_secs(300), 10);
        let now = Instant::now();
        assert!(cache.mx_hosts(&dns, &domain("failing.test"), now).await.is_err());
        assert!(cache.mx_hosts(&dns, &domain("failing.test"), now).await.is_err());
        assert_eq!(dns.asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_full_cache_drops_the_oldest_answer() {
        let dns = CountingDns::default();
        let cache = MxCache::new(Duration::from_secs(300), 2);
        let start = Instant::now();
        for (n, name) in ["a.test", "b.test", "c.test"].into_iter().enumerate() {
            cache.mx_hosts(&dns, &domain(name), start + Duration::from_secs(n as u64)).await.unwrap();
        }
        assert_eq!(cache.answers().len(), 2);

        let later = start + Duration::from_secs(10);
        cache.mx_hosts(&dns, &domain("c.test"), later).await.unwrap();
        cache.mx_hosts(&dns, &domain("b.test"), later).await.unwrap();
        assert_eq!(dns.asked.load(Ordering::SeqCst), 3, "b and c were kept");
        cache.mx_hosts(&dns, &domain("a.test"), later).await.unwrap();
        assert_eq!(dns.asked.load(Ordering::SeqCst), 4, "a, the oldest, was dropped");
    }
}
