//! The delivery worker's step function: claim due messages under a lease, and for each
//! decide, build, sign, hand off and record the outcome (docs/api.md#messages).
//!
//! Per message to one recipient, in order (a message with a recipient list: [`recipients`]):
//! 1. Recipient suppressed now → `Suppressed`, unsent. (A message found in `Sent`, whose
//!    previous attempt's outcome is unknown after a crash, cannot become `Suppressed`; it
//!    ends `Failed` with that reason instead.)
//! 2. Sending domain deleted, or the message cannot be built or signed → `Failed` with the
//!    reason. (A domain that merely stopped verifying keeps sending: only deletion stops it.)
//!    So is a message from the sandbox sending domain when the mailer sends mail off the
//!    machine ([`Mailer::keeps_mail_local`]).
//! 3. Record `Sent` (attempt number, `providerMessageId`), then hand the message to the
//!    [`Mailer`]; classify what it reports ([`classify`]) and record `Delivered`,
//!    `Deferred` (with `nextAttemptAt`), or `Bounced` (`Hard` after suppressing the address,
//!    `Soft` for non-address refusals and when the schedule is used up).
//!
//! Every change goes through [`Messages::record_event`](crate::usecases::Messages::record_event),
//! so webhooks fan out and the write is atomic. Writes before the send also require the claim's lease to be unchanged
//! (a client may reschedule a claimed `Scheduled` message without changing its status).
//! A `Conflict` before the send (another actor changed the message) leads
//! to one re-read: if the message is still ours (its lease unchanged) the decision is made
//! again, else it is skipped. After the send, a conflict skips: the send happened, and
//! whoever changed the message owns it now.
//!
//! Crash safety: a crash after `Sent` leaves the message `Sent` with its lease; when the
//! lease ends it is claimed again and sent again (`Sent`→`Sent`). On a store only one
//! process can open, the restarted process need not wait for that:
//! [`DeliveryWorker::release_leases_after_restart`] makes such messages due at once. Duplicates are possible
//! only in the window between the receiver's final reply and the durable write of the
//! outcome (or when the lease ends while an attempt still runs, which the send timeout
//! prevents). The `Message-ID` is the same on every attempt, so receivers can de-duplicate.
//!
//! Leases: all messages of a batch are claimed at once and then processed `concurrency` at
//! a time, each send bounded by `send_timeout`, so the lease is
//! `send_timeout × ⌈batch / concurrency⌉` plus `lease_margin` (a minute by default) for
//! building and storage; it must outlast the transport's own total timeout, which the
//! `send_timeout` enforces by cancelling a send that runs longer (it is then retried like a
//! timeout). The lease is also how long a crashed node's claimed messages wait before
//! another node on the same store takes them over.
//!
//! Memory stays flat however long the queue: one batch is in memory at a time, and the
//! signer cache is bounded.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::classify::{Verdict, classify};
use crate::delivery::schedule::RetrySchedule;
use crate::delivery::signers::SignerCache;
use crate::delivery::site_gate::{Gate, Shaping, SiteGate, Ticket};
use crate::email::EmailAddress;
use crate::ids::{EventId, MessageId};
use crate::model::{BounceType, Domain, EventDetails, EventType, Message, MessageStatus};
use crate::model::{SuppressionReason, SuppressionSource};
use crate::outbound::prepare;
use crate::ports::{Mailer, OutboundEmail, SendError, SendReceipt};
use crate::state_machine::Happening;
use crate::usecases::Tidings;
use crate::usecases::sandbox::SANDBOX_NOT_DELIVERABLE;
use crate::{Error, Result};

/// Longest `response` kept in an event's details; SMTP replies can be long.
const MAX_RESPONSE_CHARS: usize = 1_000;
/// Leases released per store call at start-up; bounds how long one call holds the store.
const RELEASE_BATCH: usize = 1_000;

/// How the worker runs.
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// Messages claimed per step (at least 1).
    pub batch_size: usize,
    /// Messages attempted at once within a step (at least 1). A message to several
    /// recipients sends all its copies at once (at most 50), so that its attempt takes one
    /// `send_timeout` like any other and the lease covers it.
    pub concurrency: usize,
    /// Longest one send may take; a longer one is cancelled and retried. Set it at or above
    /// the transport's own total timeout for one message.
    pub send_timeout: Duration,
    /// Delays between attempts.
    pub schedule: RetrySchedule,
    /// Domains whose parsed DKIM keys are kept (at least 1).
    pub signer_cache_size: usize,
    /// Added to the longest time a batch's sends can take to make the lease: time for
    /// building, signing and storage. Shorter lets other nodes take over a crashed node's
    /// messages sooner; too short for the store's pace, and a lease can end while its
    /// attempt still runs, so that another claimer sends the message again (same
    /// `Message-ID`).
    pub lease_margin: Duration,
    /// Messages built and signed at once (at least 1), each on a blocking thread. Signing is
    /// CPU work (an RSA signature is most of a delivery's CPU), so more than the cores only
    /// adds threads that take turns: with 32 sends in flight, tokio's blocking pool grew to
    /// 18 threads signing on two cores. Default: the cores this process may use.
    pub signing_threads: usize,
    /// Admission by delivery site (contract §12): when set, and the mailer names sites
    /// ([`Mailer::site`]), each attempt (each copy, for a message with a recipient list) first
    /// asks its recipient's site, and mail the site cannot take yet goes back to the queue
    /// without an attempt. `None` by default: a relay shapes its own delivery.
    pub shaping: Option<Shaping>,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        Self {
            batch_size: 64,
            concurrency: 32,
            send_timeout: Duration::from_secs(180),
            schedule: RetrySchedule::default(),
            signer_cache_size: 1_024,
            lease_margin: Duration::from_secs(60),
            signing_threads: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            shaping: None,
        }
    }
}

impl DeliverySettings {
    /// How long a claim lasts: long enough for the whole batch at `concurrency` sends at a
    /// time, each up to `send_timeout`, plus `lease_margin` for building, signing and storage.
    pub fn lease(&self) -> chrono::Duration {
        let waves = self.batch_size.max(1).div_ceil(self.concurrency.max(1));
        let busy = self.send_timeout.saturating_mul(u32::try_from(waves).unwrap_or(u32::MAX));
        chrono::Duration::from_std(busy.saturating_add(self.lease_margin)).unwrap_or(chrono::Duration::days(1))
    }
}

/// What one step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Messages claimed.
    pub claimed: usize,
    /// Accepted by the receiver.
    pub delivered: usize,
    /// Failed temporarily; retried later.
    pub deferred: usize,
    /// Refused for the address, which is now suppressed.
    pub bounced_hard: usize,
    /// Refused for other reasons, or retries used up.
    pub bounced_soft: usize,
    /// Not sent: the recipient is suppressed.
    pub suppressed: usize,
    /// Cannot be sent at all.
    pub failed: usize,
    /// Left alone because something else changed them meanwhile.
    pub skipped: usize,
    /// Put back in the queue without an attempt: their site could not take them yet.
    pub waiting: usize,
    /// Messages whose processing hit an error (storage unavailable, ...), with the error;
    /// they stay leased and are tried again when the lease ends. At most one per claim.
    pub errors: Vec<(MessageId, String)>,
}

impl DeliveryReport {
    /// Counts what one attempt did (per recipient, for a message with a recipient list).
    pub(crate) fn add(&mut self, id: MessageId, outcome: Result<Outcome>) {
        match outcome {
            Ok(Outcome::Several(each)) => {
                for outcome in each {
                    self.add(id, Ok(outcome));
                }
            }
            Ok(Outcome::Delivered) => self.delivered += 1,
            Ok(Outcome::Deferred) => self.deferred += 1,
            Ok(Outcome::Bounced(BounceType::Hard)) => self.bounced_hard += 1,
            Ok(Outcome::Bounced(BounceType::Soft)) => self.bounced_soft += 1,
            Ok(Outcome::Suppressed) => self.suppressed += 1,
            Ok(Outcome::Failed) => self.failed += 1,
            Ok(Outcome::Skipped) => self.skipped += 1,
            Ok(Outcome::Waiting) => self.waiting += 1,
            Err(e) => self.errors.push((id, e.to_string())),
        }
    }
}

/// What happened to one claimed message.
pub(crate) enum Outcome {
    /// What happened to each recipient attempted, for a message with a recipient list.
    Several(Vec<Outcome>),
    Delivered,
    Deferred,
    Bounced(BounceType),
    Suppressed,
    Failed,
    Skipped,
    /// Its site could not take it yet: back in the queue, no attempt made.
    Waiting,
}

/// The first half of an attempt: either the message was dealt with without sending, or it
/// is recorded `Sent` and ready to go.
enum Start {
    Done(Outcome),
    Ready(Box<Ready>),
    /// The site cannot take it before `due`.
    Wait(DateTime<Utc>),
    Conflict,
}

/// A message recorded `Sent`, its email, and its site's ticket if it was admitted by site.
struct Ready {
    sent: Message,
    email: OutboundEmail,
    ticket: Option<Ticket>,
}

/// A message built and signed, or the reason it cannot be (it then fails, never retried).
enum Prepared {
    Ready(OutboundEmail),
    Unsendable(String),
}

/// What one attempt's result becomes ([`Shared::judge`]).
pub(super) struct Judged {
    /// The event to record.
    event: Happening,
    /// What the step reports.
    outcome: Outcome,
    /// A hard bounce: the caller suppresses the address before recording the event.
    hard_bounce: bool,
}

/// Delivers due messages through a [`Mailer`]. Cheap to share behind an `Arc`; steps may
/// run concurrently (the store's claims keep them apart).
pub struct DeliveryWorker {
    shared: Arc<Shared>,
}

/// What every attempt needs; shared with the attempts, which may run on tasks of their own
/// ([`DeliveryWorker::attempt`]).
struct Shared {
    core: Tidings,
    mailer: Arc<dyn Mailer>,
    settings: DeliverySettings,
    signers: Arc<SignerCache>,
    /// Permits of the builds that may run at once (`DeliverySettings::signing_threads`).
    signing: Arc<tokio::sync::Semaphore>,
    /// Admission by site, when shaping is on.
    gate: Option<SiteGate>,
}

impl DeliveryWorker {
    /// A worker delivering through `mailer` by `settings`, recording through `core`.
    pub fn new(core: Tidings, mailer: Arc<dyn Mailer>, settings: DeliverySettings) -> Self {
        let signers = Arc::new(SignerCache::new(settings.signer_cache_size));
        let signing = Arc::new(tokio::sync::Semaphore::new(settings.signing_threads.max(1)));
        let gate = settings
            .shaping
            .clone()
            .map(|shaping| SiteGate::new(shaping, Arc::clone(core.store()), mailer.idle_connection_lifetime()));
        Self { shared: Arc::new(Shared { core, mailer, settings, signers, signing, gate }) }
    }

    /// The settings.
    pub fn settings(&self) -> &DeliverySettings {
        &self.shared.settings
    }

    /// One attempt at a message claimed until `lease_until`, as a future that owns what it
    /// needs, so that the delivery loop can run each on a task of its own (and so on every
    /// core) while it claims the next ones.
    pub(crate) fn attempt(
        &self,
        message: Message,
        lease_until: DateTime<Utc>,
    ) -> impl Future<Output = (MessageId, Result<Outcome>)> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        async move {
            let id = message.id;
            (id, shared.deliver_one(message, lease_until).await)
        }
    }

    /// Claims up to `limit` messages due at `now` (at least one), leased until `now` +
    /// [`DeliverySettings::lease`], which it returns with them. The claim of both
    /// [`Self::deliver_due`] and the runtime's delivery loop, which then run [`Self::attempt`]
    /// on each: the two differ only in how many attempts overlap.
    pub(crate) async fn claim(&self, now: DateTime<Utc>, limit: usize) -> Result<(Vec<Message>, DateTime<Utc>)> {
        let lease_until = now + self.shared.settings.lease();
        let claimed = self.shared.core.store().claim_due_messages(now, lease_until, limit.max(1)).await?;
        Ok((claimed, lease_until))
    }

    /// One step: claims up to `batch_size` messages due at `now` (leased until `now` +
    /// [`DeliverySettings::lease`]) and takes each through one attempt, `concurrency` at a
    /// time. Fails only if the claim itself fails; per-message errors are in the report.
    /// Event times come from the service's clock. Tests step delivery with it; the runtime's
    /// loop makes the same claim and attempts, pipelined (claiming again as attempts finish
    /// instead of after the batch's slowest).
    pub async fn deliver_due(&self, now: DateTime<Utc>) -> Result<DeliveryReport> {
        let settings = &self.shared.settings;
        let (claimed, lease_until) = self.claim(now, settings.batch_size).await?;
        let mut report = DeliveryReport { claimed: claimed.len(), ..DeliveryReport::default() };
        let mut outcomes = futures::stream::iter(claimed)
            .map(|message| self.attempt(message, lease_until))
            .buffer_unordered(settings.concurrency.max(1));
        while let Some((id, outcome)) = outcomes.next().await {
            report.add(id, outcome);
        }
        Ok(report)
    }

    /// Makes the messages that the previous run of this process left claimed (`Queued` or
    /// `Sent` under a lease, after a crash or a shutdown that dropped in-flight sends) due at
    /// `now`, so that the first step retries them instead of waiting for their leases to
    /// end; returns how many. Calls [`MessageStore::release_message_leases`] in batches until
    /// one comes back short.
    ///
    /// Only for a store that one process alone can open, before this process's first
    /// [`Self::deliver_due`]: on a store that several processes share it would take messages
    /// away from live workers, which would then send them twice.
    ///
    /// [`MessageStore::release_message_leases`]: crate::ports::MessageStore::release_message_leases
    pub async fn release_leases_after_restart(&self, now: DateTime<Utc>) -> Result<usize> {
        let mut total = 0;
        loop {
            let released = self.shared.core.store().release_message_leases(now, RELEASE_BATCH).await?;
            total += released;
            if released < RELEASE_BATCH {
                return Ok(total);
            }
        }
    }
}

impl Shared {
    async fn deliver_one(&self, claimed: Message, lease_until: DateTime<Utc>) -> Result<Outcome> {
        if claimed.has_recipient_list() {
            return self.deliver_recipients(claimed, lease_until).await;
        }
        // Shared with the blocking task that builds and signs it, instead of copied there.
        let mut message = Arc::new(claimed);
        let mut reread = false;
        let (sent, email, ticket) = loop {
            match self.start_attempt(&message, lease_until).await? {
                Start::Done(outcome) => return Ok(outcome),
                Start::Ready(ready) => {
                    let Ready { sent, email, ticket } = *ready;
                    break (sent, email, ticket);
                }
                Start::Wait(due) => {
                    let (ws, id) = (message.workspace_id, message.id);
                    return Ok(match self.core.store().requeue_message(ws, id, lease_until, due).await? {
                        true => Outcome::Waiting,
                        false => Outcome::Skipped,
                    });
                }
                Start::Conflict if !reread => {
                    reread = true;
                    match self.core.store().get_message(message.workspace_id, message.id).await? {
                        Some(fresh) if fresh.next_attempt_at == Some(lease_until) => message = Arc::new(fresh),
                        _ => return Ok(Outcome::Skipped),
                    }
                }
                Start::Conflict => return Ok(Outcome::Skipped),
            }
        };
        let result = match tokio::time::timeout(self.settings.send_timeout, self.mailer.send(&email)).await {
            Ok(result) => result,
            Err(_) => {
                Err(SendError::Unreachable { reason: format!("no answer within {:?}", self.settings.send_timeout) })
            }
        };
        self.release(ticket, &result).await;
        self.record_outcome(&sent, &result).await
    }

    /// Ends the ticket of a delivery that happened, with what the site said (for its
    /// adaptive rules) and whether the connection may be kept.
    async fn release(&self, ticket: Option<Ticket>, result: &std::result::Result<SendReceipt, SendError>) {
        if let (Some(gate), Some(ticket)) = (&self.gate, ticket) {
            let (reply, connected) = site_reply(result);
            gate.release(ticket, reply.as_deref(), connected, self.core.clock().now()).await;
        }
    }

    /// Whether the site of `to` (a recipient of `message`) admits its copy now (`Ok(None)`
    /// when there is no shaping, or the mailer names no site for the recipient); else when
    /// to ask again.
    async fn admit(
        &self,
        message: &Message,
        to: &EmailAddress,
        lease_until: DateTime<Utc>,
    ) -> Result<std::result::Result<Option<Ticket>, DateTime<Utc>>> {
        let Some(gate) = &self.gate else { return Ok(Ok(None)) };
        let Some(site) = self.mailer.site(to.domain()).await else { return Ok(Ok(None)) };
        let now = self.core.clock().now();
        match gate.admit(site, message.workspace_id, message.id, now, lease_until, &*self.core.random).await? {
            Gate::Admitted(ticket) => Ok(Ok(Some(ticket))),
            Gate::Wait { due, why } => {
                tracing::debug!(message = %message.id, %due, %why, "the site cannot take the copy yet");
                Ok(Err(due))
            }
        }
    }

    /// Ends a ticket whose delivery did not happen.
    async fn cancel(&self, ticket: Option<Ticket>) {
        if let (Some(gate), Some(ticket)) = (&self.gate, ticket) {
            gate.cancel(ticket, self.core.clock().now()).await;
        }
    }

    /// Steps 1–3 of the module docs, up to and including the `Sent` event.
    async fn start_attempt(&self, message: &Arc<Message>, lease_until: DateTime<Utc>) -> Result<Start> {
        use MessageStatus as S;
        if !matches!(message.status, S::Queued | S::Scheduled | S::Deferred | S::Sent) {
            return Ok(Start::Done(Outcome::Skipped));
        }
        let store = self.core.store();
        if store.get_suppression(message.workspace_id, &message.to).await?.is_some() {
            return if message.status == S::Sent {
                let reason = "the recipient was suppressed after an attempt whose outcome is unknown";
                self.finish(message, EventType::Failed, response(reason), Outcome::Failed).await
            } else {
                self.finish(message, EventType::Suppressed, EventDetails::default(), Outcome::Suppressed).await
            };
        }
        let Some(domain) = store.get_domain(message.workspace_id, message.domain_id).await? else {
            let details = response("the sending domain was deleted");
            return self.finish(message, EventType::Failed, details, Outcome::Failed).await;
        };
        if domain.is_sandbox() && !self.mailer.keeps_mail_local() {
            // Queued under the outbox, found after a restart with a relay or MX: it must not
            // leave the machine, and no later attempt would differ.
            let details = response(SANDBOX_NOT_DELIVERABLE);
            return self.finish(message, EventType::Failed, details, Outcome::Failed).await;
        }
        // Paused by the reputation guard: held, neither attempted nor bounced.
        if let Some(due) =
            self.core.reputation().holds(message.workspace_id, domain.id, self.core.clock().now()).await?
        {
            return Ok(Start::Wait(due));
        }
        // Asked before building: a message its site cannot take yet costs no signature.
        let ticket = match self.admit(message, &message.to, lease_until).await? {
            Ok(ticket) => ticket,
            Err(due) => return Ok(Start::Wait(due)),
        };
        let email = match self.prepare(message, domain).await {
            Ok(Prepared::Ready(email)) => email,
            Ok(Prepared::Unsendable(reason)) => {
                self.cancel(ticket).await;
                return self.finish(message, EventType::Failed, response(&reason), Outcome::Failed).await;
            }
            Err(e) => {
                self.cancel(ticket).await;
                return Err(e);
            }
        };
        let details = EventDetails { attempt: Some(message.attempts.saturating_add(1)), ..EventDetails::default() };
        let sent = happening(&self.core, EventType::Sent, details, Some(email.provider_message_id.clone()), None);
        match self.record(message, sent, message.next_attempt_at).await {
            Ok(Some(sent)) => Ok(Start::Ready(Box::new(Ready { sent, email, ticket }))),
            Ok(None) => {
                self.cancel(ticket).await;
                Ok(Start::Conflict)
            }
            Err(e) => {
                self.cancel(ticket).await;
                Err(e)
            }
        }
    }

    /// Builds and signs off the async executor (an RSA signature, and a key parse on a cache
    /// miss), at most `signing_threads` at once. The permit goes with the blocking task.
    async fn prepare(&self, message: &Arc<Message>, domain: Domain) -> Result<Prepared> {
        let permit = Arc::clone(&self.signing)
            .acquire_owned()
            .await
            .map_err(|e| Error::Internal(crate::Cause::context("the signing permits are closed", e)))?;
        let signers = Arc::clone(&self.signers);
        let message = Arc::clone(message);
        let return_path = self.core.config().return_path_for(&domain);
        let tracking = self.core.config().tracking.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let built = signers.get_or_create(&domain).map_err(|e| e.to_string()).and_then(|signer| {
                prepare(&message, &domain, &signer, return_path.as_ref(), tracking.as_ref()).map_err(|e| e.to_string())
            });
            match built {
                Ok(email) => Prepared::Ready(email),
                Err(reason) => Prepared::Unsendable(reason),
            }
        })
        .await
        .map_err(|e| Error::Internal(crate::Cause::context("building the message did not finish", e)))
    }

    async fn record_outcome(
        &self,
        sent: &Message,
        result: &std::result::Result<SendReceipt, SendError>,
    ) -> Result<Outcome> {
        let judged = self.judge(sent.attempts, result);
        if judged.hard_bounce {
            // Suppress first: if the process dies before the event is written, the
            // address is still protected (the message then ends Failed on re-claim).
            let (ws, to) = (sent.workspace_id, &sent.to);
            let (reason, source) = (SuppressionReason::HardBounce, SuppressionSource::Bounce);
            self.core.suppressions().add_automatically(ws, to, reason, source, Some(sent.id)).await?;
        }
        let Judged { event, outcome, .. } = judged;
        // The send happened: its outcome is recorded whatever became of the lease.
        Ok(match self.record(sent, event, None).await? {
            Some(_) => outcome,
            None => Outcome::Skipped,
        })
    }

    /// What attempt number `attempt`'s `result` becomes: one table for a message and for
    /// each recipient of a list (`Delivered`; `Deferred` until the schedule is used up, then
    /// `Bounced` Soft; `Bounced` of the classified kind).
    fn judge(&self, attempt: u32, result: &std::result::Result<SendReceipt, SendError>) -> Judged {
        let mut details = reply_details(result);
        details.attempt = Some(attempt);
        let (event_type, next_attempt_at, outcome) = match classify(result) {
            Verdict::Delivered => (EventType::Delivered, None, Outcome::Delivered),
            Verdict::Retry { not_before } => match self.settings.schedule.delay_after(attempt) {
                Some(delay) => {
                    let wait = delay.max(not_before.unwrap_or_default());
                    let at = self.core.clock().now()
                        + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::days(30));
                    details.next_attempt_at = Some(at);
                    (EventType::Deferred, Some(at), Outcome::Deferred)
                }
                None => {
                    details.bounce_type = Some(BounceType::Soft);
                    (EventType::Bounced, None, Outcome::Bounced(BounceType::Soft))
                }
            },
            Verdict::Bounce(kind) => {
                details.bounce_type = Some(kind);
                (EventType::Bounced, None, Outcome::Bounced(kind))
            }
        };
        let hard_bounce = matches!(outcome, Outcome::Bounced(BounceType::Hard));
        Judged { event: happening(&self.core, event_type, details, None, next_attempt_at), outcome, hard_bounce }
    }

    /// Records an event that ends this step's work on the message without a send.
    async fn finish(
        &self,
        message: &Message,
        event_type: EventType,
        details: EventDetails,
        outcome: Outcome,
    ) -> Result<Start> {
        let event = happening(&self.core, event_type, details, None, None);
        Ok(match self.record(message, event, message.next_attempt_at).await? {
            Some(_) => Start::Done(outcome),
            None => Start::Conflict,
        })
    }

    /// Records `event`; `None` if the message changed meanwhile or is gone. Before the send,
    /// `lease` is the claimed message's `next_attempt_at`: a cancel, reschedule or release
    /// since the claim (which need not change the status) then makes this a conflict.
    async fn record(
        &self,
        message: &Message,
        event: Happening,
        lease: Option<DateTime<Utc>>,
    ) -> Result<Option<Message>> {
        match self.core.messages().record_event_if_due_at(message, event, lease).await {
            Ok((next, _)) => Ok(Some(next)),
            Err(Error::Conflict(_) | Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn happening(
    core: &Tidings,
    event_type: EventType,
    details: EventDetails,
    provider_message_id: Option<String>,
    next_attempt_at: Option<DateTime<Utc>>,
) -> Happening {
    let at = core.clock().now();
    Happening {
        event_id: EventId::new_at(at, &*core.random),
        event_type,
        at,
        details,
        provider_message_id,
        next_attempt_at,
    }
}

fn response(text: &str) -> EventDetails {
    EventDetails { response: Some(text.to_owned()), ..EventDetails::default() }
}

/// The reply a site gave to an attempt, for its adaptive rules, and whether a connection to
/// it was made (so that the transport may keep it idle). A failure to connect has no reply;
/// its text is still matched, since a refusal at connection can carry the throttling text.
fn site_reply(result: &std::result::Result<SendReceipt, SendError>) -> (Option<String>, bool) {
    match result {
        Ok(receipt) => (Some(receipt.reply.to_string()), true),
        Err(SendError::Rejected { reply, .. }) => (Some(reply.to_string()), true),
        Err(SendError::Unreachable { reason }) => (Some(reason.clone()), false),
        Err(_) => (None, false),
    }
}

/// `smtpCode`, `enhancedCode`, `response` and, for a receipt, `tls` of what the transport
/// reported.
fn reply_details(result: &std::result::Result<SendReceipt, SendError>) -> EventDetails {
    let (reply, text) = match result {
        Ok(receipt) => (Some(&receipt.reply), receipt.reply.text.clone()),
        Err(SendError::Rejected { reply, .. }) => (Some(reply), reply.text.clone()),
        Err(other) => (None, other.to_string()),
    };
    EventDetails {
        smtp_code: reply.map(|r| r.code),
        enhanced_code: reply.and_then(|r| r.enhanced).map(|e| e.to_string()),
        response: Some(text.chars().take(MAX_RESPONSE_CHARS).collect()),
        tls: result.as_ref().ok().and_then(|receipt| receipt.tls.clone()),
        ..EventDetails::default()
    }
}

#[path = "worker_recipients.rs"]
mod recipients;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_covers_every_wave_of_sends_plus_the_margin() {
        let settings = DeliverySettings {
            batch_size: 64,
            concurrency: 32,
            send_timeout: Duration::from_secs(15),
            ..DeliverySettings::default()
        };
        assert_eq!(settings.lease(), chrono::Duration::seconds(2 * 15 + 60), "a minute by default");
        let short = DeliverySettings { lease_margin: Duration::from_secs(2), ..settings };
        assert_eq!(short.lease(), chrono::Duration::seconds(2 * 15 + 2), "never shorter than the sends");
    }
}
