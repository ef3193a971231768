//! Secrets of the store (the tracking key): `SECRET ‖ name` → the secret sealed
//! (`sealing.rs`), written once and never changed but for being sealed again with a new key
//! ([`SecretResealStore`], which this module also implements for every kind of record).

use async_trait::async_trait;
use tidings_core::ports::{ResealBatch, ResealCursor, SecretHolder, SecretResealStore, SecretStore, StoreResult};
use tidings_core::sealing::secret_label;
use tidings_core::secret::{Secret, SecretName};

use crate::SledStore;
use crate::codec::sled_error;
use crate::layout;
use crate::sealing::seal_error;

#[async_trait]
impl SecretStore for SledStore {
    async fn ensure_secret(&self, name: SecretName, candidate: &Secret<Vec<u8>>) -> StoreResult<Secret<Vec<u8>>> {
        let key = layout::secret(name).0;
        let label = secret_label(name.as_str());
        let sealed = self.sealer.seal(&label, candidate.expose()).map_err(seal_error)?;
        // Durable also when the secret was there: it may have been written a moment ago by a
        // call whose flush is still to come. This runs once per start.
        let stored = self
            .inner
            .write_durable(|tree, batch| {
                if let Some(stored) = tree.get(&key).map_err(sled_error)? {
                    return Ok(stored.to_vec());
                }
                batch.insert(key.as_slice(), sealed.as_slice());
                Ok(sealed.clone())
            })
            .await?;
        self.sealer.open(&label, &stored).map(Secret::new).map_err(seal_error)
    }
}

#[async_trait]
impl SecretResealStore for SledStore {
    async fn reseal_secrets(
        &self,
        kind: SecretHolder,
        after: Option<&ResealCursor>,
        limit: usize,
    ) -> StoreResult<ResealBatch> {
        crate::sealing::reseal_batch(&self.inner, &self.sealer, kind, after, limit.max(1)).await
    }

    async fn replace_key_check(&self) -> StoreResult<()> {
        crate::sealing::replace_key_check(&self.inner, &self.sealer).await
    }
}
