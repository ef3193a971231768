//! The reputation guard through the built server (contract §12, "Reputation guard"): a
//! domain whose hard-bounce rate reaches the pause threshold is paused once, announced by
//! one signed `SendingPaused` webhook; its sends are refused 403 `sending_paused`; mail
//! already queued is held, not attempted and not bounced; the rates and the state show in
//! `GET /v1/reputation` and `/metrics`; and a resume by a full key lets the held mail and new
//! sends go. Runs on sled, and on PostgreSQL in the suite's second pass.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tidings_transport_smtp::testing::{Rule, SmtpSink, Stage};

use crate::common::mail::{timeline, types};
use crate::common::receiver::Receiver;
use crate::common::{
    assert_error, assert_ok, block_on, create_key, dashboard_page, dashboard_session, server_relaying_to,
    verified_domain,
};

const DOMAIN: &str = "shop.example";
const WAIT: Duration = Duration::from_secs(60);

/// Sends, waiting out the key's send rate (20 sends are more than its burst).
async fn send(server: &tidings_e2e::TestServer, key: &str, body: Value) -> (u16, Value) {
    loop {
        let (status, answer) = server.post("/v1/messages", key, body.clone()).await;
        if status != 429 {
            return (status, answer);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn mail(to: &str) -> Value {
    json!({"from": format!("orders@{DOMAIN}"), "to": to, "subject": "Your order", "text": "Thanks for your order."})
}

/// Polls the message until its status is one of `done`.
async fn settle(server: &tidings_e2e::TestServer, id: &str, done: &[&str]) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
        if done.iter().any(|s| body["data"]["status"] == *s) {
            return body["data"].clone();
        }
        assert!(Instant::now() < deadline, "{id} never reached {done:?}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_domain_over_the_bounce_threshold_is_paused_its_mail_held_until_resumed() {
    block_on(async {
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        for n in 0..3 {
            sink.add_rule(
                Rule::reply(Stage::Rcpt, 550, "5.1.1 user unknown").for_recipient(&format!("gone{n}@inbox.example")),
            );
        }
        let (server, dns) = server_relaying_to(
            &sink,
            &[
                ("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true"),
                ("TIDINGS_REPUTATION_MIN_VOLUME", "20"),
                ("TIDINGS_REPUTATION_CHECK_INTERVAL", "1s"),
            ],
        )
        .await;
        let key = server.key().to_owned();
        let domain_id = verified_domain(&server, &dns, &key, DOMAIN).await;
        let receiver = Receiver::start().await;
        let hook = json!({"url": receiver.url("/guard"), "eventTypes": ["ReputationWarning", "SendingPaused"]});
        let (status, body) = server.post("/v1/webhooks", &key, hook).await;
        assert_ok(status, &body, 201, "an endpoint for the guard's events");
        let secret = body["data"]["secret"].as_str().unwrap().to_owned();

        // A message scheduled far ahead: queued, not due, while the rates go bad.
        let later = json!({"from": format!("orders@{DOMAIN}"), "to": "later@inbox.example", "subject": "Later",
                           "text": "Held.", "scheduledAt": (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339()});
        let (status, body) = send(&server, &key, later).await;
        assert_ok(status, &body, 201, "schedule a message");
        let held = body["data"]["id"].as_str().unwrap().to_owned();

        // 17 delivered and 3 hard bounces: 15 %, over the 8 % pause threshold, at 20 recipients.
        let mut ids = Vec::new();
        for n in 0..20 {
            let to = if n < 3 { format!("gone{n}@inbox.example") } else { format!("reader{n}@inbox.example") };
            let (status, body) = send(&server, &key, mail(&to)).await;
            assert_ok(status, &body, 201, "send");
            ids.push(body["data"]["id"].as_str().unwrap().to_owned());
        }
        for id in &ids {
            settle(&server, id, &["Delivered", "Bounced"]).await;
        }

        // One SendingPaused, signed, naming the domain, the rate and the resume call; no
        // warning (it went straight past it) and no workspace event (its only domain is
        // paused, so nothing else of it is counted).
        let hits = receiver.wait_for("/guard", 1, WAIT).await;
        let event = hits[0].json();
        assert_eq!(event["type"], "SendingPaused", "{event}");
        standardwebhooks::Webhook::new(&secret).unwrap().verify(&hits[0].body, &hits[0].headers).expect("signed");
        let details = &event["data"]["details"];
        assert_eq!(
            (&details["scope"], &details["domain"], &details["rate"]),
            (&json!("domain"), &json!(DOMAIN), &json!("bounce")),
            "{event}"
        );
        assert_eq!((&details["counted"], &details["among"]), (&json!(3), &json!(20)), "{event}");
        assert_eq!(details["ratePercent"], 15.0, "{event}");
        assert_eq!(details["thresholdPercent"], 8.0, "{event}");
        assert_eq!(details["resume"], format!("POST /v1/domains/{domain_id}/resume"), "{event}");
        assert!(event["data"]["messageId"].is_null(), "{event}");

        // New sends are refused, naming the rate and the way out; by the Resend API too.
        let (status, body) = send(&server, &key, mail("new@inbox.example")).await;
        assert_error(status, &body, 403, "sending_paused", "a send while paused");
        let said = body["error"]["message"].as_str().unwrap();
        assert!(
            said.contains("bounce rate 15.00 %") && said.contains(&format!("/v1/domains/{domain_id}/resume")),
            "{said}"
        );
        let resend =
            json!({"from": format!("orders@{DOMAIN}"), "to": ["new@inbox.example"], "subject": "Hi", "text": "x"});
        let (status, body) = server.post("/resend/emails", &key, resend).await;
        assert_eq!(status, 403, "Resend's API refuses too: {body}");

        // Where it stands, in the API and in /metrics.
        let (status, body) = server.get("/v1/reputation", &key).await;
        assert_ok(status, &body, 200, "the standings");
        let scopes = body["data"].as_array().unwrap();
        assert_eq!(scopes[0]["scope"], "workspace", "{body}");
        assert_eq!(scopes[0]["state"], "good", "{body}");
        let domain = scopes.iter().find(|s| s["domain"] == DOMAIN).expect("the domain is listed");
        assert_eq!(
            (&domain["state"], &domain["volume"], &domain["hardBounced"]),
            (&json!("paused"), &json!(20), &json!(3)),
            "{body}"
        );
        assert_eq!(domain["bounceRate"], 15.0, "{body}");
        // An open /metrics counts scopes by state and names no customer.
        let metrics = server.request(reqwest::Method::GET, "/metrics").send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains("tidings_reputation_scopes{scope=\"domain\",state=\"paused\"} 1\n"), "{metrics}");
        assert!(metrics.contains("tidings_reputation_worst_bounce_rate 0.15\n"), "{metrics}");
        assert!(!metrics.contains(DOMAIN), "{metrics}");

        // The dashboard's overview says why, with a button that resumes.
        let session = dashboard_session(&server, &key).await;
        let (status, page) = dashboard_page(&server, &session, "/overview").await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains(&format!("Domain {DOMAIN} cannot send.")), "the banner: {page}");
        assert!(page.contains("bounce rate 15.00 % (3 of 20 recipients)"), "the rate: {page}");
        assert!(page.contains(&format!("action=\"/domains/{domain_id}/resume\"")), "the resume button: {page}");

        // A send key may not resume.
        let (_, send_key) = create_key(&server, &key, json!({"name": "sender", "scope": "send"})).await;
        let (status, body) = server.post(&format!("/v1/domains/{domain_id}/resume"), &send_key, json!({})).await;
        assert_error(status, &body, 403, "insufficient_scope", "a send key resuming");

        // The scheduled message falls due while paused: held, never attempted.
        let (status, body) = server
            .patch(&format!("/v1/messages/{held}"), &key, json!({"scheduledAt": chrono::Utc::now().to_rfc3339()}))
            .await;
        assert_ok(status, &body, 200, "make the scheduled message due now");
        tokio::time::sleep(Duration::from_secs(4)).await;
        let events = timeline(&server, &key, &held).await;
        assert!(!types(&events).contains(&"Sent"), "held mail is not attempted: {events:#?}");
        assert!(!sink.messages().iter().any(|m| m.recipients.contains(&"later@inbox.example".to_owned())));

        // Resumed: the held message goes, new sends are taken, and no new event is raised.
        let (status, body) = server.post(&format!("/v1/domains/{domain_id}/resume"), &key, json!({})).await;
        assert_ok(status, &body, 200, "resume");
        let domain = body["data"].as_array().unwrap().iter().find(|s| s["domain"] == DOMAIN).cloned().unwrap();
        assert_eq!(
            (&domain["state"], &domain["volume"]),
            (&json!("good"), &json!(0)),
            "counted from the resume: {domain}"
        );
        settle(&server, &held, &["Delivered"]).await;
        let (_, page) = dashboard_page(&server, &session, "/overview").await;
        assert!(page.contains("Sending reputation: good."), "the banner is gone: {page}");
        let (status, body) = send(&server, &key, mail("new@inbox.example")).await;
        assert_ok(status, &body, 201, "a send after the resume");
        settle(&server, body["data"]["id"].as_str().unwrap(), &["Delivered"]).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(receiver.hits("/guard").len(), 1, "the pause was announced once");
    });
}
