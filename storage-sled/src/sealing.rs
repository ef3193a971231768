//! Secrets sealed at rest ([`tidings_core::sealing`]): domain and webhook records are stored
//! with their secrets sealed, the store's secrets (`SECRET ‖ name`) as sealed bytes, and
//! `META ‖ sealing-key-check` holds the key check.
//!
//! At open, [`seal_at_open`] checks the key against the key check (a store sealed with
//! another key does not open) and seals, in one write, whatever a version before sealing
//! stored in plaintext; then it writes the key check if the store had none. Reads still take
//! a plaintext value as it is, but after the open none is left.
//!
//! A key rotation ([`tidings_core::sealing::rotation`]) opens the store with the new key and
//! the previous one; [`reseal_batch`] seals a batch of records again with the new key under
//! the writer lock, and [`replace_key_check`] ends it.

use std::ops::Bound;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sled::{IVec, Tree};
use tidings_core::Cause;
use tidings_core::model::{Domain, WebhookEndpoint};
use tidings_core::ports::{ResealBatch, ResealCursor, SecretHolder, StoreError};
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

/// Re-seals up to `limit` records of `kind` after `after` (a raw key of that kind) under
/// the writer lock, so that no other write of this process comes between the read and the
/// write (sled allows one process per store); durable on return.
pub async fn reseal_batch(
    inner: &Inner,
    sealer: &Sealer,
    kind: SecretHolder,
    after: Option<&ResealCursor>,
    limit: usize,
) -> Result<ResealBatch, StoreError> {
    let tag = match kind {
        SecretHolder::Domains => layout::DOMAIN,
        SecretHolder::Webhooks => layout::WEBHOOK,
        SecretHolder::StoreSecrets => layout::SECRET,
    };
    let start = match after {
        Some(cursor) => Bound::Excluded(IVec::from(cursor.0.as_slice())),
        None => Bound::Included(IVec::from(&[tag])),
    };
    let end = Bound::Excluded(IVec::from(&[tag + 1]));
    inner
        .write_durable(|tree, batch| {
            let mut done = ResealBatch { examined: 0, resealed: 0, next: None };
            let mut last = None;
            for entry in tree.range::<IVec, _>((start, end)).take(limit) {
                let (key, value) = entry.map_err(sled_error)?;
                done.examined += 1;
                let resealed = match kind {
                    SecretHolder::Domains => reseal_stored::<Domain>(sealer, &value, "domain")?,
                    SecretHolder::Webhooks => reseal_stored::<WebhookEndpoint>(sealer, &value, "webhook")?,
                    SecretHolder::StoreSecrets => {
                        let label = secret_label(&String::from_utf8_lossy(&key[1..]));
                        sealer.reseal(&label, &value).map_err(seal_error)?
                    }
                };
                if let Some(resealed) = resealed {
                    batch.insert(key.clone(), resealed);
                    done.resealed += 1;
                }
                last = Some(key);
            }
            if done.examined == limit {
                done.next = last.map(|key| ResealCursor(key.to_vec()));
            }
            Ok(done)
        })
        .await
}

/// A stored record's bytes with its secrets sealed with the key, if any was not.
fn reseal_stored<R>(sealer: &Sealer, value: &[u8], what: &str) -> Result<Option<Vec<u8>>, StoreError>
where
    R: SecretFields + Clone + Serialize + DeserializeOwned,
{
    let stored: Sealed<R> = decode(value, what)?;
    match sealer.reseal_record(&stored).map_err(seal_error)? {
        Some(resealed) => encode(&resealed).map(Some),
        None => Ok(None),
    }
}

/// Replaces the key check with the key's own (durable on return).
pub async fn replace_key_check(inner: &Inner, sealer: &Sealer) -> Result<(), StoreError> {
    let check = sealer.key_check().map_err(seal_error)?;
    inner
        .write_durable(|_, batch| {
            batch.insert(layout::meta(KEY_CHECK).0, check);
            Ok(())
        })
        .await
}
