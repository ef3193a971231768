//! What a write adds to the counters: pure functions of the message as read and the events
//! written, so that each store adds the same and a property test can compare them with a
//! count over the recorded timelines.

use crate::model::{BounceType, EventType, Message, MessageEvent};
use crate::state_machine::next_status;

use super::{ActivityCounts, ActivityDelta, HourStart};

impl ActivityDelta {
    /// What accepting `message` with its first event and the `Suppressed` events of its
    /// suppressed recipients (`NewMessage::recipient_events`) counts: every recipient as
    /// accepted, in the hour of its creation, and each of those events.
    pub fn of_new_message(message: &Message, recipient_events: &[MessageEvent]) -> Self {
        let mut delta = Self::of_events(message, recipient_events);
        let accepted = ActivityCounts { accepted: recipient_count(message), ..ActivityCounts::default() };
        delta.add(message.workspace_id, message.domain_id, HourStart::of(message.created_at), accepted);
        delta
    }

    /// What writing `events` (in order) to `read`, the message as its writer read it,
    /// counts, each in the hour it happened:
    /// - `Delivered`, `Complained`, `Suppressed`: one recipient each.
    /// - `Bounced`: one hard or soft bounce (a bounce without a type is hard: permanent is
    ///   what `Bounced` means unless the worker says retries ran out).
    /// - `Failed`: about one recipient, or about the whole message (on a message with a
    ///   list, `recipient` unset), then each recipient it fails: those not yet settled
    ///   (contract §10).
    /// - `Opened`, `Clicked`: only a recipient's first, which `read`'s tracking tally tells
    ///   ([`crate::tracking::TrackingTally::opened_by`]); an open or click is written only
    ///   if nothing was written since it was read (`EventWrite::expected_last_event_id`),
    ///   so `read`'s tally is the stored one.
    /// - Nothing else (`Queued`, `Scheduled`, `Sent`, `Deferred`, `Canceled`): those are
    ///   steps, not outcomes, and a send is counted once, when accepted.
    pub fn of_events(read: &Message, events: &[MessageEvent]) -> Self {
        let mut delta = Self::none();
        // Firsts already counted by this write: a write may carry several events.
        let (mut opened, mut clicked) = (0u64, 0u64);
        for event in events {
            let mut counts = ActivityCounts::default();
            match event.event_type {
                EventType::Delivered => {
                    counts.delivered = 1;
                    counts.delivered_open_tracked = u64::from(read.tracking.opens);
                    counts.delivered_click_tracked = u64::from(read.tracking.clicks);
                }
                EventType::Bounced => match event.details.bounce_type {
                    Some(BounceType::Soft) => counts.soft_bounced = 1,
                    Some(BounceType::Hard) | None => counts.hard_bounced = 1,
                },
                EventType::Complained => counts.complained = 1,
                EventType::Suppressed => counts.suppressed = 1,
                EventType::Failed => counts.failed = failed_recipients(read, event),
                EventType::Opened => {
                    if let Some(bit) = recipient_bit(read, event)
                        && opened & bit == 0
                        && !read.tracking_tally.opened_by(bit.trailing_zeros() as usize)
                    {
                        opened |= bit;
                        counts.opened = 1;
                    }
                }
                EventType::Clicked => {
                    if let Some(bit) = recipient_bit(read, event)
                        && clicked & bit == 0
                        && !read.tracking_tally.clicked_by(bit.trailing_zeros() as usize)
                    {
                        clicked |= bit;
                        counts.clicked = 1;
                    }
                }
                EventType::Queued
                | EventType::Scheduled
                | EventType::Sent
                | EventType::Deferred
                | EventType::Canceled => {}
            }
            delta.add(read.workspace_id, read.domain_id, HourStart::of(event.occurred_at), counts);
        }
        delta
    }
}

/// How many recipients a message has (without building the list a message without one
/// lacks: this runs on every send).
fn recipient_count(message: &Message) -> u64 {
    if message.has_recipient_list() { message.recipients.len() as u64 } else { 1 }
}

/// The bit of the recipient `event` is about: its position in `read`'s list, 0 on a message
/// without one; `None` if the list does not name it.
fn recipient_bit(read: &Message, event: &MessageEvent) -> Option<u64> {
    let position = match &event.recipient {
        Some(address) if read.has_recipient_list() => {
            let wanted = address.normalized();
            read.recipients.iter().position(|r| r.email.normalized() == wanted)?
        }
        _ => 0,
    };
    1u64.checked_shl(u32::try_from(position).ok()?)
}

/// The recipients a `Failed` event fails: one if it names one (or the message has no list),
/// else every recipient of `read` that can still fail.
fn failed_recipients(read: &Message, event: &MessageEvent) -> u64 {
    if event.recipient.is_some() || !read.has_recipient_list() {
        return 1;
    }
    read.recipients.iter().filter(|r| next_status(r.status, EventType::Failed).is_ok()).count() as u64
}
