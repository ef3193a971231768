//! The policies known, per recipient domain: each with the id it was announced under and
//! when it expires, and the fetches that failed lately. Bounded, because recipient domains
//! come from clients: past the capacity, the domain written longest ago is forgotten.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tidings_core::domain_name::DomainName;

use super::policy::Policy;

/// A policy as fetched, with what the cache needs to know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivePolicy {
    /// The id of the TXT record it was fetched for.
    pub id: String,
    /// The policy.
    pub policy: Arc<Policy>,
    /// When it was fetched.
    pub fetched_at: DateTime<Utc>,
    /// `fetched_at` plus its `max_age`: from then on it no longer applies.
    pub expires: DateTime<Utc>,
}

/// A fetch that failed, not tried again for the same id until `until`.
#[derive(Debug, Clone)]
struct Failure {
    id: String,
    until: DateTime<Utc>,
}

#[derive(Debug)]
struct Entry {
    /// The entry's place in the write order.
    written: u64,
    policy: Option<ActivePolicy>,
    failure: Option<Failure>,
}

/// Domain → policy and recent failure, at most `capacity` domains.
#[derive(Debug)]
pub(crate) struct PolicyCache {
    capacity: usize,
    entries: HashMap<DomainName, Entry>,
    /// Write order → domain, the oldest first, for eviction.
    order: BTreeMap<u64, DomainName>,
    next: u64,
}

impl PolicyCache {
    /// An empty cache holding at most `capacity` domains (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), entries: HashMap::new(), order: BTreeMap::new(), next: 0 }
    }

    /// The policy of `domain` if it has not expired at `now`. An expired one is forgotten
    /// (with its entry, unless a failure is still remembered there).
    pub(crate) fn valid(&mut self, domain: &DomainName, now: DateTime<Utc>) -> Option<ActivePolicy> {
        let entry = self.entries.get_mut(domain)?;
        if entry.policy.as_ref().is_some_and(|policy| policy.expires <= now) {
            entry.policy = None;
        }
        if entry.failure.as_ref().is_some_and(|failure| failure.until <= now) {
            entry.failure = None;
        }
        if entry.policy.is_none() && entry.failure.is_none() {
            self.remove(domain);
            return None;
        }
        entry.policy.clone()
    }

    /// Whether fetching `domain`'s policy for `id` failed lately (until a time not yet
    /// reached at `now`).
    pub(crate) fn recently_failed(&self, domain: &DomainName, id: &str, now: DateTime<Utc>) -> bool {
        self.entries
            .get(domain)
            .and_then(|entry| entry.failure.as_ref())
            .is_some_and(|failure| failure.id == id && now < failure.until)
    }

    /// Keeps `policy` for `domain`, replacing what was there (a failure included).
    pub(crate) fn store(&mut self, domain: &DomainName, policy: ActivePolicy) {
        let entry = self.write(domain);
        entry.policy = Some(policy);
        entry.failure = None;
    }

    /// Remembers that fetching `domain`'s policy for `id` failed, until `until`; a policy
    /// cached for the domain stays.
    pub(crate) fn fetch_failed(&mut self, domain: &DomainName, id: &str, until: DateTime<Utc>) {
        let entry = self.write(domain);
        entry.failure = Some(Failure { id: id.to_owned(), until });
    }

    /// How many domains are held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry of `domain`, moved to the newest place in the write order (created empty
    /// if missing, the oldest entries dropped to stay within the capacity).
    fn write(&mut self, domain: &DomainName) -> &mut Entry {
        let written = self.next;
        self.next += 1;
        if let Some(entry) = self.entries.get_mut(domain) {
            self.order.remove(&entry.written);
            entry.written = written;
        } else {
            while self.entries.len() >= self.capacity {
                let Some((_, oldest)) = self.order.pop_first() else { break };
                self.entries.remove(&oldest);
            }
            self.entries.insert(domain.clone(), Entry { written, policy: None, failure: None });
        }
        self.order.insert(written, domain.clone());
        self.entries.get_mut(domain).expect("the entry was just written")
    }

    fn remove(&mut self, domain: &DomainName) {
        if let Some(entry) = self.entries.remove(domain) {
            self.order.remove(&entry.written);
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::mta_sts::policy::Mode;

    fn domain(text: &str) -> DomainName {
        DomainName::parse(text).unwrap()
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    fn active(id: &str, fetched: i64, max_age: i64) -> ActivePolicy {
        let policy = Policy { mode: Mode::Enforce, mx: Vec::new(), max_age: 0 };
        ActivePolicy {
            id: id.to_owned(),
            policy: Arc::new(policy),
            fetched_at: at(fetched),
            expires: at(fetched) + TimeDelta::seconds(max_age),
        }
    }

    #[test]
    fn a_policy_is_valid_until_it_expires() {
        let mut cache = PolicyCache::new(10);
        cache.store(&domain("a.test"), active("1", 0, 100));
        assert_eq!(cache.valid(&domain("a.test"), at(99)).map(|p| p.id), Some("1".to_owned()));
        assert_eq!(cache.valid(&domain("a.test"), at(100)), None);
        assert_eq!(cache.len(), 0, "an expired policy is forgotten");
        assert_eq!(cache.valid(&domain("b.test"), at(0)), None);
    }

    #[test]
    fn a_failure_is_remembered_per_id_until_its_time_and_keeps_the_policy() {
        let mut cache = PolicyCache::new(10);
        let a = domain("a.test");
        cache.store(&a, active("1", 0, 1000));
        cache.fetch_failed(&a, "2", at(60));
        assert!(cache.recently_failed(&a, "2", at(59)));
        assert!(!cache.recently_failed(&a, "3", at(59)));
        assert!(!cache.recently_failed(&a, "2", at(60)));
        assert_eq!(cache.valid(&a, at(10)).map(|p| p.id), Some("1".to_owned()));
        cache.store(&a, active("2", 70, 1000));
        assert!(!cache.recently_failed(&a, "2", at(71)), "a stored policy clears the failure");
    }

    #[test]
    fn a_failure_without_a_policy_lasts_until_its_time() {
        let mut cache = PolicyCache::new(10);
        let a = domain("a.test");
        cache.fetch_failed(&a, "1", at(60));
        assert_eq!(cache.valid(&a, at(10)), None);
        assert!(cache.recently_failed(&a, "1", at(10)));
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.valid(&a, at(60)), None);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn past_its_capacity_the_cache_forgets_the_domain_written_longest_ago() {
        let mut cache = PolicyCache::new(3);
        for name in ["a.test", "b.test", "c.test"] {
            cache.store(&domain(name), active(name.trim_end_matches(".test"), 0, 1000));
        }
        // Rewriting a.test makes b.test the oldest.
        cache.store(&domain("a.test"), active("a2", 1, 1000));
        cache.fetch_failed(&domain("d.test"), "d", at(500));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.valid(&domain("b.test"), at(2)), None);
        assert_eq!(cache.valid(&domain("a.test"), at(2)).map(|p| p.id), Some("a2".to_owned()));
        assert!(cache.valid(&domain("c.test"), at(2)).is_some());
        assert!(cache.recently_failed(&domain("d.test"), "d", at(2)));
        for n in 0..100 {
            cache.store(&domain(&format!("n{n}.test")), active("x", 0, 1000));
            assert!(cache.len() <= 3);
        }
    }
}
