//! Admission by delivery site (contract §12, "Destinations" and "Adaptive"): mail its site
//! cannot take yet goes back to the queue with no attempt, no event and no retry used; a
//! reply matching an adaptive rule holds the site while other sites flow; a relay (no sites)
//! is not shaped. A message with a recipient list is admitted copy by copy, each by its
//! recipient's site.

use std::sync::Arc;

use chrono::{DateTime, Duration as Span, Utc};
use tidings_core::delivery::{Shaping, SiteControl};
use tidings_core::model::{EventType, Message, MessageStatus};
use tidings_core::ports::Limits;
use tidings_core::shaping::ShapingTable;
use tidings_core::usecases::{CoreConfig, LocalLimits, SendRequest};
use tidings_testing::delivery::Delivery;
use tidings_testing::mailer::{FakeMailer, rejected};

/// `.slow.example` takes 2 a second over at most 10 connections; `.google.com` is built in.
const SHAPING: &str = r#"
[".slow.example"]
max_message_rate = "2/s"
connection_limit = 10
"#;

async fn shaped(mailer: FakeMailer) -> (Delivery, Arc<LocalLimits>) {
    let (d, limits, _) = shaped_with_control(mailer).await;
    (d, limits)
}

async fn shaped_with_control(mailer: FakeMailer) -> (Delivery, Arc<LocalLimits>, SiteControl) {
    let limits = Arc::new(LocalLimits::default());
    let table = Arc::new(ShapingTable::from_toml(SHAPING).expect("the shaping file"));
    let shaping = Shaping::new(table, Arc::clone(&limits) as Arc<dyn Limits>);
    let for_control = shaping.clone();
    let d = Delivery::with(CoreConfig::default(), mailer, |s| {
        s.shaping = Some(shaping);
        // One attempt at a time: the order of admissions is the order of the claim.
        s.concurrency = 1;
    })
    .await;
    let control = SiteControl::new(for_control, d.t.core.store().clone());
    (d, limits, control)
}

fn routed() -> FakeMailer {
    FakeMailer::default()
        .routing("slow.example", ".slow.example")
        .routing("gmail.example", ".google.com")
        .routing("other.example", "mx.other.example")
}

#[tokio::test]
async fn mail_over_its_sites_rate_waits_in_the_queue_without_an_attempt() {
    let (d, _limits) = shaped(routed()).await;
    let t0 = d.t.now();
    let mut sent = Vec::new();
    for n in 0..5 {
        sent.push(d.send(&format!("user{n}@slow.example")).await);
    }

    let report = d.step().await;
    assert_eq!((report.claimed, report.delivered, report.waiting), (5, 2, 3), "the burst of 2/s: {report:?}");
    assert_eq!(d.mailer.sent().len(), 2);
    let mut waiting = Vec::new();
    for m in &sent {
        let stored = d.message(m.id).await;
        if stored.status == MessageStatus::Queued {
            assert_eq!(stored.attempts, 0, "waiting is not an attempt");
            assert_eq!(d.event_types(m.id).await, ["Queued"], "and records nothing");
            waiting.push(stored.next_attempt_at.expect("due again later"));
        }
    }
    waiting.sort();
    let expected: Vec<DateTime<Utc>> = [500, 1_000, 1_500].iter().map(|&ms| t0 + Span::milliseconds(ms)).collect();
    assert_eq!(waiting, expected, "each back at its turn of the rate");

    let mut steps = 0;
    while d.mailer.sent().len() < 5 {
        steps += 1;
        assert!(steps < 40, "every message goes within 10 s");
        d.t.clock.advance(Span::milliseconds(250));
        let report = d.step().await;
        assert!(report.delivered <= 1, "one token each half second: {report:?}");
    }
    assert_eq!(d.t.now() - t0, Span::milliseconds(1_500), "5 at 2/s with a burst of 2 take 1.5 s");
    for m in &sent {
        let stored = d.message(m.id).await;
        assert_eq!((stored.status, stored.attempts), (MessageStatus::Delivered, 1), "one attempt each");
        assert_eq!(d.event_types(m.id).await, ["Queued", "Sent", "Delivered"]);
    }
}

#[tokio::test]
async fn a_throttling_reply_holds_its_site_while_other_sites_flow() {
    let gmail_says = rejected(421, "4.7.28 Our system has detected an unusual rate of unsolicited mail");
    let (d, limits, control) = shaped_with_control(routed().answering_for(".google.com", vec![gmail_says])).await;
    let first = d.send("a@gmail.example").await;
    let report = d.step().await;
    assert_eq!(report.deferred, 1, "the reply itself is a deferral: {report:?}");
    let states = limits.site_states(d.t.now()).await.expect("states");
    let google = states.iter().find(|s| s.site.as_str() == ".google.com").expect("the site has a state");
    let (rate, until, reason) = google.throttle.clone().expect("throttled by the built-in rule");
    assert_eq!(rate.to_string(), "1/min");
    assert_eq!(until, d.t.now() + Span::minutes(90));
    assert!(reason.contains("4.7.28"), "{reason}");

    // One a minute: the next Gmail message goes, the one after waits; other sites flow.
    let (g1, g2, other) =
        (d.send("b@gmail.example").await, d.send("c@gmail.example").await, d.send("d@other.example").await);
    d.t.clock.advance(Span::minutes(1));
    let report = d.step().await;
    // The first message's retry is due too, and waits like the rest of its site.
    assert_eq!((report.delivered, report.waiting), (2, 2), "{report:?}");
    assert_eq!(d.message(other.id).await.status, MessageStatus::Delivered);
    let statuses = [d.message(g1.id).await, d.message(g2.id).await];
    let held: Vec<_> = statuses.iter().filter(|m| m.status == MessageStatus::Queued).collect();
    assert_eq!(held.len(), 1, "one of the two waits for the next minute");
    assert_eq!(held[0].attempts, 0);
    // The first message's retries are still its own: waiting used none of them.
    let first = d.message(first.id).await;
    assert_eq!((first.status, first.attempts), (MessageStatus::Deferred, 1));

    // The operator's view: both sites, Google throttled with the reply that did it.
    let views = control.list(d.t.now()).await.expect("the sites");
    let names: Vec<&str> = views.iter().map(|v| v.site.as_str()).collect();
    assert_eq!(names, [".google.com", "mx.other.example"]);
    let google = &views[0];
    assert_eq!(google.limits.connection_limit, 5, "the built-in table's");
    assert_eq!(google.seen.waiting, 2, "the retry and one new message wait");
    assert_eq!(google.seen.in_flight, 0);
    assert_eq!(google.seen.admitted_last_minute, 1, "one admitted this minute; the first was a minute ago");
    assert!(google.throttled.is_some());
    assert!(google.last_reply().expect("a reply").reply.starts_with("250"), "the last reply is the delivery's");
    assert_eq!(views[1].seen.last_reply.as_ref().map(|r| r.reply.starts_with("250")), Some(true));
}

#[tokio::test]
async fn a_suspended_site_gets_nothing_until_resumed() {
    let (d, limits, control) = shaped_with_control(routed()).await;
    let now = d.t.now();
    let change =
        tidings_core::ports::SiteChange::Suspend { until: now + Span::hours(1), reason: "by the operator".into() };
    let site = tidings_core::shaping::SiteKey::parse(".slow.example").expect("a key");
    limits.change_site(&site, change, now).await.expect("suspend");
    let held = d.send("user@slow.example").await;
    let report = d.step().await;
    assert_eq!((report.waiting, report.delivered), (1, 0), "{report:?}");
    let recheck = now + Span::minutes(5);
    assert_eq!(d.message(held.id).await.next_attempt_at, Some(recheck), "asks again in 5 minutes at most");
    d.t.clock.set(recheck);
    assert_eq!(d.step().await.waiting, 1, "still suspended: put back again");
    // The operator resumes: what waits here is due at once.
    control.resume(&site, recheck).await.expect("resume");
    assert_eq!(d.message(held.id).await.next_attempt_at, Some(recheck));
    assert_eq!(d.step().await.delivered, 1);
    assert!(d.mailer.sent().len() == 1, "sent once");
}

#[tokio::test]
async fn without_sites_nothing_is_shaped() {
    // The mailer names no site (a relay): the table's limits do not apply.
    let (d, _limits) = shaped(FakeMailer::default()).await;
    for n in 0..5 {
        d.send(&format!("user{n}@slow.example")).await;
    }
    let report = d.step().await;
    assert_eq!((report.delivered, report.waiting), (5, 0), "{report:?}");
}

/// A send to `to`, `cc` and `bcc`, one recipient each.
async fn send_to_three(d: &Delivery, [to, cc, bcc]: [&str; 3]) -> Message {
    let req = SendRequest {
        to: Some(to.into()),
        cc: Some(serde_json::json!([cc])),
        bcc: Some(bcc.into()),
        from: Some("billing@acme.example.com".into()),
        subject: Some("Your invoice".into()),
        text: Some("Thanks.".into()),
        ..SendRequest::default()
    };
    d.t.core.messages().send(&d.who, req, None).await.expect("sent").message
}

/// The event types of `message` about `address`.
async fn events_about(d: &Delivery, message: &Message, address: &str) -> Vec<EventType> {
    let events = d.events(message.id).await;
    events
        .iter()
        .filter(|e| e.recipient.as_ref().is_some_and(|r| r.to_string() == address))
        .map(|e| e.event_type)
        .collect()
}

fn statuses(m: &Message) -> Vec<MessageStatus> {
    m.recipient_list().iter().map(|r| r.status).collect()
}

#[tokio::test]
async fn each_copy_of_a_message_to_several_recipients_waits_for_its_own_sites_turn() {
    let (d, limits) = shaped(routed()).await;
    let t0 = d.t.now();
    // The slow site's burst (2 at 2/s) goes to two other messages first.
    d.send("first@slow.example").await;
    d.send("second@slow.example").await;
    assert_eq!(d.step().await.delivered, 2);
    let message = send_to_three(&d, ["ann@other.example", "bob@slow.example", "carol@slow.example"]).await;

    let report = d.step().await;

    assert_eq!((report.claimed, report.delivered, report.waiting), (1, 1, 2), "{report:?}");
    let sent: Vec<String> = d.mailer.sent().iter().skip(2).map(|e| e.envelope_to.to_string()).collect();
    assert_eq!(sent, ["ann@other.example"], "the other site's copy goes at once");
    let stored = d.message(message.id).await;
    assert_eq!(statuses(&stored), [MessageStatus::Delivered, MessageStatus::Queued, MessageStatus::Queued]);
    let attempts: Vec<u32> = stored.recipient_list().iter().map(|r| r.attempts).collect();
    assert_eq!(attempts, [1, 0, 0], "waiting is not an attempt");
    assert!(events_about(&d, &stored, "bob@slow.example").await.is_empty(), "and records nothing");
    assert!(events_about(&d, &stored, "carol@slow.example").await.is_empty());
    let due: Vec<_> = stored.recipients[1..].iter().map(|r| r.next_attempt_at).collect();
    let (turn, next_turn) = (t0 + Span::milliseconds(500), t0 + Span::milliseconds(1_000));
    assert_eq!(due, [Some(turn), Some(next_turn)], "each due at its turn of the rate");
    assert_eq!(stored.next_attempt_at, Some(turn), "the message is back for its first waiting recipient");

    d.t.clock.set(turn);
    let report = d.step().await;
    assert_eq!((report.claimed, report.delivered, report.waiting), (1, 1, 0), "bob's turn alone: {report:?}");
    assert_eq!(d.message(message.id).await.next_attempt_at, Some(next_turn));
    d.t.clock.set(next_turn);
    assert_eq!(d.step().await.delivered, 1, "then carol's");

    let stored = d.message(message.id).await;
    assert_eq!((stored.status, stored.next_attempt_at), (MessageStatus::Delivered, None));
    let attempts: Vec<u32> = stored.recipient_list().iter().map(|r| r.attempts).collect();
    assert_eq!(attempts, [1, 1, 1], "one attempt each");
    assert_eq!(events_about(&d, &stored, "bob@slow.example").await, [EventType::Sent, EventType::Delivered]);
    assert_eq!(events_about(&d, &stored, "carol@slow.example").await, [EventType::Sent, EventType::Delivered]);
    let states = limits.site_states(d.t.now()).await.expect("states");
    assert!(states.iter().all(|s| s.leases == 0), "every copy's lease was given back: {states:?}");
}

#[tokio::test]
async fn copies_to_a_suspended_site_wait_while_the_rest_go_and_go_when_it_is_resumed() {
    let (d, limits, control) = shaped_with_control(routed()).await;
    let t0 = d.t.now();
    let site = suspend_slow(&limits, t0).await;
    let message = send_to_three(&d, ["ann@slow.example", "bob@other.example", "carol@slow.example"]).await;

    let report = d.step().await;

    assert_eq!((report.delivered, report.waiting), (1, 2), "{report:?}");
    let stored = d.message(message.id).await;
    assert_eq!(statuses(&stored), [MessageStatus::Queued, MessageStatus::Delivered, MessageStatus::Queued]);
    assert!(events_about(&d, &stored, "ann@slow.example").await.is_empty(), "waiting records nothing");
    assert_eq!(stored.next_attempt_at, Some(t0 + Span::minutes(5)), "asks again in 5 minutes at most");
    // The operator resumes: the copies waiting here go at once, not at their recheck.
    control.resume(&site, t0).await.expect("resume");
    assert_eq!(d.message(message.id).await.next_attempt_at, Some(t0));
    let report = d.step().await;
    assert_eq!((report.delivered, report.waiting), (2, 0), "{report:?}");
    let stored = d.message(message.id).await;
    assert_eq!(stored.status, MessageStatus::Delivered);
    assert_eq!(events_about(&d, &stored, "ann@slow.example").await, [EventType::Sent, EventType::Delivered]);
    assert_eq!(d.mailer.sent().len(), 3, "each copy sent once");
}

#[tokio::test]
async fn a_message_whose_every_copy_waits_is_put_back_without_a_write() {
    let (d, limits, control) = shaped_with_control(routed()).await;
    let t0 = d.t.now();
    let site = suspend_slow(&limits, t0).await;
    let message = send_to_three(&d, ["ann@slow.example", "bob@slow.example", "carol@slow.example"]).await;

    let report = d.step().await;

    assert_eq!((report.claimed, report.waiting, report.delivered), (1, 3, 0), "{report:?}");
    let stored = d.message(message.id).await;
    assert_eq!(d.event_types(message.id).await, ["Queued"], "no event");
    assert_eq!(stored.recipients, message.recipients, "the recipients are as sent");
    let recheck = t0 + Span::minutes(5);
    assert_eq!(stored.next_attempt_at, Some(recheck), "the message alone is due again, at the earliest turn");
    d.t.clock.set(recheck);
    assert_eq!(d.step().await.waiting, 3, "still suspended: put back again");
    assert_eq!(d.event_types(message.id).await, ["Queued"]);

    control.resume(&site, recheck).await.expect("resume");
    let report = d.step().await;
    assert_eq!((report.delivered, report.waiting), (2, 1), "the site's burst of 2, then its rate: {report:?}");
    d.t.clock.advance(Span::milliseconds(500));
    assert_eq!(d.step().await.delivered, 1);
    let stored = d.message(message.id).await;
    assert_eq!(stored.status, MessageStatus::Delivered);
    assert!(stored.recipient_list().iter().all(|r| r.attempts == 1), "one attempt each");
}

/// Suspends `.slow.example` for an hour from `now`; its key.
async fn suspend_slow(limits: &LocalLimits, now: DateTime<Utc>) -> tidings_core::shaping::SiteKey {
    let site = tidings_core::shaping::SiteKey::parse(".slow.example").expect("a key");
    let suspend = tidings_core::ports::SiteChange::Suspend { until: now + Span::hours(1), reason: "by hand".into() };
    limits.change_site(&site, suspend, now).await.expect("suspend");
    site
}

#[tokio::test]
async fn each_copys_reply_goes_through_its_sites_adaptive_rules() {
    let gmail_says = rejected(421, "4.7.28 Our system has detected an unusual rate of unsolicited mail");
    let (d, limits) = shaped(routed().answering_for(".google.com", vec![gmail_says])).await;
    send_to_three(&d, ["ann@other.example", "bob@gmail.example", "carol@other.example"]).await;

    let report = d.step().await;

    assert_eq!((report.delivered, report.deferred), (2, 1), "{report:?}");
    let states = limits.site_states(d.t.now()).await.expect("states");
    let google = states.iter().find(|s| s.site.as_str() == ".google.com").expect("the site has a state");
    let (rate, _, reason) = google.throttle.clone().expect("throttled by the built-in rule");
    assert_eq!(rate.to_string(), "1/min");
    assert!(reason.contains("4.7.28"), "{reason}");
}

#[tokio::test]
async fn a_delivery_ending_makes_the_next_message_waiting_for_its_connection_due_at_once() {
    // One connection; each delivery takes 200 ms of real time, the clock stands still. The
    // second message, refused while the first holds the connection, is made due when the
    // first ends, not a quarter second later (the fallback spread).
    let limits = Arc::new(LocalLimits::default());
    let table = ShapingTable::from_toml("[\".one.example\"]\nconnection_limit = 1\n").expect("the shaping file");
    let shaping = Shaping::new(Arc::new(table), Arc::clone(&limits) as Arc<dyn Limits>);
    let mailer = FakeMailer::stalling(std::time::Duration::from_millis(200)).routing("one.example", ".one.example");
    let d = Delivery::with(CoreConfig::default(), mailer, |s| {
        s.shaping = Some(shaping);
        s.concurrency = 2;
    })
    .await;
    let t0 = d.t.now();
    let (a, b) = (d.send("a@one.example").await, d.send("b@one.example").await);

    let report = d.step().await;
    assert_eq!((report.delivered, report.waiting), (1, 1), "one connection: {report:?}");
    let held = [d.message(a.id).await, d.message(b.id).await].into_iter().find(|m| m.status == MessageStatus::Queued);
    let held = held.expect("one waits");
    assert_eq!(held.next_attempt_at, Some(t0), "due when the connection came free");

    let report = d.step().await;
    assert_eq!(report.delivered, 1, "taken without the clock moving: {report:?}");
    assert_eq!(d.message(held.id).await.attempts, 1);
}
