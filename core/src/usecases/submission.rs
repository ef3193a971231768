//! SMTP submission: applications that only speak SMTP hand a message to the
//! submission listener, and it becomes one send to all its envelope recipients (contract
//! §10) through the same rate-limited send as the API's
//! ([`Messages::send_rate_limited`](crate::usecases::Messages::send_rate_limited)), so the
//! sender checks, domain-scoped keys, suppressions, DKIM, events and webhooks all apply.
//!
//! SMTP answers a whole message at once after `DATA`, so whatever can refuse one recipient
//! alone is asked at `RCPT TO` instead ([`Submission::check_recipient`]). What is
//! left to fail after `DATA` fails for the message as a whole, and a client that retries
//! after a lost reply gets the message already queued back: the `Message-ID` makes the
//! retry a replay ([`SubmittedMessage::idempotency_key`]).

use crate::email::EmailAddress;
use crate::ports::Limits;
use crate::usecases::{Admission, LimitedSend, Principal, RetryAfter, SendOutcome, SubmittedMessage, Tidings};
use crate::{Error, Result};

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
    /// The SMTP submission use cases: a recipient checked at `RCPT TO`, a message submitted
    /// after `DATA`.
    pub fn submission(&self) -> Submission<'_> {
        Submission { core: self }
    }
}

/// The SMTP submission area of [`Tidings`] ([`Tidings::submission`]): what the submission
/// listener asks of core for a session authenticated with an API key, each recipient at
/// `RCPT TO` and each message after `DATA`, sent through the API's rate-limited send.
#[derive(Clone, Copy)]
pub struct Submission<'a> {
    core: &'a Tidings,
}

impl Submission<'_> {
    /// Whether `who` may send to `to`, asked at `RCPT TO`: a suppressed address is
    /// [`Error::RecipientSuppressed`]. The send checks again, so a suppression added between
    /// `RCPT` and `DATA` still holds. The key is looked up again first, as for the message
    /// itself: a session whose key was revoked after AUTH gets [`Error::InvalidApiKey`] for
    /// every recipient, and so learns nothing more about the workspace's suppression list.
    pub async fn check_recipient(&self, who: &Principal, to: &EmailAddress) -> Result<()> {
        let (key, suppression) = tokio::join!(
            self.core.store.get_api_key(who.workspace_id, who.key_id),
            self.core.store.get_suppression(who.workspace_id, to)
        );
        if key?.is_none_or(|key| key.revoked_at.is_some()) {
            return Err(Error::InvalidApiKey);
        }
        match suppression? {
            Some(_) => Err(Error::RecipientSuppressed(to.to_string())),
            None => Ok(()),
        }
    }

    /// Queues `raw` (the message after `DATA`) as one send to `recipients`, taking one
    /// rate-limit token; returns the message (or the one a retry replays) once it is
    /// durably stored, the only case in which the listener may answer `250`. The key is
    /// looked up again first: one revoked since the session authenticated is
    /// [`Error::InvalidApiKey`].
    pub async fn submit(
        &self,
        limits: &dyn Limits,
        who: &Principal,
        recipients: &[EmailAddress],
        raw: &[u8],
    ) -> std::result::Result<SendOutcome, SubmitFailure> {
        let key = self
            .core
            .store
            .get_api_key(who.workspace_id, who.key_id)
            .await
            .map_err(|e| SubmitFailure::from(Error::from(e)))?;
        if key.is_none_or(|key| key.revoked_at.is_some()) {
            return Err(Error::InvalidApiKey.into());
        }
        let message = SubmittedMessage::parse(raw)?;
        let req = message.send_request(recipients);
        match self.core.messages().send_rate_limited(limits, who, req, message.idempotency_key().as_deref()).await? {
            Admission::Allowed(LimitedSend { outcome, .. }) => Ok(outcome),
            Admission::Limited { retry_after } => Err(SubmitFailure::RateLimited(retry_after)),
        }
    }
}
