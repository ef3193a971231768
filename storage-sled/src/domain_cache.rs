//! Domains as decoded, by the exact bytes they were decoded from.
//!
//! Every send looks up its sending domain by name and every delivery by id, and a stored
//! domain is sealed JSON: decoding it opens its DKIM keys and parses its DNS records, which
//! showed as 4–5 % of the server's CPU in the delivery benchmark (bench/README.md). The
//! record is still read from the tree on every lookup; only its decoding is skipped when the
//! bytes are those decoded last time. So a change of any kind (a check, a key rotation, a
//! deletion) is seen at once, as it was without the cache.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use sled::IVec;
use tidings_core::model::Domain;

/// Domains kept at most; past it the cache starts over, which only costs decodes.
const CAPACITY: usize = 1_024;

/// See the module docs.
#[derive(Debug, Default)]
pub struct DomainCache {
    entries: Mutex<HashMap<IVec, (IVec, Domain)>>,
}

impl DomainCache {
    /// The domain stored under `key` if `bytes` are what it was decoded from, else what
    /// `decode` makes of them (kept for next time).
    pub fn get_or_decode<E>(
        &self,
        key: &[u8],
        bytes: IVec,
        decode: impl FnOnce(&[u8]) -> Result<Domain, E>,
    ) -> Result<Domain, E> {
        if let Some((seen, domain)) = self.entries().get(key)
            && *seen == bytes
        {
            return Ok(domain.clone());
        }
        // Decoded outside the lock: two lookups racing on a change both decode, and either
        // result is right for the bytes it came from.
        let domain = decode(&bytes)?;
        let mut entries = self.entries();
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(IVec::from(key), (bytes, domain.clone()));
        Ok(domain)
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<IVec, (IVec, Domain)>> {
        // A panic while holding the lock cannot leave the map inconsistent (get, insert, clear).
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_bytes_are_decoded_once_and_changed_bytes_again() {
        let cache = DomainCache::default();
        let ws = tidings_core::ids::WorkspaceId(tidings_testing::fixtures::ulid());
        let domain = tidings_testing::fixtures::domain(ws, "example.com");
        let decodes = std::cell::Cell::new(0);
        let decode = |_: &[u8]| -> Result<Domain, ()> {
            decodes.set(decodes.get() + 1);
            Ok(domain.clone())
        };
        cache.get_or_decode(b"k", IVec::from(&b"v1"[..]), decode).unwrap();
        cache.get_or_decode(b"k", IVec::from(&b"v1"[..]), decode).unwrap();
        assert_eq!(decodes.get(), 1, "unchanged bytes: decoded once");
        cache.get_or_decode(b"k", IVec::from(&b"v2"[..]), decode).unwrap();
        assert_eq!(decodes.get(), 2, "changed bytes: decoded again");
        cache.get_or_decode(b"other", IVec::from(&b"v2"[..]), decode).unwrap();
        assert_eq!(decodes.get(), 3, "another key has its own entry");
    }
}
