//! The public SMTP listener (`TIDINGS_INBOUND_SMTP_LISTEN`): the SMTP server of
//! `tidings-inbound-smtp`, accepting mail for
//! - `TIDINGS_RETURN_PATH_DOMAIN` and the sending domains' own return paths
//!   (`bounces.<domain>`, with `TIDINGS_INBOUND_MX_HOST`), each report handed to core's
//!   [`Feedback::process_report`](tidings_core::usecases::Feedback::process_report)
//!   (docs/api.md#bounce-and-complaint-reports);
//! - the workspaces' inbound domains (docs/api.md#inbound-mail), each message checked for
//!   SPF, DKIM and DMARC and handed to core's
//!   [`Inbound::receive`](tidings_core::usecases::Inbound::receive), which stores it before
//!   the `250`;
//!
//! and refusing every other recipient at `RCPT TO` (never an open relay).
//!
//! A report is answered 250 once core has recorded what it says (or found it is about no
//! message of ours: that is counted and logged, never an error, so a sender does not retry
//! it forever); a storage failure or a message that keeps changing is a 451, and the sender
//! tries again later.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use tidings_core::domain_name::DomainName;
use tidings_core::email::EmailAddress;
use tidings_core::inbound::InboundParseError;
use tidings_core::ports::{AuthInput, MessageAuth};
use tidings_core::usecases::{ReceiveOutcome, ReceivedEnvelope, RecipientVerdict, ReportOutcome, Tidings, Unreadable};
use tidings_inbound_smtp::{Envelope, HandlerError, InboundHandler, InboundListener, InboundSettings, Refusal};

use crate::ServerError;
use crate::config::{InboundConfig, SmtpLimits};

/// Reports seen since start, by what they turned out to be.
#[derive(Debug, Default)]
pub struct ReportCounts {
    /// Bounces recorded.
    pub bounced: AtomicU64,
    /// Delays recorded.
    pub deferred: AtomicU64,
    /// Complaints recorded.
    pub complained: AtomicU64,
    /// Already processed.
    pub duplicate: AtomicU64,
    /// About no message of ours.
    pub unmatched: AtomicU64,
    /// Not a report, or nothing to do.
    pub ignored: AtomicU64,
}

/// Hands received reports and inbound mail to core.
pub struct ReportHandler {
    core: Tidings,
    counts: Arc<ReportCounts>,
    auth: Arc<dyn MessageAuth>,
    hostname: String,
    /// `TIDINGS_RETURN_PATH_DOMAIN`, which the listener takes whole without asking.
    return_path_domain: Option<DomainName>,
}

impl ReportHandler {
    /// A handler recording through `core`, checking inbound mail's SPF, DKIM and DMARC with
    /// `auth` as the receiver `hostname`.
    pub fn new(
        core: Tidings,
        auth: Arc<dyn MessageAuth>,
        hostname: String,
        return_path_domain: Option<DomainName>,
    ) -> Self {
        Self { core, counts: Arc::default(), auth, hostname, return_path_domain }
    }

    /// Whether `recipient` is a return path of ours (else it was accepted as inbound mail).
    async fn is_report_address(&self, recipient: &EmailAddress) -> Result<bool, HandlerError> {
        self.core.feedback().accepts_report_to(recipient).await.map_err(|e| {
            tracing::warn!("a recipient could not be checked, the sender will retry: {e}");
            HandlerError::Temporary(e.to_string())
        })
    }

    /// Stores an inbound message for its workspaces.
    async fn receive_inbound(
        &self,
        envelope: &Envelope,
        recipients: Vec<EmailAddress>,
        raw: &[u8],
    ) -> Result<(), HandlerError> {
        let mail_from = envelope.mail_from.as_ref().map(ToString::to_string);
        let input = AuthInput {
            raw,
            client_ip: envelope.peer.ip(),
            helo: &envelope.helo,
            mail_from: mail_from.as_deref(),
            receiver: &self.hostname,
        };
        let auth = self.auth.authenticate(input).await;
        let received = ReceivedEnvelope {
            mail_from: envelope.mail_from.clone(),
            recipients,
            client_ip: envelope.peer.ip(),
            helo: envelope.helo.clone(),
        };
        let outcome = self.core.inbound().receive(&received, raw, auth).await.map_err(|e| {
            tracing::warn!(peer = %envelope.peer, "inbound message not stored, the sender will retry: {e}");
            HandlerError::Temporary(e.to_string())
        })?;
        match outcome {
            Ok(ReceiveOutcome::Stored(ids)) => {
                tracing::info!(peer = %envelope.peer, stored = ids.len(), "inbound message received");
                Ok(())
            }
            Ok(ReceiveOutcome::Full) => Err(mailbox_full()),
            Err(Unreadable::Parse(InboundParseError::TooLarge { .. })) => {
                Err(HandlerError::Refused(Refusal::new(552, "5.3.4", "message too big")))
            }
            Err(Unreadable::Parse(e)) => {
                tracing::info!(peer = %envelope.peer, "inbound message refused: {e}");
                Err(HandlerError::Refused(Refusal::new(554, "5.6.0", "message not readable")))
            }
        }
    }
}

/// `452 4.2.2`: the workspace keeps as much inbound mail as it may; the sender retries.
fn mailbox_full() -> HandlerError {
    HandlerError::Refused(Refusal::new(452, "4.2.2", "mailbox full, try again later"))
}

#[async_trait]
impl InboundHandler for ReportHandler {
    async fn receive(&self, envelope: Envelope, raw: Vec<u8>) -> Result<(), HandlerError> {
        // Reports and inbound mail may share a transaction in principle; each part goes
        // its way. The listener's own return-path domain is always reports.
        let (mut reports, mut inbound) = (Vec::new(), Vec::new());
        for recipient in &envelope.recipients {
            if self.is_report_address(recipient).await? || self.on_return_path_domain(recipient) {
                reports.push(recipient.clone());
            } else {
                inbound.push(recipient.clone());
            }
        }
        if !inbound.is_empty() {
            self.receive_inbound(&envelope, inbound, &raw).await?;
        }
        if reports.is_empty() {
            return Ok(());
        }
        let outcome = self.core.feedback().process_report(&reports, &raw).await.map_err(|e| {
            tracing::warn!(peer = %envelope.peer, "report not processed, the sender will retry: {e}");
            HandlerError::Temporary(e.to_string())
        })?;
        let c = &self.counts;
        let (kind, counter, message) = match &outcome {
            ReportOutcome::Bounced { message, .. } => ("bounced", &c.bounced, Some(message.id)),
            ReportOutcome::Deferred { message } => ("deferred", &c.deferred, Some(message.id)),
            ReportOutcome::Complained { message, .. } => ("complained", &c.complained, Some(message.id)),
            ReportOutcome::Duplicate { message } => ("duplicate", &c.duplicate, Some(message.id)),
            ReportOutcome::Unmatched { .. } => ("unmatched", &c.unmatched, None),
            ReportOutcome::Ignored { .. } => ("ignored", &c.ignored, None),
        };
        let total = counter.fetch_add(1, Ordering::Relaxed) + 1;
        let detail = match &outcome {
            ReportOutcome::Unmatched { reason } => reason.to_string(),
            ReportOutcome::Ignored { reason } => reason.to_string(),
            ReportOutcome::Bounced { hard, .. } => if *hard { "hard" } else { "soft" }.to_owned(),
            _ => String::new(),
        };
        match message {
            Some(message) => tracing::info!(peer = %envelope.peer, %message, total, "report: {kind} {detail}"),
            None => tracing::info!(peer = %envelope.peer, total, "report: {kind} ({detail})"),
        }
        Ok(())
    }

    async fn accepts_report_to(&self, recipient: &EmailAddress) -> Result<bool, HandlerError> {
        if self.is_report_address(recipient).await? {
            return Ok(true);
        }
        let verdict = self.core.inbound().check_recipient(recipient).await.map_err(|e| {
            tracing::warn!("an inbound recipient could not be checked, the sender will retry: {e}");
            HandlerError::Temporary(e.to_string())
        })?;
        match verdict {
            RecipientVerdict::Accept(_) => Ok(true),
            RecipientVerdict::NotOurs => Ok(false),
            RecipientVerdict::Rejected => Err(HandlerError::Refused(Refusal::new(550, "5.1.1", "mailbox unavailable"))),
            RecipientVerdict::Full => Err(mailbox_full()),
        }
    }
}

impl ReportHandler {
    /// Whether `recipient` is on the server-wide return-path domain, which the listener
    /// takes whole without asking.
    fn on_return_path_domain(&self, recipient: &EmailAddress) -> bool {
        self.return_path_domain.as_ref() == Some(recipient.domain())
    }
}

/// Binds the listener on `addr` for `domain` (and the domains' own return paths, and the
/// inbound domains) with `limits`; prints `inbound SMTP listening on ADDR` on stderr (the
/// real port when `addr` has port 0).
pub async fn bind(
    addr: SocketAddr,
    domain: Option<DomainName>,
    limits: &SmtpLimits,
    inbound: &InboundConfig,
    core: Tidings,
    auth: Arc<dyn MessageAuth>,
) -> Result<InboundListener, ServerError> {
    let settings = InboundSettings {
        max_message_bytes: inbound.max_message_bytes,
        max_messages_per_client: inbound.messages_per_minute,
        message_window: std::time::Duration::from_secs(60),
        ..with_limits(InboundSettings::reports(domain.clone()), limits)
    };
    let handler = ReportHandler::new(core, auth, settings.hostname.clone(), domain);
    let listener = InboundListener::bind(addr, settings, Arc::new(handler))
        .await
        .map_err(|source| ServerError::InboundBind { addr, source })?;
    eprintln!("inbound SMTP listening on {}", listener.local_addr());
    Ok(listener)
}

/// `settings` with the operator's session and message data limits.
pub(crate) fn with_limits(settings: InboundSettings, limits: &SmtpLimits) -> InboundSettings {
    InboundSettings {
        max_connections: limits.max_sessions,
        max_connections_per_ip: limits.max_sessions_per_ip,
        max_data_bytes_in_flight: limits.data_bytes_in_flight,
        ..settings
    }
}
