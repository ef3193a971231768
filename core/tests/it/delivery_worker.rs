//! The delivery worker over the in-memory store and a scripted mailer: delivery, retries on
//! the schedule and at named times, soft and hard bounces with suppression, messages that
//! cannot be sent, crash recovery through the lease, webhook fan-out, and the message that
//! actually goes out (MIME and both DKIM signatures).

use std::time::Duration;

use chrono::Duration as Span;
use mail_parser::MessageParser;
use tidings_core::Error;
use tidings_core::domain_name::DomainName;
use tidings_core::ids::EventId;
use tidings_core::model::{
    BounceType, CertificateCheck, ConnectionTls, EventDetails, EventType, MessageStatus, SuppressionReason,
    SuppressionSource, TlsVersion,
};
use tidings_core::outbound::{ReturnPath, ReturnPathKey};
use tidings_core::ports::{MessageStore, PageRequest, SendError, SuppressionStore, WebhookStore};
use tidings_core::state_machine::Happening;
use tidings_core::usecases::{AddSuppressionRequest, CoreConfig, CreateWebhookRequest, SendRequest};
use tidings_testing::delivery::Delivery;
use tidings_testing::dkim::verify_dkim;
use tidings_testing::fixtures;
use tidings_testing::mailer::{FakeMailer, accepted_over, rejected};

#[tokio::test]
async fn a_queued_message_is_signed_sent_and_delivered() {
    let d = Delivery::new("1m", vec![]).await;
    let queued = d.send("user@example.net").await;

    let report = d.step().await;

    assert_eq!((report.claimed, report.delivered), (1, 1), "{report:?}");
    let message = d.message(queued.id).await;
    let provider_id = format!("{}@acme.example.com", queued.id);
    assert_eq!(message.status, MessageStatus::Delivered);
    assert_eq!(message.provider_message_id.as_deref(), Some(provider_id.as_str()));
    assert_eq!((message.attempts, message.next_attempt_at), (1, None));
    let events = d.events(queued.id).await;
    let types: Vec<_> = events.iter().map(|e| e.event_type).collect();
    assert_eq!(types, [EventType::Queued, EventType::Sent, EventType::Delivered]);
    assert_eq!(events[1].details, EventDetails { attempt: Some(1), ..EventDetails::default() });
    assert_eq!(events[1].provider_message_id.as_deref(), Some(provider_id.as_str()));
    let delivered = &events[2].details;
    assert_eq!((delivered.smtp_code, delivered.enhanced_code.as_deref()), (Some(250), Some("2.0.0")));
    assert_eq!(delivered.response.as_deref(), Some("Ok: queued as 4Xyz"));
    assert_eq!(events[2].provider_message_id.as_deref(), Some(provider_id.as_str()));

    assert_eq!(d.step().await.claimed, 0, "nothing is due any more");
}

#[tokio::test]
async fn what_goes_out_parses_back_and_both_dkim_signatures_verify() {
    let d = Delivery::new("1m", vec![]).await;
    let queued = d.send("user@example.net").await;

    d.step().await;

    let sent = d.mailer.sent();
    assert_eq!(sent.len(), 1);
    let email = &sent[0];
    assert_eq!(email.message_id, queued.id);
    assert_eq!(email.envelope_to.to_string(), "user@example.net");
    assert_eq!(email.envelope_from.to_string(), "billing@acme.example.com", "no return path configured");
    let parsed = MessageParser::default().parse(&email.raw[..]).unwrap();
    let from = parsed.from().and_then(|a| a.first()).unwrap();
    assert_eq!((from.name(), from.address()), (Some("Acme Billing"), Some("billing@acme.example.com")));
    assert_eq!(parsed.to().and_then(|a| a.first()).and_then(|a| a.address()), Some("user@example.net"));
    assert_eq!(parsed.subject(), Some("Your invoice"));
    assert_eq!(parsed.message_id(), Some(email.provider_message_id.as_str()));
    assert_eq!(parsed.body_text(0).as_deref(), Some("Thanks for your order."));
    assert_eq!(parsed.body_html(0).as_deref(), Some("<p>Thanks for your order.</p>"));
    let checks = verify_dkim(&email.raw, &d.domain.records).await;
    let algorithms: Vec<&str> = checks.iter().map(|c| c.algorithm.as_str()).collect();
    assert_eq!(algorithms, ["rsa-sha256", "ed25519-sha256"]);
    assert!(checks.iter().all(|c| c.passed()), "{checks:?}");
}

#[tokio::test]
async fn with_a_return_path_domain_the_envelope_sender_names_the_message() {
    let return_path = ReturnPath {
        domain: DomainName::parse("bounces.tidings.example").unwrap(),
        key: ReturnPathKey::from_bytes([3; 32]),
    };
    let config = CoreConfig { return_path: Some(return_path.clone()), ..CoreConfig::default() };
    let d = Delivery::with(config, FakeMailer::default(), |_| {}).await;
    let queued = d.send("user@example.net").await;

    d.step().await;

    let sent = &d.mailer.sent()[0].envelope_from;
    let prefix = format!("bounces+{}-", queued.id.to_string().to_ascii_lowercase());
    assert!(sent.local_part().starts_with(&prefix), "{sent}");
    assert_eq!(sent.domain().as_str(), "bounces.tidings.example");
    let claimed = return_path.claim(sent).unwrap();
    assert!(return_path.verify(&claimed, &queued.to), "signed for the message's recipient");
}

#[tokio::test]
async fn a_deferred_message_is_retried_at_its_next_attempt_and_then_delivered() {
    let d = Delivery::new("1m,5m", vec![rejected(451, "4.3.0 Temporary lookup failure")]).await;
    let queued = d.send("user@example.net").await;
    let start = d.t.now();

    assert_eq!(d.step().await.deferred, 1);
    let deferred = d.message(queued.id).await;
    assert_eq!(deferred.status, MessageStatus::Deferred);
    assert_eq!(deferred.next_attempt_at, Some(start + Span::minutes(1)));
    let event = d.events(queued.id).await.pop().unwrap();
    assert_eq!(event.event_type, EventType::Deferred);
    assert_eq!((event.details.smtp_code, event.details.enhanced_code.as_deref()), (Some(451), Some("4.3.0")));
    assert_eq!(event.details.response.as_deref(), Some("Temporary lookup failure"));
    assert_eq!((event.details.attempt, event.details.next_attempt_at), (Some(1), Some(start + Span::minutes(1))));

    d.t.clock.advance(Span::seconds(59));
    assert_eq!(d.step().await.claimed, 0, "not due before nextAttemptAt");
    d.t.clock.advance(Span::seconds(1));
    assert_eq!(d.step().await.delivered, 1);

    assert_eq!(d.event_types(queued.id).await, ["Queued", "Sent", "Deferred", "Sent", "Delivered"]);
    assert_eq!(d.message(queued.id).await.attempts, 2);
    let sent = d.mailer.sent();
    assert_eq!(sent[0].provider_message_id, sent[1].provider_message_id, "the same Message-ID on every attempt");
}

#[tokio::test]
async fn a_retry_time_named_by_the_server_is_honoured() {
    let d = Delivery::new("1m", vec![rejected(450, "4.7.1 Greylisted, please try again in 5 minutes")]).await;
    let queued = d.send("user@example.net").await;

    d.step().await;

    assert_eq!(d.message(queued.id).await.next_attempt_at, Some(d.t.now() + Span::minutes(5)));
}

#[tokio::test]
async fn unreachable_servers_are_retried_and_a_used_up_schedule_is_a_soft_bounce() {
    let unreachable = || Err(SendError::Unreachable { reason: "connection refused".into() });
    let d = Delivery::new("1s,1s", vec![unreachable(), unreachable(), rejected(421, "4.4.2 timeout")]).await;
    let queued = d.send("user@example.net").await;

    for _ in 0..3 {
        d.step().await;
        d.t.clock.advance(Span::seconds(1));
    }

    let message = d.message(queued.id).await;
    assert_eq!((message.status, message.bounce_type), (MessageStatus::Bounced, Some(BounceType::Soft)));
    assert_eq!(message.attempts, 3, "two delays allow three attempts");
    let types = d.event_types(queued.id).await;
    assert_eq!(types, ["Queued", "Sent", "Deferred", "Sent", "Deferred", "Sent", "Bounced"]);
    let events = d.events(queued.id).await;
    assert_eq!(events[2].details.response.as_deref(), Some("connection refused"));
    assert_eq!(events[2].details.smtp_code, None);
    assert_eq!(events[6].details.bounce_type, Some(BounceType::Soft));
    assert_eq!(events[6].details.smtp_code, Some(421));
    let suppression = d.t.store.get_suppression(d.who.workspace_id, &queued.to).await.unwrap();
    assert_eq!(suppression, None, "a soft bounce suppresses nothing");
    d.send("user@example.net").await;
}

#[tokio::test]
async fn an_unknown_mailbox_bounces_hard_suppresses_the_address_and_blocks_the_next_send() {
    let d = Delivery::new("1m", vec![rejected(550, "5.1.1 <user@example.net>: Recipient address rejected")]).await;
    let queued = d.send("user@example.net").await;

    assert_eq!(d.step().await.bounced_hard, 1);

    let message = d.message(queued.id).await;
    assert_eq!((message.status, message.bounce_type), (MessageStatus::Bounced, Some(BounceType::Hard)));
    let bounced = d.events(queued.id).await.pop().unwrap();
    assert_eq!(bounced.event_type, EventType::Bounced);
    assert_eq!(bounced.details.bounce_type, Some(BounceType::Hard));
    assert_eq!((bounced.details.smtp_code, bounced.details.enhanced_code.as_deref()), (Some(550), Some("5.1.1")));
    let entry = d.t.store.get_suppression(d.who.workspace_id, &queued.to).await.unwrap().expect("suppressed");
    assert_eq!(
        (entry.reason, entry.source, entry.message_id),
        (SuppressionReason::HardBounce, SuppressionSource::Bounce, Some(queued.id))
    );
    let req = SendRequest {
        to: Some("USER@example.net".into()),
        subject: Some("Again".into()),
        text: Some("Hello".into()),
        ..SendRequest::default()
    };
    let again = d.t.core.messages().send(&d.who, req, None).await;
    assert!(matches!(again, Err(Error::RecipientSuppressed(_))), "{again:?}");
    assert_eq!(again.unwrap_err().code(), "recipient_suppressed");
}

#[tokio::test]
async fn a_policy_block_bounces_without_suppressing_the_address() {
    let d = Delivery::new("1m", vec![rejected(550, "5.7.1 Message rejected due to content")]).await;
    let queued = d.send("user@example.net").await;

    assert_eq!(d.step().await.bounced_soft, 1);

    let message = d.message(queued.id).await;
    assert_eq!((message.status, message.bounce_type), (MessageStatus::Bounced, Some(BounceType::Soft)));
    assert_eq!(d.t.store.get_suppression(d.who.workspace_id, &queued.to).await.unwrap(), None);
}

#[tokio::test]
async fn a_recipient_suppressed_while_queued_is_not_sent() {
    let d = Delivery::new("1m", vec![]).await;
    let queued = d.send("user@example.net").await;
    let req = AddSuppressionRequest { email: Some("User@Example.net".into()) };
    d.t.core.suppressions().add(&d.who, req).await.unwrap();

    assert_eq!(d.step().await.suppressed, 1);

    assert_eq!(d.message(queued.id).await.status, MessageStatus::Suppressed);
    assert_eq!(d.event_types(queued.id).await, ["Queued", "Suppressed"]);
    assert!(d.mailer.sent().is_empty());
}

#[tokio::test]
async fn a_message_whose_domain_was_deleted_fails_unsent() {
    let d = Delivery::new("1m", vec![]).await;
    let queued = d.send("user@example.net").await;
    d.t.core.domains().delete(&d.who, d.domain.id).await.unwrap();

    assert_eq!(d.step().await.failed, 1);

    assert_eq!(d.message(queued.id).await.status, MessageStatus::Failed);
    let failed = d.events(queued.id).await.pop().unwrap();
    assert_eq!(failed.event_type, EventType::Failed);
    assert_eq!(failed.details.response.as_deref(), Some("the sending domain was deleted"));
    assert!(d.mailer.sent().is_empty());
}

/// What a worker that died right after recording `Sent` leaves behind.
async fn crash_after_sent(d: &Delivery) -> tidings_core::model::Message {
    let queued = d.send("user@example.net").await;
    let lease = d.worker.settings().lease();
    let claimed = d.t.store.claim_due_messages(d.t.now(), d.t.now() + lease, 10).await.unwrap();
    let sent = Happening {
        event_id: EventId(fixtures::ulid()),
        event_type: EventType::Sent,
        at: d.t.now(),
        details: EventDetails { attempt: Some(1), ..EventDetails::default() },
        provider_message_id: Some(format!("{}@acme.example.com", queued.id)),
        next_attempt_at: None,
    };
    d.t.core.messages().record_event(&claimed[0], sent).await.unwrap();
    queued
}

#[tokio::test]
async fn a_message_left_sent_by_a_crash_is_sent_again_when_its_lease_ends() {
    let d = Delivery::new("1m", vec![]).await;
    let queued = crash_after_sent(&d).await;

    assert_eq!(d.step().await.claimed, 0, "still leased to the dead worker");
    d.t.clock.advance(d.worker.settings().lease());
    assert_eq!(d.step().await.delivered, 1);

    assert_eq!(d.event_types(queued.id).await, ["Queued", "Sent", "Sent", "Delivered"]);
    assert_eq!(d.message(queued.id).await.attempts, 2);
}

#[tokio::test]
async fn a_crashed_attempt_to_a_since_suppressed_recipient_fails_instead_of_sending() {
    let d = Delivery::new("1m", vec![]).await;
    let queued = crash_after_sent(&d).await;
    let req = AddSuppressionRequest { email: Some("user@example.net".into()) };
    d.t.core.suppressions().add(&d.who, req).await.unwrap();
    d.t.clock.advance(d.worker.settings().lease());

    assert_eq!(d.step().await.failed, 1);

    assert_eq!(d.message(queued.id).await.status, MessageStatus::Failed);
    assert!(d.mailer.sent().is_empty());
}

#[tokio::test]
async fn every_event_is_fanned_out_to_subscribed_webhooks() {
    let d = Delivery::new("1m", vec![rejected(451, "4.3.0 try later")]).await;
    let names = ["Queued", "Sent", "Deferred", "Delivered"].map(String::from).to_vec();
    let endpoint = hook_for(&d, names).await;
    let queued = d.send("user@example.net").await;

    d.step().await;
    d.t.clock.advance(Span::minutes(1));
    d.step().await;

    let page = d.t.store.list_webhook_deliveries(d.who.workspace_id, endpoint.id, PageRequest::first(50)).await;
    let mut deliveries = page.unwrap().items;
    deliveries.reverse();
    let types: Vec<&str> = deliveries.iter().map(|w| w.event_type.as_str()).collect();
    assert_eq!(types, ["Queued", "Sent", "Deferred", "Sent", "Delivered"]);
    let delivered: serde_json::Value = serde_json::from_str(&deliveries[4].payload).unwrap();
    assert_eq!(delivered["data"]["providerMessageId"], format!("{}@acme.example.com", queued.id));
    assert_eq!(delivered["data"]["details"]["smtpCode"], 250);
}

#[tokio::test]
async fn the_delivered_event_and_its_webhook_say_how_the_connection_was_secured() {
    let invalid = ConnectionTls::Tls {
        certificate: CertificateCheck::invalid("certificate expired"),
        version: Some(TlsVersion::Tls1_2),
    };
    let script = vec![rejected(451, "4.3.0 try later"), accepted_over(invalid.clone())];
    let d = Delivery::new("1m", script).await;
    let endpoint = hook_for(&d, vec!["Delivered".to_owned()]).await;
    let queued = d.send("user@example.net").await;

    d.step().await;
    d.t.clock.advance(Span::minutes(1));
    d.step().await;

    let events = d.events(queued.id).await;
    let deferred = events.iter().find(|e| e.event_type == EventType::Deferred).unwrap();
    assert_eq!(deferred.details.tls, None, "a refused attempt has no receipt, so no TLS details");
    let delivered = events.iter().find(|e| e.event_type == EventType::Delivered).unwrap();
    assert_eq!(delivered.details.tls, Some(invalid));
    let page = d.t.store.list_webhook_deliveries(d.who.workspace_id, endpoint.id, PageRequest::first(50)).await;
    let webhook = &page.unwrap().items[0];
    let payload: serde_json::Value = serde_json::from_str(&webhook.payload).unwrap();
    assert_eq!(
        payload["data"]["details"]["tls"],
        serde_json::json!({
            "plaintext": false,
            "certificate": "invalid",
            "certificateError": "certificate expired",
            "tlsVersion": "TLSv1.2"
        })
    );
}

#[tokio::test]
async fn a_send_that_outlasts_the_timeout_is_cancelled_and_deferred() {
    let d = Delivery::with(CoreConfig::default(), FakeMailer::stalling(Duration::from_secs(30)), |s| {
        s.send_timeout = Duration::from_millis(50);
    })
    .await;
    let queued = d.send("user@example.net").await;

    assert_eq!(d.step().await.deferred, 1);

    let event = d.events(queued.id).await.pop().unwrap();
    assert_eq!(event.event_type, EventType::Deferred);
    assert_eq!(event.details.response.as_deref(), Some("no answer within 50ms"));
}

#[tokio::test]
async fn claims_are_batched_so_a_long_queue_is_worked_through_in_bounded_steps() {
    let unreachable = || Err(SendError::Unreachable { reason: "connection refused".into() });
    let d =
        Delivery::with(CoreConfig::default(), FakeMailer::answering((0..45).map(|_| unreachable()).collect()), |s| {
            s.batch_size = 10;
            s.concurrency = 4;
        })
        .await;
    for i in 0..45 {
        d.send(&format!("user{i}@example.net")).await;
    }

    let mut claimed = Vec::new();
    loop {
        let report = d.step().await;
        if report.claimed == 0 {
            break;
        }
        assert_eq!(report.deferred, report.claimed, "{report:?}");
        claimed.push(report.claimed);
    }

    assert_eq!(claimed, [10, 10, 10, 10, 5]);
    assert_eq!(d.mailer.sent().len(), 45);
    d.t.clock.advance(Span::minutes(1));
    assert_eq!(d.step().await.delivered, 10, "the retries come due together, still ten at a time");
}

/// A webhook endpoint of `d`'s workspace subscribed to `names`.
async fn hook_for(d: &Delivery, names: Vec<String>) -> tidings_core::model::WebhookEndpoint {
    let req = CreateWebhookRequest {
        url: Some("https://hooks.example.com/tidings".into()),
        event_types: Some(names),
        enabled: None,
        format: None,
    };
    d.t.core.webhooks().create(&d.who, req).await.unwrap()
}
