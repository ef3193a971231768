//! The submission handler: core's use cases behind the listener's hooks (AUTH through the
//! failed-auth throttle, recipients against the suppression list, each message through the
//! rate-limited send), and the one place that turns what core decided into an SMTP reply,
//! as `http-adapter/src/error.rs` does for HTTP.
//!
//! The AUTH username is ignored (any value will do, `tidings` by convention); the password
//! is the API key. `MAIL FROM` is not checked: core checks the `From` header, and delivery
//! uses Tidings' own return path.

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use tidings_core::email::EmailAddress;
use tidings_core::ports::Limits;
use tidings_core::usecases::{AuthOutcome, AuthRefusal, Principal, SubmitFailure, Tidings};
use tidings_core::{Error, IdempotencyConflict};

use crate::handler::{AuthFailure, Credentials, Envelope, HandlerError, InboundHandler, Refusal};

/// Submits accepted messages through core.
pub struct SubmissionHandler {
    core: Tidings,
    limits: Arc<dyn Limits>,
}

impl SubmissionHandler {
    /// A handler sending through `core`, counting rate limits and failed AUTHs in `limits`
    /// (the same as the HTTP API's, so a key's limit is one budget across both).
    pub fn new(core: Tidings, limits: Arc<dyn Limits>) -> Self {
        Self { core, limits }
    }
}

#[async_trait]
impl InboundHandler for SubmissionHandler {
    async fn authenticate(&self, client: IpAddr, credentials: Credentials) -> Result<Principal, AuthFailure> {
        match self.core.authenticate_client(&*self.limits, client, Some(&credentials.password)).await {
            Ok(AuthOutcome::Admitted(principal)) => Ok(principal),
            Ok(AuthOutcome::Refused(AuthRefusal::Blocked(_))) => Err(AuthFailure::Throttled),
            Ok(AuthOutcome::Refused(AuthRefusal::Missing | AuthRefusal::Invalid)) => Err(AuthFailure::Invalid),
            Err(error) => {
                tracing::warn!(%client, "submission AUTH could not be checked: {error}");
                Err(AuthFailure::Unavailable)
            }
        }
    }

    async fn check_recipient(&self, principal: &Principal, recipient: &EmailAddress) -> Result<(), HandlerError> {
        self.core.submission().check_recipient(principal, recipient).await.map_err(|error| reply_for(&error))
    }

    async fn receive(&self, envelope: Envelope, raw: Vec<u8>) -> Result<(), HandlerError> {
        let Some(who) = &envelope.principal else {
            // The session never takes a message before AUTH; this would be a listener bug.
            return Err(HandlerError::Refused(Refusal::new(530, "5.7.0", "Authentication required")));
        };
        match self.core.submission().submit(&*self.limits, who, &envelope.recipients, &raw).await {
            Ok(outcome) => {
                let message = &outcome.message;
                let recipients = envelope.recipients.len();
                tracing::info!(peer = %envelope.peer, message = %message.id, recipients, replayed = outcome.replayed, "submitted message queued");
                Ok(())
            }
            Err(reason) => Err(match reason {
                SubmitFailure::RateLimited(wait) => {
                    HandlerError::Refused(Refusal::new(451, "4.7.1", format!("Rate limit exceeded, retry in {wait} s")))
                }
                SubmitFailure::Send(error) => reply_for(&error),
            }),
        }
    }
}

/// The reply for what core refused: what the API answers 4xx is a permanent 5xx here, what
/// it answers 5xx (storage, a lost race) is a temporary 451 the client retries.
fn reply_for(error: &Error) -> HandlerError {
    let refused = |code, status, text: String| HandlerError::Refused(Refusal::new(code, status, text));
    match error {
        Error::Validation { .. } | Error::TemplateRender(_) | Error::TemplateSyntax(_) => {
            refused(550, "5.6.0", format!("Message rejected: {error}"))
        }
        Error::DomainNotVerified(_) | Error::DomainNotAllowed { .. } | Error::InsufficientScope => {
            refused(550, "5.7.1", format!("Sender not allowed: {error}"))
        }
        // Held, as the API's queued mail is: the client's queue keeps it until a resume.
        Error::SendingPaused(_) => refused(451, "4.7.1", format!("Sending paused: {error}")),
        Error::RecipientSuppressed(_) | Error::AllRecipientsSuppressed { .. } => {
            refused(550, "5.1.1", "Recipient is on the suppression list".to_owned())
        }
        Error::InvalidApiKey => refused(550, "5.7.8", "API key revoked".to_owned()),
        Error::IdempotencyKeyReused(IdempotencyConflict::OtherRequest) => {
            refused(550, "5.6.0", "This Message-ID was already used for a different message".to_owned())
        }
        Error::IdempotencyKeyReused(IdempotencyConflict::OtherKey) => {
            refused(550, "5.6.0", "This Message-ID was already used by another API key of this workspace".to_owned())
        }
        Error::InvalidIdempotencyKey(_) | Error::NotFound(_) | Error::Conflict(_) | Error::Internal(_) => {
            tracing::error!("submission failed: {error}");
            HandlerError::Temporary(error.to_string())
        }
        Error::Unavailable(_) => {
            tracing::warn!("submission failed: {error}");
            HandlerError::Temporary(error.to_string())
        }
    }
}
