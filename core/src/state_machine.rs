//! The message state machine (docs/api.md#statuses-and-transitions), as a pure function.
//!
//! `next_status` decides whether an event may happen to a message in a given status and what
//! the status becomes; `apply_event` also updates the message and produces the one timeline
//! event that records the transition. The table:
//!
//! | from | event | to |
//! |---|---|---|
//! | (new) | Queued | Queued |
//! | (new), Queued, Scheduled | Scheduled | Scheduled (a send time set or moved) |
//! | Scheduled | Queued | Queued (the send time dropped: send now) |
//! | Queued, Scheduled | Canceled | Canceled |
//! | Queued, Scheduled, Deferred, Sent (after a crash) | Sent | Sent |
//! | Sent | Delivered | Delivered |
//! | Sent | Deferred | Deferred |
//! | Delivered | Deferred | Delivered (informational: a relay's delay report) |
//! | Sent, Deferred, Delivered | Bounced | Bounced |
//! | Delivered | Complained | Complained |
//! | Queued, Scheduled, Deferred | Suppressed | Suppressed |
//! | any non-terminal but Delivered | Failed | Failed |
//! | Sent, Deferred, Delivered, Bounced, Complained | Opened, Clicked | unchanged |
//!
//! Opens and clicks need the message to have been handed off at least once; they are
//! recorded even on terminal messages (a complaint does not stop a reader from clicking),
//! but never change the status.
//!
//! `Deferred` on a `Delivered` message records a delay report (RFC 3464 `Action: delayed`)
//! from a relay that accepted the message and is still trying the next hop: worth showing on
//! the timeline, but the message is not back in our queue, so it stays `Delivered` (and is
//! not due). A later failure report moves it to `Bounced`.
//!
//! `Scheduled` and `Canceled` are the client's (scheduling, `POST /v1/messages/{id}/cancel`,
//! `PATCH /v1/messages/{id}`): they apply only before the first attempt. A claim does not
//! change the status, so a claimed but unsent message may still be canceled or rescheduled;
//! the worker's `Sent` then fails its compare-and-set (status, or the lease it expects in
//! `next_attempt_at`) and it leaves the message alone.

use chrono::{DateTime, Utc};

use crate::email::EmailAddress;
use crate::ids::EventId;
use crate::model::{BounceType, EventDetails, EventType, Message, MessageEvent, MessageStatus, Recipient};

/// An event that the message's current status does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("event {event:?} is not possible for a message in status {from:?}")]
pub struct InvalidTransition {
    /// The status the message was in.
    pub from: MessageStatus,
    /// The refused event.
    pub event: EventType,
}

/// The status after `event` happens to a message in `from`, or why it cannot happen.
pub fn next_status(from: MessageStatus, event: EventType) -> Result<MessageStatus, InvalidTransition> {
    use EventType as E;
    use MessageStatus as S;
    let to = match (from, event) {
        // Sent→Sent: the worker that made the last attempt crashed before recording its
        // outcome; the lease expired and a new attempt starts.
        (S::Queued | S::Scheduled | S::Deferred | S::Sent, E::Sent) => S::Sent,
        (S::Sent, E::Delivered) => S::Delivered,
        (S::Sent, E::Deferred) => S::Deferred,
        (S::Delivered, E::Deferred) => S::Delivered,
        (S::Sent | S::Deferred | S::Delivered, E::Bounced) => S::Bounced,
        (S::Delivered, E::Complained) => S::Complained,
        (S::Queued | S::Scheduled | S::Deferred, E::Suppressed) => S::Suppressed,
        (S::Queued | S::Scheduled, E::Scheduled) => S::Scheduled,
        (S::Scheduled, E::Queued) => S::Queued,
        (S::Queued | S::Scheduled, E::Canceled) => S::Canceled,
        // "Cannot be sent at all" stops applying once the receiver has accepted it.
        // `PartiallyDelivered` is only ever a message's aggregate, never a recipient's: no
        // event starts from it.
        (s, E::Failed) if !s.is_terminal() && !matches!(s, S::Delivered | S::PartiallyDelivered) => S::Failed,
        (s @ (S::Sent | S::Deferred | S::Delivered | S::Bounced | S::Complained), E::Opened | E::Clicked) => s,
        _ => return Err(InvalidTransition { from, event }),
    };
    Ok(to)
}

/// The facts of an event that happened, before it is applied to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Happening {
    /// Id for the timeline entry.
    pub event_id: EventId,
    /// What happened.
    pub event_type: EventType,
    /// When.
    pub at: DateTime<Utc>,
    /// Details for the timeline.
    pub details: EventDetails,
    /// The Message-ID used on the wire (set by `Sent`; other events keep the message's).
    pub provider_message_id: Option<String>,
    /// When the delivery worker should look at the message next (`Deferred`: the retry
    /// time; `Scheduled`: the send time, which also becomes the message's `scheduled_at`;
    /// `Queued`: now). Ignored for statuses that have nothing due.
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// Applies `happening` to `message`: returns the updated message and the one event that
/// records it, or refuses without changing anything.
///
/// On a message with a recipient list ([`Message::has_recipient_list`]) this is an event
/// about the whole message (`Queued`, `Scheduled`, `Canceled`, `Failed`): it moves every
/// recipient that can take it and is refused if none can. Events about one recipient go
/// through [`apply_recipient_event`].
pub fn apply_event(message: &Message, happening: Happening) -> Result<(Message, MessageEvent), InvalidTransition> {
    if !message.has_recipient_list() {
        return apply_to_single(message, happening);
    }
    let mut next = message.clone();
    let mut moved = false;
    for recipient in &mut next.recipients {
        if let Ok(status) = next_status(recipient.status, happening.event_type) {
            move_recipient(recipient, status, &happening);
            moved = true;
        }
    }
    if !moved {
        return Err(InvalidTransition { from: message.status, event: happening.event_type });
    }
    apply_message_fields(&mut next, message, &happening);
    next.settle_from_recipients();
    Ok(finish(message, next, happening, None))
}

/// Applies `happening` to the recipient at `index` of `message` (its one recipient, 0, on a
/// message without a list): that recipient moves as the table says a message does, and the
/// message's status follows ([`crate::model::recipients::aggregate_status`]). The event
/// names the recipient on a message with a list. Refused if the recipient's status does not
/// allow the event, or there is no such recipient.
pub fn apply_recipient_event(
    message: &Message,
    index: usize,
    happening: Happening,
) -> Result<(Message, MessageEvent), InvalidTransition> {
    if !message.has_recipient_list() {
        if index != 0 {
            return Err(InvalidTransition { from: message.status, event: happening.event_type });
        }
        return apply_to_single(message, happening);
    }
    let Some(recipient) = message.recipients.get(index) else {
        return Err(InvalidTransition { from: message.status, event: happening.event_type });
    };
    let status = next_status(recipient.status, happening.event_type)?;
    let mut next = message.clone();
    move_recipient(&mut next.recipients[index], status, &happening);
    apply_message_fields(&mut next, message, &happening);
    next.settle_from_recipients();
    let about = Some(recipient.email.clone());
    Ok(finish(message, next, happening, about))
}

/// The state machine on a message that is its one recipient: its own fields move.
fn apply_to_single(message: &Message, happening: Happening) -> Result<(Message, MessageEvent), InvalidTransition> {
    let status = next_status(message.status, happening.event_type)?;
    let mut next = message.clone();
    next.status = status;
    next.updated_at = happening.at.max(message.updated_at);
    match happening.event_type {
        EventType::Sent => next.attempts = message.attempts.saturating_add(1),
        EventType::Bounced => next.bounce_type = Some(happening.details.bounce_type.unwrap_or(BounceType::Hard)),
        _ => {}
    }
    apply_message_fields(&mut next, message, &happening);
    next.next_attempt_at = due_after(happening.event_type, status, message.next_attempt_at, happening.next_attempt_at);
    Ok(finish(message, next, happening, None))
}

/// The recipient after an event moved it to `status`.
fn move_recipient(recipient: &mut Recipient, status: MessageStatus, happening: &Happening) {
    let before = recipient.next_attempt_at;
    recipient.updated_at = happening.at.max(recipient.updated_at);
    match happening.event_type {
        EventType::Sent => recipient.attempts = recipient.attempts.saturating_add(1),
        EventType::Bounced => {
            recipient.bounce_type = Some(happening.details.bounce_type.unwrap_or(BounceType::Hard));
        }
        _ => {}
    }
    recipient.status = status;
    recipient.next_attempt_at = due_after(happening.event_type, status, before, happening.next_attempt_at);
    recipient.waits_for_site = false;
}

/// What the event sets on the message as a whole: the wire `Message-ID` (`Sent`) and the
/// send time (`Scheduled` sets it, `Queued` from `Scheduled` drops it).
fn apply_message_fields(next: &mut Message, message: &Message, happening: &Happening) {
    next.updated_at = happening.at.max(message.updated_at);
    match happening.event_type {
        EventType::Sent if happening.provider_message_id.is_some() => {
            next.provider_message_id.clone_from(&happening.provider_message_id);
        }
        EventType::Scheduled => next.scheduled_at = happening.next_attempt_at.or(message.scheduled_at),
        // Only Scheduled→Queued gets here: the send time is dropped.
        EventType::Queued => next.scheduled_at = None,
        _ => {}
    }
}

/// When something in `status` is next due after `event`: only what waits for an attempt is
/// due; a `Sent` one keeps its time (the lease: the worker that claimed it records the
/// outcome); opens and clicks change nothing; everything else leaves the queue.
fn due_after(
    event: EventType,
    status: MessageStatus,
    before: Option<DateTime<Utc>>,
    given: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    match (event, status) {
        (EventType::Opened | EventType::Clicked, _) => before,
        (_, MessageStatus::Queued | MessageStatus::Scheduled | MessageStatus::Deferred) => given.or(before),
        (EventType::Sent, MessageStatus::Sent) => before,
        _ => None,
    }
}

/// The event that records `happening` on `message`, now `next`, with the timeline's order.
fn finish(
    message: &Message,
    mut next: Message,
    happening: Happening,
    recipient: Option<EmailAddress>,
) -> (Message, MessageEvent) {
    // Ids are random within a millisecond; bump past the newest event so the timeline's id
    // order is the order of acceptance.
    let id = if happening.event_id > message.last_event_id {
        happening.event_id
    } else {
        EventId(message.last_event_id.0.increment().unwrap_or(happening.event_id.0))
    };
    next.last_event_id = id;
    let event = MessageEvent {
        id,
        message_id: message.id,
        event_type: happening.event_type,
        provider_message_id: next.provider_message_id.clone(),
        occurred_at: happening.at,
        details: happening.details,
        recipient,
    };
    (next, event)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod recipient_tests;
