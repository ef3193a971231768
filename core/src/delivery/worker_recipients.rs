//! One attempt at a message with a recipient list (contract §10): each due recipient gets its
//! own envelope and its own outcome, the bytes are signed once.
//!
//! Per claimed message:
//! 1. The due recipients: those waiting whose time has come, and those found `Sent` (an
//!    attempt whose outcome a crash lost).
//! 2. Each due recipient suppressed now ends `Suppressed` (`Failed` if found `Sent`), the
//!    others go on.
//! 3. With admission by site, each other copy asks its recipient's site, as a single
//!    message's attempt does (contract §12): a copy its site refuses is not attempted, gets
//!    no event and uses no retry; it waits, due at its site's turn, while the admitted copies
//!    go now. Its due time (and [`Recipient::waits_for_site`], which lets a site's resume
//!    hurry it: [`due_recipients`]) goes with the claim's first write (the admitted copies'
//!    `Sent`), so the message comes back to the queue when its earliest waiting recipient is
//!    due; when no copy goes, there is no event to write, and the claim's due time alone
//!    moves to that time (`MessageStore::requeue_message`).
//! 4. A deleted domain, the sandbox off the machine, or a message that cannot be built fails
//!    every due recipient, those waiting for their site included.
//! 5. The message is built and signed once; when its HTML is tracked, once per recipient,
//!    whose tokens name it. Each recipient is recorded `Sent`, then every copy is handed to
//!    the [`Mailer`](crate::ports::Mailer) in an envelope of its own (RCPT TO the recipient,
//!    MAIL FROM the return path signed for it), all at once, and each outcome is recorded
//!    for its recipient, a hard bounce suppressing that address alone. Each copy's site
//!    ticket ends after its own reply, which goes through the site's adaptive rules.
//!
//! Why an envelope per recipient rather than one per receiving domain: the return path is
//! signed for one recipient, so a bounce proves which recipient it is about without trusting
//! the report's text; and the receiver's verdict on one RCPT cannot be mistaken for another's
//! (docs/decisions.md, "Several recipients").
//!
//! The recipients' writes take turns on the message as last written (each checks that no
//! event came in between, and on a conflict reads the message again and decides again), so a
//! bounce report or an open of one recipient landing meanwhile is kept, never overwritten.
//! Writes are shared: every due recipient's `Sent` is one write, and outcomes that arrive
//! while a write is under way are written together by the next one, so a message to 50
//! recipients costs a few writes of its record, not 100.
//! Until every due recipient is recorded `Sent`, the writes keep the message under the
//! claim's lease; from then on a recipient in flight keeps it
//! ([`Message::settle_from_recipients`]).

use std::collections::HashMap;
use std::sync::PoisonError;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use tokio::sync::Mutex;

use super::{Outcome, Shared, happening, response};
use crate::delivery::site_gate::Ticket;
use crate::model::{EventDetails, EventType, Message, MessageStatus, Recipient, SuppressionReason, SuppressionSource};
use crate::outbound::{ReturnPath, SignedCopy, sign_copy};
use crate::ports::{SendError, SendReceipt};
use crate::state_machine::{Happening, apply_recipient_event};
use crate::usecases::sandbox::SANDBOX_NOT_DELIVERABLE;
use crate::{Error, Result};

/// Conflicting writes retried before a recipient's event is given up: each conflict means
/// another event of the message was written, and a message takes few at once.
const CONFLICT_RETRIES: usize = 16;

/// The message as last written, which the recipients' writes share, and the outcomes
/// waiting to be written.
struct Current {
    message: Mutex<Message>,
    lease: DateTime<Utc>,
    /// Outcomes that arrived while another write held the message: the next writer writes
    /// them all at once, so that outcomes arriving together cost one write, not one each.
    pending: std::sync::Mutex<Vec<(usize, Happening)>>,
    /// Copies their site refused (recipient position, when the site will take it): every
    /// write of the claim sets these recipients' due times.
    held: Vec<(usize, DateTime<Utc>)>,
    /// The site tickets of the admitted copies, by recipient position, until each copy's
    /// reply (or its end without a send) gives its ticket back.
    tickets: std::sync::Mutex<HashMap<usize, Ticket>>,
}

impl Current {
    fn take_ticket(&self, index: usize) -> Option<Ticket> {
        self.tickets.lock().unwrap_or_else(PoisonError::into_inner).remove(&index)
    }
}

impl Shared {
    pub(super) async fn deliver_recipients(&self, claimed: Message, lease: DateTime<Utc>) -> Result<Outcome> {
        let now = self.core.clock().now();
        // Paused by the reputation guard: every copy held, none attempted or bounced.
        if let Some(due) = self.core.reputation().holds(claimed.workspace_id, claimed.domain_id, now).await? {
            let requeued = self.core.store().requeue_message(claimed.workspace_id, claimed.id, lease, due).await?;
            return Ok(if requeued { Outcome::Waiting } else { Outcome::Skipped });
        }
        let due = due_recipients(&claimed, now);
        let mut current = Current {
            message: Mutex::new(claimed),
            lease,
            pending: std::sync::Mutex::new(Vec::new()),
            held: Vec::new(),
            tickets: std::sync::Mutex::new(HashMap::new()),
        };
        let mut outcomes = Vec::with_capacity(due.len());
        let mut going = Vec::with_capacity(due.len());
        for index in due {
            let (ws, address, found_sent) = {
                let m = current.message.lock().await;
                (m.workspace_id, m.recipients[index].email.clone(), m.recipients[index].status == MessageStatus::Sent)
            };
            if self.core.store().get_suppression(ws, &address).await?.is_some() {
                let (event_type, details, outcome) = if found_sent {
                    let reason = "the recipient was suppressed after an attempt whose outcome is unknown";
                    (EventType::Failed, response(reason), Outcome::Failed)
                } else {
                    (EventType::Suppressed, EventDetails::default(), Outcome::Suppressed)
                };
                outcomes.push(self.settle(&current, index, event_type, details, outcome, true).await?);
            } else {
                going.push(index);
            }
        }
        let going = self.admit_copies(&mut current, going).await?;
        if going.is_empty() {
            return self.put_back(&current, outcomes).await;
        }
        let snapshot = current.message.lock().await.clone();
        let prepared = self.prepare_copies(&snapshot, &going).await;
        let (copies, return_path) = match prepared {
            Ok(Ok(prepared)) => prepared,
            Ok(Err(reason)) => {
                self.cancel_tickets(&current).await;
                // The message as a whole cannot go: the copies waiting for their site fail too.
                let held = std::mem::take(&mut current.held);
                for index in going.into_iter().chain(held.into_iter().map(|(index, _)| index)) {
                    let details = response(&reason);
                    outcomes
                        .push(self.settle(&current, index, EventType::Failed, details, Outcome::Failed, true).await?);
                }
                return Ok(Outcome::Several(outcomes));
            }
            Err(e) => {
                self.cancel_tickets(&current).await;
                return Err(e);
            }
        };
        // Every admitted copy's recipient is `Sent` before the first copy leaves, in one
        // write, so the message stays leased while any is in flight.
        let attempts: Vec<u32> = {
            let m = current.message.lock().await;
            going.iter().map(|&i| m.recipients[i].attempts.saturating_add(1)).collect()
        };
        let sent: Vec<(usize, Happening)> = going
            .iter()
            .zip(&copies)
            .zip(&attempts)
            .map(|((&index, copy), &attempt)| {
                let details = EventDetails { attempt: Some(attempt), ..EventDetails::default() };
                let provider = Some(copy.provider_message_id.clone());
                (index, happening(&self.core, EventType::Sent, details, provider, None))
            })
            .collect();
        let recorded = self.write_sent(&current, sent, &mut outcomes).await?;
        let mut ready = Vec::with_capacity(going.len());
        for (((index, copy), attempt), written) in going.into_iter().zip(copies).zip(attempts).zip(recorded) {
            match written {
                true => ready.push((index, copy, attempt)),
                false => outcomes.push(Outcome::Skipped),
            }
        }
        // Every copy at once (at most 50): the attempt then takes one `send_timeout` at most,
        // as a single recipient's does, which is what the claim's lease is made of. The
        // transports' pools bound the connections to each destination.
        let at_once = ready.len().max(1);
        let sends = futures::stream::iter(ready)
            .map(|(index, copy, attempt)| {
                let current = &current;
                let return_path = return_path.as_ref();
                async move {
                    let email = {
                        let m = current.message.lock().await;
                        copy.addressed_to(&m, &m.recipients[index].email, return_path)
                    };
                    let result = match tokio::time::timeout(self.settings.send_timeout, self.mailer.send(&email)).await
                    {
                        Ok(result) => result,
                        Err(_) => Err(SendError::Unreachable {
                            reason: format!("no answer within {:?}", self.settings.send_timeout),
                        }),
                    };
                    self.record_recipient_outcome(current, index, attempt, &result).await
                }
            })
            .buffer_unordered(at_once);
        let finished: Vec<Result<Outcome>> = sends.collect().await;
        for outcome in finished {
            outcomes.push(outcome?);
        }
        Ok(Outcome::Several(outcomes))
    }

    /// Asks the site of each copy at `due` (its recipient's, [`Mailer::site`]) to admit it,
    /// as a single message's attempt is asked: returns the positions admitted, their tickets
    /// kept in `current`, and notes in `current.held` when the others' sites will take them.
    /// Without shaping, or for a recipient whose site the mailer does not name, the copy is
    /// admitted without a ticket.
    ///
    /// [`Mailer::site`]: crate::ports::Mailer::site
    async fn admit_copies(&self, current: &mut Current, due: Vec<usize>) -> Result<Vec<usize>> {
        let mut admitted = Vec::with_capacity(due.len());
        let mut failure = None;
        {
            let message = current.message.get_mut();
            let tickets = current.tickets.get_mut().unwrap_or_else(PoisonError::into_inner);
            for index in due {
                match self.admit(message, &message.recipients[index].email, current.lease).await {
                    Ok(Ok(ticket)) => {
                        if let Some(ticket) = ticket {
                            tickets.insert(index, ticket);
                        }
                        admitted.push(index);
                    }
                    Ok(Err(when)) => current.held.push((index, when)),
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
        }
        match failure {
            Some(e) => {
                self.cancel_tickets(current).await;
                Err(e)
            }
            None => Ok(admitted),
        }
    }

    /// Ends a claim that sends nothing (every due copy waits for its site, or none is left
    /// due): the message goes back to the queue at its earliest waiting recipient's due time
    /// (a held copy's site's turn, or another's retry), as a single message its site refuses
    /// does. Each held copy is `Waiting`, or `Skipped` if the message changed since the claim.
    async fn put_back(&self, current: &Current, mut outcomes: Vec<Outcome>) -> Result<Outcome> {
        let (workspace, id, due) = {
            let m = current.message.lock().await;
            (m.workspace_id, m.id, earliest_due(&m, &current.held))
        };
        let requeued = match due {
            Some(due) => self.core.store().requeue_message(workspace, id, current.lease, due).await?,
            None => false,
        };
        outcomes.extend(current.held.iter().map(|_| if requeued { Outcome::Waiting } else { Outcome::Skipped }));
        Ok(Outcome::Several(outcomes))
    }

    /// The `Sent` write of the admitted copies, which also carries the held copies' due
    /// times ([`Self::write_locked`]). The tickets of copies it did not record are given
    /// back; the held copies are `Waiting` if the write was made, else `Skipped` (the
    /// message is someone else's now).
    async fn write_sent(
        &self,
        current: &Current,
        sent: Vec<(usize, Happening)>,
        outcomes: &mut Vec<Outcome>,
    ) -> Result<Vec<bool>> {
        let indexes: Vec<usize> = sent.iter().map(|(index, _)| *index).collect();
        let written = self.write(current, sent, true).await;
        let recorded = |at: usize| written.as_ref().is_ok_and(|w| w.get(at).copied().unwrap_or(false));
        for (at, &index) in indexes.iter().enumerate() {
            if !recorded(at) {
                self.cancel(current.take_ticket(index)).await;
            }
        }
        let any = (0..indexes.len()).any(recorded);
        outcomes.extend(current.held.iter().map(|_| if any { Outcome::Waiting } else { Outcome::Skipped }));
        written
    }

    /// Gives back every ticket still held: the copies did not go.
    async fn cancel_tickets(&self, current: &Current) {
        let tickets: Vec<Ticket> =
            current.tickets.lock().unwrap_or_else(PoisonError::into_inner).drain().map(|(_, t)| t).collect();
        for ticket in tickets {
            self.cancel(Some(ticket)).await;
        }
    }

    /// The signed copies for the recipients at `indexes` (one shared by all, or one each when
    /// the HTML is tracked: tokens per recipient) and the return path their envelopes use.
    /// `Err` with the reason when the message cannot be sent (domain deleted, sandbox off
    /// the machine, build or signing failed).
    async fn prepare_copies(
        &self,
        message: &Message,
        indexes: &[usize],
    ) -> Result<std::result::Result<(Vec<SignedCopy>, Option<ReturnPath>), String>> {
        let Some(domain) = self.core.store().get_domain(message.workspace_id, message.domain_id).await? else {
            return Ok(Err("the sending domain was deleted".to_owned()));
        };
        if domain.is_sandbox() && !self.mailer.keeps_mail_local() {
            return Ok(Err(SANDBOX_NOT_DELIVERABLE.to_owned()));
        }
        let return_path = self.core.config().return_path_for(&domain);
        let tracking = self.core.config().tracking.clone();
        let per_recipient =
            tracking.is_some() && message.html.is_some() && (message.tracking.opens || message.tracking.clicks);
        let permit = std::sync::Arc::clone(&self.signing)
            .acquire_owned()
            .await
            .map_err(|e| Error::Internal(crate::Cause::context("the signing permits are closed", e)))?;
        let signers = std::sync::Arc::clone(&self.signers);
        let message = message.clone();
        let indexes = indexes.to_vec();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let signer = signers.get_or_create(&domain).map_err(|e| e.to_string())?;
            let sign = |recipient: Option<u8>| {
                sign_copy(&message, &domain, &signer, tracking.as_ref(), recipient).map_err(|e| e.to_string())
            };
            let copies = if per_recipient {
                // At most 50 recipients: every position fits a byte.
                indexes.iter().map(|&i| sign(u8::try_from(i).ok())).collect::<std::result::Result<_, _>>()?
            } else {
                let once = sign(None)?;
                vec![once; indexes.len()]
            };
            Ok((copies, return_path))
        })
        .await
        .map_err(|e| Error::Internal(crate::Cause::context("building the message did not finish", e)))
    }

    /// Records what the transport said about the copy to the recipient at `index`.
    async fn record_recipient_outcome(
        &self,
        current: &Current,
        index: usize,
        attempt: u32,
        result: &std::result::Result<SendReceipt, SendError>,
    ) -> Result<Outcome> {
        self.release(current.take_ticket(index), result).await;
        let judged = self.judge(attempt, result);
        if judged.hard_bounce {
            // Suppress first, as for a single recipient: this address alone.
            let (ws, id, address) = {
                let m = current.message.lock().await;
                (m.workspace_id, m.id, m.recipients[index].email.clone())
            };
            let (reason, source) = (SuppressionReason::HardBounce, SuppressionSource::Bounce);
            self.core.suppressions().add_automatically(ws, &address, reason, source, Some(id)).await?;
        }
        let super::Judged { event: outcome_event, outcome, .. } = judged;
        // The send happened: its outcome is recorded whatever became of the lease, with the
        // others that arrived meanwhile.
        current.pending.lock().map_err(|_| poisoned())?.push((index, outcome_event));
        let mut message = current.message.lock().await;
        let batch = std::mem::take(&mut *current.pending.lock().map_err(|_| poisoned())?);
        if batch.is_empty() {
            // Another writer took it with its own.
            return Ok(outcome);
        }
        let ours = batch.iter().position(|(i, _)| *i == index);
        let written = self.write_locked(&mut message, current, batch, false).await?;
        let recorded = ours.and_then(|at| written.get(at).copied()).unwrap_or(true);
        Ok(if recorded { outcome } else { Outcome::Skipped })
    }

    /// Records an event that ends this claim's work on one recipient without a send.
    async fn settle(
        &self,
        current: &Current,
        index: usize,
        event_type: EventType,
        details: EventDetails,
        outcome: Outcome,
        before_send: bool,
    ) -> Result<Outcome> {
        let event = happening(&self.core, event_type, details, None, None);
        let written = self.write(current, vec![(index, event)], before_send).await?;
        Ok(if written.first().copied().unwrap_or(false) { outcome } else { Outcome::Skipped })
    }

    /// [`Self::write_locked`] once the message is free.
    async fn write(&self, current: &Current, events: Vec<(usize, Happening)>, before_send: bool) -> Result<Vec<bool>> {
        let mut message = current.message.lock().await;
        self.write_locked(&mut message, current, events, before_send).await
    }

    /// Applies `events` (recipient position, what happened), in order, to the message as
    /// last written and stores them in one write, provided no other event came in between;
    /// on a conflict reads the message again and applies them again. `before_send` writes
    /// also need the claim's lease to be unchanged, and keep the message under it while
    /// recipients are still to go. Every write also sets the due times of the copies held for
    /// their site (the events then settle the message's own due time from its recipients'),
    /// so no write of its own is needed for them. Whether each event was recorded: not if its recipient's
    /// state no longer allows it, nor any if the lease was lost, the message is gone, or the
    /// conflicts did not end.
    async fn write_locked(
        &self,
        message: &mut Message,
        current: &Current,
        events: Vec<(usize, Happening)>,
        before_send: bool,
    ) -> Result<Vec<bool>> {
        let lease = before_send.then_some(current.lease);
        let none = vec![false; events.len()];
        for _ in 0..CONFLICT_RETRIES {
            let mut next = message.clone();
            hold(&mut next, &current.held);
            let mut recorded = Vec::with_capacity(events.len());
            let mut written = Vec::with_capacity(events.len());
            for (index, event) in &events {
                match apply_recipient_event(&next, *index, event.clone()) {
                    Ok((after, event)) => {
                        next = after;
                        recorded.push(event);
                        written.push(true);
                    }
                    Err(_) => written.push(false),
                }
            }
            if recorded.is_empty() {
                return Ok(written);
            }
            if before_send && next.recipients.iter().any(|r| !r.is_settled()) {
                next.next_attempt_at = Some(current.lease);
            }
            let read = message.clone();
            match self.core.store_message_events(&read, next, recorded, lease, Some(read.last_event_id)).await {
                Ok((stored, _)) => {
                    *message = stored;
                    return Ok(written);
                }
                Err(Error::Conflict(_)) => match self.core.store().get_message(read.workspace_id, read.id).await? {
                    Some(fresh) if !before_send || fresh.next_attempt_at == Some(current.lease) => *message = fresh,
                    _ => return Ok(none),
                },
                Err(Error::NotFound(_)) => return Ok(none),
                Err(e) => return Err(e),
            }
        }
        Ok(none)
    }
}

fn poisoned() -> Error {
    Error::Internal("the pending outcomes' lock was poisoned".into())
}

/// Marks each copy held for its site (recipient position, when) as waiting for it, due at
/// its turn, if the recipient still waits. A recipient found `Sent` keeps the claim's lease
/// instead: it is due again when the lease ends.
fn hold(message: &mut Message, held: &[(usize, DateTime<Utc>)]) {
    use MessageStatus as S;
    for &(index, due) in held {
        if let Some(r) = message.recipients.get_mut(index)
            && matches!(r.status, S::Queued | S::Scheduled | S::Deferred)
        {
            r.next_attempt_at = Some(due);
            r.waits_for_site = true;
        }
    }
}

/// When the first waiting recipient of `message` is due, with the copies in `held` due at
/// their site's turn; `None` if none waits.
fn earliest_due(message: &Message, held: &[(usize, DateTime<Utc>)]) -> Option<DateTime<Utc>> {
    use MessageStatus as S;
    let waiting =
        message.recipients.iter().enumerate().filter_map(|(index, r)| match held.iter().find(|(i, _)| *i == index) {
            Some((_, due)) => Some(*due),
            None if matches!(r.status, S::Queued | S::Scheduled | S::Deferred) => r.next_attempt_at,
            None => None,
        });
    waiting.min()
}

/// The recipients this claim attempts: those waiting whose time has come (`Queued`,
/// `Scheduled`, `Deferred`), and those found `Sent`, whose attempt a crash interrupted. If
/// none has, the message was claimed before its time, which a site's resume does
/// ([`SiteControl::resume`]): those waiting only for their site ask it again (no retry).
///
/// [`SiteControl::resume`]: crate::delivery::SiteControl::resume
fn due_recipients(message: &Message, now: DateTime<Utc>) -> Vec<usize> {
    use MessageStatus as S;
    let waiting = |r: &Recipient| matches!(r.status, S::Queued | S::Scheduled | S::Deferred);
    let by_time: Vec<usize> = message
        .recipients
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status == S::Sent || (waiting(r) && r.next_attempt_at.is_none_or(|at| at <= now)))
        .map(|(i, _)| i)
        .collect();
    if !by_time.is_empty() {
        return by_time;
    }
    message.recipients.iter().enumerate().filter(|(_, r)| waiting(r) && r.waits_for_site).map(|(i, _)| i).collect()
}
