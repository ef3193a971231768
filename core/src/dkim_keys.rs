//! DKIM keys of a sending domain: generation (RSA-2048 and Ed25519, docs/api.md#domains) and the
//! public halves that go into the `p=` of the published DKIM records.
//!
//! Private keys are stored as PKCS#8 DER (`DkimKeys`); the public keys are derived from them
//! on demand, so there is one source of truth for what the signer uses and what DNS must say.

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::model::DkimKeys;
use crate::ports::Random;
use crate::secret::Secret;

/// Prefix of every selector Tidings generates, so operators can tell our keys apart.
pub const SELECTOR_PREFIX: &str = "td";

/// Random bytes in a selector: 80 bits, exactly 16 base32 characters.
const SELECTOR_RANDOM_BYTES: usize = 10;

/// Why DKIM keys could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DkimKeyError {
    /// The crypto library failed to generate a key (it has no more detail to give).
    #[error("could not generate the {algorithm} DKIM key")]
    Generation {
        /// `RSA-2048` or `Ed25519`.
        algorithm: &'static str,
    },
    /// A stored private key does not parse as PKCS#8 of the expected algorithm.
    #[error("the stored {algorithm} DKIM private key is unusable: {reason}")]
    InvalidPrivateKey {
        /// `RSA-2048` or `Ed25519`.
        algorithm: &'static str,
        /// What the crypto library rejected.
        #[source]
        reason: crate::Cause,
    },
}

const RSA: &str = "RSA-2048";
const ED25519: &str = "Ed25519";

/// Fresh RSA-2048 and Ed25519 keys (PKCS#8 DER in `DkimKeys`) with fresh, distinct selectors.
///
/// Both selectors share one random part, `td<16 base32 chars>`, with the suffix `r` (RSA) or
/// `e` (Ed25519), so the pair is recognisable in a zone file. The random part comes from
/// `random`; the key material comes from aws-lc-rs's own CSPRNG (its API takes no RNG).
/// RSA generation takes about 0.1 s of CPU; call it off the async executor if that matters.
pub fn generate(random: &dyn Random) -> Result<DkimKeys, DkimKeyError> {
    let rsa = RsaKeyPair::generate(KeySize::Rsa2048).map_err(|_| DkimKeyError::Generation { algorithm: RSA })?;
    let rsa_pkcs8 = rsa.as_der().map_err(|_| DkimKeyError::Generation { algorithm: RSA })?;
    let ed_pkcs8 = Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new())
        .map_err(|_| DkimKeyError::Generation { algorithm: ED25519 })?;
    let base = selector_base(random);
    Ok(DkimKeys {
        rsa_selector: format!("{base}r"),
        rsa_private_pkcs8: Secret::new(rsa_pkcs8.as_ref().to_vec()),
        ed25519_selector: format!("{base}e"),
        ed25519_private_pkcs8: Secret::new(ed_pkcs8.as_ref().to_vec()),
        created_at: None,
    })
}

/// base64 of the RSA SubjectPublicKeyInfo DER (the `p=` of the DKIM record), as
/// `openssl rsa -pubout` prints it and as every DKIM verifier accepts.
pub fn rsa_public_key_base64(keys: &DkimKeys) -> Result<String, DkimKeyError> {
    let invalid = |reason: crate::Cause| DkimKeyError::InvalidPrivateKey { algorithm: RSA, reason };
    let pair = RsaKeyPair::from_pkcs8(keys.rsa_private_pkcs8.expose()).map_err(|e| invalid(crate::Cause::new(e)))?;
    let spki = pair.public_key().as_der().map_err(|_| invalid("cannot encode its public key".into()))?;
    Ok(BASE64.encode(spki.as_ref()))
}

/// base64 of the raw 32-byte Ed25519 public key (RFC 8463 `p=`; not SubjectPublicKeyInfo).
pub fn ed25519_public_key_base64(keys: &DkimKeys) -> Result<String, DkimKeyError> {
    let pair = Ed25519KeyPair::from_pkcs8(keys.ed25519_private_pkcs8.expose())
        .map_err(|e| DkimKeyError::InvalidPrivateKey { algorithm: ED25519, reason: crate::Cause::new(e) })?;
    Ok(BASE64.encode(pair.public_key().as_ref()))
}

/// `td` + 16 lower-case base32 characters: a valid DNS label that never starts with a digit
/// or hyphen, with room for a one-letter suffix.
fn selector_base(random: &dyn Random) -> String {
    let mut bytes = [0u8; SELECTOR_RANDOM_BYTES];
    random.fill(&mut bytes);
    format!("{SELECTOR_PREFIX}{}", base32_lower(&bytes))
}

/// RFC 4648 base32, lower case, without padding. DNS labels are case-insensitive, so base64
/// would lose information; base32 does not.
fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &byte in bytes {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

/// One generated key set shared by the tests of this crate (RSA generation is slow).
#[cfg(test)]
pub(crate) fn test_keys() -> &'static DkimKeys {
    static KEYS: std::sync::OnceLock<DkimKeys> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| generate(&crate::ports::SystemRandom).unwrap())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU8, Ordering};

    use aws_lc_rs::rand::SystemRandom as AwsRandom;
    use aws_lc_rs::signature::{ED25519, RSA_PKCS1_2048_8192_SHA256, RSA_PKCS1_SHA256, UnparsedPublicKey};

    use super::*;
    use crate::ports::SystemRandom;

    /// Deterministic bytes, each call different, for selector tests.
    struct CountingRandom(AtomicU8);

    impl Random for CountingRandom {
        fn fill(&self, buf: &mut [u8]) {
            let start = self.0.fetch_add(1, Ordering::Relaxed);
            for (i, b) in buf.iter_mut().enumerate() {
                *b = start.wrapping_add(i as u8);
            }
        }
    }

    fn is_dns_label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    #[test]
    fn base32_matches_rfc4648_vectors() {
        assert_eq!(base32_lower(b""), "");
        assert_eq!(base32_lower(b"f"), "my");
        assert_eq!(base32_lower(b"foob"), "mzxw6yq");
        assert_eq!(base32_lower(b"foobar"), "mzxw6ytboi");
    }

    #[test]
    fn generated_keys_sign_and_verify_with_the_published_public_keys() {
        let keys = test_keys();
        let message = b"DKIM-Signature: v=1; a=rsa-sha256; d=example.com; s=td";

        let rsa = RsaKeyPair::from_pkcs8(keys.rsa_private_pkcs8.expose()).unwrap();
        assert_eq!(rsa.public_modulus_len(), 256, "RSA-2048");
        let mut signature = vec![0; rsa.public_modulus_len()];
        rsa.sign(&RSA_PKCS1_SHA256, &AwsRandom::new(), message, &mut signature).unwrap();
        let spki = BASE64.decode(rsa_public_key_base64(keys).unwrap()).unwrap();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &spki).verify(message, &signature).unwrap();
        // SubjectPublicKeyInfo starts with the rsaEncryption OID, unlike a bare RSAPublicKey.
        assert!(spki.windows(9).any(|w| w == [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01]));

        let ed = Ed25519KeyPair::from_pkcs8(keys.ed25519_private_pkcs8.expose()).unwrap();
        let signature = ed.sign(message);
        let raw = BASE64.decode(ed25519_public_key_base64(keys).unwrap()).unwrap();
        assert_eq!(raw.len(), 32);
        UnparsedPublicKey::new(&ED25519, &raw).verify(message, signature.as_ref()).unwrap();
    }

    #[test]
    fn selectors_are_fresh_distinct_dns_labels() {
        let keys = test_keys();
        assert_ne!(keys.rsa_selector, keys.ed25519_selector);
        assert!(keys.rsa_selector.starts_with("td") && keys.rsa_selector.ends_with('r'));
        assert!(keys.ed25519_selector.starts_with("td") && keys.ed25519_selector.ends_with('e'));
        assert!(is_dns_label(&keys.rsa_selector) && is_dns_label(&keys.ed25519_selector));

        let again = generate(&SystemRandom).unwrap();
        let all = [&keys.rsa_selector, &keys.ed25519_selector, &again.rsa_selector, &again.ed25519_selector];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_ne!(keys.rsa_private_pkcs8, again.rsa_private_pkcs8);
        assert_ne!(keys.ed25519_private_pkcs8, again.ed25519_private_pkcs8);
    }

    #[test]
    fn selector_base_uses_the_random_port() {
        let random = CountingRandom(AtomicU8::new(0));
        let first = selector_base(&random);
        let second = selector_base(&random);
        assert_eq!(first, format!("td{}", base32_lower(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])));
        assert_eq!(first.len(), 18);
        assert_ne!(first, second);
    }

    #[test]
    fn unusable_stored_keys_are_reported_not_panicked_on() {
        let keys = DkimKeys {
            rsa_selector: "tdxr".into(),
            rsa_private_pkcs8: Secret::new(vec![1, 2, 3]),
            ed25519_selector: "tdxe".into(),
            ed25519_private_pkcs8: Secret::new(vec![]),
            created_at: None,
        };
        assert!(matches!(
            rsa_public_key_base64(&keys),
            Err(DkimKeyError::InvalidPrivateKey { algorithm: "RSA-2048", .. })
        ));
        assert!(matches!(
            ed25519_public_key_base64(&keys),
            Err(DkimKeyError::InvalidPrivateKey { algorithm: "Ed25519", .. })
        ));
    }
}
