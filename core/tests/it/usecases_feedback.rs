//! Bounce and complaint reports (`Feedback::process_report`) on the in-memory store, with
//! messages sent through the real delivery worker and the report fixtures of
//! `tests/fixtures/reports/` addressed to them.

use tidings_core::Error;
use tidings_core::domain_name::DomainName;
use tidings_core::email::EmailAddress;
use tidings_core::feedback::NotAReport;
use tidings_core::ids::MessageId;
use tidings_core::model::{BounceType, EventType, Message, MessageStatus, SuppressionReason, SuppressionSource};
use tidings_core::outbound::{ReturnPath, ReturnPathKey};
use tidings_core::ports::{MessageStore, PageRequest, SuppressionStore, WebhookStore};
use tidings_core::tracking::MAX_REPORTED_DELAYS_KEPT;
use tidings_core::usecases::{CoreConfig, CreateWebhookRequest, Ignored, ReportOutcome, SendRequest, Unmatched};
use tidings_testing::delivery::Delivery;
use tidings_testing::mailer::FakeMailer;

const RETURN_PATH_DOMAIN: &str = "bounces.tidings.example";

/// The return path every service here signs with.
fn signer() -> ReturnPath {
    ReturnPath { domain: DomainName::parse(RETURN_PATH_DOMAIN).unwrap(), key: ReturnPathKey::from_bytes([5; 32]) }
}

/// A service with a return-path domain whose worker delivers everything.
async fn service() -> Delivery {
    let config = CoreConfig { return_path: Some(signer()), ..CoreConfig::default() };
    Delivery::with(config, FakeMailer::default(), |_| {}).await
}

/// Sends a message to `to` and lets the worker deliver it.
async fn delivered(d: &Delivery, to: &str) -> Message {
    let queued = d.send(to).await;
    assert_eq!(d.step().await.delivered, 1);
    d.message(queued.id).await
}

/// The message's signed return path (as the worker wrote it).
fn return_path(message: &Message) -> String {
    signer().address(message.id, &message.to).to_string()
}

/// `message`'s return path with its id replaced by `id`, keeping its signature.
fn with_id(message: &Message, id: MessageId) -> String {
    return_path(message).replace(&message.id.to_string().to_ascii_lowercase(), &id.to_string().to_ascii_lowercase())
}

/// The unsigned return path of before: `bounces+<id>@…`.
fn unsigned(id: MessageId) -> String {
    format!("bounces+{}@{RETURN_PATH_DOMAIN}", id.to_string().to_ascii_lowercase())
}

/// The fixture with its placeholders naming `message`.
fn report_about(name: &str, message: &Message) -> Vec<u8> {
    let provider_id = message.provider_message_id.clone().expect("a sent message");
    fill(name, &provider_id, &return_path(message), &message.to.to_string())
}

fn fill(name: &str, message_id: &str, return_path: &str, recipient: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/reports/{name}", env!("CARGO_MANIFEST_DIR"));
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    match String::from_utf8(raw) {
        Ok(text) => text
            .replace("{{MESSAGE_ID}}", message_id)
            .replace("{{RETURN_PATH}}", return_path)
            .replace("{{RECIPIENT}}", recipient)
            .into_bytes(),
        Err(binary) => binary.into_bytes(),
    }
}

fn addresses(list: &[&str]) -> Vec<EmailAddress> {
    list.iter().map(|a| EmailAddress::parse(a).unwrap()).collect()
}

/// Processes the fixture sent to the message's own return path.
async fn process(d: &Delivery, name: &str, message: &Message) -> ReportOutcome {
    let envelope = addresses(&[&return_path(message)]);
    d.t.core.feedback().process_report(&envelope, &report_about(name, message)).await.unwrap()
}

fn bounced(outcome: ReportOutcome) -> (Message, bool) {
    match outcome {
        ReportOutcome::Bounced { message, hard } => (*message, hard),
        other => panic!("expected Bounced, got {other:?}"),
    }
}

#[tokio::test]
async fn a_hard_bounce_report_bounces_suppresses_notifies_and_blocks_the_next_send() {
    let d = service().await;
    let req = CreateWebhookRequest {
        url: Some("https://hooks.example.com/tidings".into()),
        event_types: Some(vec!["Bounced".into()]),
        enabled: None,
        format: None,
    };
    let endpoint = d.t.core.webhooks().create(&d.who, req).await.unwrap();
    let m = delivered(&d, "no.such.user@gmail.com").await;

    let (after, hard) = bounced(process(&d, "gmail_5_1_1.eml", &m).await);

    assert!(hard);
    assert_eq!((after.status, after.bounce_type), (MessageStatus::Bounced, Some(BounceType::Hard)));
    assert_eq!(d.message(m.id).await, after, "stored");
    let events = d.events(m.id).await;
    let last = events.last().unwrap();
    assert_eq!(last.event_type, EventType::Bounced);
    assert_eq!(last.details.smtp_code, Some(550));
    assert_eq!(last.details.enhanced_code.as_deref(), Some("5.1.1"));
    assert_eq!(last.details.bounce_type, Some(BounceType::Hard));
    let response = last.details.response.as_deref().unwrap();
    assert!(response.starts_with("The email account that you tried to reach does not exist."), "{response}");
    let entry = d.t.store.get_suppression(d.who.workspace_id, &m.to).await.unwrap().expect("suppressed");
    assert_eq!(
        (entry.reason, entry.source, entry.message_id),
        (SuppressionReason::HardBounce, SuppressionSource::Bounce, Some(m.id))
    );
    let hooks = d.t.store.list_webhook_deliveries(d.who.workspace_id, endpoint.id, PageRequest::first(10)).await;
    let hooks = hooks.unwrap().items;
    assert_eq!(hooks.len(), 1, "one webhook delivery queued");
    let payload: serde_json::Value = serde_json::from_str(&hooks[0].payload).unwrap();
    assert_eq!(payload["data"]["details"]["bounceType"], "Hard");
    let again = SendRequest {
        to: Some("No.Such.User@gmail.com".into()),
        from: Some("billing@acme.example.com".into()),
        subject: Some("Again".into()),
        text: Some("Hello".into()),
        ..SendRequest::default()
    };
    let refused = d.t.core.messages().send(&d.who, again, None).await;
    assert!(matches!(refused, Err(Error::RecipientSuppressed(_))), "{refused:?}");
}

#[tokio::test]
async fn soft_bounces_end_the_message_without_suppressing() {
    for (fixture, code) in
        [("mailbox_full_5_2_2.eml", "5.2.2"), ("yahoo_5_7_9.eml", "5.7.9"), ("postfix_failed_4_4_1.eml", "4.4.1")]
    {
        let d = service().await;
        let m = delivered(&d, "someone@example.org").await;

        let (after, hard) = bounced(process(&d, fixture, &m).await);

        assert!(!hard, "{fixture}");
        assert_eq!((after.status, after.bounce_type), (MessageStatus::Bounced, Some(BounceType::Soft)), "{fixture}");
        let last = d.events(m.id).await.pop().unwrap();
        assert_eq!(last.details.enhanced_code.as_deref(), Some(code), "{fixture}");
        assert_eq!(last.details.bounce_type, Some(BounceType::Soft), "{fixture}");
        assert_eq!(d.t.store.get_suppression(d.who.workspace_id, &m.to).await.unwrap(), None, "{fixture}");
    }
}

#[tokio::test]
async fn a_recipient_not_found_at_outlook_is_hard() {
    let d = service().await;
    let m = delivered(&d, "gone@outlook.com").await;
    let (after, hard) = bounced(process(&d, "outlook_5_1_10.eml", &m).await);
    assert!(hard);
    assert_eq!(after.bounce_type, Some(BounceType::Hard));
    assert!(d.t.store.get_suppression(d.who.workspace_id, &m.to).await.unwrap().is_some());
}

#[tokio::test]
async fn a_delay_report_is_recorded_and_the_message_stays_delivered() {
    let d = service().await;
    let m = delivered(&d, "greylisted@example.org").await;

    let outcome = process(&d, "postfix_delayed_4_7_0.eml", &m).await;

    let ReportOutcome::Deferred { message } = outcome else { panic!("expected Deferred, got {outcome:?}") };
    assert_eq!(message.status, MessageStatus::Delivered);
    assert_eq!(message.next_attempt_at, None, "nothing becomes due");
    assert_eq!(d.message(m.id).await.status, MessageStatus::Delivered);
    assert_eq!(d.event_types(m.id).await, ["Queued", "Sent", "Delivered", "Deferred"]);
    let last = d.events(m.id).await.pop().unwrap();
    assert_eq!((last.details.smtp_code, last.details.enhanced_code.as_deref()), (Some(450), Some("4.7.0")));
    assert_eq!(last.details.response.as_deref(), Some("Greylisted, please try again in 300 seconds"));

    let again = process(&d, "postfix_delayed_4_7_0.eml", &m).await;
    assert!(matches!(again, ReportOutcome::Duplicate { .. }), "{again:?}");
    assert_eq!(d.events(m.id).await.len(), 4, "the same delay report twice records it once");
}

#[tokio::test]
async fn a_complaint_moves_the_message_to_complained_and_suppresses() {
    let d = service().await;
    let m = delivered(&d, "annoyed@yahoo.com").await;

    let outcome = process(&d, "yahoo_arf_abuse.eml", &m).await;

    let ReportOutcome::Complained { message, recorded } = outcome else { panic!("got {outcome:?}") };
    assert!(recorded);
    assert_eq!(message.status, MessageStatus::Complained);
    let last = d.events(m.id).await.pop().unwrap();
    assert_eq!(last.event_type, EventType::Complained);
    assert_eq!(last.details.user_agent.as_deref(), Some("Yahoo!-Mail-Feedback/2.0"));
    assert_eq!(last.details.response.as_deref(), Some("abuse"));
    let entry = d.t.store.get_suppression(d.who.workspace_id, &m.to).await.unwrap().expect("suppressed");
    assert_eq!(
        (entry.reason, entry.source, entry.message_id),
        (SuppressionReason::Complaint, SuppressionSource::Complaint, Some(m.id))
    );
    let again = process(&d, "yahoo_arf_abuse.eml", &m).await;
    assert!(matches!(again, ReportOutcome::Duplicate { .. }), "{again:?}");
}

#[tokio::test]
async fn the_worker_sends_from_the_signed_return_path() {
    let d = service().await;
    let m = delivered(&d, "someone@example.org").await;
    let sent = d.mailer.sent();
    assert_eq!(sent.last().unwrap().envelope_from.to_string(), return_path(&m));
}

#[tokio::test]
async fn a_complaint_to_another_address_is_matched_by_its_quoted_return_path() {
    let d = service().await;
    let m = delivered(&d, "someone@hotmail.com").await;
    let envelope = addresses(&["fbl@acme.example.com"]);

    let outcome =
        d.t.core.feedback().process_report(&envelope, &report_about("outlook_jmrp_abuse.eml", &m)).await.unwrap();

    assert!(matches!(outcome, ReportOutcome::Complained { recorded: true, .. }), "{outcome:?}");
    assert_eq!(d.message(m.id).await.status, MessageStatus::Complained);
}

#[tokio::test]
async fn a_report_naming_a_message_only_by_its_message_id_changes_nothing() {
    // Contract §8: every holder of the mail can read its Message-ID, so it proves nothing.
    let d = service().await;
    let m = delivered(&d, "target@example.org").await;
    for fixture in ["gmail_5_1_1.eml", "yahoo_arf_abuse.eml", "outlook_jmrp_abuse.eml"] {
        let provider_id = m.provider_message_id.as_deref().unwrap();
        let raw = fill(fixture, provider_id, "someone@attacker.example", "target@example.org");
        let outcome =
            d.t.core.feedback().process_report(&addresses(&["postmaster@acme.example.com"]), &raw).await.unwrap();
        assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::NoReference }, "{fixture}");
    }
    assert_eq!(d.message(m.id).await.status, MessageStatus::Delivered);
    assert_eq!(d.t.store.get_suppression(d.who.workspace_id, &m.to).await.unwrap(), None);
}

#[tokio::test]
async fn forged_return_paths_for_a_neighbours_message_change_nothing() {
    // Issue #28's attack: the recipient of one message of a batch reports on the others, by
    // their ids with its own signature, with no signature, and through a complaint.
    let d = service().await;
    let mine = delivered(&d, "attacker@example.org").await;
    let others = [delivered(&d, "ann@example.org").await, delivered(&d, "bob@example.org").await];
    for other in &others {
        let provider_id = other.provider_message_id.as_deref().unwrap();
        let bounce = fill("gmail_5_1_1.eml", provider_id, "", &other.to.to_string());
        let outcome =
            d.t.core.feedback().process_report(&addresses(&[&with_id(&mine, other.id)]), &bounce).await.unwrap();
        assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::BadSignature(other.id) });
        let outcome = d.t.core.feedback().process_report(&addresses(&[&unsigned(other.id)]), &bounce).await.unwrap();
        assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::Unsigned });
        let complaint = fill("yahoo_arf_abuse.eml", "", &with_id(&mine, other.id), &other.to.to_string());
        let outcome =
            d.t.core.feedback().process_report(&addresses(&["fbl@acme.example.com"]), &complaint).await.unwrap();
        assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::BadSignature(other.id) });
        // The attacker's own return path signed for the other's recipient does not verify.
        let swapped = signer().address(mine.id, &other.to).to_string();
        let outcome = d.t.core.feedback().process_report(&addresses(&[&swapped]), &bounce).await.unwrap();
        assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::BadSignature(mine.id) });
    }
    for other in &others {
        assert_eq!(d.event_types(other.id).await, ["Queued", "Sent", "Delivered"]);
        assert_eq!(d.t.store.get_suppression(d.who.workspace_id, &other.to).await.unwrap(), None);
    }
    assert_eq!(d.event_types(mine.id).await, ["Queued", "Sent", "Delivered"]);
}

#[tokio::test]
async fn without_a_return_path_no_report_matches() {
    let d = Delivery::with(CoreConfig::default(), FakeMailer::default(), |_| {}).await;
    let m = delivered(&d, "someone@example.org").await;
    let raw = report_about("gmail_5_1_1.eml", &m);
    let outcome = d.t.core.feedback().process_report(&addresses(&[&return_path(&m)]), &raw).await.unwrap();
    assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::NoReturnPath });
    assert_eq!(d.message(m.id).await.status, MessageStatus::Delivered);
}

/// The delay fixture about `m`, made distinct by `n` (so none is a duplicate of another).
fn delay_report(m: &Message, n: usize) -> Vec<u8> {
    String::from_utf8(report_about("postfix_delayed_4_7_0.eml", m))
        .unwrap()
        .replace("please try again in 300 seconds", &format!("please try again in {n} seconds"))
        .into_bytes()
}

#[tokio::test]
async fn a_flood_of_delay_reports_keeps_a_bounded_number() {
    let d = service().await;
    let req = CreateWebhookRequest {
        url: Some("https://hooks.example.com/tidings".into()),
        event_types: Some(vec!["Deferred".into()]),
        enabled: None,
        format: None,
    };
    let endpoint = d.t.core.webhooks().create(&d.who, req).await.unwrap();
    let m = delivered(&d, "greylisted@example.org").await;
    let mut kept = 0;
    for n in 0..40 {
        match d.t.core.feedback().process_report(&addresses(&[&return_path(&m)]), &delay_report(&m, n)).await.unwrap() {
            ReportOutcome::Deferred { .. } => kept += 1,
            ReportOutcome::Ignored { reason: Ignored::TooManyDelays } => {}
            other => panic!("report {n}: {other:?}"),
        }
    }
    assert_eq!(kept, MAX_REPORTED_DELAYS_KEPT);
    let deferred = d.event_types(m.id).await.iter().filter(|t| **t == "Deferred").count();
    assert_eq!(deferred, MAX_REPORTED_DELAYS_KEPT as usize);
    let hooks = d.t.store.list_webhook_deliveries(d.who.workspace_id, endpoint.id, PageRequest::first(100)).await;
    assert_eq!(hooks.unwrap().items.len(), MAX_REPORTED_DELAYS_KEPT as usize, "one webhook per kept delay");
    // A real bounce still counts after the flood.
    let (after, _) = bounced(process(&d, "gmail_5_1_1.eml", &m).await);
    assert_eq!(after.status, MessageStatus::Bounced);
}

#[tokio::test]
async fn concurrent_delay_reports_cannot_all_slip_under_the_cap() {
    let d = service().await;
    let m = delivered(&d, "greylisted@example.org").await;
    let reports: Vec<Vec<u8>> = (0..32).map(|n| delay_report(&m, n)).collect();
    let envelope = addresses(&[&return_path(&m)]);
    let feedback = d.t.core.feedback();
    let results = futures::future::join_all(reports.iter().map(|raw| feedback.process_report(&envelope, raw))).await;
    // A report that lost every race is a Conflict (the listener answers 451 and the sender
    // retries); none may add an event past the cap.
    assert!(results.iter().all(|r| r.is_ok() || matches!(r, Err(Error::Conflict(_)))), "{results:?}");
    let deferred = d.event_types(m.id).await.iter().filter(|t| **t == "Deferred").count();
    assert!((1..=MAX_REPORTED_DELAYS_KEPT as usize).contains(&deferred), "{deferred} delays kept");
}

#[tokio::test]
async fn unknown_ids_match_nothing() {
    let d = service().await;
    let m = delivered(&d, "someone@example.org").await;
    let unknown = MessageId(ulid::Ulid::new());
    let forged = with_id(&m, unknown);
    let raw = fill("gmail_5_1_1.eml", &format!("{unknown}@acme.example.com"), &forged, "someone@example.org");

    let outcome = d.t.core.feedback().process_report(&addresses(&[&forged]), &raw).await.unwrap();

    assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::BadSignature(unknown) });
    let none =
        d.t.core
            .feedback()
            .process_report(
                &addresses(&["postmaster@acme.example.com"]),
                &fill("dsn_without_message_id.eml", "", "", "x@example.org"),
            )
            .await;
    assert_eq!(none.unwrap(), ReportOutcome::Unmatched { reason: Unmatched::NoReference });
    assert_eq!(d.message(m.id).await.status, MessageStatus::Delivered, "the real message is untouched");
}

#[tokio::test]
async fn the_return_path_counts_only_at_the_return_path_domain_in_any_case() {
    let d = service().await;
    let m = delivered(&d, "someone@example.org").await;
    // No Message-ID in this report: only the envelope can match it.
    let raw = fill("dsn_without_message_id.eml", "", "", &m.to.to_string());
    let elsewhere = return_path(&m).replace(RETURN_PATH_DOMAIN, "acme.example.com");

    let outcome = d.t.core.feedback().process_report(&addresses(&[&elsewhere]), &raw).await.unwrap();
    assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::NoReference });

    let shouted = return_path(&m).to_ascii_uppercase();
    let outcome = d.t.core.feedback().process_report(&addresses(&["other@example.net", &shouted]), &raw).await.unwrap();
    let (after, hard) = bounced(outcome);
    assert!(hard);
    assert_eq!(after.id, m.id);
}

#[tokio::test]
async fn the_envelope_wins_when_it_and_the_message_id_disagree() {
    let d = service().await;
    let named = delivered(&d, "first@example.org").await;
    let other = delivered(&d, "second@example.org").await;
    let raw = fill(
        "gmail_5_1_1.eml",
        other.provider_message_id.as_deref().unwrap(),
        &return_path(&named),
        "first@example.org",
    );

    let (after, _) =
        bounced(d.t.core.feedback().process_report(&addresses(&[&return_path(&named)]), &raw).await.unwrap());

    assert_eq!(after.id, named.id);
    assert_eq!(d.message(other.id).await.status, MessageStatus::Delivered);
}

#[tokio::test]
async fn the_same_bounce_twice_is_a_duplicate() {
    let d = service().await;
    let m = delivered(&d, "no.such.user@gmail.com").await;
    bounced(process(&d, "gmail_5_1_1.eml", &m).await);
    let events = d.events(m.id).await.len();

    let again = process(&d, "gmail_5_1_1.eml", &m).await;

    let ReportOutcome::Duplicate { message } = again else { panic!("got {again:?}") };
    assert_eq!(message.status, MessageStatus::Bounced);
    assert_eq!(d.events(m.id).await.len(), events, "no second event");
}

#[tokio::test]
async fn garbage_and_non_reports_are_ignored() {
    let d = service().await;
    let m = delivered(&d, "someone@example.org").await;
    let envelope = addresses(&[&return_path(&m)]);
    for (name, why) in [("garbage.bin", None), ("missing_boundary.eml", Some(NotAReport::MissingReportPart))] {
        let outcome = d.t.core.feedback().process_report(&envelope, &report_about(name, &m)).await.unwrap();
        match (outcome, why) {
            (ReportOutcome::Ignored { reason: Ignored::NotAReport(got) }, Some(want)) => {
                assert_eq!(got, want, "{name}")
            }
            (ReportOutcome::Ignored { reason: Ignored::NotAReport(_) }, None) => {}
            (other, _) => panic!("{name}: {other:?}"),
        }
    }
    let autoreply = b"From: a@example.org\r\nSubject: Out of office\r\n\r\nBack on Monday.\r\n";
    let outcome = d.t.core.feedback().process_report(&envelope, autoreply).await.unwrap();
    assert_eq!(outcome, ReportOutcome::Ignored { reason: Ignored::NotAReport(NotAReport::NotMultipartReport) });
    assert_eq!(d.event_types(m.id).await, ["Queued", "Sent", "Delivered"]);
}

#[tokio::test]
async fn a_report_about_a_message_never_sent_matches_nothing() {
    let d = service().await;
    let queued = d.send("someone@example.org").await;
    let raw = fill("dsn_without_message_id.eml", "", "", "someone@example.org");
    let outcome = d.t.core.feedback().process_report(&addresses(&[&return_path(&queued)]), &raw).await.unwrap();
    assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::NotSent(queued.id) });
    assert_eq!(d.message(queued.id).await.status, MessageStatus::Queued);
}

#[tokio::test]
async fn a_complaint_about_a_bounced_message_suppresses_without_an_event() {
    let d = service().await;
    let m = delivered(&d, "someone@example.org").await;
    bounced(process(&d, "mailbox_full_5_2_2.eml", &m).await);
    let events = d.events(m.id).await.len();

    let outcome = process(&d, "yahoo_arf_abuse.eml", &m).await;

    assert!(matches!(outcome, ReportOutcome::Complained { recorded: false, .. }), "{outcome:?}");
    assert_eq!(d.events(m.id).await.len(), events);
    let entry = d.t.store.get_suppression(d.who.workspace_id, &m.to).await.unwrap().expect("suppressed");
    assert_eq!(entry.reason, SuppressionReason::Complaint);
    assert_eq!(d.t.store.find_message(m.id).await.unwrap().map(|m| m.status), Some(MessageStatus::Bounced));
}
