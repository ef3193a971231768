//! Scheduled sending through the use cases and the delivery worker: `scheduledAt` limits,
//! the worker leaving a Scheduled message alone until its time, cancel and reschedule
//! (including their races with a claim), and send-key visibility.

use chrono::{Duration, SecondsFormat};
use tidings_core::Error;
use tidings_core::ids::MessageId;
use tidings_core::model::{EventType, Message, MessageStatus};
use tidings_core::ports::MessageStore;
use tidings_core::usecases::{MessageChange, SendRequest};
use tidings_testing::delivery::Delivery;
use tidings_testing::service::{invalid_fields, send_key_beside};

fn request(scheduled_at: Option<String>) -> SendRequest {
    SendRequest {
        to: Some("reader@example.net".into()),
        from: Some("Acme Billing <billing@acme.example.com>".into()),
        subject: Some("Your invoice".into()),
        text: Some("Thanks for your order.".into()),
        scheduled_at,
        ..SendRequest::default()
    }
}

fn at(d: &Delivery, ahead: Duration) -> String {
    (d.t.now() + ahead).to_rfc3339_opts(SecondsFormat::Millis, true)
}

async fn schedule(d: &Delivery, ahead: Duration) -> Message {
    d.t.core.messages().send(&d.who, request(Some(at(d, ahead))), None).await.unwrap().message
}

fn reschedule(to: Option<String>) -> MessageChange {
    MessageChange { scheduled_at: Some(to) }
}

#[tokio::test]
async fn a_scheduled_message_waits_for_its_time_then_is_delivered_like_a_queued_one() {
    let d = Delivery::new("1m", vec![]).await;
    let m = schedule(&d, Duration::minutes(10)).await;
    assert_eq!(m.status, MessageStatus::Scheduled);
    assert_eq!(m.scheduled_at, Some(d.t.now() + Duration::minutes(10)));
    assert_eq!(m.next_attempt_at, m.scheduled_at, "due at its send time");
    assert_eq!(d.event_types(m.id).await, ["Scheduled"]);
    assert_eq!(d.events(m.id).await[0].details.scheduled_at, m.scheduled_at, "the event carries the time");

    assert_eq!(d.step().await.claimed, 0, "not touched before its time");
    d.t.clock.advance(Duration::minutes(10) - Duration::milliseconds(1));
    assert_eq!(d.step().await.claimed, 0, "a millisecond early");
    assert!(d.mailer.sent().is_empty());

    d.t.clock.advance(Duration::milliseconds(1));
    let report = d.step().await;
    assert_eq!((report.claimed, report.delivered), (1, 1));
    assert_eq!(d.message(m.id).await.status, MessageStatus::Delivered);
    assert_eq!(d.event_types(m.id).await, ["Scheduled", "Sent", "Delivered"]);
    assert_eq!(d.mailer.sent().len(), 1);
}

#[tokio::test]
async fn scheduled_at_is_bounded_and_a_time_not_after_now_sends_at_once() {
    let d = Delivery::new("1m", vec![]).await;
    let messages = d.t.core.messages();
    let send = |text: &str| messages.send(&d.who, request(Some(text.to_owned())), None);
    assert_eq!(invalid_fields(send("tomorrow").await), ["scheduledAt"]);
    assert_eq!(invalid_fields(send(&at(&d, Duration::days(30) + Duration::seconds(1))).await), ["scheduledAt"]);
    assert_eq!(invalid_fields(send(&at(&d, -Duration::minutes(5))).await), ["scheduledAt"], "long past");
    let at_limit = send(&at(&d, Duration::days(30))).await.unwrap().message;
    assert_eq!(at_limit.status, MessageStatus::Scheduled, "exactly 30 days is allowed");
    let now = send(&at(&d, -Duration::seconds(30))).await.unwrap().message;
    assert_eq!((now.status, now.scheduled_at), (MessageStatus::Queued, None), "a little in the past: now");
    assert_eq!(d.event_types(now.id).await, ["Queued"]);
}

#[tokio::test]
async fn a_canceled_message_is_never_sent_and_cannot_be_canceled_twice() {
    let d = Delivery::new("1m", vec![]).await;
    let scheduled = schedule(&d, Duration::minutes(5)).await;
    let queued = d.send("queued@example.net").await;

    for m in [&scheduled, &queued] {
        let canceled = d.t.core.messages().cancel(&d.who, m.id).await.unwrap();
        assert_eq!((canceled.status, canceled.next_attempt_at), (MessageStatus::Canceled, None));
        assert_eq!(d.event_types(m.id).await.last(), Some(&"Canceled"));
        let again = d.t.core.messages().cancel(&d.who, m.id).await;
        assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");
    }
    d.t.clock.advance(Duration::minutes(10));
    assert_eq!(d.step().await.claimed, 0);
    assert!(d.mailer.sent().is_empty(), "nothing canceled goes out");
}

#[tokio::test]
async fn a_message_already_attempted_cannot_be_canceled_or_rescheduled() {
    let d = Delivery::new("1m", vec![]).await;
    let m = d.send("u@example.net").await;
    d.step().await;
    assert_eq!(d.message(m.id).await.status, MessageStatus::Delivered);
    let id = m.id.to_string();
    assert!(matches!(d.t.core.messages().cancel(&d.who, MessageId::parse_or_none(&id)).await, Err(Error::Conflict(_))));
    let moved =
        d.t.core
            .messages()
            .reschedule(&d.who, MessageId::parse_or_none(&id), reschedule(Some(at(&d, Duration::hours(1)))))
            .await;
    assert!(matches!(moved, Err(Error::Conflict(_))), "{moved:?}");
    assert_eq!(d.event_types(m.id).await, ["Queued", "Sent", "Delivered"], "nothing recorded");
}

#[tokio::test]
async fn rescheduling_moves_the_send_time_and_null_sends_now() {
    let d = Delivery::new("1m", vec![]).await;
    let m = schedule(&d, Duration::minutes(5)).await;
    let id = m.id.to_string();

    let later =
        d.t.core
            .messages()
            .reschedule(&d.who, MessageId::parse_or_none(&id), reschedule(Some(at(&d, Duration::hours(2)))))
            .await
            .unwrap();
    assert_eq!((later.status, later.scheduled_at), (MessageStatus::Scheduled, Some(d.t.now() + Duration::hours(2))));
    assert_eq!(later.next_attempt_at, later.scheduled_at);
    d.t.clock.advance(Duration::minutes(10));
    assert_eq!(d.step().await.claimed, 0, "the old time no longer applies");

    let now = d.t.core.messages().reschedule(&d.who, MessageId::parse_or_none(&id), reschedule(None)).await.unwrap();
    assert_eq!((now.status, now.scheduled_at, now.next_attempt_at), (MessageStatus::Queued, None, Some(d.t.now())));
    assert_eq!(d.step().await.delivered, 1);
    assert_eq!(d.event_types(m.id).await, ["Scheduled", "Scheduled", "Queued", "Sent", "Delivered"]);

    // A Queued message can be given a time.
    let q = d.send("q@example.net").await;
    let s = d.t.core.messages().reschedule(&d.who, q.id, reschedule(Some(at(&d, Duration::hours(1))))).await;
    assert_eq!(s.unwrap().status, MessageStatus::Scheduled);
    // The field is required; its limits are a send's.
    let missing = d.t.core.messages().reschedule(&d.who, q.id, MessageChange::default()).await;
    assert_eq!(invalid_fields(missing), ["scheduledAt"]);
    let far = d.t.core.messages().reschedule(&d.who, q.id, reschedule(Some(at(&d, Duration::days(31))))).await;
    assert_eq!(invalid_fields(far), ["scheduledAt"]);
}

#[tokio::test]
async fn a_reschedule_after_the_claim_keeps_the_worker_from_sending() {
    let d = Delivery::new("1m", vec![]).await;
    let m = schedule(&d, Duration::minutes(1)).await;
    d.t.clock.advance(Duration::minutes(1));
    let now = d.t.now();
    let claimed = d.t.store.claim_due_messages(now, now + Duration::minutes(5), 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "claimed by a worker, not yet sent");

    // The client moves it meanwhile; the status stays Scheduled.
    let id = m.id.to_string();
    let moved =
        d.t.core
            .messages()
            .reschedule(&d.who, MessageId::parse_or_none(&id), reschedule(Some(at(&d, Duration::hours(1)))))
            .await
            .unwrap();
    assert_eq!(moved.status, MessageStatus::Scheduled);
    // The worker's Sent under the old lease is refused.
    let sent = tidings_core::state_machine::Happening {
        event_id: tidings_core::ids::EventId::new_at(now, &tidings_core::ports::SystemRandom),
        event_type: EventType::Sent,
        at: now,
        details: Default::default(),
        provider_message_id: Some("x@acme.example.com".into()),
        next_attempt_at: None,
    };
    let lease = claimed[0].next_attempt_at;
    let refused = d.t.core.messages().record_event_if_due_at(&claimed[0], sent, lease).await;
    assert!(matches!(refused, Err(Error::Conflict(_))), "{refused:?}");
    assert_eq!(d.message(m.id).await, moved, "the reschedule stands");
}

#[tokio::test]
async fn a_cancel_after_the_claim_makes_the_worker_skip_the_message() {
    let d = Delivery::new("1m", vec![]).await;
    let m = d.send("u@example.net").await;
    let now = d.t.now();
    let claimed = d.t.store.claim_due_messages(now, now + Duration::minutes(5), 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let canceled = d.t.core.messages().cancel(&d.who, m.id).await.unwrap();
    assert_eq!(canceled.status, MessageStatus::Canceled, "claimed but unsent: still cancelable");
    // A second worker step after the lease: nothing is due; the canceled message stays.
    d.t.clock.advance(Duration::minutes(6));
    assert_eq!(d.step().await.claimed, 0);
    assert!(d.mailer.sent().is_empty());
    assert_eq!(d.event_types(m.id).await, ["Queued", "Canceled"]);
}

#[tokio::test]
async fn a_send_key_cancels_only_its_own_messages() {
    let d = Delivery::new("1m", vec![]).await;
    let m = schedule(&d, Duration::minutes(5)).await;
    let other = send_key_beside(&d.who);
    let id = m.id.to_string();
    assert_eq!(
        d.t.core.messages().cancel(&other, MessageId::parse_or_none(&id)).await,
        Err(Error::NotFound("message"))
    );
    let moved = d.t.core.messages().reschedule(&other, MessageId::parse_or_none(&id), reschedule(None)).await;
    assert_eq!(moved, Err(Error::NotFound("message")));
    assert_eq!(d.message(m.id).await.status, MessageStatus::Scheduled);
    assert_eq!(
        d.t.core.messages().cancel(&d.who, MessageId::parse_or_none("not-an-id")).await,
        Err(Error::NotFound("message"))
    );
}
