//! A bounded cache of [`DomainSigner`]s by domain id, so keys are parsed once per domain and
//! not per message. A rotation changes a domain's active keys under its id, so each entry
//! remembers the selectors it was made for and a domain read with other ones (its new active
//! pair) gets a new signer: the worker reads the domain at send time and signs with what
//! that read says is active, never with keys the cache held from before. The bound only
//! keeps memory flat with many domains. When full, the oldest entry goes (first in, first
//! out: a miss costs one key parse).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use crate::dkim_keys::DkimKeyError;
use crate::ids::DomainId;
use crate::model::Domain;
use crate::outbound::DomainSigner;

#[derive(Debug, Default)]
struct Entries {
    /// The signer, with the RSA and Ed25519 selectors it signs with.
    signers: HashMap<DomainId, (String, String, Arc<DomainSigner>)>,
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
        let keys = &domain.dkim;
        if let Some((rsa, ed25519, found)) = self.lock().signers.get(&domain.id)
            && *rsa == keys.rsa_selector
            && *ed25519 == keys.ed25519_selector
        {
            return Ok(Arc::clone(found));
        }
        // Parsed outside the lock; two threads missing together both parse, harmlessly.
        let signer = Arc::new(DomainSigner::new(domain)?);
        let entry = (keys.rsa_selector.clone(), keys.ed25519_selector.clone(), Arc::clone(&signer));
        let mut entries = self.lock();
        if entries.signers.insert(domain.id, entry).is_none() {
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

    #[test]
    fn a_domain_read_with_a_new_active_pair_gets_a_new_signer() {
        let cache = SignerCache::new(4);
        let domain = signing_domain("rotated.example.com");
        let before = cache.get_or_create(&domain).unwrap();
        let mut rotated = domain.clone();
        rotated.dkim = crate::dkim_keys::generate(&crate::ports::SystemRandom).unwrap();
        let after = cache.get_or_create(&rotated).unwrap();
        assert!(!Arc::ptr_eq(&before, &after), "the new keys sign, not the cached old ones");
        let signed = String::from_utf8(after.sign(b"From: a@rotated.example.com\r\n\r\nhi\r\n").unwrap()).unwrap();
        assert!(signed.contains(&format!("s={};", rotated.dkim.rsa_selector)), "{signed}");
        assert!(signed.contains(&format!("s={};", rotated.dkim.ed25519_selector)), "{signed}");
        assert!(!signed.contains(&domain.dkim.rsa_selector), "{signed}");
        assert_eq!(cache.len(), 1, "one entry per domain");
    }
}
