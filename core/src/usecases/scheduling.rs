//! Scheduled sending: the `scheduledAt` rule, `POST /v1/messages/{id}/cancel` and
//! `PATCH /v1/messages/{id}`.
//!
//! Both change a message only before its first attempt (`Queued` or `Scheduled`), through
//! [`Messages::record_event`], so the change is a compare-and-set on the status: a
//! delivery worker that records `Sent` first wins (the client gets a 409), and one that comes
//! second finds the status (or, for a reschedule, its lease) changed and leaves the message
//! alone.

use chrono::{DateTime, Duration, Utc};

use crate::ids::{EventId, MessageId};
use crate::model::{EventDetails, EventType, Message, MessageStatus};
use crate::state_machine::Happening;
use crate::usecases::{Messages, Principal};
use crate::{Error, Result};

/// How far ahead a send may be scheduled.
pub const MAX_SCHEDULE_AHEAD: Duration = Duration::days(30);
/// How far in the past a `scheduledAt` may be and still mean "now": a client's clock a little
/// behind ours, or a request that took a while, must not turn "send at 12:00:00" into a 422.
pub const SCHEDULE_PAST_TOLERANCE: Duration = Duration::seconds(60);
/// How often a cancel or reschedule re-reads the message after losing a race before it gives
/// up with a `Conflict`.
const ATTEMPTS: usize = 3;

/// `PATCH /v1/messages/{id}` as the client sent it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageChange {
    /// `None`: the field was absent (a 422: there is nothing else to change).
    /// `Some(None)`: `"scheduledAt": null`, send now. `Some(Some(t))`: send at `t`.
    pub scheduled_at: Option<Option<String>>,
}

/// Parses a `scheduledAt` against `now`: `Ok(Some(t))` to send at `t`; `Ok(None)` to send at
/// once (a time not after now, up to [`SCHEDULE_PAST_TOLERANCE`] ago); `Err` with the message
/// for the field otherwise.
pub(crate) fn parse_send_time(text: &str, now: DateTime<Utc>) -> std::result::Result<Option<DateTime<Utc>>, String> {
    let at = DateTime::parse_from_rfc3339(text)
        .map_err(|_| "must be an RFC 3339 timestamp, e.g. 2026-01-31T09:00:00Z".to_owned())?
        .with_timezone(&Utc);
    if at <= now - SCHEDULE_PAST_TOLERANCE {
        return Err("must be in the future".to_owned());
    }
    if at > now + MAX_SCHEDULE_AHEAD {
        return Err(format!("must be at most {} days ahead", MAX_SCHEDULE_AHEAD.num_days()));
    }
    Ok((at > now).then_some(at))
}

impl Messages<'_> {
    /// `POST /v1/messages/{id}/cancel`: a `Queued` or `Scheduled` message becomes `Canceled`
    /// (terminal) and is never sent. Anything else is a `Conflict`: an attempt has started
    /// (or it ended otherwise). A `send` key may cancel only its own messages.
    pub async fn cancel(&self, who: &Principal, id: MessageId) -> Result<Message> {
        self.change_before_first_attempt(who, id, |_| Ok((EventType::Canceled, None))).await
    }

    /// `PATCH /v1/messages/{id}`: moves a `Scheduled` message to another time, gives a
    /// `Queued` one a time (it becomes `Scheduled`), or with `scheduledAt: null` sends a
    /// `Scheduled` one now (it becomes `Queued`). The same limits as a send apply; a time not
    /// after now means now. Records a `Scheduled` (or `Queued`) event. Anything but `Queued`
    /// or `Scheduled` is a `Conflict`.
    pub async fn reschedule(&self, who: &Principal, id: MessageId, change: MessageChange) -> Result<Message> {
        // Another workspace's (or key's) message is a 404 whatever the body says, as on every
        // other route: the body is judged only for a message the caller may see.
        self.get(who, id).await?;
        let Some(requested) = change.scheduled_at else {
            return Err(Error::field("scheduledAt", "is required (a time, or null to send now)"));
        };
        let at = match requested.as_deref().map(|text| parse_send_time(text, self.core.clock.now())) {
            None => None,
            Some(Ok(at)) => at,
            Some(Err(message)) => return Err(Error::field("scheduledAt", message)),
        };
        self.change_before_first_attempt(who, id, |m| match (at, m.status) {
            (Some(at), _) => Ok((EventType::Scheduled, Some(at))),
            (None, MessageStatus::Scheduled) => Ok((EventType::Queued, None)),
            // Already queued: sending now is what it does; nothing to record.
            (None, _) => Err(None),
        })
        .await
    }

    /// Reads the message (as [`Self::get`] does, so a `send` key sees only its own), checks
    /// that no attempt has started, and records the event `decide` picks, with the send time
    /// it gives. `decide` returning `Err(None)` means "nothing to do": the message is
    /// returned as it is. Retries after a lost race, deciding again on the fresh message.
    async fn change_before_first_attempt(
        &self,
        who: &Principal,
        id: MessageId,
        decide: impl Fn(&Message) -> std::result::Result<(EventType, Option<DateTime<Utc>>), Option<Error>>,
    ) -> Result<Message> {
        let mut last_conflict = None;
        for _ in 0..ATTEMPTS {
            let message = self.get(who, id).await?;
            if !message.status.is_cancelable() {
                return Err(Error::Conflict(format!(
                    "message {} is {}: only Queued or Scheduled messages can be canceled or rescheduled",
                    message.id,
                    message.status.as_str()
                )));
            }
            let (event_type, at) = match decide(&message) {
                Ok(decided) => decided,
                Err(None) => return Ok(message),
                Err(Some(e)) => return Err(e),
            };
            let now = self.core.clock.now();
            let happening = Happening {
                event_id: EventId::new_at(now, &*self.core.random),
                event_type,
                at: now,
                details: EventDetails { scheduled_at: at, ..EventDetails::default() },
                provider_message_id: None,
                // `Scheduled`: the new send time; `Queued`: due now.
                next_attempt_at: Some(at.unwrap_or(now)),
            };
            match self.record_event(&message, happening).await {
                Ok((next, _)) => return Ok(next),
                Err(Error::Conflict(text)) => last_conflict = Some(text),
                Err(Error::NotFound(_)) => return Err(Error::NotFound("message")),
                Err(e) => return Err(e),
            }
        }
        Err(Error::Conflict(last_conflict.unwrap_or_else(|| "the message changed meanwhile; retry".to_owned())))
    }
}
