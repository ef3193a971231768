//! `EventObserver`: how a front end learns, as they happen, of the things operators count
//! or read in logs (messages accepted and their timeline events, suppressions added, webhook
//! attempts and endpoints disabled) without core knowing how they are counted, exported or
//! logged. Any number listen at once ([`ObserverSet`], what a service holds): the server adds
//! a Prometheus registry and its operator log, an embedding application its own reactions,
//! tests a recording fake; by default nobody listens.
//!
//! This is the live, in-process view: what happened while the process was down is not told
//! again. A reaction that must not be missed reads the durable feed instead
//! (`Events::since`, reached as `core.events().since`), which this wakes up early.
//!
//! Called after the event is durable, from the use case that recorded it, so every front end
//! and every worker of the process is counted once. An observer must be cheap and must not
//! block: it runs on the request's or worker's task.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
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

/// Which observer of an [`ObserverSet`] it is, to take it out again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObserverId(u64);

/// The observers of one service, shared by all its clones: one added through any clone,
/// before or after the others were made, is told of what every clone records. Telling them
/// takes a snapshot of the list (two atomic operations, no lock held while they run), so an
/// observer may add or remove observers without deadlock.
#[derive(Default, Clone)]
pub struct ObserverSet {
    inner: Arc<ObserverList>,
}

/// The observers as one snapshot: replaced whole when one is added or removed.
type Snapshot = Arc<[(ObserverId, Arc<dyn EventObserver>)]>;

#[derive(Default)]
struct ObserverList {
    next_id: AtomicU64,
    // Copy on write: added and removed rarely, read on every event.
    list: RwLock<Snapshot>,
}

impl ObserverSet {
    /// Adds `observer`; it is told of everything recorded from now on, in the order
    /// observers were added.
    pub fn add(&self, observer: Arc<dyn EventObserver>) -> ObserverId {
        let id = ObserverId(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let mut list = self.inner.list.write().unwrap_or_else(PoisonError::into_inner);
        let mut grown: Vec<_> = list.iter().cloned().collect();
        grown.push((id, observer));
        *list = grown.into();
        id
    }

    /// Takes an observer out; `false` if it was not in the set.
    pub fn remove(&self, id: ObserverId) -> bool {
        let mut list = self.inner.list.write().unwrap_or_else(PoisonError::into_inner);
        let kept: Vec<_> = list.iter().filter(|(each, _)| *each != id).cloned().collect();
        let removed = kept.len() != list.len();
        *list = kept.into();
        removed
    }

    /// How many observers listen.
    pub fn len(&self) -> usize {
        self.snapshot().len()
    }

    /// Whether nobody listens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn snapshot(&self) -> Snapshot {
        // A panicking observer cannot leave the list half-written (it is replaced whole).
        Arc::clone(&self.inner.list.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn each(&self, tell: impl Fn(&dyn EventObserver)) {
        for (_, observer) in self.snapshot().iter() {
            tell(observer.as_ref());
        }
    }
}

impl std::fmt::Debug for ObserverSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObserverSet").field("observers", &self.len()).finish()
    }
}

impl EventObserver for ObserverSet {
    fn message_accepted(&self, message: &Message) {
        self.each(|o| o.message_accepted(message));
    }

    fn message_event(&self, message: &Message, event: &MessageEvent) {
        self.each(|o| o.message_event(message, event));
    }

    fn webhook_attempt(&self, result: WebhookAttemptResult, response_code: Option<u16>) {
        self.each(|o| o.webhook_attempt(result, response_code));
    }

    fn webhook_delivery(&self, delivery: &WebhookDelivery, result: WebhookAttemptResult) {
        self.each(|o| o.webhook_delivery(delivery, result));
    }

    fn webhook_endpoint_disabled(&self, endpoint: &WebhookEndpoint) {
        self.each(|o| o.webhook_endpoint_disabled(endpoint));
    }

    fn suppression_added(&self, suppression: &Suppression) {
        self.each(|o| o.suppression_added(suppression));
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
