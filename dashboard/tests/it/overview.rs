//! The overview on known data. A `full` key: the activity of each range (24 h, 7 d, 30 d)
//! from the counters, the rates coloured by level with a word and the threshold in words,
//! the table per sending domain, the chart by hour or day, every card and bar a link to the
//! messages list filtered to its status and period; the queue, failing webhooks and
//! unverified domains. A `send` key: its own messages by outcome, and the read cap.

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use tidings_core::ids::{ApiKeyId, DomainId, EventId, MessageId};
use tidings_core::model::{BounceType, EventType, Message, MessageStatus, MessageTracking};
use tidings_core::ports::{MessageStore, SystemRandom, WebhookStore};
use tidings_core::tracking::Engagement;
use tidings_core::usecases::{AddDomainRequest, CreateWebhookRequest, OVERVIEW_READ_CAP, OverviewRange};
use tidings_testing::fixtures;

use crate::support::TestApp;

/// The fixed "now" of these tests.
fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-10T12:30:00Z").unwrap().with_timezone(&Utc)
}

/// Stores a message of `key` created `ago` before now, in `status` (no events: only its
/// creation counts). For the `send` key's own view.
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

/// Sends a message from `domain` created `ago` before now and takes it through `outcomes`
/// a minute apart (after `Sent`), as the worker and the reports would; returns it as stored.
async fn sent(app: &TestApp, domain: DomainId, ago: Duration, outcomes: &[EventType], opens: bool) -> Message {
    let at = now() - ago;
    let mut m = fixtures::message(app.workspace(), app.principal.key_id, domain);
    m.id = MessageId::new_at(at, &SystemRandom);
    m.last_event_id = EventId::new_at(at, &SystemRandom);
    (m.created_at, m.updated_at, m.next_attempt_at) = (at, at, Some(at));
    m.tracking = MessageTracking { opens, clicks: false };
    app.store.create_message(&fixtures::new_message(&m)).await.unwrap();
    let mut when = at;
    for event in std::iter::once(EventType::Sent).chain(outcomes.iter().copied()) {
        when += Duration::seconds(20);
        let mut write = fixtures::event_write(&m, event, when, None);
        if event == EventType::Bounced {
            write.event.details.bounce_type = Some(BounceType::Hard);
            write.activity = tidings_core::activity::ActivityDelta::of_events(&m, std::slice::from_ref(&write.event));
        }
        if event == EventType::Opened {
            write.message.tracking_tally = m.tracking_tally.keep(Engagement::Open, 0).unwrap();
            write.expected_last_event_id = Some(m.last_event_id);
        }
        m = write.message.clone();
        app.store.record_event(write).await.unwrap();
    }
    m
}

async fn domain(app: &TestApp, name: &str) -> DomainId {
    let added = app.core.domains().add(&app.principal, AddDomainRequest { domain: Some(name.into()) }).await.unwrap();
    added.id
}

/// The element with this id, up to its end tag's name (`a` or `tr`), as text.
fn element<'a>(body: &'a str, id: &str, tag: &str) -> &'a str {
    let at = body.find(&format!(r#"id="{id}""#)).unwrap_or_else(|| panic!("#{id} in\n{body}"));
    let start = body[..at].rfind('<').unwrap();
    let end = body[at..].find(&format!("</{tag}>")).unwrap_or_else(|| panic!("the end of #{id}")) + at;
    &body[start..end]
}

/// The row of the domains table for `id`.
fn domain_row(body: &str, id: DomainId) -> &str {
    let at = body.find(&format!(r#"<tr data-domain="{id}">"#)).unwrap_or_else(|| panic!("the row of {id}"));
    &body[at..at + body[at..].find("</tr>").unwrap()]
}

/// Messages in two domains over the last days: in the last 24 hours `mail.example` 45
/// delivered (one of them then reported as spam, nine opened) and 5 hard bounces (10 %:
/// bad), `news.example` 96 delivered and 4 hard bounces (4 %: a warning); three days ago one
/// more delivery; ten days ago one more.
async fn populate(app: &TestApp) -> (DomainId, DomainId) {
    let (mail, news) = (domain(app, "mail.example").await, domain(app, "news.example").await);
    for i in 0..45 {
        let mut outcomes = vec![EventType::Delivered];
        if i == 0 {
            outcomes.push(EventType::Complained);
        }
        if i < 9 {
            outcomes.push(EventType::Opened);
        }
        sent(app, mail, Duration::minutes(20), &outcomes, true).await;
    }
    for _ in 0..5 {
        sent(app, mail, Duration::minutes(25), &[EventType::Bounced], true).await;
    }
    for _ in 0..96 {
        sent(app, news, Duration::hours(3), &[EventType::Delivered], false).await;
    }
    for _ in 0..4 {
        sent(app, news, Duration::hours(3), &[EventType::Bounced], false).await;
    }
    sent(app, news, Duration::days(3), &[EventType::Delivered], false).await;
    sent(app, news, Duration::days(10), &[EventType::Delivered], false).await;
    (mail, news)
}

#[tokio::test]
async fn the_last_day_shows_rates_coloured_by_level_with_words_and_links_to_the_filtered_list() {
    let app = TestApp::new().await;
    app.clock.set(now());
    let (mail, news) = populate(&app).await;
    let browser = app.sign_in(&app.key).await;
    let page = browser.get("/overview?range=24h").await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    let day = "createdAfter=2026-03-09T13:00:00Z&amp;createdBefore=2026-03-10T13:00:00Z";

    let delivered = element(body, "card-delivered", "a");
    assert!(delivered.contains(r#"<span class="n">141</span>"#), "{delivered}");
    assert!(delivered.contains("of 150 accepted"), "{delivered}");
    assert!(delivered.contains(&format!(r#"href="/messages?status=Delivered&amp;{day}""#)), "{delivered}");
    // 9 hard bounces of 150 ended deliveries: 6 %, over Resend's 4 %, under SES's 10 %.
    let bounce = element(body, "card-bounce", "a");
    assert!(bounce.contains(r#"data-level="warn""#) && bounce.contains("level-warn"), "{bounce}");
    assert!(bounce.contains("6.0 %") && bounce.contains("▲ Warning"), "{bounce}");
    assert!(bounce.contains("Resend asks for under 4 %") && bounce.contains("pauses sending at 10 %"), "{bounce}");
    assert!(bounce.contains(&format!(r#"href="/messages?status=Bounced&amp;{day}""#)), "{bounce}");
    // 1 complaint of 141 delivered: 0.71 %, over Gmail's 0.3 %.
    let complaint = element(body, "card-complaint", "a");
    assert!(complaint.contains(r#"data-level="bad""#) && complaint.contains("0.71 %"), "{complaint}");
    assert!(complaint.contains("✖ Bad") && complaint.contains("refuses mail at 0.3 %"), "{complaint}");
    assert!(complaint.contains(&format!(r#"href="/messages?status=Complained&amp;{day}""#)), "{complaint}");
    // 9 first opens of the 45 delivered with open tracking; nothing tracked clicks.
    let opens = element(body, "card-opens", "a");
    assert!(opens.contains(r#"<span class="n">9</span>"#) && opens.contains("20.0 % of 45 delivered"), "{opens}");
    assert!(opens.contains(&format!(r#"href="/messages?{day}""#)), "{opens}");
    assert!(element(body, "card-clicks", "a").contains("no delivery with click tracking"));

    // Per domain: the busiest first, each rate with its level in words.
    let mail_row = domain_row(body, mail);
    assert!(
        mail_row.contains("mail.example") && mail_row.contains("10.0 %") && mail_row.contains("✖ Bad"),
        "{mail_row}"
    );
    let news_row = domain_row(body, news);
    assert!(news_row.contains("4.0 %") && news_row.contains("▲ Warning") && news_row.contains("✓ OK"), "{news_row}");
    assert!(body.find(&news.to_string()) < body.find(&mail.to_string()), "news.example sent more");

    // 24 bars, one an hour, each segment a link to its status and hour.
    assert_eq!(body.matches("<g data-period=").count(), 24);
    let hour = "createdAfter=2026-03-10T12:00:00Z&amp;createdBefore=2026-03-10T13:00:00Z";
    assert!(body.contains(&format!(r#"<a href="/messages?status=Delivered&amp;{hour}"><rect class="o-delivered" data-outcome="delivered" data-count="45""#)), "{body}");
    let nine = "createdAfter=2026-03-10T09:00:00Z&amp;createdBefore=2026-03-10T10:00:00Z";
    assert!(body.contains(&format!(r#"<a href="/messages?status=Bounced&amp;{nine}"><rect class="o-bounced" data-outcome="bounced" data-count="4""#)), "{body}");
    assert!(body.contains(r#"aria-current="page">24 hours</a>"#), "the switch marks the range");
}

#[tokio::test]
async fn each_range_counts_its_days_and_the_default_is_seven() {
    let app = TestApp::new().await;
    app.clock.set(now());
    populate(&app).await;
    let browser = app.sign_in(&app.key).await;
    for (query, periods, delivered, after) in [
        ("", 7, "142", "2026-03-04T00:00:00Z"),
        ("?range=7d", 7, "142", "2026-03-04T00:00:00Z"),
        ("?range=nonsense", 7, "142", "2026-03-04T00:00:00Z"),
        ("?range=30d", 30, "143", "2026-02-09T00:00:00Z"),
    ] {
        let page = browser.get(&format!("/overview{query}")).await;
        assert_eq!(page.status, StatusCode::OK, "{query}");
        let card = element(&page.body, "card-delivered", "a");
        assert!(card.contains(&format!(r#"<span class="n">{delivered}</span>"#)), "{query}: {card}");
        let link = format!("createdAfter={after}&amp;createdBefore=2026-03-11T00:00:00Z");
        assert!(card.contains(&link), "{query}: {card}");
        assert_eq!(page.body.matches("<g data-period=").count(), periods, "{query}");
    }
    let core = app.core.overview(&app.principal, OverviewRange::Month).await.unwrap();
    let activity = core.activity.expect("a full key sees the workspace's activity");
    assert_eq!((activity.totals.hard_bounced, activity.totals.accepted), (9, 152));
    assert!(core.own.is_none());
}

#[tokio::test]
async fn nothing_sent_shows_no_data_rather_than_a_rate() {
    let app = TestApp::new().await;
    app.clock.set(now());
    let browser = app.sign_in(&app.key).await;
    let page = browser.get("/overview?range=24h").await;
    let bounce = element(&page.body, "card-bounce", "a");
    assert!(
        bounce.contains(r#"data-level="none""#) && bounce.contains("– No data") && bounce.contains("–"),
        "{bounce}"
    );
    assert!(page.body.contains(r#"id="domains-none""#));
}

#[tokio::test]
async fn failing_webhooks_unverified_domains_and_the_queue_are_listed() {
    let app = TestApp::new().await;
    app.clock.set(now());
    message(&app, app.principal.key_id, Duration::hours(1), MessageStatus::Queued).await;
    message(&app, app.principal.key_id, Duration::hours(2), MessageStatus::Deferred).await;
    app.core.domains().add(&app.principal, AddDomainRequest { domain: Some("todo.example".into()) }).await.unwrap();
    let hook = CreateWebhookRequest {
        url: Some("https://hooks.example.com/down".into()),
        event_types: Some(vec!["Delivered".into()]),
        enabled: None,
        format: None,
    };
    let mut hook = app.core.webhooks().create(&app.principal, hook).await.unwrap();
    hook.failing_since = Some(now() - Duration::hours(3));
    app.store.update_webhook(&hook).await.unwrap();
    let quiet = CreateWebhookRequest {
        url: Some("https://hooks.example.com/fine".into()),
        event_types: Some(vec!["Delivered".into()]),
        enabled: None,
        format: None,
    };
    app.core.webhooks().create(&app.principal, quiet).await.unwrap();
    let browser = app.sign_in(&app.key).await;
    let body = browser.get("/overview").await.body;
    assert!(body.contains(r#"<span class="n" id="queue-total">2</span>"#), "{body}");
    let failing = &body[body.find(r#"id="failing-webhooks""#).unwrap()..];
    assert!(
        failing.contains("hooks.example.com/down") && !failing[..failing.find("</section>").unwrap()].contains("/fine")
    );
    assert!(body[body.find(r#"id="unverified-domains""#).unwrap()..].contains("todo.example"));
}

/// The number shown for `outcome` in the `window` (`day` or `week`) block of a send key.
fn count(body: &str, window: &str, outcome: &str) -> String {
    let block = &body[body.find(&format!(r#"id="counts-{window}""#)).expect("the counts block")..];
    let needle = format!(r#"data-outcome="{outcome}"><span class="n">"#);
    let at = block.find(&needle).unwrap_or_else(|| panic!("{outcome} in {window}")) + needle.len();
    block[at..].split('<').next().unwrap().to_owned()
}

#[tokio::test]
async fn a_send_key_counts_only_its_own_messages_and_sees_no_rates_or_management_sections() {
    let app = TestApp::new().await;
    app.clock.set(now());
    let (send_key, send_id) = app.create_key("send", None).await;
    message(&app, app.principal.key_id, Duration::minutes(5), MessageStatus::Delivered).await;
    message(&app, app.principal.key_id, Duration::minutes(6), MessageStatus::Bounced).await;
    message(&app, send_id, Duration::minutes(7), MessageStatus::Delivered).await;
    message(&app, send_id, Duration::days(2), MessageStatus::Bounced).await;
    let browser = app.sign_in(&send_key).await;
    let page = browser.get("/overview?range=30d").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(count(&page.body, "day", "delivered"), "1");
    assert_eq!(count(&page.body, "day", "bounced"), "0");
    assert_eq!(count(&page.body, "week", "bounced"), "1");
    assert!(!page.body.contains("failing-webhooks") && !page.body.contains("unverified-domains"));
    assert!(!page.body.contains("card-bounce"), "no workspace rates for a send key");
    assert_eq!(page.body.matches("<g data-hour=").count(), 24, "its own messages per hour");
}

#[tokio::test]
async fn beyond_the_read_cap_a_send_keys_counts_are_lower_bounds_and_say_so() {
    let app = TestApp::new().await;
    app.clock.set(now());
    let (send_key, send_id) = app.create_key("send", None).await;
    for i in 0..=OVERVIEW_READ_CAP as i64 {
        message(&app, send_id, Duration::seconds(1 + i % 3600), MessageStatus::Delivered).await;
    }
    let principal = app.core.authenticate(&send_key).await.unwrap();
    let overview = app.core.overview(&principal, OverviewRange::Week).await.unwrap();
    let own = overview.own.expect("a send key's own messages");
    assert!(!own.complete);
    assert_eq!((own.read, own.last_week.total()), (OVERVIEW_READ_CAP, OVERVIEW_READ_CAP as u64));
    let browser = app.sign_in(&send_key).await;
    let page = browser.get("/overview").await;
    assert!(page.body.contains(r#"id="partial""#) && page.body.contains("at least"));
    assert_eq!(count(&page.body, "week", "delivered"), format!("≥ {OVERVIEW_READ_CAP}"));
}
