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

pub use build::{BuildError, BuiltMessage, build_message, clean_subject, envelope_sender, provider_message_id};
pub use dkim::{DomainSigner, SIGNED_HEADERS, SignError};
pub use return_path::{
    ClaimedReturnPath, RETURN_PATH_KEY_SECRET, RETURN_PATH_PREFIX, ReturnPath, ReturnPathError, ReturnPathKey,
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

/// Builds, signs and addresses `message` from `domain` with `signer` (the domain's). The
/// envelope sender is the signed per-message return path when `return_path` is set
/// ([`envelope_sender`]). The HTML part gets the tracking the message asks for when
/// `tracking` is configured; it is rewritten before signing, so the signatures cover it.
/// CPU-bound (one RSA signature): call it off the async executor when
/// that matters.
pub fn prepare(
    message: &Message,
    domain: &Domain,
    signer: &DomainSigner,
    return_path: Option<&ReturnPath>,
    tracking: Option<&TrackingConfig>,
) -> Result<OutboundEmail, PrepareError> {
    if signer.domain_id() != domain.id {
        return Err(PrepareError::WrongSigner);
    }
    let built = build_message(message, domain, tracking)?;
    let signed = signer.sign(&built.raw)?;
    Ok(OutboundEmail {
        message_id: message.id,
        provider_message_id: built.provider_message_id,
        envelope_from: envelope_sender(message, return_path),
        envelope_to: message.to.clone(),
        raw: signed.into(),
    })
}
