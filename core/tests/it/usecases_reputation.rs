//! The reputation guard's use cases over the in-memory store, a scripted mailer and the
//! delivery worker: a warning said once, then a pause with its event; sends refused and
//! queued mail held while paused; the resume counting from then on; the workspace catching
//! bad mail spread over domains too small to judge alone; and two nodes judging at once
//! changing a standing (and announcing it) once.

use std::sync::Arc;

use chrono::Duration as Span;
use tidings_core::Error;
use tidings_core::model::{DomainStatus, MessageStatus};
use tidings_core::ports::{DomainStore, PageRequest, SystemRandom, WebhookStore};
use tidings_core::reputation::ReputationPolicy;
use tidings_core::usecases::{AddDomainRequest, CoreConfig, CreateWebhookRequest, SendRequest, Tidings};
use tidings_testing::delivery::Delivery;
use tidings_testing::mailer::{Answer, FakeMailer, accepted, rejected};

/// A guard judging from 20 recipients, with the contract's thresholds.
fn config() -> CoreConfig {
    CoreConfig {
        allow_private_webhooks: true,
        reputation: ReputationPolicy { min_volume: 20, ..ReputationPolicy::default() },
        ..CoreConfig::default()
    }
}

fn gone() -> Answer {
    rejected(550, "5.1.1 user unknown")
}

/// `d`'s endpoint for the guard's events.
async fn guard_hook(d: &Delivery) -> tidings_core::model::WebhookEndpoint {
    let req = CreateWebhookRequest {
        url: Some("https://hooks.example.com/guard".into()),
        event_types: Some(vec!["ReputationWarning".into(), "SendingPaused".into()]),
        enabled: None,
        format: None,
    };
    d.t.core.webhooks().create(&d.who, req).await.unwrap()
}

/// The event types queued for `endpoint`, oldest first.
async fn announced(d: &Delivery, endpoint: tidings_core::ids::WebhookId) -> Vec<serde_json::Value> {
    let page = d.t.store.list_webhook_deliveries(d.who.workspace_id, endpoint, PageRequest::first(50)).await.unwrap();
    page.items.iter().rev().map(|x| serde_json::from_str(&x.payload).unwrap()).collect()
}

/// Sends `n` messages and delivers each with one step.
async fn send_and_deliver(d: &Delivery, n: usize) {
    for i in 0..n {
        d.send(&format!("reader{i}@example.net")).await;
        d.step().await;
    }
}

#[tokio::test]
async fn a_warning_is_said_once_then_a_pause_holds_mail_until_resumed() {
    // 1 hard bounce in 20: 5 %, over the 4 % warning, under the 8 % pause.
    let mut script = vec![gone()];
    script.extend((0..19).map(|_| accepted()));
    // Then the two refusals that pause it.
    script.extend([gone(), gone()]);
    let d = Delivery::with(config(), FakeMailer::answering(script), |_| {}).await;
    let hook = guard_hook(&d).await;
    let ws = d.who.workspace_id;
    send_and_deliver(&d, 20).await;

    let guard = d.t.core.reputation();
    assert_eq!(guard.judge_workspace(ws, d.t.now()).await.unwrap(), 1, "the domain is warned");
    assert_eq!(guard.judge_workspace(ws, d.t.now()).await.unwrap(), 0, "and only once");
    let said = announced(&d, hook.id).await;
    assert_eq!(said.len(), 1, "{said:#?}");
    assert_eq!(said[0]["type"], "ReputationWarning");
    assert_eq!(said[0]["data"]["details"]["rate"], "bounce");
    assert_eq!(said[0]["data"]["details"]["ratePercent"], 5.0);
    assert!(said[0]["data"]["details"]["resume"].is_null(), "a warning has nothing to resume");
    // Warned, sending goes on.
    let queued = d.send("later@example.net").await;

    // Two more hard bounces: 3 of 22, 13.6 %, paused.
    d.step().await;
    d.send("one-more@example.net").await;
    d.step().await;
    let held = d.send("held@example.net").await;
    assert_eq!(guard.judge_workspace(ws, d.t.now()).await.unwrap(), 1, "the domain is paused");
    let said = announced(&d, hook.id).await;
    assert_eq!(
        said.iter().map(|e| e["type"].as_str().unwrap()).collect::<Vec<_>>(),
        ["ReputationWarning", "SendingPaused"]
    );
    assert_eq!(said[1]["data"]["details"]["counted"], 3);
    assert_eq!(said[1]["data"]["details"]["among"], 22);
    assert_eq!(said[1]["data"]["details"]["resume"], format!("POST /v1/domains/{}/resume", d.domain.id));
    assert_eq!(d.message(queued.id).await.status, MessageStatus::Bounced);

    // Sends are refused; the message queued before the pause is held: no attempt, no event.
    let refused = d.t.core.messages().send(&d.who, request("new@example.net"), None).await.unwrap_err();
    assert!(matches!(&refused, Error::SendingPaused(m) if m.contains("bounce rate 13.64 %")), "{refused:?}");
    let sent_before = d.mailer.sent().len();
    let report = d.step().await;
    assert_eq!(report.waiting, 1, "{report:?}");
    assert_eq!(d.mailer.sent().len(), sent_before, "nothing was attempted");
    assert_eq!(d.event_types(held.id).await, ["Queued"], "no attempt, no bounce");
    d.t.clock.advance(Span::minutes(2));
    assert_eq!(d.step().await.waiting, 1, "still held a while later");

    // Resumed: counted from now, the held message goes, sends are taken again.
    let standings = guard.resume_domain(&d.who, d.domain.id).await.unwrap();
    let domain = standings.iter().find(|s| s.domain_id == Some(d.domain.id)).unwrap();
    assert_eq!((domain.state, domain.volume), ("good", 0), "{domain:?}");
    d.t.clock.advance(Span::minutes(2));
    assert_eq!(d.step().await.delivered, 1);
    assert_eq!(d.message(held.id).await.status, MessageStatus::Delivered);
    d.t.core.messages().send(&d.who, request("new@example.net"), None).await.expect("taken after the resume");
    assert_eq!(guard.judge_workspace(ws, d.t.now()).await.unwrap(), 0, "the old bounces do not pause it again");
    assert_eq!(announced(&d, hook.id).await.len(), 2);
}

fn request(to: &str) -> SendRequest {
    SendRequest {
        to: Some(to.into()),
        from: Some("billing@acme.example.com".into()),
        subject: Some("Hi".into()),
        text: Some("Hello.".into()),
        ..SendRequest::default()
    }
}

#[tokio::test]
async fn the_workspace_catches_bad_mail_spread_over_domains_too_small_to_judge() {
    // Two domains, 15 recipients each with 3 hard bounces: 20 % each, but under the 20
    // recipients a domain is judged at; together 30 recipients at 20 %.
    let mut script = Vec::new();
    for _ in 0..2 {
        script.extend((0..3).map(|_| gone()));
        script.extend((0..12).map(|_| accepted()));
    }
    let d = Delivery::with(config(), FakeMailer::answering(script), |_| {}).await;
    let hook = guard_hook(&d).await;
    let mut other =
        d.t.core.domains().add(&d.who, AddDomainRequest { domain: Some("other.example.com".into()) }).await.unwrap();
    other.status = DomainStatus::Verified;
    other.verified_at = Some(d.t.now());
    d.t.store.update_domain(&other).await.unwrap();
    send_and_deliver(&d, 15).await;
    for i in 0..15 {
        let req = SendRequest { from: Some("news@other.example.com".into()), ..request(&format!("r{i}@example.org")) };
        d.t.core.messages().send(&d.who, req, None).await.unwrap();
        d.step().await;
    }

    let guard = d.t.core.reputation();
    assert_eq!(guard.judge_workspace(d.who.workspace_id, d.t.now()).await.unwrap(), 1, "the workspace alone");
    let said = announced(&d, hook.id).await;
    assert_eq!(said.len(), 1, "{said:#?}");
    assert_eq!(
        (&said[0]["type"], &said[0]["data"]["details"]["scope"]),
        (&"SendingPaused".into(), &"workspace".into())
    );
    for from in ["billing@acme.example.com", "news@other.example.com"] {
        let req = SendRequest { from: Some(from.into()), ..request("x@example.net") };
        let refused = d.t.core.messages().send(&d.who, req, None).await.unwrap_err();
        assert!(matches!(&refused, Error::SendingPaused(m) if m.contains("/v1/reputation/resume")), "{refused:?}");
    }
    guard.resume_workspace(&d.who).await.unwrap();
    d.t.core.messages().send(&d.who, request("x@example.net"), None).await.expect("taken after the resume");
    assert_eq!(guard.judge_workspace(d.who.workspace_id, d.t.now()).await.unwrap(), 0, "counted from the resume");
}

#[tokio::test]
async fn two_nodes_judging_at_once_change_a_standing_and_announce_it_once() {
    let mut script: Vec<Answer> = (0..5).map(|_| gone()).collect();
    script.extend((0..15).map(|_| accepted()));
    let d = Delivery::with(config(), FakeMailer::answering(script), |_| {}).await;
    let hook = guard_hook(&d).await;
    send_and_deliver(&d, 20).await;
    let other_node = Tidings::new(
        Arc::clone(&d.t.store) as _,
        Arc::clone(&d.t.clock) as _,
        Arc::new(SystemRandom),
        Arc::clone(&d.t.dns) as _,
        config(),
    );
    let ws = d.who.workspace_id;
    let (here, there) = (d.t.core.reputation(), other_node.reputation());
    let (a, b) = tokio::join!(here.judge_workspace(ws, d.t.now()), there.judge_workspace(ws, d.t.now()));
    assert_eq!(a.unwrap() + b.unwrap(), 1, "one change between the two");
    let said = announced(&d, hook.id).await;
    assert_eq!(said.len(), 1, "one event: {said:#?}");
    // The other node sees the pause too (it reads the store).
    let refused = other_node.messages().send(&d.who, request("x@example.net"), None).await.unwrap_err();
    assert!(matches!(refused, Error::SendingPaused(_)), "{refused:?}");
}
