//! The delivery worker on messages to several recipients (contract §10), over the in-memory
//! store and a scripted mailer (one message at a time; its copies start in recipient order,
//! so the script's answers go to the recipients in order): one envelope per recipient carrying the same signed bytes, each
//! recipient's own outcome, the aggregate status, a hard bounce suppressing that address
//! alone, a deferred recipient retried alone, and recipients left `Sent` by a crash.

use tidings_core::ids::EventId;
use tidings_core::model::{EventDetails, EventType, Message, MessageStatus, RecipientKind};
use tidings_core::ports::{MessageStore, SuppressionStore};
use tidings_core::state_machine::Happening;
use tidings_core::usecases::{CoreConfig, SendRequest};
use tidings_testing::delivery::Delivery;
use tidings_testing::fixtures;
use tidings_testing::mailer::{FakeMailer, accepted, rejected};

async fn one_at_a_time(script: Vec<tidings_testing::mailer::Answer>) -> Delivery {
    Delivery::with(CoreConfig::default(), FakeMailer::answering(script), |s| s.concurrency = 1).await
}

async fn send_to_three(d: &Delivery) -> Message {
    let req = SendRequest {
        to: Some("Ann <ann@example.net>".into()),
        cc: Some(serde_json::json!(["bob@example.net"])),
        bcc: Some("carol@example.net".into()),
        from: Some("billing@acme.example.com".into()),
        subject: Some("Your invoice".into()),
        text: Some("Thanks.".into()),
        ..SendRequest::default()
    };
    d.t.core.messages().send(&d.who, req, None).await.unwrap().message
}

fn statuses(m: &Message) -> Vec<MessageStatus> {
    m.recipient_list().iter().map(|r| r.status).collect()
}

#[tokio::test]
async fn each_recipient_gets_its_envelope_and_its_own_outcome_from_bytes_signed_once() {
    let d = one_at_a_time(vec![accepted(), rejected(550, "5.1.1 no such user"), rejected(451, "4.2.1 busy")]).await;
    let queued = send_to_three(&d).await;
    assert_eq!(
        queued.recipient_list().iter().map(|r| r.kind).collect::<Vec<_>>(),
        [RecipientKind::To, RecipientKind::Cc, RecipientKind::Bcc]
    );

    let report = d.step().await;

    assert_eq!((report.claimed, report.delivered, report.bounced_hard, report.deferred), (1, 1, 1, 1), "{report:?}");
    let sent = d.mailer.sent();
    let to: Vec<String> = sent.iter().map(|e| e.envelope_to.to_string()).collect();
    assert_eq!(to, ["ann@example.net", "bob@example.net", "carol@example.net"]);
    assert!(sent.iter().all(|e| e.raw == sent[0].raw), "one signature for every copy");
    let message = d.message(queued.id).await;
    assert_eq!(statuses(&message), [MessageStatus::Delivered, MessageStatus::Bounced, MessageStatus::Deferred]);
    assert_eq!(message.status, MessageStatus::Deferred, "its one unsettled recipient is deferred");
    let suppressed = |address: &str| {
        let store = &d.t.store;
        let ws = d.who.workspace_id;
        let address = tidings_core::email::EmailAddress::parse(address).unwrap();
        async move { store.get_suppression(ws, &address).await.unwrap().is_some() }
    };
    assert!(suppressed("bob@example.net").await && !suppressed("ann@example.net").await);
    assert!(!suppressed("carol@example.net").await, "a deferral suppresses nothing");

    d.t.clock.advance(chrono::Duration::minutes(1));
    let report = d.step().await;

    assert_eq!((report.claimed, report.delivered), (1, 1), "only carol is tried again: {report:?}");
    assert_eq!(d.mailer.sent().len(), 4);
    let message = d.message(queued.id).await;
    assert_eq!(statuses(&message), [MessageStatus::Delivered, MessageStatus::Bounced, MessageStatus::Delivered]);
    assert_eq!((message.status, message.next_attempt_at), (MessageStatus::PartiallyDelivered, None));
    let events = d.events(queued.id).await;
    let about = |address: &str| -> Vec<EventType> {
        events
            .iter()
            .filter(|e| e.recipient.as_ref().is_some_and(|r| r.to_string() == address))
            .map(|e| e.event_type)
            .collect()
    };
    assert_eq!(
        about("carol@example.net"),
        [EventType::Sent, EventType::Deferred, EventType::Sent, EventType::Delivered]
    );
    assert_eq!(about("bob@example.net"), [EventType::Sent, EventType::Bounced]);
    assert!(events.windows(2).all(|w| w[0].id < w[1].id), "the timeline's ids are in order");
}

#[tokio::test]
async fn recipients_left_sent_by_a_crash_are_sent_again_when_the_lease_ends() {
    let d = one_at_a_time(vec![]).await;
    let queued = send_to_three(&d).await;
    let lease = d.worker.settings().lease();
    let mut claimed = d.t.store.claim_due_messages(d.t.now(), d.t.now() + lease, 10).await.unwrap().remove(0);
    for index in 0..2 {
        let sent = Happening {
            event_id: EventId(fixtures::ulid()),
            event_type: EventType::Sent,
            at: d.t.now(),
            details: EventDetails { attempt: Some(1), ..EventDetails::default() },
            provider_message_id: Some(format!("{}@acme.example.com", queued.id)),
            next_attempt_at: None,
        };
        claimed = d.t.core.messages().record_recipient_event(&claimed, index, sent).await.unwrap().0;
    }
    assert_eq!(claimed.status, MessageStatus::Sent);

    assert_eq!(d.step().await.claimed, 0, "still leased to the dead worker");
    d.t.clock.advance(lease);
    assert_eq!(d.step().await.delivered, 3);

    let message = d.message(queued.id).await;
    assert_eq!(message.status, MessageStatus::Delivered);
    let attempts: Vec<u32> = message.recipient_list().iter().map(|r| r.attempts).collect();
    assert_eq!(attempts, [2, 2, 1], "the two left Sent were attempted again");
}
