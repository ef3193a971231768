//! SMTP submission: applications that only speak SMTP hand a message to the
//! submission listener, and it becomes one message per envelope recipient through the same
//! rate-limited send as the API's ([`Tidings::send_rate_limited`]), so the sender checks,
//! domain-scoped keys, suppressions, DKIM, events and webhooks all apply.
//!
//! SMTP answers a whole message at once after `DATA`, so whatever can refuse one recipient
//! alone is asked at `RCPT TO` instead ([`Tidings::check_submission_recipient`]). What is
//! left to fail after `DATA` fails for every recipient alike (the MIME, the sender, the
//! domain), except the rate limit and the store: then the recipients before the failure are
//! queued and the client is told to retry, and the `Message-ID` turns that retry into
//! replays for them (see [`SubmittedMessage::idempotency_key`]).

use crate::email::EmailAddress;
use crate::ports::Limits;
use crate::usecases::{Admission, LimitedSend, Principal, RetryAfter, SendOutcome, SubmittedMessage, Tidings};
use crate::{Error, Result};

/// Why a submitted message was not (wholly) queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({queued} recipient(s) queued before it)")]
pub struct SubmitError {
    /// How many recipients, in envelope order, were queued before it stopped.
    pub queued: usize,
    /// What stopped it.
    pub reason: SubmitFailure,
}

/// What stopped a submission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitFailure {
    /// The key's rate limit: retry after the wait.
    #[error("rate limited, retry after {0} s")]
    RateLimited(RetryAfter),
    /// The send refused or failed, as it would have for the API.
    #[error(transparent)]
    Send(#[from] Error),
}

impl Tidings {
    /// Whether `who` may send to `to`, asked at `RCPT TO`: a suppressed address is
    /// [`Error::RecipientSuppressed`]. The send checks again, so a suppression added between
    /// `RCPT` and `DATA` still holds. The key is looked up again first, as for the message
    /// itself: a session whose key was revoked after AUTH gets [`Error::InvalidApiKey`] for
    /// every recipient, and so learns nothing more about the workspace's suppression list.
    pub async fn check_submission_recipient(&self, who: &Principal, to: &EmailAddress) -> Result<()> {
        let (key, suppression) = tokio::join!(
            self.store.get_api_key(who.workspace_id, who.key_id),
            self.store.get_suppression(who.workspace_id, to)
        );
        if key?.is_none_or(|key| key.revoked_at.is_some()) {
            return Err(Error::InvalidApiKey);
        }
        match suppression? {
            Some(_) => Err(Error::RecipientSuppressed(to.to_string())),
            None => Ok(()),
        }
    }

    /// Queues `raw` (the message after `DATA`) once per recipient, in order, each taking one
    /// rate-limit token; returns the messages (replays included) when every one is durably
    /// stored, the only case in which the listener may answer `250`. The key is looked up
    /// again first: one revoked since the session authenticated is [`Error::InvalidApiKey`].
    pub async fn submit_message(
        &self,
        limits: &dyn Limits,
        who: &Principal,
        recipients: &[EmailAddress],
        raw: &[u8],
    ) -> std::result::Result<Vec<SendOutcome>, SubmitError> {
        let refused = |error: Error| SubmitError { queued: 0, reason: error.into() };
        let key = self.store.get_api_key(who.workspace_id, who.key_id).await.map_err(|e| refused(e.into()))?;
        if key.is_none_or(|key| key.revoked_at.is_some()) {
            return Err(refused(Error::InvalidApiKey));
        }
        let message = SubmittedMessage::parse(raw).map_err(refused)?;
        let mut queued = Vec::with_capacity(recipients.len());
        for to in recipients {
            let req = message.send_request(to);
            let key = message.idempotency_key(to);
            let stop = |reason| SubmitError { queued: queued.len(), reason };
            match self.send_rate_limited(limits, who, req, key.as_deref()).await {
                Ok(Admission::Allowed(LimitedSend { outcome, .. })) => queued.push(outcome),
                Ok(Admission::Limited { retry_after }) => return Err(stop(SubmitFailure::RateLimited(retry_after))),
                Err(error) => return Err(stop(SubmitFailure::Send(error))),
            }
        }
        Ok(queued)
    }
}
