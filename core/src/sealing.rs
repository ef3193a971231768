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
//! Core holds the rule and no disk code; the stores persist what [`Sealer::seal_record`]
//! gives and decode with [`Sealer::open_record`]. Key rotation is not supported.

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

/// Seals and opens values with one [`SealingKey`]. Cheap to clone.
#[derive(Clone)]
pub struct Sealer {
    key: Arc<RandomizedNonceKey>,
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
        // 32 bytes is exactly what AES-256-GCM takes: this cannot fail.
        let key = RandomizedNonceKey::new(&AES_256_GCM, key.0.expose()).expect("a 32-byte AES-256-GCM key");
        Self { key: Arc::new(key) }
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

    /// The plaintext of `stored`: opened if it is sealed, as it is if it is not (a value
    /// written before sealing existed).
    pub fn open(&self, label: &str, stored: &[u8]) -> Result<Vec<u8>, SealError> {
        if !is_sealed(stored) {
            return Ok(stored.to_vec());
        }
        let malformed = || SealError::Malformed { label: label.to_owned() };
        let rest = &stored[MAGIC.len()..];
        if rest.len() < NONCE_LEN + TAG_LEN {
            return Err(malformed());
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| malformed())?;
        let mut in_out = ciphertext.to_vec();
        let plaintext = self
            .key
            .open_in_place(nonce, aad(label), &mut in_out)
            .map_err(|_| SealError::DoesNotOpen { label: label.to_owned() })?;
        Ok(plaintext.to_vec())
    }

    /// A value that only this key opens, for a store to keep and check at open.
    pub fn key_check(&self) -> Result<Vec<u8>, SealError> {
        self.seal(KEY_CHECK_LABEL, KEY_CHECK_PLAINTEXT)
    }

    /// Whether `stored` (a store's [`Self::key_check`]) was made with this key:
    /// `DoesNotOpen` if it was not.
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

#[cfg(test)]
mod tests;
