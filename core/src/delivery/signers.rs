//! A bounded cache of [`DomainSigner`]s by domain id, so keys are parsed once per domain and
//! not per message. A domain's keys never change under its id (a re-added domain gets a new
//! id), so entries never go stale; the bound only keeps memory flat with many domains. When
//! full, the oldest entry goes (first in, first out: a miss costs one key parse).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use crate::dkim_keys::DkimKeyError;
use crate::ids::DomainId;
use crate::model::Domain;
use crate::outbound::DomainSigner;

#[derive(Debug, Default)]
struct Entries {
    signers: HashMap<DomainId, Arc<DomainSigner>>,
    order: VecDeque<DomainId>,
}

/// Signers of up to `capacity` domains.
#[derive(Debug)]
pub(crate) struct SignerCache {
    capacity: usize,
    entries: Mutex<Entries>,
}

impl SignerCache {
    /// An empty cache holding at most `capacity` signers (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), entries: Mutex::new(Entries::default()) }
    }

    /// The signer of `domain`, parsing its keys on a miss. Blocking CPU work on a miss: call
    /// it off the async executor.
    pub(crate) fn get_or_create(&self, domain: &Domain) -> Result<Arc<DomainSigner>, DkimKeyError> {
        if let Some(found) = self.lock().signers.get(&domain.id) {
            return Ok(Arc::clone(found));
        }
        // Parsed outside the lock; two threads missing together both parse, harmlessly.
        let signer = Arc::new(DomainSigner::new(domain)?);
        let mut entries = self.lock();
        if entries.signers.insert(domain.id, Arc::clone(&signer)).is_none() {
            entries.order.push_back(domain.id);
        }
        while entries.order.len() > self.capacity {
            if let Some(oldest) = entries.order.pop_front() {
                entries.signers.remove(&oldest);
            }
        }
        Ok(signer)
    }

    /// How many signers are cached.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().signers.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // Nothing is left half-done under the lock, so a poisoned one is still consistent.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::test_support::signing_domain;

    #[test]
    fn signers_are_reused_and_the_cache_stays_bounded() {
        let cache = SignerCache::new(2);
        let (a, b, c) =
            (signing_domain("a.example.com"), signing_domain("b.example.com"), signing_domain("c.example.com"));
        let first = cache.get_or_create(&a).unwrap();
        assert!(Arc::ptr_eq(&first, &cache.get_or_create(&a).unwrap()), "a hit returns the same signer");
        cache.get_or_create(&b).unwrap();
        cache.get_or_create(&c).unwrap();
        assert_eq!(cache.len(), 2);
        assert!(!Arc::ptr_eq(&first, &cache.get_or_create(&a).unwrap()), "the oldest entry was evicted");
        assert_eq!(cache.len(), 2);
    }
}
