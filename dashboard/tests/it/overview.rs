//! The overview on known data: counts by outcome for 24 hours and 7 days, the hourly SVG
//! chart (segments and their geometry), the queue, failing webhooks and unverified domains;
//! a send key's overview counting only its own messages; the read cap.

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use tidings_core::ids::{ApiKeyId, DomainId, EventId, MessageId};
use tidings_core::model::MessageStatus;
use tidings_core::ports::{MessageStore, SystemRandom, WebhookStore};
use tidings_core::usecases::{CreateWebhookRequest, OVERVIEW_READ_CAP};
use tidings_testing::fixtures;

use crate::support::TestApp;

/// The fixed "now" of these tests.
fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-10T12:30:00Z").unwrap().with_timezone(&Utc)
}

/// Stores a message of `key` created `ago` before now, in `status`.
async fn message(app: &TestApp, key: ApiKeyId, ago: Duration, status: MessageStatus) -> MessageId {
    let at = now() - ago;
    let mut m = fixtures::message(app.workspace(), key, DomainId::new_at(at, &SystemRandom));
    m.id = MessageId::new_at(at, &SystemRandom);
    m.last_event_id = EventId::new_at(at, &SystemRandom);
    (m.created_at, m.updated_at, m.status) = (at, at, status);
    m.next_attempt_at = matches!(status, MessageStatus::Queued | MessageStatus::Deferred).then_some(at);
    app.store.create_message(&fixtures::new_message(&m)).await.unwrap();
    m.id
}

/// The number shown for `outcome` in the `window` (`day` or `week`) block.
fn count(body: &str, window: &str, outcome: &str) -> String {
    let block = &body[body.find(&format!(r#"id="counts-{window}""#)).expect("the counts block")..];
    let needle = format!(r#"data-outcome="{outcome}"><span class="n">"#);
    let at = block.find(&needle).unwrap_or_else(|| panic!("{outcome} in {window}")) + needle.len();
    block[at..].split('<').next().unwrap().to_owned()
}

/// The `<g>` of one hour of the chart.
fn hour<'a>(body: &'a str, start: &str) -> &'a str {
    let at = body.find(&format!(r#"<g data-hour="{start}">"#)).unwrap_or_else(|| panic!("hour {start}"));
    let end = body[at..].find("</g>").unwrap();
    &body[at..at + end]
}

#[tokio::test]
async fn counts_and_chart_follow_the_messages_of_the_last_day_and_week() {
    let app = TestApp::new().await;
    app.clock.set(now());
    let key = app.principal.key_id;
    for _ in 0..3 {
        message(&app, key, Duration::minutes(10), MessageStatus::Delivered).await;
    }
    message(&app, key, Duration::hours(1), MessageStatus::Queued).await;
    message(&app, key, Duration::hours(2), MessageStatus::Bounced).await;
    message(&app, key, Duration::hours(5), MessageStatus::Complained).await;
    message(&app, key, Duration::minutes(23 * 60 + 30), MessageStatus::Deferred).await;
    message(&app, key, Duration::minutes(23 * 60 + 30), MessageStatus::Deferred).await;
    message(&app, key, Duration::hours(25), MessageStatus::Failed).await;
    message(&app, key, Duration::days(6), MessageStatus::Delivered).await;
    message(&app, key, Duration::days(8), MessageStatus::Delivered).await;
    // Something needing attention: a domain never verified, a webhook endpoint failing.
    app.core
        .add_domain(&app.principal, tidings_core::usecases::AddDomainRequest { domain: Some("todo.example".into()) })
        .await
        .unwrap();
    let hook = CreateWebhookRequest {
        url: Some("https://hooks.example.com/down".into()),
        event_types: Some(vec!["Delivered".into()]),
        enabled: None,
    };
    let mut hook = app.core.create_webhook(&app.principal, hook).await.unwrap();
    hook.failing_since = Some(now() - Duration::hours(3));
    app.store.update_webhook(&hook).await.unwrap();
    let quiet = CreateWebhookRequest {
        url: Some("https://hooks.example.com/fine".into()),
        event_types: Some(vec!["Delivered".into()]),
        enabled: None,
    };
    app.core.create_webhook(&app.principal, quiet).await.unwrap();

    let browser = app.sign_in(&app.key).await;
    let page = browser.get("/overview").await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    let day =
        [("delivered", "3"), ("bounced", "1"), ("complained", "1"), ("deferred", "2"), ("failed", "0"), ("other", "1")];
    for (outcome, n) in day {
        assert_eq!(count(body, "day", outcome), n, "24 h {outcome}");
    }
    let week =
        [("delivered", "4"), ("bounced", "1"), ("complained", "1"), ("deferred", "2"), ("failed", "1"), ("other", "1")];
    for (outcome, n) in week {
        assert_eq!(count(body, "week", outcome), n, "7 d {outcome}");
    }
    assert!(!body.contains(r#"id="partial""#), "everything was read");

    // 24 bars, 13:00 yesterday to the current hour; the busiest hour (3) fills the plot.
    assert_eq!(body.matches("<g data-hour=").count(), 24);
    let current = hour(body, "2026-03-10T12:00:00+00:00");
    assert!(current.contains(r#"<rect class="o-delivered" data-outcome="delivered" data-count="3" x="#), "{current}");
    assert!(current.contains(r#"y="12.0" width="#) && current.contains(r#"height="184.0""#), "{current}");
    let first = hour(body, "2026-03-09T13:00:00+00:00");
    assert!(
        first.contains(r#"data-outcome="deferred" data-count="2""#) && first.contains(r#"height="122.7""#),
        "{first}"
    );
    let eleven = hour(body, "2026-03-10T11:00:00+00:00");
    assert!(eleven.contains(r#"data-outcome="other" data-count="1""#), "{eleven}");
    assert!(
        hour(body, "2026-03-10T05:00:00+00:00").is_empty()
            || !hour(body, "2026-03-10T05:00:00+00:00").contains("<rect")
    );
    assert!(body.contains("<svg class=\"chart\" id=\"hourly-chart\""), "drawn on the server");

    // The queue: the one Queued and the two Deferred messages wait.
    assert!(body.contains(r#"<span class="n" id="queue-total">3</span>"#), "{body}");
    let failing = &body[body.find(r#"id="failing-webhooks""#).unwrap()..];
    assert!(
        failing.contains("hooks.example.com/down") && !failing[..failing.find("</section>").unwrap()].contains("/fine")
    );
    assert!(body[body.find(r#"id="unverified-domains""#).unwrap()..].contains("todo.example"));
}

#[tokio::test]
async fn a_send_key_counts_only_its_own_messages_and_sees_no_management_sections() {
    let app = TestApp::new().await;
    app.clock.set(now());
    let (send_key, send_id) = app.create_key("send", None).await;
    message(&app, app.principal.key_id, Duration::minutes(5), MessageStatus::Delivered).await;
    message(&app, app.principal.key_id, Duration::minutes(6), MessageStatus::Bounced).await;
    message(&app, send_id, Duration::minutes(7), MessageStatus::Delivered).await;
    let browser = app.sign_in(&send_key).await;
    let page = browser.get("/overview").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(count(&page.body, "day", "delivered"), "1");
    assert_eq!(count(&page.body, "day", "bounced"), "0");
    assert!(!page.body.contains("failing-webhooks") && !page.body.contains("unverified-domains"));
}

#[tokio::test]
async fn beyond_the_read_cap_the_counts_are_lower_bounds_and_say_so() {
    let app = TestApp::new().await;
    app.clock.set(now());
    for i in 0..=OVERVIEW_READ_CAP as i64 {
        message(&app, app.principal.key_id, Duration::seconds(1 + i % 3600), MessageStatus::Delivered).await;
    }
    let overview = app.core.overview(&app.principal).await.unwrap();
    assert!(!overview.complete);
    assert_eq!((overview.read, overview.last_week.total()), (OVERVIEW_READ_CAP, OVERVIEW_READ_CAP as u64));
    let browser = app.sign_in(&app.key).await;
    let page = browser.get("/overview").await;
    assert!(page.body.contains(r#"id="partial""#) && page.body.contains("at least"));
    assert_eq!(count(&page.body, "week", "delivered"), format!("≥ {OVERVIEW_READ_CAP}"));
}
