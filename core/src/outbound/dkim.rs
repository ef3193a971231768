//! DKIM signing with both keys of a sending domain (docs/api.md#domains): `rsa-sha256` with the
//! RSA key (selector `DKIM`) and `ed25519-sha256` with the Ed25519 key (selector `DKIM2`, RFC
//! 8463), relaxed/relaxed, through mail-auth on its aws-lc-rs backend.
//!
//! A [`DomainSigner`] holds the parsed keys of one domain. Parsing is the part that must not
//! happen per message: creating a signer parses and checks the RSA-2048 and Ed25519 private
//! keys, ≈ 0.15 ms of CPU (measured on the reference machine, release build: about half an
//! RSA signature). Signing one 2 KB message with both keys then costs ≈ 0.32 ms, nearly all
//! of it the RSA signature; building the message ≈ 0.015 ms. A domain's keys never change
//! (a re-added domain has a new id), so a signer can be cached by domain id for as long as
//! one likes; the delivery worker keeps a bounded cache.
//!
//! The signatures' `t=` is the system time when signing (mail-auth offers no way to pass
//! it), so signed bytes are not reproducible; everything under the signatures is.
//!
//! Each `DKIM-Signature` field is mail-auth's, folded again ([`fold`]) so that no white space
//! follows the `b=` value: dkimpy rejects a signature where it does.

mod fold;

use mail_auth::common::crypto::{Ed25519Key, RsaKey, Sha256};
use mail_auth::common::headers::HeaderWriter;
use mail_auth::dkim::{Canonicalization, DkimSigner, Done};
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::Cause;
use crate::dkim_keys::DkimKeyError;
use crate::ids::DomainId;
use crate::model::Domain;

/// Header fields both signatures cover. Names absent from a message are signed as absent, so
/// `Reply-To`, `Cc`, `In-Reply-To` and `References` cannot be added in transit either.
/// `List-Unsubscribe` and `List-Unsubscribe-Post`, which a send may set as custom headers,
/// are covered because mailbox providers honour one-click unsubscribe only when they are
/// (RFC 8058 §4), and so is `Feedback-ID`, which Gmail's feedback loop reads only from a
/// signed header; other custom headers are not signed.
pub const SIGNED_HEADERS: [&str; 15] = [
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
    "Reply-To",
    "Cc",
    "In-Reply-To",
    "References",
    "List-Unsubscribe",
    "List-Unsubscribe-Post",
    "Feedback-ID",
];

/// Signing failed inside the crypto library (not expected with keys that parsed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DKIM signing with the {algorithm} key failed: {reason}")]
pub struct SignError {
    /// `rsa-sha256` or `ed25519-sha256`.
    pub algorithm: &'static str,
    /// What mail-auth reported.
    #[source]
    pub reason: Cause,
}

/// The two DKIM signers of one sending domain, keys parsed once. `Send + Sync`; share it
/// behind an `Arc`.
pub struct DomainSigner {
    domain_id: DomainId,
    rsa: DkimSigner<RsaKey<Sha256>, Done>,
    ed25519: DkimSigner<Ed25519Key, Done>,
}

impl std::fmt::Debug for DomainSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DomainSigner").field("domain_id", &self.domain_id).finish_non_exhaustive()
    }
}

impl DomainSigner {
    /// Parses the domain's private keys (see the module docs for the cost) and prepares both
    /// signers for `d=<domain>` with the domain's selectors.
    pub fn new(domain: &Domain) -> Result<Self, DkimKeyError> {
        let keys = &domain.dkim;
        let rsa_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(keys.rsa_private_pkcs8.expose().as_slice()));
        let rsa = RsaKey::<Sha256>::from_key_der(rsa_der)
            .map_err(|e| DkimKeyError::InvalidPrivateKey { algorithm: "RSA-2048", reason: Cause::new(e) })?;
        let ed25519 = Ed25519Key::from_pkcs8_der(keys.ed25519_private_pkcs8.expose())
            .map_err(|e| DkimKeyError::InvalidPrivateKey { algorithm: "Ed25519", reason: Cause::new(e) })?;
        let name = domain.name.as_str();
        // Relaxed header canonicalization is what lets `fold` re-fold the field (and
        // mail-auth's default); it is set here so that it cannot change underneath.
        Ok(Self {
            domain_id: domain.id,
            rsa: DkimSigner::from_key(rsa)
                .domain(name)
                .selector(&keys.rsa_selector)
                .headers(SIGNED_HEADERS)
                .header_canonicalization(Canonicalization::Relaxed)
                .body_canonicalization(Canonicalization::Relaxed),
            ed25519: DkimSigner::from_key(ed25519)
                .domain(name)
                .selector(&keys.ed25519_selector)
                .headers(SIGNED_HEADERS)
                .header_canonicalization(Canonicalization::Relaxed)
                .body_canonicalization(Canonicalization::Relaxed),
        })
    }

    /// The domain whose keys these are.
    pub fn domain_id(&self) -> DomainId {
        self.domain_id
    }

    /// `message` with both `DKIM-Signature` header fields prepended (RSA first, then
    /// Ed25519). Each signature covers the message as given, so their order does not matter
    /// to verifiers.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, SignError> {
        let rsa = self
            .rsa
            .sign(message)
            .map_err(|e| SignError { algorithm: "rsa-sha256", reason: Cause::new(e) })?
            .to_header();
        let ed25519 = self
            .ed25519
            .sign(message)
            .map_err(|e| SignError { algorithm: "ed25519-sha256", reason: Cause::new(e) })?
            .to_header();
        let (rsa, ed25519) = (refolded(rsa, "rsa-sha256"), refolded(ed25519, "ed25519-sha256"));
        let mut signed = Vec::with_capacity(rsa.len() + ed25519.len() + message.len());
        signed.extend_from_slice(rsa.as_bytes());
        signed.extend_from_slice(ed25519.as_bytes());
        signed.extend_from_slice(message);
        Ok(signed)
    }
}

/// `field` re-folded by [`fold::refold`]. Should mail-auth ever render a field of another
/// shape, it is sent as mail-auth wrote it (RFC 6376 verifiers accept it) and a warning says
/// that dkimpy may not.
fn refolded(field: String, algorithm: &'static str) -> String {
    fold::refold(&field).unwrap_or_else(|| {
        tracing::warn!(algorithm, "a DKIM-Signature of an unexpected shape is sent as mail-auth wrote it");
        field
    })
}
