//! Secrets sealed at rest ([`tidings_core::sealing`]): domain and webhook records are stored
//! with their secrets sealed, the store's secrets (`SECRET ‖ name`) as sealed bytes, and
//! `META ‖ sealing-key-check` holds the key check.
//!
//! At open, [`seal_at_open`] checks the key against the key check (a store sealed with
//! another key does not open) and seals, in one write, whatever a version before sealing
//! stored in plaintext; then it writes the key check if the store had none. Reads still take
//! a plaintext value as it is, but after the open none is left.

use serde::Serialize;
use serde::de::DeserializeOwned;
use sled::Tree;
use tidings_core::Cause;
use tidings_core::model::{Domain, WebhookEndpoint};
use tidings_core::ports::StoreError;
use tidings_core::sealing::{SealError, Sealed, Sealer, SecretFields, is_sealed, secret_label};

use crate::codec::{decode, encode, sled_error};
use crate::db::{Batch, Inner};
use crate::layout;

/// The key check's name under `META`.
const KEY_CHECK: &str = "sealing-key-check";

/// A sealing failure met while reading or writing: the store's data is not what this key
/// sealed, which after the key check at open means it was altered.
pub fn seal_error(e: SealError) -> StoreError {
    StoreError::Corrupt(Cause::new(e))
}

/// `record` encoded with its secrets sealed.
pub fn encode_sealed<R: SecretFields + Clone + Serialize>(sealer: &Sealer, record: &R) -> Result<Vec<u8>, StoreError> {
    encode(&sealer.seal_record(record).map_err(seal_error)?)
}

/// A stored record decoded and its secrets opened.
pub fn decode_sealed<R: SecretFields + DeserializeOwned>(
    sealer: &Sealer,
    bytes: &[u8],
    what: &str,
) -> Result<R, StoreError> {
    sealer.open_record(decode::<Sealed<R>>(bytes, what)?).map_err(seal_error)
}

/// What [`seal_at_open`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SealedAtOpen {
    /// Records and secrets that were stored in plaintext and are sealed now.
    pub sealed: usize,
}

/// Why a store's secrets could not be checked or sealed at open.
#[derive(Debug, thiserror::Error)]
pub enum SealingError {
    /// The store's secrets were sealed with another key.
    #[error("its secrets were sealed with another key than the one given (the key check does not open)")]
    WrongKey(#[source] SealError),
    /// A record or secret could not be read or sealed.
    #[error("cannot seal its secrets: {0}")]
    Store(#[from] StoreError),
}

/// Checks `sealer` against the store's key check, then seals every secret a version before
/// sealing left in plaintext and writes the key check if it is missing (one write, made
/// durable by the caller's flush).
pub fn seal_at_open(inner: &Inner, sealer: &Sealer) -> Result<SealedAtOpen, SealingError> {
    let check_key = layout::meta(KEY_CHECK).0;
    let tree = inner.tree()?;
    if let Some(stored) = tree.get(&check_key).map_err(sled_error)? {
        sealer.verify_key_check(&stored).map_err(SealingError::WrongKey)?;
    }
    let found = inner.write(|tree, batch| {
        let mut found = SealedAtOpen::default();
        found.sealed += reseal::<Domain>(tree, batch, sealer, layout::DOMAIN, "domain")?;
        found.sealed += reseal::<WebhookEndpoint>(tree, batch, sealer, layout::WEBHOOK, "webhook")?;
        for entry in tree.scan_prefix([layout::SECRET]) {
            let (key, value) = entry.map_err(sled_error)?;
            if !is_sealed(&value) {
                let label = secret_label(&String::from_utf8_lossy(&key[1..]));
                batch.insert(key.clone(), sealer.seal(&label, &value).map_err(seal_error)?);
                found.sealed += 1;
            }
        }
        if !tree.contains_key(&check_key).map_err(sled_error)? {
            batch.insert(check_key.as_slice(), sealer.key_check().map_err(seal_error)?);
        }
        Ok(found)
    })?;
    Ok(found)
}

/// Seals the plaintext records under `tag` in `batch`; returns how many.
fn reseal<R>(tree: &Tree, batch: &mut Batch, sealer: &Sealer, tag: u8, what: &str) -> Result<usize, StoreError>
where
    R: SecretFields + Clone + Serialize + DeserializeOwned,
{
    let mut count = 0;
    for entry in tree.scan_prefix([tag]) {
        let (key, value) = entry.map_err(sled_error)?;
        let stored: Sealed<R> = decode(&value, what)?;
        if !stored.is_sealed() {
            let record = sealer.open_record(stored).map_err(seal_error)?;
            batch.insert(key, encode_sealed(sealer, &record)?);
            count += 1;
        }
    }
    Ok(count)
}
