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

/// The entries of `map` after `after` by their `key` bytes (already in that order), at most
/// `limit`, each re-sealed (`Some`) or not.
fn batch<K: Copy, V>(
    map: &std::collections::BTreeMap<K, V>,
    key: impl Fn(&K) -> Vec<u8>,
    after: Option<&ResealCursor>,
    limit: usize,
    reseal: impl Fn(&K, &V) -> StoreResult<Option<V>>,
) -> StoreResult<(Vec<(K, V)>, usize, Option<Vec<u8>>)> {
    let mut changed = Vec::new();
    let mut examined = 0;
    let mut last = None;
    for (k, v) in map.iter().filter(|(k, _)| after.is_none_or(|c| key(k) > c.0)).take(limit) {
        examined += 1;
        last = Some(key(k));
        if let Some(new) = reseal(k, v)? {
            changed.push((*k, new));
        }
    }
    Ok((changed, examined, last))
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
                let (changed, examined, last) =
                    batch(&state.domains, |id| id.to_bytes().to_vec(), after, limit, |_, d| record(sealer, d))?;
                let resealed = changed.len();
                state.domains.extend(changed);
                (resealed, examined, last)
            }
            SecretHolder::Webhooks => {
                let (changed, examined, last) =
                    batch(&state.webhooks, |id| id.to_bytes().to_vec(), after, limit, |_, w| record(sealer, w))?;
                let resealed = changed.len();
                state.webhooks.extend(changed);
                (resealed, examined, last)
            }
            SecretHolder::StoreSecrets => {
                let (changed, examined, last) = batch(
                    &state.secrets,
                    |name| name.as_str().as_bytes().to_vec(),
                    after,
                    limit,
                    |name, value| sealer.reseal(&secret_label(name.as_str()), value).map_err(corrupt),
                )?;
                let resealed = changed.len();
                state.secrets.extend(changed);
                (resealed, examined, last)
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
