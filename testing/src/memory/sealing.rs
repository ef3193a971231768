//! Re-sealing the store's secrets under a new key ([`SecretResealStore`]), and the key check
//! that says which key the store is sealed with, as the persistent stores keep it.

use async_trait::async_trait;
use tidings_core::ports::{ResealBatch, ResealCursor, SecretHolder, SecretResealStore, StoreError, StoreResult};
use tidings_core::sealing::{SealError, Sealed, Sealer, SecretFields, secret_label};

use super::MemoryStore;

fn corrupt(e: SealError) -> StoreError {
    StoreError::Corrupt(tidings_core::Cause::new(e))
}

impl MemoryStore {
    /// An empty store sealed with `sealer`'s key, its key check made by it.
    pub fn with_sealer(sealer: Sealer) -> Self {
        let store = Self { state: Default::default(), sealer };
        let check = store.sealer.key_check().expect("sealing a constant");
        store.state().key_check = Some(check);
        store
    }

    /// The same data as seen by a store opened with `sealer` (as a persistent store is
    /// opened again with another key): `DoesNotOpen` if `sealer` opens neither with its key
    /// nor with its previous key the store's key check.
    pub fn reopen(self, sealer: Sealer) -> Result<Self, SealError> {
        let state = self.state.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(check) = &state.key_check {
            sealer.verify_key_check(check)?;
        }
        Ok(Self { state: std::sync::Mutex::new(state), sealer })
    }
}

/// What one batch over a map found.
struct Found<K, V> {
    /// The entries re-sealed, to write back.
    changed: Vec<(K, V)>,
    examined: usize,
    /// The key bytes of the last entry read.
    last: Option<Vec<u8>>,
}

/// The entries of `map` after `after` by their `key` bytes (already in that order), at most
/// `limit`, each re-sealed (`Some`) or not.
fn batch<K: Copy, V>(
    map: &std::collections::BTreeMap<K, V>,
    key: impl Fn(&K) -> Vec<u8>,
    after: Option<&ResealCursor>,
    limit: usize,
    reseal: impl Fn(&K, &V) -> StoreResult<Option<V>>,
) -> StoreResult<Found<K, V>> {
    let mut found = Found { changed: Vec::new(), examined: 0, last: None };
    for (k, v) in map.iter().filter(|(k, _)| after.is_none_or(|c| key(k) > c.0)).take(limit) {
        found.examined += 1;
        found.last = Some(key(k));
        if let Some(new) = reseal(k, v)? {
            found.changed.push((*k, new));
        }
    }
    Ok(found)
}

fn record<R: SecretFields + Clone>(sealer: &Sealer, stored: &Sealed<R>) -> StoreResult<Option<Sealed<R>>> {
    sealer.reseal_record(stored).map_err(corrupt)
}

#[async_trait]
impl SecretResealStore for MemoryStore {
    async fn reseal_secrets(
        &self,
        kind: SecretHolder,
        after: Option<&ResealCursor>,
        limit: usize,
    ) -> StoreResult<ResealBatch> {
        let sealer = &self.sealer;
        let mut state = self.state();
        // Decided and written under the one lock: atomic with every other write.
        let (resealed, examined, last) = match kind {
            SecretHolder::Domains => {
                let found = batch(&state.domains, |id| id.to_bytes().to_vec(), after, limit, |_, d| record(sealer, d))?;
                let resealed = found.changed.len();
                state.domains.extend(found.changed);
                (resealed, found.examined, found.last)
            }
            SecretHolder::Webhooks => {
                let found =
                    batch(&state.webhooks, |id| id.to_bytes().to_vec(), after, limit, |_, w| record(sealer, w))?;
                let resealed = found.changed.len();
                state.webhooks.extend(found.changed);
                (resealed, found.examined, found.last)
            }
            SecretHolder::StoreSecrets => {
                let found = batch(
                    &state.secrets,
                    |name| name.as_str().as_bytes().to_vec(),
                    after,
                    limit,
                    |name, value| sealer.reseal(&secret_label(name.as_str()), value).map_err(corrupt),
                )?;
                let resealed = found.changed.len();
                state.secrets.extend(found.changed);
                (resealed, found.examined, found.last)
            }
        };
        let next = if examined < limit { None } else { last.map(ResealCursor) };
        Ok(ResealBatch { examined, resealed, next })
    }

    async fn replace_key_check(&self) -> StoreResult<()> {
        let check = self.sealer.key_check().map_err(corrupt)?;
        self.state().key_check = Some(check);
        Ok(())
    }
}
