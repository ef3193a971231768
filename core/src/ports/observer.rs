//! `EventObserver`: how a front end learns, as they happen, of the things operators count
//! or read in logs (messages accepted and their timeline events, suppressions added, webhook
//! attempts and endpoints disabled) without core knowing how they are counted, exported or
//! logged. The server gives core a Prometheus registry and its operator log together
//! ([`Observers`]); tests give a recording fake; by default nobody listens ([`NoObserver`]).
//!
//! Called after the event is durable, from the use case that recorded it, so every front end
//! and every worker of the process is counted once. An observer must be cheap and must not
//! block: it runs on the request's or worker's task.

use std::sync::Arc;
use std::time::Duration;

use crate::model::{EventType, Message, MessageEvent, Suppression, WebhookDelivery, WebhookEndpoint};

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

    /// The same attempt with the delivery as recorded after it (status, attempts, response
    /// code, last error, next attempt): who failed, for the operator's log.
    fn webhook_delivery(&self, delivery: &WebhookDelivery, result: WebhookAttemptResult) {
        let _ = (delivery, result);
    }

    /// An endpoint was disabled by the worker (it answered 410, or failed for too long), as
    /// stored, its `disabled_reason` set. Not called when its owner disables it.
    fn webhook_endpoint_disabled(&self, endpoint: &WebhookEndpoint) {
        let _ = endpoint;
    }

    /// An address was newly suppressed (by the API, a hard bounce or a complaint). Not called
    /// when it already was.
    fn suppression_added(&self, suppression: &Suppression) {
        let _ = suppression;
    }
}

/// Listens to nothing: the default.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl EventObserver for NoObserver {}

/// Several observers as one, each told of everything in order (metrics and logs).
#[derive(Default, Clone)]
pub struct Observers(pub Vec<Arc<dyn EventObserver>>);

impl EventObserver for Observers {
    fn message_accepted(&self, message: &Message) {
        self.0.iter().for_each(|o| o.message_accepted(message));
    }

    fn message_event(&self, message: &Message, event: &MessageEvent) {
        self.0.iter().for_each(|o| o.message_event(message, event));
    }

    fn webhook_attempt(&self, result: WebhookAttemptResult, response_code: Option<u16>) {
        self.0.iter().for_each(|o| o.webhook_attempt(result, response_code));
    }

    fn webhook_delivery(&self, delivery: &WebhookDelivery, result: WebhookAttemptResult) {
        self.0.iter().for_each(|o| o.webhook_delivery(delivery, result));
    }

    fn webhook_endpoint_disabled(&self, endpoint: &WebhookEndpoint) {
        self.0.iter().for_each(|o| o.webhook_endpoint_disabled(endpoint));
    }

    fn suppression_added(&self, suppression: &Suppression) {
        self.0.iter().for_each(|o| o.suppression_added(suppression));
    }
}

/// Time from acceptance to delivery when `event` is the `Delivered` event of `message`: the
/// delivery latency operators watch. `None` for any other event, and for a clock that went
/// backwards.
pub fn delivery_latency(message: &Message, event: &MessageEvent) -> Option<Duration> {
    if event.event_type != EventType::Delivered {
        return None;
    }
    (event.occurred_at - message.created_at).to_std().ok()
}
