//! Random keys every node sharing a store uses alike (the tracking key, the return-path key):
//! made once, on the store's first use, and kept there sealed ([`SecretStore::ensure_secret`]),
//! so that what one node signs, every other node verifies.

use crate::ports::{Random, SecretStore, StoreError, StoreResult};
use crate::secret::{Secret, SecretName};

/// Length of a shared key in bytes: HMAC-SHA256's output size, the key length RFC 2104
/// recommends as the minimum.
pub const SHARED_KEY_BYTES: usize = 32;

/// The key stored under `name`; on the store's first use, `kept` (a key this node had from
/// before) or else a fresh random one, stored first. Nodes starting together all get the one
/// that was stored. `Corrupt` if the stored secret is not [`SHARED_KEY_BYTES`] long.
pub async fn shared_key(
    store: &dyn SecretStore,
    name: SecretName,
    random: &dyn Random,
    kept: Option<[u8; SHARED_KEY_BYTES]>,
) -> StoreResult<[u8; SHARED_KEY_BYTES]> {
    let candidate = kept.unwrap_or_else(|| {
        let mut bytes = [0u8; SHARED_KEY_BYTES];
        random.fill(&mut bytes);
        bytes
    });
    let stored = store.ensure_secret(name, &Secret::new(candidate.to_vec())).await?;
    stored.expose().as_slice().try_into().map_err(|_| {
        StoreError::Corrupt(
            format!("the stored {name} holds {} bytes, not {SHARED_KEY_BYTES}", stored.expose().len()).into(),
        )
    })
}
