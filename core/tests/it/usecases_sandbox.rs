//! The sandbox sending domain over the in-memory store: with sandbox sending on, a
//! workspace sends without a domain of its own, from `noreply@sandbox.tidings.invalid`; off,
//! everything is as before and any use of the sandbox is refused with what to do. Two services
//! over one store, one on and one off, stand for a server restarted with another transport.

use std::sync::Arc;

use chrono::Duration;
use tidings_core::Error;
use tidings_core::delivery::{DeliverySettings, DeliveryWorker};
use tidings_core::ids::DomainId;
use tidings_core::model::{Domain, DomainKind, DomainStatus, EventType, MessageStatus, RecordStatus};
use tidings_core::ports::{DomainStore, Mailer, MessageQuery, MessageStore, PageRequest, SystemRandom};
use tidings_core::usecases::{
    AddDomainRequest, CoreConfig, CreateApiKeyRequest, ListParams, Principal, SANDBOX_DOMAIN, SendRequest, Tidings,
    UpdateDomainTrackingRequest,
};
use tidings_testing::TestCore;
use tidings_testing::dkim::verify_dkim;
use tidings_testing::fixtures;
use tidings_testing::mailer::FakeMailer;
use tidings_testing::service::{full_key, invalid_fields};

fn text_send(to: &str) -> SendRequest {
    SendRequest {
        to: Some(to.into()),
        subject: Some("Hello".into()),
        text: Some("It works.".into()),
        ..SendRequest::default()
    }
}

fn from_sandbox(to: &str) -> SendRequest {
    SendRequest { from: Some(format!("noreply@{SANDBOX_DOMAIN}")), ..text_send(to) }
}

/// A service with sandbox sending on (the server with `TIDINGS_DELIVERY=outbox`).
fn sandbox_on() -> TestCore {
    TestCore::with_config(CoreConfig { sandbox_sending: true, ..CoreConfig::default() })
}

/// Another service over `t`'s store and clock with sandbox sending `on` or off: the same data
/// after a restart with another transport, or a second node.
fn node(t: &TestCore, on: bool) -> Tidings {
    let config = CoreConfig { sandbox_sending: on, ..CoreConfig::default() };
    Tidings::new(
        Arc::clone(&t.store) as _,
        Arc::clone(&t.clock) as _,
        Arc::new(SystemRandom),
        Arc::clone(&t.dns) as _,
        config,
    )
}

/// A Verified customer domain, its id taken at the test clock's time so that lists order it
/// among the domains the service makes.
async fn verified_domain(t: &TestCore, who: &Principal, name: &str) -> Domain {
    let domain = Domain {
        id: DomainId::new_at(t.now(), &SystemRandom),
        status: DomainStatus::Verified,
        verified_at: Some(t.now()),
        ..fixtures::domain(who.workspace_id, name)
    };
    t.store.insert_domain(&domain).await.unwrap();
    domain
}

/// The workspace's domains as `core` lists them, all pages.
async fn listed(core: &Tidings, who: &Principal) -> Vec<Domain> {
    core.domains().list(who, ListParams { limit: Some(200), cursor: None }).await.unwrap().items
}

/// Every domain the store holds for the workspace, the sandbox included.
async fn stored(t: &TestCore, who: &Principal) -> Vec<Domain> {
    t.store.list_domains(who.workspace_id, PageRequest::first(200)).await.unwrap().items
}

fn assert_sandbox_refusal<T: std::fmt::Debug>(result: tidings_core::Result<T>) {
    match result {
        Err(Error::DomainNotVerified(message)) => {
            for part in [SANDBOX_DOMAIN, "sandbox sending domain", "TIDINGS_DELIVERY=outbox", "POST /v1/domains"] {
                assert!(message.contains(part), "the message names {part:?}: {message}");
            }
        }
        other => panic!("expected domain_not_verified about the sandbox, got {other:?}"),
    }
}

// --- on ----------------------------------------------------------------------------------

#[tokio::test]
async fn with_the_sandbox_on_a_fresh_workspace_sends_without_from() {
    let t = sandbox_on();
    let who = full_key();

    let sent = t.core.messages().send(&who, text_send("ann@example.com"), None).await.unwrap().message;

    assert_eq!(sent.status, MessageStatus::Queued);
    assert_eq!(sent.from.address.to_string(), format!("noreply@{SANDBOX_DOMAIN}"));
    let domains = stored(&t, &who).await;
    assert_eq!(domains.len(), 1, "the send made the sandbox domain: {domains:?}");
    let sandbox = &domains[0];
    assert_eq!(
        (sandbox.kind, sandbox.status, sandbox.name.as_str()),
        (DomainKind::Sandbox, DomainStatus::Verified, SANDBOX_DOMAIN)
    );
    assert_eq!(sent.domain_id, sandbox.id);
    assert_eq!(sandbox.verified_at, Some(t.now()));
    assert_eq!(sandbox.last_checked_at, None, "never looked up in DNS");
    assert!(sandbox.records.iter().all(|r| r.status == RecordStatus::Verified && r.warning.is_none()));
    assert_ne!(sandbox.dkim.rsa_selector, sandbox.dkim.ed25519_selector);

    let again = t.core.messages().send(&who, text_send("bob@example.com"), None).await.unwrap().message;
    assert_eq!(again.domain_id, sandbox.id, "one sandbox per workspace, made once");
    let other = full_key();
    let theirs = t.core.messages().send(&other, text_send("ann@example.com"), None).await.unwrap().message;
    assert_ne!(theirs.domain_id, sandbox.id, "each workspace has its own, with its own keys");
}

#[tokio::test]
async fn with_the_sandbox_on_the_first_list_makes_and_shows_it() {
    let t = sandbox_on();
    let who = full_key();

    let domains = listed(&t.core, &who).await;

    assert_eq!(
        domains.iter().map(|d| (d.name.as_str(), d.kind)).collect::<Vec<_>>(),
        [(SANDBOX_DOMAIN, DomainKind::Sandbox)]
    );
    let by_id = t.core.domains().get(&who, domains[0].id).await.unwrap();
    assert_eq!(by_id, domains[0]);
    assert_eq!(listed(&t.core, &who).await, domains, "listing again makes no second one");
}

#[tokio::test]
async fn with_the_sandbox_on_an_explicit_from_at_it_works_and_keeps_its_local_part() {
    let t = sandbox_on();
    let who = full_key();
    let req = SendRequest { from: Some(format!("Acme Test <hello@{SANDBOX_DOMAIN}>")), ..text_send("ann@example.com") };

    let sent = t.core.messages().send(&who, req, None).await.unwrap().message;

    assert_eq!(sent.from.to_string(), format!("\"Acme Test\" <hello@{SANDBOX_DOMAIN}>"));
    assert_eq!(stored(&t, &who).await[0].id, sent.domain_id);
    let under = SendRequest { from: Some(format!("a@mail.{SANDBOX_DOMAIN}")), ..text_send("ann@example.com") };
    assert!(
        matches!(t.core.messages().send(&who, under, None).await, Err(Error::DomainNotVerified(_))),
        "a name under the sandbox is no domain of the workspace"
    );
}

#[tokio::test]
async fn a_verified_customer_domain_stays_the_default_from_with_the_sandbox_on() {
    let t = sandbox_on();
    let who = full_key();
    listed(&t.core, &who).await; // the sandbox exists before the real domain
    t.clock.advance(Duration::seconds(1));
    verified_domain(&t, &who, "acme.com").await;
    t.clock.advance(Duration::seconds(1));
    let pending = fixtures::domain(who.workspace_id, "pending.com");
    t.store.insert_domain(&pending).await.unwrap();

    let sent = t.core.messages().send(&who, text_send("ann@example.com"), None).await.unwrap().message;
    assert_eq!(sent.from.address.to_string(), "noreply@acme.com", "the sandbox never shadows a real domain");

    verified_domain(&t, &who, "other.com").await;
    assert_eq!(
        invalid_fields(t.core.messages().send(&who, text_send("ann@example.com"), None).await),
        ["from"],
        "several verified domains still need a from"
    );
    let explicit = t.core.messages().send(&who, from_sandbox("ann@example.com"), None).await.unwrap().message;
    assert_eq!(explicit.from.address.domain().as_str(), SANDBOX_DOMAIN, "but the sandbox can still be named");
}

#[tokio::test]
async fn only_unverified_customer_domains_leave_the_sandbox_as_the_default() {
    let t = sandbox_on();
    let who = full_key();
    t.store.insert_domain(&fixtures::domain(who.workspace_id, "pending.com")).await.unwrap();

    let sent = t.core.messages().send(&who, text_send("ann@example.com"), None).await.unwrap().message;

    assert_eq!(sent.from.address.domain().as_str(), SANDBOX_DOMAIN);
}

#[tokio::test]
async fn a_key_restricted_to_a_customer_domain_never_falls_back_to_the_sandbox() {
    let t = sandbox_on();
    let who = full_key();
    let pending = fixtures::domain(who.workspace_id, "pending.com");
    t.store.insert_domain(&pending).await.unwrap();
    let restricted = Principal { sending_domain_id: Some(pending.id), ..who.clone() };

    let no_from = t.core.messages().send(&restricted, text_send("ann@example.com"), None).await;
    assert!(matches!(no_from, Err(Error::DomainNotVerified(ref m)) if m.contains("pending.com")), "{no_from:?}");
    let at_sandbox = t.core.messages().send(&restricted, from_sandbox("ann@example.com"), None).await;
    assert_eq!(at_sandbox.map(drop), Err(Error::DomainNotAllowed { allowed: "pending.com".into() }));
    assert!(stored(&t, &who).await.iter().all(|d| !d.is_sandbox()), "no sandbox was made for a restricted key");
}

#[tokio::test]
async fn a_key_may_be_restricted_to_the_sandbox_only_while_it_is_on() {
    let t = sandbox_on();
    let who = full_key();
    let sandbox = listed(&t.core, &who).await.remove(0);
    let req = |id: &Domain| CreateApiKeyRequest {
        name: Some("sandbox only".into()),
        sending_domain_id: Some(id.id.to_string()),
        ..CreateApiKeyRequest::default()
    };

    let created = t.core.keys().create(&who, req(&sandbox)).await.unwrap();
    let restricted = Principal { sending_domain_id: Some(sandbox.id), ..who.clone() };
    let sent = t.core.messages().send(&restricted, text_send("ann@example.com"), None).await.unwrap().message;
    assert_eq!(sent.domain_id, sandbox.id);
    assert_eq!(created.key.sending_domain_id, Some(sandbox.id));

    let off = node(&t, false);
    assert_eq!(invalid_fields(off.keys().create(&who, req(&sandbox)).await), ["sendingDomainId"]);
    assert_sandbox_refusal(off.messages().send(&restricted, text_send("ann@example.com"), None).await);
}

#[tokio::test]
async fn the_sandbox_cannot_be_deleted_verifying_it_changes_nothing_and_tracking_switches() {
    let t = sandbox_on();
    let who = full_key();
    let sandbox = listed(&t.core, &who).await.remove(0);
    let id = sandbox.id.to_string();

    assert_eq!(invalid_fields(t.core.domains().delete(&who, DomainId::parse_or_none(&id)).await), ["id"]);
    t.clock.advance(Duration::hours(1));
    // The fake DNS publishes nothing: a real check would fail every record.
    assert_eq!(
        t.core.domains().verify(&who, DomainId::parse_or_none(&id)).await.unwrap(),
        sandbox,
        "returned as it is"
    );
    let report = t.core.domains().recheck(t.now() + Duration::days(1), 100).await.unwrap();
    assert_eq!(report.checked, 0, "the background re-check never takes it");
    let tracked = t
        .core
        .domains()
        .update_tracking(
            &who,
            DomainId::parse_or_none(&id),
            UpdateDomainTrackingRequest { open_tracking: Some(true), click_tracking: None, inbound: None },
        )
        .await
        .unwrap();
    assert!(tracked.open_tracking);
    assert_eq!(stored(&t, &who).await, [tracked], "still there, Verified, with tracking on");
}

#[tokio::test]
async fn racing_first_sends_on_two_nodes_make_one_sandbox() {
    let t = sandbox_on();
    let other_node = node(&t, true);
    let who = full_key();

    let sends = (0..8).map(|i| {
        let core = if i % 2 == 0 { t.core.clone() } else { other_node.clone() };
        let who = who.clone();
        tokio::spawn(async move { core.messages().send(&who, text_send("ann@example.com"), None).await })
    });
    let sent: Vec<_> =
        futures::future::join_all(sends).await.into_iter().map(|r| r.unwrap().unwrap().message).collect();

    let domains = stored(&t, &who).await;
    assert_eq!(domains.len(), 1, "one sandbox: {domains:?}");
    assert!(sent.iter().all(|m| m.domain_id == domains[0].id), "every send uses the one that was stored");
}

// --- both -------------------------------------------------------------------------------

#[tokio::test]
async fn the_sandbox_name_and_names_under_it_cannot_be_added() {
    for t in [sandbox_on(), TestCore::new()] {
        let who = full_key();
        for name in [SANDBOX_DOMAIN, "mail.sandbox.tidings.invalid", "SANDBOX.tidings.invalid."] {
            let added = t.core.domains().add(&who, AddDomainRequest { domain: Some(name.into()) }).await;
            assert_eq!(invalid_fields(added), ["domain"], "{name}");
        }
    }
}

// --- off ---------------------------------------------------------------------------------

#[tokio::test]
async fn with_the_sandbox_off_a_fresh_workspace_behaves_as_before() {
    let t = TestCore::new();
    let who = full_key();

    assert_eq!(invalid_fields(t.core.messages().send(&who, text_send("ann@example.com"), None).await), ["from"]);
    assert!(listed(&t.core, &who).await.is_empty());
    assert_sandbox_refusal(t.core.messages().send(&who, from_sandbox("ann@example.com"), None).await);
    assert!(stored(&t, &who).await.is_empty(), "nothing made the sandbox");
}

#[tokio::test]
async fn with_the_sandbox_off_an_existing_sandbox_is_invisible_and_unusable() {
    let t = sandbox_on();
    let who = full_key();
    let sandbox = listed(&t.core, &who).await.remove(0);
    let off = node(&t, false);
    let id = sandbox.id.to_string();

    assert!(listed(&off, &who).await.is_empty(), "not listed");
    for result in [
        off.domains().get(&who, DomainId::parse_or_none(&id)).await.map(drop),
        off.domains().verify(&who, DomainId::parse_or_none(&id)).await.map(drop),
        off.domains().delete(&who, DomainId::parse_or_none(&id)).await,
        off.domains()
            .update_tracking(&who, DomainId::parse_or_none(&id), UpdateDomainTrackingRequest::default())
            .await
            .map(drop),
        off.senders().list(&who, DomainId::parse_or_none(&id), ListParams::default()).await.map(drop),
    ] {
        assert_eq!(result, Err(Error::NotFound("domain")));
    }
    assert_eq!(
        invalid_fields(off.messages().send(&who, text_send("ann@example.com"), None).await),
        ["from"],
        "not a default from"
    );
    assert_sandbox_refusal(off.messages().send(&who, from_sandbox("ann@example.com"), None).await);

    verified_domain(&t, &who, "acme.com").await;
    let sent = off.messages().send(&who, text_send("ann@example.com"), None).await.unwrap().message;
    assert_eq!(sent.from.address.to_string(), "noreply@acme.com", "the sandbox does not count among several");
}

#[tokio::test]
async fn with_the_sandbox_off_pages_of_domains_skip_it_and_stay_full() {
    let t = sandbox_on();
    let who = full_key();
    let mut names = Vec::new();
    for i in 0..4 {
        t.clock.advance(Duration::seconds(1));
        if i == 2 {
            listed(&t.core, &who).await; // the sandbox, between d1 and d2
            t.clock.advance(Duration::seconds(1));
        }
        let d = format!("d{i}.example.com");
        verified_domain(&t, &who, &d).await;
        names.insert(0, d);
    }
    let off = node(&t, false);

    for limit in 1..=5 {
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let page = off.domains().list(&who, ListParams { limit: Some(limit), cursor }).await.unwrap();
            assert!(
                page.items.len() == limit as usize || !page.has_more,
                "limit {limit}: a page before the end is full"
            );
            seen.extend(page.items.iter().map(|d| d.name.to_string()));
            if !page.has_more {
                break;
            }
            cursor = page.next_cursor;
        }
        assert_eq!(seen, names, "limit {limit}");
    }
}

// --- delivery ----------------------------------------------------------------------------

#[tokio::test]
async fn a_sandbox_message_is_failed_by_a_mailer_that_sends_and_delivered_by_the_outbox() {
    let t = sandbox_on();
    let who = full_key();
    for to in ["ann@example.com", "bob@example.com"] {
        t.core.messages().send(&who, text_send(to), None).await.unwrap();
    }
    let messages = |status| {
        let query = MessageQuery {
            status: Some(status),
            to: None,
            sent_by: None,
            tags: vec![],
            metadata: vec![],
            ..MessageQuery::page(PageRequest::first(10))
        };
        let (store, ws) = (Arc::clone(&t.store), who.workspace_id);
        async move { store.list_messages(ws, &query).await.unwrap().items }
    };
    let worker = |mailer: &Arc<FakeMailer>| {
        let settings = DeliverySettings { batch_size: 1, ..DeliverySettings::default() };
        DeliveryWorker::new(node(&t, false), Arc::clone(mailer) as Arc<dyn Mailer>, settings)
    };

    // Restarted with a relay: the message must not leave, and says why.
    let relay = Arc::new(FakeMailer::answering(vec![]));
    let report = worker(&relay).deliver_due(t.now()).await.unwrap();
    assert_eq!((report.claimed, report.failed), (1, 1), "{report:?}");
    assert!(relay.sent().is_empty(), "nothing was handed to the relay");
    let failed = messages(MessageStatus::Failed).await;
    assert_eq!(failed.len(), 1);
    let events = t.store.list_events(who.workspace_id, failed[0].id, PageRequest::first(10)).await.unwrap().items;
    let last = events.last().unwrap();
    assert_eq!(last.event_type, EventType::Failed);
    let reason = last.details.response.as_deref().unwrap_or_default();
    assert!(reason.contains("sandbox sending domain") && reason.contains("outbox"), "{reason}");

    // With the outbox it goes out, signed by the sandbox domain's keys.
    let outbox = Arc::new(FakeMailer::local());
    let report = worker(&outbox).deliver_due(t.now()).await.unwrap();
    assert_eq!((report.claimed, report.delivered), (1, 1), "{report:?}");
    assert_eq!(messages(MessageStatus::Delivered).await.len(), 1);
    let sandbox = stored(&t, &who).await.remove(0);
    let checks = verify_dkim(&outbox.sent()[0].raw, &sandbox.records).await;
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert!(checks.iter().all(|c| c.passed()), "{checks:?}");
}
