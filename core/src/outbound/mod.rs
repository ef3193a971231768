//! What leaves Tidings for one delivery attempt: the RFC 5322 message ([`build`], with its
//! parts written by [`bodies`] and the generated text part by [`html_text`]), its two DKIM
//! signatures ([`dkim`]) and its envelope (docs/api.md#domains,
//! #bounce-and-complaint-reports). Pure functions of the stored message and domain; the
//! delivery worker calls [`prepare`] and hands the result to a [`Mailer`](crate::ports::Mailer).

pub mod bodies;
pub mod build;
pub mod dkim;
pub mod html_text;
pub mod return_path;
#[cfg(test)]
pub(crate) mod test_support;

pub use build::{
    BuildError, BuiltMessage, build_copy, build_message, clean_subject, envelope_sender, provider_message_id,
};
pub use dkim::{DomainSigner, SIGNED_HEADERS, SignError};
pub use return_path::{
    ClaimedReturnPath, RETURN_PATH_KEY_SECRET, RETURN_PATH_PREFIX, ReturnPath, ReturnPathError, ReturnPathKey,
    ReturnPaths,
};

use crate::model::{Domain, Message};
use crate::ports::OutboundEmail;
use crate::tracking::TrackingConfig;

/// Why a message could not be prepared for the wire; it ends `Failed` with this reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    /// Building the MIME failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Signing failed.
    #[error(transparent)]
    Sign(#[from] SignError),
    /// The signer given is for another domain.
    #[error("the DKIM signer given is for another domain than the message's")]
    WrongSigner,
}

/// Builds, signs and addresses `message` from `domain` with `signer` (the domain's), for its
/// one recipient or, on a message with a recipient list, for the first. The envelope sender
/// is the return path signed for that recipient when `return_path` is set
/// ([`envelope_sender`]). The HTML part gets the tracking the message asks for when
/// `tracking` is configured; it is rewritten before signing, so the signatures cover it.
/// CPU-bound (one RSA signature): call it off the async executor when that matters.
pub fn prepare(
    message: &Message,
    domain: &Domain,
    signer: &DomainSigner,
    return_path: Option<&ReturnPath>,
    tracking: Option<&TrackingConfig>,
) -> Result<OutboundEmail, PrepareError> {
    let signed = sign_copy(message, domain, signer, tracking, None)?;
    Ok(signed.addressed_to(message, &message.to, return_path))
}

/// The signed bytes of a message (or of one recipient's copy), before they are addressed.
#[derive(Debug, Clone)]
pub struct SignedCopy {
    /// `Message-ID` without brackets.
    pub provider_message_id: String,
    /// The signed message, shared by every envelope it goes in.
    pub raw: bytes::Bytes,
}

impl SignedCopy {
    /// These bytes in the envelope of `recipient`: RCPT TO it, MAIL FROM the return path
    /// signed for it. Cheap: the bytes are shared, not copied.
    pub fn addressed_to(
        &self,
        message: &Message,
        recipient: &crate::email::EmailAddress,
        return_path: Option<&ReturnPath>,
    ) -> OutboundEmail {
        OutboundEmail {
            message_id: message.id,
            provider_message_id: self.provider_message_id.clone(),
            envelope_from: envelope_sender(message, recipient, return_path),
            envelope_to: recipient.clone(),
            raw: self.raw.clone(),
        }
    }
}

/// Builds and signs `message` from `domain` once, for every recipient whose copy carries no
/// token of its own (`recipient` `None`), or the copy of the recipient at that position of
/// the list, whose tracking tokens name it (contract §10: a tracked send to several
/// recipients is signed per recipient).
pub fn sign_copy(
    message: &Message,
    domain: &Domain,
    signer: &DomainSigner,
    tracking: Option<&TrackingConfig>,
    recipient: Option<u8>,
) -> Result<SignedCopy, PrepareError> {
    if signer.domain_id() != domain.id {
        return Err(PrepareError::WrongSigner);
    }
    let built = build_copy(message, domain, tracking, recipient)?;
    let signed = signer.sign(&built.raw)?;
    Ok(SignedCopy { provider_message_id: built.provider_message_id, raw: signed.into() })
}
