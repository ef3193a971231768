//! The `EventObserver` hears of every event core records, once, after it is stored: the
//! send's `Queued` (not an idempotent replay's), each delivery event with the message as it
//! became, the acceptance-to-delivery latency, each webhook attempt's result and delivery,
//! an endpoint the worker disables, and each suppression newly added. Any number of
//! observers listen, through every clone of the service.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Duration as Span;
use tidings_core::delivery::{DeliverySettings, DeliveryWorker, WebhookSettings, WebhookWorker};
use tidings_core::model::{
    BounceType, DeliveryStatus, EventType, Message, MessageEvent, MessageStatus, Suppression, SuppressionReason,
    SuppressionSource, WebhookDelivery, WebhookEndpoint,
};
use tidings_core::ports::{
    EventObserver, Mailer, WebhookAttemptResult, WebhookRequest, WebhookResponse, WebhookSender, delivery_latency,
};
use tidings_core::usecases::{CreateWebhookRequest, SendRequest, Tidings};
use tidings_testing::delivery::Delivery;
use tidings_testing::mailer::rejected;

/// What the recorder keeps of one event.
type Seen = (EventType, MessageStatus, Option<BounceType>, Option<Duration>);

/// Keeps what it hears.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Seen>>,
    webhooks: Mutex<Vec<(WebhookAttemptResult, Option<u16>)>>,
    /// Each attempt's delivery as recorded: its status and attempts.
    deliveries: Mutex<Vec<(WebhookAttemptResult, DeliveryStatus, u32)>>,
    disabled: Mutex<Vec<(bool, Option<String>)>>,
    suppressed: Mutex<Vec<(SuppressionReason, SuppressionSource)>>,
    accepted: Mutex<u32>,
}

impl Recorder {
    fn events(&self) -> Vec<Seen> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl EventObserver for Recorder {
    fn message_accepted(&self, _: &Message) {
        *self.accepted.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    fn message_event(&self, message: &Message, event: &MessageEvent) {
        let latency = delivery_latency(message, event);
        let row = (event.event_type, message.status, message.bounce_type, latency);
        self.events.lock().unwrap_or_else(PoisonError::into_inner).push(row);
    }

    fn webhook_attempt(&self, result: WebhookAttemptResult, response_code: Option<u16>) {
        self.webhooks.lock().unwrap_or_else(PoisonError::into_inner).push((result, response_code));
    }

    fn webhook_delivery(&self, delivery: &WebhookDelivery, result: WebhookAttemptResult) {
        let row = (result, delivery.status, delivery.attempts);
        self.deliveries.lock().unwrap_or_else(PoisonError::into_inner).push(row);
    }

    fn webhook_endpoint_disabled(&self, endpoint: &WebhookEndpoint) {
        let row = (endpoint.enabled, endpoint.disabled_reason.clone());
        self.disabled.lock().unwrap_or_else(PoisonError::into_inner).push(row);
    }

    fn suppression_added(&self, suppression: &Suppression) {
        let row = (suppression.reason, suppression.source);
        self.suppressed.lock().unwrap_or_else(PoisonError::into_inner).push(row);
    }
}

/// The fixture's service, observed, with a delivery worker over the observed service.
fn observed(d: &Delivery) -> (Tidings, DeliveryWorker, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let core = d.t.core.clone().with_observer(Arc::clone(&recorder) as Arc<dyn EventObserver>);
    let worker =
        DeliveryWorker::new(core.clone(), Arc::clone(&d.mailer) as Arc<dyn Mailer>, DeliverySettings::default());
    (core, worker, recorder)
}

fn send_request() -> SendRequest {
    SendRequest {
        to: Some("user@example.net".into()),
        from: Some("billing@acme.example.com".into()),
        subject: Some("Hi".into()),
        text: Some("Hello".into()),
        ..SendRequest::default()
    }
}

#[tokio::test]
async fn an_accepted_then_delivered_message_is_observed_at_each_step_with_its_latency() {
    let d = Delivery::new("1m", vec![]).await;
    let (core, worker, recorder) = observed(&d);

    core.messages().send(&d.who, send_request(), Some("key-1")).await.unwrap();
    core.messages().send(&d.who, send_request(), Some("key-1")).await.unwrap();
    assert_eq!(recorder.events(), [(EventType::Queued, MessageStatus::Queued, None, None)], "a replay is no event");
    assert_eq!(*recorder.accepted.lock().unwrap(), 1, "nor an acceptance");

    d.t.clock.advance(Span::seconds(3));
    worker.deliver_due(d.t.now()).await.unwrap();

    assert_eq!(
        recorder.events()[1..],
        [
            (EventType::Sent, MessageStatus::Sent, None, None),
            (EventType::Delivered, MessageStatus::Delivered, None, Some(Duration::from_secs(3))),
        ]
    );
}

#[tokio::test]
async fn deferrals_and_bounces_are_observed_with_the_bounce_type() {
    let d = Delivery::new("1m", vec![rejected(451, "4.7.1 try later"), rejected(550, "5.1.1 no such user")]).await;
    let (core, worker, recorder) = observed(&d);
    core.messages().send(&d.who, send_request(), None).await.unwrap();

    worker.deliver_due(d.t.now()).await.unwrap();
    d.t.clock.advance(Span::minutes(1));
    worker.deliver_due(d.t.now()).await.unwrap();

    let types: Vec<_> = recorder.events().iter().map(|(t, _, b, _)| (*t, *b)).collect();
    assert_eq!(
        types,
        [
            (EventType::Queued, None),
            (EventType::Sent, None),
            (EventType::Deferred, None),
            (EventType::Sent, None),
            (EventType::Bounced, Some(BounceType::Hard)),
        ]
    );
}

#[tokio::test]
async fn observers_hear_every_clone_made_before_or_after_they_were_added() {
    let d = Delivery::new("1m", vec![]).await;
    let earlier_clone = d.t.core.clone();
    let (_core, _worker, first) = observed(&d);
    let second = Arc::new(Recorder::default());
    let id = earlier_clone.add_observer(Arc::clone(&second) as Arc<dyn EventObserver>);

    d.send("user@example.net").await; // through the fixture's own service
    d.step().await;

    let expected = [EventType::Queued, EventType::Sent, EventType::Delivered];
    let types = |r: &Recorder| r.events().iter().map(|(t, ..)| *t).collect::<Vec<_>>();
    assert_eq!(types(&first), expected, "added through a later clone, hears the original");
    assert_eq!(types(&second), expected, "added through an earlier clone, hears it too");

    assert!(d.t.core.remove_observer(id), "taken out through any clone");
    assert!(!d.t.core.remove_observer(id), "once");
    d.send("other@example.net").await;
    assert_eq!(types(&second).len(), 3, "a removed observer hears nothing more");
    assert_eq!(types(&first).len(), 4, "the others still do");
}

/// Answers 503, then 200.
struct Flaky(Mutex<u32>);

#[async_trait]
impl WebhookSender for Flaky {
    async fn post(&self, _: &WebhookRequest) -> WebhookResponse {
        let mut calls = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *calls += 1;
        let status = if *calls == 1 { 503 } else { 200 };
        WebhookResponse::Answered { status, retry_after: None, body_prefix: String::new() }
    }
}

#[tokio::test]
async fn webhook_attempts_are_observed_with_their_result_and_status() {
    let d = Delivery::new("1m", vec![]).await;
    let (core, _worker, recorder) = observed(&d);
    let req = CreateWebhookRequest {
        url: Some("https://hooks.example.com/tidings".into()),
        event_types: Some(vec!["Queued".into()]),
        enabled: None,
        format: None,
    };
    core.webhooks().create(&d.who, req).await.unwrap();
    let hooks = WebhookWorker::new(core.clone(), Arc::new(Flaky(Mutex::new(0))), WebhookSettings::default());
    core.messages().send(&d.who, send_request(), None).await.unwrap();

    hooks.deliver_due(d.t.now()).await.unwrap();
    d.t.clock.advance(Span::hours(1));
    hooks.deliver_due(d.t.now()).await.unwrap();

    let seen = recorder.webhooks.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(seen, [(WebhookAttemptResult::Retrying, Some(503)), (WebhookAttemptResult::Delivered, Some(200))]);
    let deliveries = recorder.deliveries.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(
        deliveries,
        [
            (WebhookAttemptResult::Retrying, DeliveryStatus::Retrying, 1),
            (WebhookAttemptResult::Delivered, DeliveryStatus::Delivered, 2)
        ],
        "each attempt's delivery as recorded after it"
    );
    assert!(recorder.disabled.lock().unwrap().is_empty(), "no endpoint was disabled");
}

/// Answers 410 Gone.
struct Gone;

#[async_trait]
impl WebhookSender for Gone {
    async fn post(&self, _: &WebhookRequest) -> WebhookResponse {
        WebhookResponse::Answered { status: 410, retry_after: None, body_prefix: String::new() }
    }
}

#[tokio::test]
async fn an_endpoint_the_worker_disables_is_observed_once_with_its_reason() {
    let d = Delivery::new("1m", vec![]).await;
    let (core, _worker, recorder) = observed(&d);
    let req = CreateWebhookRequest {
        url: Some("https://hooks.example.com/tidings".into()),
        event_types: Some(vec!["Queued".into()]),
        enabled: None,
        format: None,
    };
    core.webhooks().create(&d.who, req).await.unwrap();
    let hooks = WebhookWorker::new(core.clone(), Arc::new(Gone), WebhookSettings::default());
    core.messages().send(&d.who, send_request(), None).await.unwrap();

    hooks.deliver_due(d.t.now()).await.unwrap();
    d.t.clock.advance(Span::hours(1));
    hooks.deliver_due(d.t.now()).await.unwrap();

    let disabled = recorder.disabled.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(disabled.len(), 1, "once, by the attempt that disabled it: {disabled:?}");
    assert!(!disabled[0].0 && disabled[0].1.as_deref().is_some_and(|r| r.contains("410")), "{disabled:?}");
}

#[tokio::test]
async fn a_suppression_is_observed_when_added_and_not_when_it_already_was() {
    let d = Delivery::new("1m", vec![rejected(550, "5.1.1 no such user")]).await;
    let (core, worker, recorder) = observed(&d);
    core.messages().send(&d.who, send_request(), None).await.unwrap();
    worker.deliver_due(d.t.now()).await.unwrap();
    let manual = tidings_core::usecases::AddSuppressionRequest { email: Some("user@example.net".into()) };
    core.suppressions().add(&d.who, manual).await.unwrap();
    let other = tidings_core::usecases::AddSuppressionRequest { email: Some("gone@example.net".into()) };
    core.suppressions().add(&d.who, other).await.unwrap();

    let seen = recorder.suppressed.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(
        seen,
        [
            (SuppressionReason::HardBounce, SuppressionSource::Bounce),
            (SuppressionReason::Manual, SuppressionSource::Api)
        ],
        "the bounce's, then the new manual one; the bounced address again is no new entry"
    );
}

#[tokio::test]
async fn every_queued_item_of_a_permissive_batch_is_observed_once_and_a_replay_is_not() {
    use tidings_core::usecases::BatchValidation;
    let d = Delivery::new("1m", vec![]).await;
    let (core, _worker, recorder) = observed(&d);
    let bad = SendRequest { to: Some("not an address".into()), ..send_request() };
    let other = SendRequest { to: Some("other@example.net".into()), ..send_request() };
    let batch = vec![send_request(), bad, other];

    core.messages().send_batch(&d.who, batch.clone(), BatchValidation::Permissive, Some("batch-1")).await.unwrap();
    core.messages().send_batch(&d.who, batch, BatchValidation::Permissive, Some("batch-1")).await.unwrap();

    assert_eq!(*recorder.accepted.lock().unwrap(), 2, "the two queued items, and not again for the replay");
    let queued: Vec<_> = recorder.events().into_iter().map(|(t, s, ..)| (t, s)).collect();
    assert_eq!(queued, [(EventType::Queued, MessageStatus::Queued); 2]);
}
