//! The bounce and complaint listener (`TIDINGS_INBOUND_SMTP_LISTEN`,
//! docs/api.md#bounce-and-complaint-reports): the SMTP server of `tidings-inbound-smtp`, accepting mail for `TIDINGS_RETURN_PATH_DOMAIN`
//! and the sending domains' own return paths (`bounces.<domain>`, with `TIDINGS_INBOUND_MX_HOST`) only,
//! with each report handed to core's [`Feedback::process_report`](tidings_core::usecases::Feedback::process_report).
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
use tidings_core::usecases::{ReportOutcome, Tidings};
use tidings_inbound_smtp::{Envelope, HandlerError, InboundHandler, InboundListener, InboundSettings};

use crate::ServerError;
use crate::config::SmtpLimits;

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

/// Hands received reports to core.
pub struct ReportHandler {
    core: Tidings,
    counts: Arc<ReportCounts>,
}

impl ReportHandler {
    /// A handler recording through `core`.
    pub fn new(core: Tidings) -> Self {
        Self { core, counts: Arc::default() }
    }
}

#[async_trait]
impl InboundHandler for ReportHandler {
    async fn receive(&self, envelope: Envelope, raw: Vec<u8>) -> Result<(), HandlerError> {
        let outcome = self.core.feedback().process_report(&envelope.recipients, &raw).await.map_err(|e| {
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
        self.core.feedback().accepts_report_to(recipient).await.map_err(|e| {
            tracing::warn!("a recipient could not be checked, the sender will retry: {e}");
            HandlerError::Temporary(e.to_string())
        })
    }
}

/// Binds the listener on `addr` for `domain` (and the domains' own return paths) with `limits`; prints `inbound SMTP listening
/// on ADDR` on stderr (the real port when `addr` has port 0).
pub async fn bind(
    addr: SocketAddr,
    domain: Option<DomainName>,
    limits: &SmtpLimits,
    core: Tidings,
) -> Result<InboundListener, ServerError> {
    let settings = with_limits(InboundSettings::reports(domain), limits);
    let listener = InboundListener::bind(addr, settings, Arc::new(ReportHandler::new(core)))
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
