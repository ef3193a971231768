//! The overview's rates in a real browser, with mail that makes them warn and alarm: two
//! sending domains relayed to a local SMTP sink that refuses some recipients for good (one
//! domain at 50 % bounces, the other at 5 %, 9.1 % together). At 1280 and 390 CSS pixels and
//! for each range: nothing scrolls sideways or leaves the screen, every text (the warning
//! and alarm colours of the cards and badges included) meets WCAG AA contrast computed from
//! the rendered styles, each level is said in words beside its colour, and the cards and the
//! chart's bars are links to the filtered messages list, which a click opens.

use serde_json::{Value, json};
use tidings_e2e::browser::{Browser, available};
use tidings_transport_smtp::testing::{Rule, SmtpSink, Stage};

use super::dashboard::{Setup, sign_in};
use super::fit_and_contrast::{FIT, SIZES, contrast};
use crate::common::{assert_ok, create_key, server_with_dns, verified_domain};

/// Two verified domains on a server relaying to `sink`; 2 sends from the first (one
/// refused), 20 from the second (one refused), all settled.
async fn setup(sink: &SmtpSink) -> Setup {
    let relay = format!("smtp://{}", sink.addr());
    let (server, dns) = server_with_dns(&[("TIDINGS_DELIVERY", "relay"), ("TIDINGS_SMTP_RELAY", &relay)]).await;
    let key = server.key().to_owned();
    let domain_id = verified_domain(&server, &dns, &key, "alarm.example").await;
    verified_domain(&server, &dns, &key, "warn.example").await;
    let setup = Setup { server, dns, key, domain_id };
    // The bootstrap key sends 10 a second; these 22 go at once.
    let (_, bulk) = create_key(&setup.server, &setup.key, json!({"name": "bulk", "rateLimitPerSec": 100})).await;
    for gone in ["gone-a@inbox.example", "gone-b@inbox.example"] {
        sink.add_rule(Rule::reply(Stage::Rcpt, 550, "5.1.1 user unknown").for_recipient(gone));
    }
    let mut sends: Vec<(String, &str)> = Vec::new();
    sends.push((send(&setup, &bulk, "alarm.example", "ok-a@inbox.example").await, "Delivered"));
    sends.push((send(&setup, &bulk, "alarm.example", "gone-a@inbox.example").await, "Bounced"));
    for i in 0..19 {
        sends.push((send(&setup, &bulk, "warn.example", &format!("reader{i}@inbox.example")).await, "Delivered"));
    }
    sends.push((send(&setup, &bulk, "warn.example", "gone-b@inbox.example").await, "Bounced"));
    for (id, status) in &sends {
        setup.wait_for_status(id, status).await;
    }
    setup
}

async fn send(setup: &Setup, key: &str, domain: &str, to: &str) -> String {
    let body = json!({"from": format!("hello@{domain}"), "to": to, "subject": "Hello", "text": "Hello."});
    let (status, sent) = setup.server.post("/v1/messages", key, body).await;
    assert_ok(status, &sent, 201, "a send");
    sent["data"]["id"].as_str().expect("id").to_owned()
}

/// Each card: `[id, data-level or null, href, its text]`.
const CARDS: &str = r#"
    return [...document.querySelectorAll('#cards a.card')].map(a => [a.id, a.dataset.level || null, a.getAttribute('href'), a.innerText]);"#;

#[test]
fn the_overview_fits_meets_aa_contrast_says_each_level_in_words_and_links_cards_and_bars() {
    if !available("the_overview_fits_meets_aa_contrast_says_each_level_in_words_and_links_cards_and_bars") {
        return;
    }
    crate::common::block_on(async {
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let setup = setup(&sink).await;
        let browser = Browser::start(SIZES[0].0, SIZES[0].1).await;
        sign_in(&browser, &setup, &setup.key).await;
        let (mut failures, mut misfits) = (Vec::new(), Vec::new());
        let (mut checked, mut badge) = (0, f64::MAX);
        for (width, height) in SIZES {
            browser.set_viewport(width, height).await;
            for range in ["24h", "7d", "30d"] {
                let path = format!("/overview?range={range}");
                browser.goto(&setup.url(&path)).await;
                assert_eq!(browser.response_status().await, 200, "{path}");
                for bad in browser.execute(FIT, vec![]).await.as_array().expect("a list") {
                    misfits.push(format!("{path} at {width}: {}", bad.as_str().unwrap_or_default()));
                }
                contrast(&browser, &path, width, &mut failures, &mut checked, &mut badge).await;
                let cards = browser.execute(CARDS, vec![]).await;
                check_cards(&cards, &path);
                // The bars: one link per segment, to a status and a period.
                let bars = browser
                    .execute("return [...document.querySelectorAll('svg#activity-chart a')].map(a => a.getAttribute('href'));", vec![])
                    .await;
                let bars: Vec<&str> = bars.as_array().expect("bars").iter().filter_map(Value::as_str).collect();
                assert!(
                    bars.iter().any(|h| h.starts_with("/messages?status=Bounced&createdAfter=")),
                    "{path}: {bars:?}"
                );
                assert!(bars.iter().all(|h| h.contains("&createdBefore=") && h.ends_with("Z")), "{path}: {bars:?}");
            }
        }
        assert!(misfits.is_empty(), "what does not fit:\n{}", misfits.join("\n"));
        assert!(failures.is_empty(), "text below AA contrast:\n{}", failures.join("\n"));
        assert!(badge >= 4.5, "the level badges: {badge:.2}");
        eprintln!("overview contrast: {checked} texts checked, the lowest badge {badge:.2}:1");

        // The domains table: one domain alarming, the other warning, each in words.
        browser.set_viewport(SIZES[0].0, SIZES[0].1).await;
        browser.goto(&setup.url("/overview?range=24h")).await;
        let rows = browser
            .execute("return [...document.querySelectorAll('table#domains tbody tr')].map(r => r.innerText);", vec![])
            .await;
        let rows: Vec<&str> = rows.as_array().expect("rows").iter().filter_map(Value::as_str).collect();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(
            rows.iter().any(|r| r.contains("alarm.example") && r.contains("50.0 %") && r.contains("✖ Bad")),
            "{rows:?}"
        );
        assert!(
            rows.iter().any(|r| r.contains("warn.example") && r.contains("5.0 %") && r.contains("▲ Warning")),
            "{rows:?}"
        );

        // A card is a link a click follows, to the list of its status and period.
        browser.click_to_navigate("a#card-bounce").await;
        assert_eq!(browser.path().await, "/messages");
        let address = browser.execute("return location.search;", vec![]).await;
        let address = address.as_str().unwrap_or_default();
        assert!(
            address.starts_with("?status=Bounced&createdAfter=") && address.contains("&createdBefore="),
            "{address}"
        );
        browser.close().await;
    });
}

/// The cards of one page: five, each a link to the messages list of the range, the bounce
/// rate at 9.1 % (a warning, said in words with the threshold), the complaint rate over 20
/// deliveries at 0 % (OK).
fn check_cards(cards: &Value, path: &str) {
    let cards = cards.as_array().expect("cards");
    let ids: Vec<&str> = cards.iter().filter_map(|c| c[0].as_str()).collect();
    assert_eq!(ids, ["card-delivered", "card-bounce", "card-complaint", "card-opens", "card-clicks"], "{path}");
    for card in cards {
        let href = card[2].as_str().unwrap_or_default();
        assert!(
            href.starts_with("/messages?") && href.contains("createdAfter=") && href.contains("createdBefore="),
            "{path}: {card}"
        );
    }
    let bounce = &cards[1];
    assert_eq!(bounce[1], "warn", "{path}: {bounce}");
    let text = bounce[3].as_str().unwrap_or_default();
    assert!(text.contains("9.1 %") && text.contains("Warning") && text.contains("4 %"), "{path}: {text}");
    let complaint = &cards[2];
    assert_eq!(complaint[1], "ok", "{path}: {complaint}");
    assert!(complaint[3].as_str().unwrap_or_default().contains("OK"), "{path}: {complaint}");
    let delivered = cards[0][3].as_str().unwrap_or_default();
    assert!(delivered.contains("20") && delivered.contains("of 22 accepted"), "{path}: 20 delivered: {delivered}");
}
