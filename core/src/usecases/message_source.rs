//! A sent message's source as it went out: rebuilt from the stored record by the same
//! builder the delivery worker uses. The build is a function of the record (the `Date:` is
//! the creation time, the MIME boundaries derive from the message, the Message-ID is fixed),
//! so the bytes are the ones that were signed, less what each attempt adds: the
//! `DKIM-Signature` headers (their `t=` is the attempt's time; they are not kept) and the
//! envelope (`Return-Path`, written by the receiver). With per-recipient tracking each
//! copy's links differ; the source is then the first recipient's copy.

use crate::email::EmailAddress;
use crate::ids::MessageId;
use crate::outbound::{BuildError, build_copy};
use crate::usecases::{Messages, Principal};
use crate::{Error, Result};

/// What [`Messages::source`] found.
#[derive(Debug)]
pub enum MessageSource {
    /// The message as built for the wire.
    Built {
        /// The RFC 5322 message, CRLF line ends, without its DKIM signatures.
        raw: Vec<u8>,
        /// With per-recipient tracking: the recipient whose copy this is.
        copy_of: Option<EmailAddress>,
    },
    /// Retention removed its content: nothing to build from.
    ContentRemoved,
    /// Its sending domain was deleted: the message cannot be built as it was.
    DomainDeleted,
    /// The record cannot be built (it could not have been sent either).
    Unbuildable(BuildError),
}

impl Messages<'_> {
    /// The source of message `id` as it was built for sending ([`MessageSource`]); a `send`
    /// key sees only its own messages. CPU-bound in the size of the message (attachments are
    /// encoded again): it runs off the async executor.
    pub async fn source(&self, who: &Principal, id: MessageId) -> Result<MessageSource> {
        let message = self.get(who, id).await?;
        if !message.has_content() {
            return Ok(MessageSource::ContentRemoved);
        }
        let Some(domain) = self.core.store.get_domain(message.workspace_id, message.domain_id).await? else {
            return Ok(MessageSource::DomainDeleted);
        };
        let tracking = self.core.config.tracking.clone();
        let tracked =
            tracking.is_some() && message.html.is_some() && (message.tracking.opens || message.tracking.clicks);
        // As the worker builds it: one copy for all, or (tracked, several) one per recipient.
        let copy_of = (tracked && message.has_recipient_list()).then(|| message.to.clone());
        let recipient = copy_of.as_ref().map(|_| 0u8);
        let built = tokio::task::spawn_blocking(move || build_copy(&message, &domain, tracking.as_ref(), recipient))
            .await
            .map_err(|e| Error::Internal(crate::Cause::context("building the message source did not finish", e)))?;
        Ok(match built {
            Ok(built) => MessageSource::Built { raw: built.raw, copy_of },
            Err(e) => MessageSource::Unbuildable(e),
        })
    }
}
