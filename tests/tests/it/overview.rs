//! The overview's figures through the real binary (on sled, or PostgreSQL with
//! `TIDINGS_E2E_STORE=postgres`): mail relayed to a local SMTP sink that refuses some
//! recipients for good, a send to several recipients among them; the dashboard's 24-hour
//! overview then shows the deliveries and hard bounces per recipient, the bounce rate at its
//! level, the sending domain's row, and figures equal to a count over the messages'
//! timelines read through the API.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tidings_transport_smtp::testing::{Rule, SmtpSink, Stage};

use crate::common::{
    assert_ok, block_on, create_key, dashboard_page, dashboard_session, server_relaying_to, verified_domain,
};

const DOMAIN: &str = "overview.example";

/// The text of the element with this id, up to the end of its `tag`.
fn element<'a>(body: &'a str, id: &str, tag: &str) -> &'a str {
    let at = body.find(&format!(r#"id="{id}""#)).unwrap_or_else(|| panic!("#{id} in\n{body}"));
    let start = body[..at].rfind('<').unwrap_or(at);
    let end = body[at..].find(&format!("</{tag}>")).map_or(body.len(), |e| e + at);
    &body[start..end]
}

#[test]
fn the_overview_counts_relayed_mail_per_recipient_as_its_timelines_do() {
    block_on(async {
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let (server, dns) = server_relaying_to(&sink, &[]).await;
        let domain_id = verified_domain(&server, &dns, server.key(), DOMAIN).await;
        for gone in ["gone1@inbox.example", "gone2@inbox.example", "gone3@inbox.example"] {
            sink.add_rule(Rule::reply(Stage::Rcpt, 550, "5.1.1 user unknown").for_recipient(gone));
        }
        let from = format!("hello@{DOMAIN}");
        // The bootstrap key sends 10 a second; these eleven go at once.
        let (_, key) = create_key(&server, server.key(), json!({"name": "bulk", "rateLimitPerSec": 100})).await;
        let mut ids = Vec::new();
        let send = |to: Value| {
            let body = json!({"from": from, "to": to, "subject": "Hello", "text": "Hello."});
            let (server, key) = (&server, &key);
            async move {
                let (status, reply) = server.post("/v1/messages", key, body).await;
                assert_ok(status, &reply, 201, "a send");
                reply["data"]["id"].as_str().expect("id").to_owned()
            }
        };
        for i in 0..8 {
            ids.push(send(json!(format!("reader{i}@inbox.example"))).await);
        }
        ids.push(send(json!("gone1@inbox.example")).await);
        ids.push(send(json!("gone2@inbox.example")).await);
        // Three recipients in one send: two delivered, one refused.
        ids.push(send(json!(["ann@inbox.example", "bob@inbox.example", "gone3@inbox.example"])).await);

        // Every message settles.
        let deadline = Instant::now() + Duration::from_secs(30);
        for id in &ids {
            loop {
                let (_, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
                let status = body["data"]["status"].as_str().unwrap_or_default().to_owned();
                if ["Delivered", "Bounced", "PartiallyDelivered"].contains(&status.as_str()) {
                    break;
                }
                assert!(Instant::now() < deadline, "message {id} is still {status}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }

        // The naive count: every timeline through the API.
        let (mut delivered, mut hard) = (0u64, 0u64);
        for id in &ids {
            let (status, body) = server.get(&format!("/v1/messages/{id}/events?limit=100"), server.key()).await;
            assert_ok(status, &body, 200, "a timeline");
            for event in body["data"].as_array().expect("events") {
                match event["type"].as_str() {
                    Some("Delivered") => delivered += 1,
                    Some("Bounced") if event["details"]["bounceType"] == "Hard" => hard += 1,
                    _ => {}
                }
            }
        }
        assert_eq!((delivered, hard), (10, 3), "the relay delivered ten recipients and refused three");

        // The dashboard, signed in with the bootstrap key.
        let session = dashboard_session(&server, server.key()).await;
        let (status, body) = dashboard_page(&server, &session, "/overview?range=24h").await;
        assert_eq!(status, 200);

        let card = element(&body, "card-delivered", "a");
        assert!(card.contains(&format!(r#"<span class="n">{delivered}</span>"#)), "{card}");
        assert!(card.contains("of 13 accepted"), "thirteen recipients in eleven sends: {card}");
        // 3 hard bounces of 13 recipients whose delivery ended: 23.1 %, over SES's 10 %.
        let bounce = element(&body, "card-bounce", "a");
        assert!(
            bounce.contains(r#"data-level="bad""#) && bounce.contains("23.1 %") && bounce.contains("✖ Bad"),
            "{bounce}"
        );
        assert!(bounce.contains(&format!("{hard} hard bounces")), "{bounce}");
        assert!(bounce.contains("href=\"/messages?status=Bounced&amp;createdAfter="), "{bounce}");
        let row = element(&body, "domains", "table");
        assert!(row.contains(&format!(r#"<tr data-domain="{domain_id}">"#)) && row.contains(DOMAIN), "{row}");
        // The chart's bars (one an hour; the sends may straddle an hour) add up to the cards.
        let bars: u64 = body
            .match_indices(r#"data-outcome="delivered" data-count=""#)
            .map(|(at, m)| body[at + m.len()..].split('"').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(bars, delivered, "the delivered segments of the chart");
        drop(dns);
    });
}
