//! Sealing secrets at rest: the rule every store follows so that a copy of its data alone
//! signs nothing. DKIM private keys, webhook signing secrets and the store's own secrets
//! (the tracking key) are stored encrypted and authenticated with AES-256-GCM under a
//! [`SealingKey`] that is kept apart from the store (the server reads it from
//! `TIDINGS_SECRET_KEY` or a key file).
//!
//! - **Format**: `MAGIC ‖ nonce (12) ‖ ciphertext ‖ tag (16)`. The 6 magic bytes make the
//!   base64 form of every sealed value start with `tdsealv1`, so a sealed value is told from
//!   a plaintext one without the key: a PKCS#8 key starts with `0x30`, a webhook secret with
//!   `whsec_`. Values written before sealing existed (plaintext) are read as they are, and
//!   the stores seal them at open ([`Sealed::is_sealed`]).
//! - **Binding**: the associated data names what a value is and whose it is (`domain <id>
//!   dkim rsa`), so a sealed value moved to another record or field does not open.
//! - **Key check**: each store keeps [`Sealer::key_check`] and verifies it at open
//!   ([`Sealer::verify_key_check`]), so that a wrong key fails the start, not a send later.
//!
//! - **Rotation**: a [`Sealer`] may hold a previous key besides its key
//!   ([`Sealer::with_previous`]): it seals with its key only, opens with either, and takes
//!   the key check of either, so nodes keep working while the store's secrets move from one
//!   key to the other. [`Sealer::reseal_record`] tells what a re-seal pass must rewrite
//!   (whatever does not open with the key itself) and [`rotation::rotate_secret_key`]
//!   walks a store ([`crate::ports::SecretResealStore`]) until nothing is left under the
//!   previous key, then replaces the key check (docs/decisions.md, "Rotating the secret key").
//!
//! Core holds the rule and no disk code; the stores persist what [`Sealer::seal_record`]
//! gives and decode with [`Sealer::open_record`].

use std::fmt;
use std::sync::Arc;

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

use crate::model::{Domain, WebhookEndpoint};
use crate::ports::Random;
use crate::secret::Secret;

/// Bytes of a [`SealingKey`].
pub const SEALING_KEY_BYTES: usize = 32;

/// The first bytes of every sealed value: base64 `tdsealv1`.
pub const MAGIC: [u8; 6] = [181, 219, 30, 106, 91, 245];

/// How the base64 form of a sealed value starts (the base64 of [`MAGIC`]).
pub const SEALED_TEXT_PREFIX: &str = "tdsealv1";

const TAG_LEN: usize = 16;

/// What the associated data of every sealed value starts with (the format's version).
const AAD_PREFIX: &str = "tidings sealed v1: ";

/// The label of the key check value.
const KEY_CHECK_LABEL: &str = "key check";

/// What the key check value seals.
const KEY_CHECK_PLAINTEXT: &[u8] = b"tidings sealing key check";

/// A 256-bit key that seals the secrets of a store. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SealingKey(Secret<[u8; SEALING_KEY_BYTES]>);

/// Why text is not a [`SealingKey`]. Never contains the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealingKeyError {
    /// Not standard base64.
    #[error("is not base64 (expected the base64 of 32 random bytes, e.g. from `openssl rand -base64 32`)")]
    NotBase64,
    /// Base64 of another number of bytes.
    #[error("decodes to {0} bytes, not 32 (e.g. `openssl rand -base64 32` makes one)")]
    WrongLength(usize),
}

impl SealingKey {
    /// A fresh random key.
    pub fn generate(random: &dyn Random) -> Self {
        let mut bytes = [0u8; SEALING_KEY_BYTES];
        random.fill(&mut bytes);
        Self(Secret::new(bytes))
    }

    /// The key whose standard base64 (padded, surrounding whitespace ignored) is `text`.
    pub fn from_base64(text: &str) -> Result<Self, SealingKeyError> {
        let bytes = BASE64.decode(text.trim()).map_err(|_| SealingKeyError::NotBase64)?;
        let bytes: [u8; SEALING_KEY_BYTES] =
            bytes.try_into().map_err(|b: Vec<u8>| SealingKeyError::WrongLength(b.len()))?;
        Ok(Self(Secret::new(bytes)))
    }

    /// Its standard base64, as [`Self::from_base64`] reads it (for a key file).
    pub fn to_base64(&self) -> Secret<String> {
        Secret::new(BASE64.encode(self.0.expose()))
    }
}

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealingKey(***)")
    }
}

/// Why a sealed value could not be opened (or, never in practice, sealed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Authentication failed: the value was sealed with another key, for another record or
    /// field, or has been changed since.
    #[error("the sealed {label} does not open: it was sealed with another key, or for another record, or was altered")]
    DoesNotOpen {
        /// What the value is (`domain <id> dkim rsa`).
        label: String,
    },
    /// Marked sealed but too short, or not base64 or UTF-8 where text is stored.
    #[error("the sealed {label} is malformed")]
    Malformed {
        /// What the value is.
        label: String,
    },
    /// The crypto library refused to seal (it gives no detail).
    #[error("cannot seal the {label}")]
    Seal {
        /// What the value is.
        label: String,
    },
}

/// Seals values with one [`SealingKey`] and opens them with it or, during a key rotation,
/// with a previous key. Cheap to clone.
#[derive(Clone)]
pub struct Sealer {
    key: Arc<RandomizedNonceKey>,
    /// The key the store's secrets may still be sealed with: opens, never seals.
    previous: Option<Arc<RandomizedNonceKey>>,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sealer(***)")
    }
}

/// Whether `stored` is in the sealed format (by its magic; says nothing of the key).
pub fn is_sealed(stored: &[u8]) -> bool {
    stored.starts_with(&MAGIC)
}

impl Sealer {
    /// A sealer with `key`.
    pub fn new(key: &SealingKey) -> Self {
        Self { key: Arc::new(aead_key(key)), previous: None }
    }

    /// A sealer during a key rotation: seals with `key`; opens with `key`, else with
    /// `previous`; takes the key check of either.
    pub fn with_previous(key: &SealingKey, previous: &SealingKey) -> Self {
        Self { key: Arc::new(aead_key(key)), previous: Some(Arc::new(aead_key(previous))) }
    }

    /// Whether it holds a previous key ([`Self::with_previous`]).
    pub fn has_previous(&self) -> bool {
        self.previous.is_some()
    }

    /// `plaintext` sealed for `label` (what the value is and whose, e.g. `secret
    /// tracking_key`): a fresh nonce each time, so sealing twice gives different bytes.
    pub fn seal(&self, label: &str, plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut in_out = plaintext.to_vec();
        let nonce = self
            .key
            .seal_in_place_append_tag(aad(label), &mut in_out)
            .map_err(|_| SealError::Seal { label: label.to_owned() })?;
        let mut sealed = Vec::with_capacity(MAGIC.len() + NONCE_LEN + in_out.len());
        sealed.extend_from_slice(&MAGIC);
        sealed.extend_from_slice(nonce.as_ref());
        sealed.extend_from_slice(&in_out);
        Ok(sealed)
    }

    /// The plaintext of `stored`: opened if it is sealed (with the key, else the previous
    /// key), as it is if it is not (a value written before sealing existed).
    pub fn open(&self, label: &str, stored: &[u8]) -> Result<Vec<u8>, SealError> {
        if !is_sealed(stored) {
            return Ok(stored.to_vec());
        }
        match (open_with(&self.key, label, stored), &self.previous) {
            (Err(SealError::DoesNotOpen { .. }), Some(previous)) => open_with(previous, label, stored),
            (opened, _) => opened,
        }
    }

    /// Whether `stored` is sealed with the key itself (not the previous key, not plaintext):
    /// what a re-seal pass leaves as it is.
    pub fn is_under_key(&self, label: &str, stored: &[u8]) -> bool {
        is_sealed(stored) && open_with(&self.key, label, stored).is_ok()
    }

    /// `stored` sealed again with the key if it is not under it already ([`Self::is_under_key`]):
    /// `None` if there is nothing to do. `DoesNotOpen` if neither key opens it.
    pub fn reseal(&self, label: &str, stored: &[u8]) -> Result<Option<Vec<u8>>, SealError> {
        if self.is_under_key(label, stored) {
            return Ok(None);
        }
        let plaintext = Secret::new(self.open(label, stored)?);
        self.seal(label, plaintext.expose()).map(Some)
    }

    /// `stored` with every secret sealed with the key, if any is not already
    /// ([`Self::is_under_key`]; a text field compared in its stored base64 form): `None` if
    /// there is nothing to do. The record's other fields are kept exactly.
    pub fn reseal_record<R: SecretFields + Clone>(&self, stored: &Sealed<R>) -> Result<Option<Sealed<R>>, SealError> {
        let mut copy = stored.0.clone();
        let all_under_key = copy.secret_fields().into_iter().all(|(label, field)| match field {
            SecretField::Bytes(value) => self.is_under_key(&label, value.expose()),
            SecretField::Text(value) => {
                value.expose().starts_with(SEALED_TEXT_PREFIX)
                    && BASE64.decode(value.expose()).is_ok_and(|sealed| self.is_under_key(&label, &sealed))
            }
        });
        if all_under_key {
            return Ok(None);
        }
        let record = self.open_record(stored.clone())?;
        self.seal_record(&record).map(Some)
    }
}

/// `stored` (in the sealed format) opened with `key`.
fn open_with(key: &RandomizedNonceKey, label: &str, stored: &[u8]) -> Result<Vec<u8>, SealError> {
    let malformed = || SealError::Malformed { label: label.to_owned() };
    let rest = &stored[MAGIC.len()..];
    if rest.len() < NONCE_LEN + TAG_LEN {
        return Err(malformed());
    }
    let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| malformed())?;
    let mut in_out = ciphertext.to_vec();
    let plaintext = key
        .open_in_place(nonce, aad(label), &mut in_out)
        .map_err(|_| SealError::DoesNotOpen { label: label.to_owned() })?;
    Ok(plaintext.to_vec())
}

impl Sealer {
    /// A value that only this key opens, for a store to keep and check at open.
    pub fn key_check(&self) -> Result<Vec<u8>, SealError> {
        self.seal(KEY_CHECK_LABEL, KEY_CHECK_PLAINTEXT)
    }

    /// Whether `stored` (a store's [`Self::key_check`]) was made with this key or the
    /// previous key: `DoesNotOpen` if with neither.
    pub fn verify_key_check(&self, stored: &[u8]) -> Result<(), SealError> {
        if !is_sealed(stored) {
            return Err(SealError::Malformed { label: KEY_CHECK_LABEL.to_owned() });
        }
        if self.open(KEY_CHECK_LABEL, stored)? == KEY_CHECK_PLAINTEXT {
            Ok(())
        } else {
            Err(SealError::DoesNotOpen { label: KEY_CHECK_LABEL.to_owned() })
        }
    }

    /// Whether `stored` (a store's [`Self::key_check`]) was made with the key itself, not
    /// the previous key: whether a rotation has finished.
    pub fn key_check_is_current(&self, stored: &[u8]) -> bool {
        self.is_under_key(KEY_CHECK_LABEL, stored)
    }

    /// `record` with its secrets sealed, as a store persists it.
    pub fn seal_record<R: SecretFields + Clone>(&self, record: &R) -> Result<Sealed<R>, SealError> {
        let mut copy = record.clone();
        for (label, field) in copy.secret_fields() {
            match field {
                SecretField::Bytes(value) => *value = Secret::new(self.seal(&label, value.expose())?),
                SecretField::Text(value) => {
                    *value = Secret::new(BASE64.encode(self.seal(&label, value.expose().as_bytes())?));
                }
            }
        }
        Ok(Sealed(copy))
    }

    /// The record `stored` holds, its secrets opened (or taken as they are where they were
    /// stored before sealing existed).
    pub fn open_record<R: SecretFields>(&self, stored: Sealed<R>) -> Result<R, SealError> {
        let mut record = stored.0;
        for (label, field) in record.secret_fields() {
            match field {
                SecretField::Bytes(value) => *value = Secret::new(self.open(&label, value.expose())?),
                SecretField::Text(value) => {
                    if value.expose().starts_with(SEALED_TEXT_PREFIX) {
                        let malformed = || SealError::Malformed { label: label.clone() };
                        let sealed = BASE64.decode(value.expose()).map_err(|_| malformed())?;
                        let plain = String::from_utf8(self.open(&label, &sealed)?).map_err(|_| malformed())?;
                        *value = Secret::new(plain);
                    }
                }
            }
        }
        Ok(record)
    }
}

/// The AES-256-GCM key of `key`.
fn aead_key(key: &SealingKey) -> RandomizedNonceKey {
    // 32 bytes is exactly what AES-256-GCM takes: this cannot fail.
    RandomizedNonceKey::new(&AES_256_GCM, key.0.expose()).expect("a 32-byte AES-256-GCM key")
}

fn aad(label: &str) -> Aad<Vec<u8>> {
    Aad::from(format!("{AAD_PREFIX}{label}").into_bytes())
}

/// One secret of a record, for [`SecretFields`].
#[derive(Debug)]
pub enum SecretField<'a> {
    /// Bytes (a DKIM private key); sealed, they hold the sealed bytes.
    Bytes(&'a mut Secret<Vec<u8>>),
    /// Text (a webhook secret); sealed, it holds the base64 of the sealed bytes.
    Text(&'a mut Secret<String>),
}

/// A record type that holds secrets, and where: each with the label that binds its sealed
/// form to this record and field.
pub trait SecretFields {
    /// Every secret field of the record, with its label.
    fn secret_fields(&mut self) -> Vec<(String, SecretField<'_>)>;
}

/// Every DKIM private key a domain holds: the active pair's (labels unchanged since sealing
/// began), and those of a pending rotation and of retiring pairs, labelled by their selector
/// (unique to the key). A retired pair has no private key left.
impl SecretFields for Domain {
    fn secret_fields(&mut self) -> Vec<(String, SecretField<'_>)> {
        let id = self.id;
        let mut fields = vec![
            (format!("domain {id} dkim rsa"), SecretField::Bytes(&mut self.dkim.rsa_private_pkcs8)),
            (format!("domain {id} dkim ed25519"), SecretField::Bytes(&mut self.dkim.ed25519_private_pkcs8)),
        ];
        let rotation = &mut self.dkim_rotation;
        let others = rotation.pending.iter_mut().chain(rotation.retiring.iter_mut().map(|r| &mut r.keys));
        for keys in others {
            let (rsa, ed25519) = (&keys.rsa_selector, &keys.ed25519_selector);
            fields.push((format!("domain {id} dkim {rsa}"), SecretField::Bytes(&mut keys.rsa_private_pkcs8)));
            fields.push((format!("domain {id} dkim {ed25519}"), SecretField::Bytes(&mut keys.ed25519_private_pkcs8)));
        }
        fields
    }
}

impl SecretFields for WebhookEndpoint {
    fn secret_fields(&mut self) -> Vec<(String, SecretField<'_>)> {
        let id = self.id;
        let mut fields = vec![(format!("webhook {id} secret"), SecretField::Text(self.secret.secret_mut()))];
        if let Some((previous, _)) = &mut self.previous_secret {
            fields.push((format!("webhook {id} previous secret"), SecretField::Text(previous.secret_mut())));
        }
        fields
    }
}

/// The label of the store secret `name` ([`crate::ports::SecretStore`]).
pub fn secret_label(name: &str) -> String {
    format!("secret {name}")
}

/// A record as a store keeps it: its secrets sealed, or plaintext where it was written
/// before sealing existed. Serialises exactly as the record does, so stored records keep
/// their shape; only [`Sealer::open_record`] gives the record back.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Sealed<R>(R);

impl<R: SecretFields + Clone> Sealed<R> {
    /// Whether every secret of the record is in the sealed format (checked without the key):
    /// `false` for a record written before sealing existed, which the store seals again.
    pub fn is_sealed(&self) -> bool {
        let mut record = self.0.clone();
        record.secret_fields().into_iter().all(|(_, field)| match field {
            SecretField::Bytes(value) => is_sealed(value.expose()),
            SecretField::Text(value) => value.expose().starts_with(SEALED_TEXT_PREFIX),
        })
    }
}

impl<R> Sealed<R> {
    /// The record with its secrets still sealed: for reading its other fields (ids, names,
    /// flags) without opening anything.
    pub fn unopened(&self) -> &R {
        &self.0
    }
}

impl<R> fmt::Debug for Sealed<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sealed(***)")
    }
}

pub mod rotation;

#[cfg(test)]
mod tests;
