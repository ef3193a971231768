//! `EventObserver`: how a front end learns, as they happen, of the things operators count
//! (messages accepted and their timeline events, webhook attempts) without core knowing how
//! they are counted or exported. The server gives core a Prometheus registry; tests give a
//! recording fake; by default nobody listens ([`NoObserver`]).
//!
//! Called after the event is durable, from the use case that recorded it, so every front end
//! and every worker of the process is counted once. An observer must be cheap and must not
//! block: it runs on the request's or worker's task.

use std::time::Duration;

use crate::model::{EventType, Message, MessageEvent};

/// What one webhook attempt came to, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookAttemptResult {
    /// The endpoint answered 2xx.
    Delivered,
    /// It failed this time and is scheduled again.
    Retrying,
    /// Given up (schedule used up, 410, endpoint disabled or deleted).
    Failed,
}

impl WebhookAttemptResult {
    /// Lower-case name, as exported.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Retrying => "retrying",
            Self::Failed => "failed",
        }
    }
}

/// Hears of events as they are recorded. Every method has an empty default, so an observer
/// takes only what it wants and new methods break nobody.
pub trait EventObserver: Send + Sync {
    /// A send was accepted (stored durably); its first event follows through
    /// [`Self::message_event`]. Not called for idempotent replays.
    fn message_accepted(&self, message: &Message) {
        let _ = message;
    }

    /// `event` was recorded durably for `message` (as it is after the event). A send's
    /// `Queued` event is reported too: that is "accepted". Idempotent replays are not events.
    fn message_event(&self, message: &Message, event: &MessageEvent) {
        let _ = (message, event);
    }

    /// A webhook delivery attempt ended, with the endpoint's HTTP status if it answered.
    fn webhook_attempt(&self, result: WebhookAttemptResult, response_code: Option<u16>) {
        let _ = (result, response_code);
    }
}

/// Listens to nothing: the default.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl EventObserver for NoObserver {}

/// Time from acceptance to delivery when `event` is the `Delivered` event of `message`: the
/// delivery latency operators watch. `None` for any other event, and for a clock that went
/// backwards.
pub fn delivery_latency(message: &Message, event: &MessageEvent) -> Option<Duration> {
    if event.event_type != EventType::Delivered {
        return None;
    }
    (event.occurred_at - message.created_at).to_std().ok()
}
