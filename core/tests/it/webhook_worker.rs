//! The webhook worker over the in-memory store and a scripted sender: message events are
//! POSTed with their exact payload and verifiable signatures, retried on the schedule and
//! after `Retry-After`, given up when the schedule ends; 410 disables the endpoint; rotation
//! signs with both secrets; disabled and deleted endpoints get nothing.

use std::sync::Arc;
use std::time::Duration;

use aws_lc_rs::hmac;
use base64::Engine as _;
use chrono::Duration as Span;
use tidings_core::delivery::webhooks::GONE_REASON;
use tidings_core::delivery::{RetrySchedule, WebhookReport, WebhookSettings, WebhookWorker};
use tidings_core::model::{DeliveryStatus, WebhookDelivery, WebhookEndpoint};
use tidings_core::ports::{EndpointQuota, PageRequest, WebhookRequest, WebhookResponse, WebhookSender, WebhookStore};
use tidings_core::usecases::{CreateWebhookRequest, UpdateWebhookRequest};
use tidings_testing::FakeWebhooks;
use tidings_testing::delivery::Delivery;

fn answered(status: u16, retry_after_secs: Option<u64>, body: &str) -> WebhookResponse {
    WebhookResponse::Answered {
        status,
        retry_after: retry_after_secs.map(Duration::from_secs),
        body_prefix: body.to_owned(),
    }
}

/// A workspace that can send, one endpoint subscribed to `Queued`, and the worker.
struct Hooks {
    d: Delivery,
    endpoint: WebhookEndpoint,
    sender: Arc<FakeWebhooks>,
    worker: WebhookWorker,
}

impl Hooks {
    async fn new(schedule: Option<&str>, script: Vec<WebhookResponse>) -> Self {
        let d = Delivery::new("1m", vec![]).await;
        let req = CreateWebhookRequest {
            url: Some("https://hooks.example.com/tidings".into()),
            event_types: Some(vec!["Queued".into()]),
            enabled: None,
            format: None,
        };
        let endpoint = d.t.core.webhooks().create(&d.who, req).await.unwrap();
        let sender = Arc::new(FakeWebhooks::answering(script));
        let mut settings = WebhookSettings::default();
        if let Some(schedule) = schedule {
            settings.schedule = RetrySchedule::parse(schedule).unwrap();
        }
        let worker = WebhookWorker::new(d.t.core.clone(), Arc::clone(&sender) as Arc<dyn WebhookSender>, settings);
        Self { d, endpoint, sender, worker }
    }

    /// Sends a message, whose `Queued` event queues one delivery, and returns the delivery.
    async fn queue(&self) -> WebhookDelivery {
        self.d.send("user@example.net").await;
        let log = self.log().await;
        assert_eq!(log.len(), 1, "one delivery per event");
        log.into_iter().next().unwrap()
    }

    async fn log(&self) -> Vec<WebhookDelivery> {
        let page = PageRequest::first(200);
        self.d.t.store.list_webhook_deliveries(self.d.who.workspace_id, self.endpoint.id, page).await.unwrap().items
    }

    async fn delivery(&self, id: tidings_core::ids::DeliveryId) -> WebhookDelivery {
        self.d.t.store.get_webhook_delivery(self.d.who.workspace_id, id).await.unwrap().unwrap()
    }

    async fn stored_endpoint(&self) -> WebhookEndpoint {
        self.d.t.store.get_webhook(self.d.who.workspace_id, self.endpoint.id).await.unwrap().unwrap()
    }

    async fn step(&self) -> WebhookReport {
        let report = self.worker.deliver_due(self.d.t.now()).await.unwrap();
        assert!(report.errors.is_empty(), "{report:?}");
        report
    }
}

/// Checks one `v1,<base64>` signature the Standard Webhooks way, independently of the
/// signing module: HMAC-SHA256 keyed by the base64-decoded `whsec_` text.
fn verifies(signature: &str, secret: &str, request: &WebhookRequest) -> bool {
    let key = base64::engine::general_purpose::STANDARD.decode(secret.strip_prefix("whsec_").unwrap()).unwrap();
    let Some(tag) = signature.strip_prefix("v1,") else { return false };
    let Ok(tag) = base64::engine::general_purpose::STANDARD.decode(tag) else { return false };
    let signed = format!("{}.{}.{}", request.webhook_id, request.webhook_timestamp, request.body);
    hmac::verify(&hmac::Key::new(hmac::HMAC_SHA256, &key), signed.as_bytes(), &tag).is_ok()
}

fn header<'a>(headers: &'a [(&'static str, String)], name: &str) -> &'a str {
    headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("no {name}"))
}

#[tokio::test]
async fn a_message_event_is_posted_with_its_exact_payload_and_a_valid_signature() {
    let h = Hooks::new(None, vec![]).await;
    let queued = h.queue().await;

    let report = h.step().await;

    assert_eq!((report.claimed, report.delivered), (1, 1), "{report:?}");
    let requests = h.sender.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.url, h.endpoint.url);
    assert_eq!(request.body, queued.payload);
    assert_eq!(request.webhook_id, queued.id.to_string());
    assert_eq!(request.webhook_timestamp, h.d.t.now().timestamp());
    let headers = request.headers();
    assert_eq!(header(&headers, "content-type"), "application/json");
    assert_eq!(header(&headers, "webhook-id"), queued.id.to_string());
    assert_eq!(header(&headers, "webhook-timestamp"), h.d.t.now().timestamp().to_string());
    let signature = header(&headers, "webhook-signature");
    assert!(!signature.contains(' '), "one secret, one signature: {signature}");
    assert!(verifies(signature, h.endpoint.secret.expose(), request), "{signature}");

    let stored = h.delivery(queued.id).await;
    assert_eq!((stored.status, stored.attempts, stored.response_code), (DeliveryStatus::Delivered, 1, Some(200)));
    assert_eq!((stored.last_error, stored.next_attempt_at), (None, None));
    assert_eq!(h.step().await.claimed, 0, "nothing is due any more");
}

#[tokio::test]
async fn a_500_is_retried_after_the_first_delay_and_then_delivered() {
    let h = Hooks::new(None, vec![answered(500, None, "database on fire")]).await;
    let queued = h.queue().await;
    let first_try = h.d.t.now();

    assert_eq!(h.step().await.retrying, 1);

    let retrying = h.delivery(queued.id).await;
    assert_eq!((retrying.status, retrying.attempts), (DeliveryStatus::Retrying, 1));
    assert_eq!(retrying.response_code, Some(500));
    assert_eq!(retrying.last_error.as_deref(), Some("HTTP 500: database on fire"));
    assert_eq!(retrying.next_attempt_at, Some(first_try + Span::seconds(5)), "docs/api.md#webhook-retries: 5 s first");
    h.d.t.clock.advance(Span::seconds(4));
    assert_eq!(h.step().await.claimed, 0, "not due before the delay");

    h.d.t.clock.advance(Span::seconds(1));
    assert_eq!(h.step().await.delivered, 1);

    let delivered = h.delivery(queued.id).await;
    assert_eq!((delivered.status, delivered.attempts), (DeliveryStatus::Delivered, 2));
    assert_eq!((delivered.response_code, delivered.last_error, delivered.next_attempt_at), (Some(200), None, None));
    let ids: Vec<String> = h.sender.requests().into_iter().map(|r| r.webhook_id).collect();
    assert_eq!(ids, [queued.id.to_string(), queued.id.to_string()], "webhook-id is stable across retries");
}

#[tokio::test]
async fn retry_after_wins_when_later_than_the_schedule_and_is_capped_at_a_day() {
    let script = vec![answered(503, Some(120), ""), answered(429, Some(2), ""), answered(503, Some(7 * 86_400), "")];
    let h = Hooks::new(None, script).await;
    let queued = h.queue().await;

    let mut due = Vec::new();
    for _ in 0..3 {
        let now = h.d.t.now();
        assert_eq!(h.step().await.retrying, 1);
        let next = h.delivery(queued.id).await.next_attempt_at.unwrap();
        due.push(next - now);
        h.d.t.clock.advance(next - now);
    }

    assert_eq!(due, [Span::seconds(120), Span::minutes(5), Span::hours(24)]);
    let stored = h.delivery(queued.id).await;
    assert_eq!((stored.attempts, stored.response_code, stored.last_error.as_deref()), (3, Some(503), Some("HTTP 503")));
}

#[tokio::test]
async fn a_410_fails_the_delivery_and_disables_the_endpoint() {
    let h = Hooks::new(None, vec![answered(410, None, "gone")]).await;
    let queued = h.queue().await;

    let report = h.step().await;

    assert_eq!((report.failed, report.endpoints_disabled), (1, 1), "{report:?}");
    let stored = h.delivery(queued.id).await;
    assert_eq!((stored.status, stored.attempts, stored.response_code), (DeliveryStatus::Failed, 1, Some(410)));
    assert_eq!((stored.last_error.as_deref(), stored.next_attempt_at), (Some("HTTP 410: gone"), None));
    let endpoint = h.stored_endpoint().await;
    assert!(!endpoint.enabled);
    assert_eq!(endpoint.disabled_reason.as_deref(), Some(GONE_REASON));
    let listed = h.d.t.core.webhooks().get(&h.d.who, h.endpoint.id).await.unwrap();
    assert_eq!(listed.disabled_reason.as_deref(), Some(GONE_REASON), "visible on the endpoint");
}

#[tokio::test]
async fn a_delivery_fails_when_the_schedule_is_used_up() {
    let refused = WebhookResponse::Failed { reason: "connection refused".into() };
    let h = Hooks::new(Some("1s"), vec![refused, answered(500, None, "still broken")]).await;
    let queued = h.queue().await;

    assert_eq!(h.step().await.retrying, 1);
    let after_refusal = h.delivery(queued.id).await;
    assert_eq!(after_refusal.response_code, None, "no HTTP answer");
    assert_eq!(after_refusal.last_error.as_deref(), Some("connection refused"));
    h.d.t.clock.advance(Span::seconds(1));
    assert_eq!(h.step().await.failed, 1);

    let stored = h.delivery(queued.id).await;
    assert_eq!((stored.status, stored.attempts, stored.next_attempt_at), (DeliveryStatus::Failed, 2, None));
    assert_eq!((stored.response_code, stored.last_error.as_deref()), (Some(500), Some("HTTP 500: still broken")));
    assert!(h.stored_endpoint().await.enabled, "only a 410 disables");
    h.d.t.clock.advance(Span::days(2));
    assert_eq!(h.step().await.claimed, 0);
}

#[tokio::test]
async fn after_a_rotation_both_secrets_sign_until_the_overlap_ends() {
    let h = Hooks::new(None, vec![]).await;
    let old = h.endpoint.secret.expose().to_owned();
    let rotated = h.d.t.core.webhooks().rotate_secret(&h.d.who, h.endpoint.id).await.unwrap();
    let new = rotated.secret.expose().to_owned();
    h.queue().await;

    h.step().await;
    h.d.t.clock.advance(Span::hours(24));
    h.d.send("other@example.net").await;
    h.step().await;

    let requests = h.sender.requests();
    assert_eq!(requests.len(), 2);
    let during: Vec<&str> = requests[0].webhook_signature.split(' ').collect();
    assert_eq!(during.len(), 2, "{during:?}");
    assert!(verifies(during[0], &new, &requests[0]) && verifies(during[1], &old, &requests[0]));
    let after: Vec<&str> = requests[1].webhook_signature.split(' ').collect();
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(verifies(after[0], &new, &requests[1]) && !verifies(after[0], &old, &requests[1]));
}

#[tokio::test]
async fn a_delivery_to_an_endpoint_disabled_after_queueing_fails_unsent() {
    let h = Hooks::new(None, vec![]).await;
    let queued = h.queue().await;
    let off = UpdateWebhookRequest { enabled: Some(false), ..UpdateWebhookRequest::default() };
    h.d.t.core.webhooks().update(&h.d.who, h.endpoint.id, off).await.unwrap();

    assert_eq!(h.step().await.failed, 1);

    assert!(h.sender.requests().is_empty());
    let stored = h.delivery(queued.id).await;
    assert_eq!((stored.status, stored.attempts, stored.next_attempt_at), (DeliveryStatus::Failed, 0, None));
    assert_eq!(stored.last_error.as_deref(), Some("endpoint disabled"));
}

#[tokio::test]
async fn a_deleted_endpoint_gets_nothing() {
    let h = Hooks::new(None, vec![]).await;
    h.queue().await;
    h.d.t.core.webhooks().delete(&h.d.who, h.endpoint.id).await.unwrap();

    let report = h.step().await;

    assert_eq!(report.delivered, 0, "{report:?}");
    assert!(h.sender.requests().is_empty());
    assert!(h.log().await.is_empty(), "the log went with the endpoint");
}

#[tokio::test]
async fn a_restart_posts_what_the_dead_run_had_claimed_without_waiting_for_the_lease() {
    let h = Hooks::new(None, vec![]).await;
    let queued = h.queue().await;
    // A run claims it and dies before posting.
    let now = h.d.t.now();
    let claimed =
        h.d.t
            .store
            .claim_due_webhook_deliveries(now, now + Span::seconds(70), 10, &EndpointQuota::unlimited())
            .await
            .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(h.step().await.claimed, 0, "leased: nothing due");

    let sender = Arc::clone(&h.sender) as Arc<dyn WebhookSender>;
    let worker = WebhookWorker::new(h.d.t.core.clone(), sender, WebhookSettings::default());
    assert_eq!(worker.release_leases_after_restart(h.d.t.now()).await.unwrap(), 1);
    assert_eq!(worker.release_leases_after_restart(h.d.t.now()).await.unwrap(), 0, "nothing left to release");
    assert_eq!(h.step().await.delivered, 1, "posted at once");
    assert_eq!(h.delivery(queued.id).await.status, DeliveryStatus::Delivered);
}

#[tokio::test]
async fn failing_since_is_set_by_a_failure_and_cleared_by_a_success() {
    let h = Hooks::new(None, vec![answered(500, None, "")]).await;
    h.queue().await;
    let first_try = h.d.t.now();
    assert_eq!(h.step().await.retrying, 1);
    assert_eq!(h.stored_endpoint().await.failing_since, Some(first_try), "the run of failures starts");
    h.d.t.clock.advance(Span::seconds(5));
    assert_eq!(h.step().await.delivered, 1);
    let endpoint = h.stored_endpoint().await;
    assert_eq!((endpoint.failing_since, endpoint.enabled), (None, true), "a success ends it");
}

#[tokio::test]
async fn an_endpoint_failing_every_delivery_for_the_period_is_disabled() {
    let h = Hooks::new(None, vec![answered(503, None, ""), answered(503, None, ""), answered(503, None, "")]).await;
    let queued = h.queue().await;
    let settings = WebhookSettings {
        schedule: RetrySchedule::parse("30m,30m,30m").unwrap(),
        disable_after_failing: Span::hours(1),
        ..WebhookSettings::default()
    };
    let worker = WebhookWorker::new(h.d.t.core.clone(), Arc::clone(&h.sender) as Arc<dyn WebhookSender>, settings);
    let step = || async { worker.deliver_due(h.d.t.now()).await.unwrap() };

    assert_eq!(step().await.retrying, 1);
    h.d.t.clock.advance(Span::minutes(30));
    assert_eq!(step().await.retrying, 1, "30 minutes of failures: still enabled");
    assert!(h.stored_endpoint().await.enabled);
    h.d.t.clock.advance(Span::minutes(30));
    let report = step().await;
    assert_eq!((report.failed, report.endpoints_disabled), (1, 1), "{report:?}");

    let endpoint = h.stored_endpoint().await;
    assert!(!endpoint.enabled);
    assert_eq!(endpoint.disabled_reason.as_deref(), Some("every delivery failed for 1 hour"));
    let delivery = h.delivery(queued.id).await;
    assert_eq!((delivery.status, delivery.attempts, delivery.next_attempt_at), (DeliveryStatus::Failed, 3, None));
}
