//! The typed in-process API (`tidings_core::inprocess`) over the in-memory store: the
//! trusted principal, workspaces, domains and templates found or made by name, and sends
//! built as `Email`s going through the same use case as the API's JSON.

use std::collections::HashSet;

use chrono::Duration;
use serde::Serialize;
use tidings_core::Error;
use tidings_core::email::{EmailAddress, Mailbox};
use tidings_core::ids::ApiKeyId;
use tidings_core::inprocess::{Content, Email, Recipients, TemplateBody, WorkspaceHandle};
use tidings_core::model::{Domain, KeyScope, MessageStatus, RateLimit};
use tidings_core::usecases::{Admission, ListParams, LocalLimits, Principal, SendRequest, TagRequest};
use tidings_testing::TestCore;
use tidings_testing::service::invalid_fields;

fn mailbox(text: &str) -> Mailbox {
    Mailbox::parse(text).expect("a mailbox")
}

fn address(text: &str) -> EmailAddress {
    EmailAddress::parse(text).expect("an address")
}

/// A workspace whose `example.com` is Verified through the fake DNS.
async fn verified(t: &TestCore) -> (WorkspaceHandle, Domain) {
    let acme = t.core.ensure_workspace("acme").await.unwrap();
    let domain = acme.ensure_domain("example.com").await.unwrap();
    t.dns.publish_all(&domain);
    let domain = t.core.domains().verify(acme.principal(), domain.id).await.unwrap();
    assert_eq!(domain.status, tidings_core::model::DomainStatus::Verified);
    (acme, domain)
}

fn welcome() -> Email {
    Email::new(mailbox("Acme <hello@example.com>"), address("ann@example.net"), Content::text("Welcome", "Hello, Ann."))
}

// --- the trusted principal -------------------------------------------------------------------

#[test]
fn the_trusted_principal_has_full_scope_every_domain_and_no_key() {
    let who = Principal::trusted(tidings_core::ids::WorkspaceId::NONE);
    assert_eq!(who.scope, KeyScope::Full);
    assert_eq!(who.sending_domain_id, None);
    assert_eq!(who.key_id, ApiKeyId::NONE);
    assert_eq!(who.rate_limit, RateLimit::DEFAULT);
    let slower = who.with_rate_limit(RateLimit::new(2).unwrap());
    assert_eq!(slower.rate_limit, RateLimit::new(2).unwrap());
    assert_eq!(slower.scope, KeyScope::Full);
}

// --- workspaces ------------------------------------------------------------------------------

#[tokio::test]
async fn ensuring_a_workspace_makes_it_once_and_finds_it_after() {
    let t = TestCore::new();
    let first = t.core.ensure_workspace("acme").await.unwrap();
    let again = t.core.ensure_workspace("acme").await.unwrap();
    let other = t.core.ensure_workspace("globex").await.unwrap();

    assert_eq!(first.id(), again.id());
    assert_ne!(first.id(), other.id());
    assert_eq!(first.workspace().name, "acme");
    let names: Vec<String> = t.core.workspaces().list().await.unwrap().into_iter().map(|w| w.name).collect();
    assert_eq!(names, ["acme", "globex"]);
    assert_eq!(t.core.workspace(first.id()).await.unwrap().id(), first.id());
}

#[tokio::test]
async fn a_workspace_made_by_ensure_default_workspace_is_found_by_its_name() {
    let t = TestCore::new();
    let (made, _) = t.core.workspaces().ensure_default(None).await.unwrap().unwrap();
    let found = t.core.ensure_workspace(tidings_core::usecases::DEFAULT_WORKSPACE_NAME).await.unwrap();
    assert_eq!(found.id(), made.id);
    assert_eq!(t.core.workspaces().list().await.unwrap().len(), 1);
}

#[tokio::test]
async fn concurrent_ensures_of_one_workspace_make_one() {
    let t = TestCore::new();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let core = t.core.clone();
            tokio::spawn(async move { core.ensure_workspace("acme").await.unwrap().id() })
        })
        .collect();
    let mut ids = HashSet::new();
    for task in tasks {
        ids.insert(task.await.unwrap());
    }
    assert_eq!(ids.len(), 1);
    assert_eq!(t.core.workspaces().list().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_bad_workspace_name_is_refused_and_an_unknown_id_is_not_found() {
    let t = TestCore::new();
    assert_eq!(invalid_fields(t.core.ensure_workspace("").await), ["name"]);
    assert!(t.core.workspaces().list().await.unwrap().is_empty());
    let unknown = t.core.workspace(tidings_core::ids::WorkspaceId::NONE).await.unwrap_err();
    assert!(matches!(unknown, Error::NotFound("workspace")), "{unknown:?}");
}

// --- domains ---------------------------------------------------------------------------------

#[tokio::test]
async fn ensuring_a_domain_keeps_its_keys_and_records() {
    let t = TestCore::new();
    let acme = t.core.ensure_workspace("acme").await.unwrap();
    let first = acme.ensure_domain("Example.COM").await.unwrap();
    let again = acme.ensure_domain("example.com.").await.unwrap();
    assert_eq!(again, first);
    let listed = t.core.domains().list(acme.principal(), ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
}

#[tokio::test]
async fn concurrent_ensures_of_one_domain_add_it_once() {
    let t = TestCore::new();
    let acme = t.core.ensure_workspace("acme").await.unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let acme = acme.clone();
            tokio::spawn(async move { acme.ensure_domain("example.com").await.unwrap().id })
        })
        .collect();
    let mut ids = HashSet::new();
    for task in tasks {
        ids.insert(task.await.unwrap());
    }
    assert_eq!(ids.len(), 1);
    assert_eq!(t.core.domains().list(acme.principal(), ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn a_bad_or_reserved_domain_name_is_refused_as_the_api_refuses_it() {
    let t = TestCore::new();
    let acme = t.core.ensure_workspace("acme").await.unwrap();
    assert_eq!(invalid_fields(acme.ensure_domain("not a domain").await), ["domain"]);
    let reserved = format!("x.{}", tidings_core::usecases::SANDBOX_DOMAIN);
    assert_eq!(invalid_fields(acme.ensure_domain(&reserved).await), ["domain"]);
    assert!(t.core.domains().list(acme.principal(), ListParams::default()).await.unwrap().items.is_empty());
}

// --- templates -------------------------------------------------------------------------------

#[tokio::test]
async fn upserting_a_template_writes_only_what_changed() {
    let t = TestCore::new();
    let acme = t.core.ensure_workspace("acme").await.unwrap();
    let body = TemplateBody::new("Welcome, {{name}}").text("Hello, {{name}}.");

    let made = acme.upsert_template("welcome", body.clone()).await.unwrap();
    let same = acme.upsert_template(" welcome ", body).await.unwrap();
    assert_eq!(same, made);
    assert_eq!(made.versions.len(), 1);

    let changed = acme.upsert_template("welcome", TemplateBody::new("Hi {{name}}").html("<p>Hi</p>")).await.unwrap();
    assert_eq!(changed.id, made.id);
    assert_eq!(changed.versions.len(), 2);
    let current = changed.current_version().unwrap();
    assert_eq!(
        (current.subject.as_str(), current.html.as_deref(), current.text.as_deref()),
        ("Hi {{name}}", Some("<p>Hi</p>"), None)
    );

    let listed = t.core.templates().list(acme.principal(), ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
}

#[tokio::test]
async fn of_two_templates_with_one_name_the_oldest_is_upserted() {
    let t = TestCore::new();
    let acme = t.core.ensure_workspace("acme").await.unwrap();
    let oldest = acme.upsert_template("welcome", TemplateBody::new("One")).await.unwrap();
    t.clock.advance(Duration::seconds(1));
    let request = tidings_core::usecases::CreateTemplateRequest {
        name: Some("welcome".into()),
        subject: Some("Two".into()),
        ..Default::default()
    };
    t.core.templates().create(acme.principal(), request).await.unwrap();
    let found = acme.upsert_template("welcome", TemplateBody::new("One")).await.unwrap();
    assert_eq!(found.id, oldest.id);
    assert_eq!(found.versions.len(), 1);
}

#[tokio::test]
async fn concurrent_upserts_of_one_template_make_one() {
    let t = TestCore::new();
    let acme = t.core.ensure_workspace("acme").await.unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let acme = acme.clone();
            tokio::spawn(async move { acme.upsert_template("welcome", TemplateBody::new("Hi")).await.unwrap().id })
        })
        .collect();
    let mut ids = HashSet::new();
    for task in tasks {
        ids.insert(task.await.unwrap());
    }
    assert_eq!(ids.len(), 1);
    assert_eq!(t.core.templates().list(acme.principal(), ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn a_template_with_a_syntax_error_is_refused_and_nothing_is_made() {
    let t = TestCore::new();
    let acme = t.core.ensure_workspace("acme").await.unwrap();
    let refused = acme.upsert_template("welcome", TemplateBody::new("Hi {{#if}}")).await.unwrap_err();
    assert!(matches!(refused, Error::TemplateSyntax(_)), "{refused:?}");
    assert!(t.core.templates().list(acme.principal(), ListParams::default()).await.unwrap().items.is_empty());
}

// --- sending ---------------------------------------------------------------------------------

#[tokio::test]
async fn an_email_is_sent_by_the_trusted_principal_and_recorded_without_a_key() {
    let t = TestCore::new();
    let (acme, domain) = verified(&t).await;
    let sent = acme.send(welcome()).await.unwrap();
    let message = acme.get_message(sent.message.id).await.unwrap();
    assert_eq!(message.status, MessageStatus::Queued);
    assert_eq!(message.domain_id, domain.id);
    assert_eq!(message.api_key_id, ApiKeyId::NONE);
    assert_eq!(message.to, address("ann@example.net"));
    assert_eq!(message.from, mailbox("Acme <hello@example.com>"));
    assert_eq!((message.subject.as_str(), message.text.as_deref()), ("Welcome", Some("Hello, Ann.")));
}

#[tokio::test]
async fn an_email_is_the_same_message_as_the_api_request_it_stands_for() {
    let t = TestCore::new();
    let (acme, _) = verified(&t).await;
    let at = t.now() + Duration::hours(2);
    let email = Email::new(
        mailbox("\"Acme, Inc.\" <hello@example.com>"),
        Recipients::from(address("ann@example.net")).and(mailbox("Bob <bob@example.net>")),
        Content::html_and_text("Welcome", "<p>Hello</p>", "Hello"),
    )
    .cc(address("carol@example.net"))
    .bcc(address("dave@example.net"))
    .reply_to(address("support@example.com"))
    .header("X-Campaign", "welcome")
    .metadata("user_id", "42")
    .tag("kind", "welcome")
    .tracking(Some(true), None)
    .scheduled_at(at);
    let typed = acme.send(email).await.unwrap().message;

    let json: SendRequest = serde_json::from_value(serde_json::json!({
        "from": "\"Acme, Inc.\" <hello@example.com>",
        "to": ["ann@example.net", "Bob <bob@example.net>"],
        "cc": ["carol@example.net"],
        "bcc": ["dave@example.net"],
        "replyTo": ["support@example.com"],
        "subject": "Welcome",
        "html": "<p>Hello</p>",
        "text": "Hello",
        "headers": {"X-Campaign": "welcome"},
        "metadata": {"user_id": "42"},
        "tags": [{"name": "kind", "value": "welcome"}],
        "tracking": {"opens": true},
        "scheduledAt": at.to_rfc3339(),
    }))
    .unwrap();
    let api = t.core.messages().send(acme.principal(), json, None).await.unwrap().message;

    assert_eq!(typed.status, MessageStatus::Scheduled);
    assert_eq!(typed.scheduled_at, Some(at));
    assert_eq!(typed.status, api.status);
    assert_eq!(typed.scheduled_at, api.scheduled_at);
    assert_eq!((&typed.from, &typed.to, &typed.subject), (&api.from, &api.to, &api.subject));
    assert_eq!((&typed.html, &typed.text), (&api.html, &api.text));
    assert_eq!(typed.recipients.len(), 4);
    let addresses = |m: &tidings_core::model::Message| {
        m.recipients.iter().map(|r| (r.email.clone(), r.name.clone())).collect::<Vec<_>>()
    };
    assert_eq!(addresses(&typed), addresses(&api));
    assert_eq!(typed.extras, api.extras);
    assert_eq!(typed.tracking, api.tracking);
}

#[tokio::test]
async fn an_email_is_validated_by_the_send_use_case() {
    let t = TestCore::new();
    let (acme, _) = verified(&t).await;
    let unverified = Email::new(mailbox("a@elsewhere.test"), address("ann@example.net"), Content::text("Hi", "Hello"));
    assert!(matches!(acme.send(unverified).await.unwrap_err(), Error::DomainNotVerified(_)));
    let bad_header = welcome().header("Bad Header", "x");
    assert_eq!(invalid_fields(acme.send(bad_header).await), ["headers.Bad Header"]);
    let empty_subject = Email::new(mailbox("hello@example.com"), address("ann@example.net"), Content::text("", "Hi"));
    assert_eq!(invalid_fields(acme.send(empty_subject).await), ["subject"]);
    let listed = t.core.messages().list(acme.principal(), ListParams::default(), &Default::default()).await.unwrap();
    assert!(listed.items.is_empty(), "a refused send queues nothing");
}

#[derive(Serialize)]
struct Welcome<'a> {
    name: &'a str,
}

#[tokio::test]
async fn an_email_from_an_upserted_template_renders_its_variables() {
    let t = TestCore::new();
    let (acme, _) = verified(&t).await;
    let template =
        acme.upsert_template("welcome", TemplateBody::new("Welcome, {{name}}").text("Hello, {{name}}.")).await.unwrap();
    let content = Content::template(template.id).variables(&Welcome { name: "Ann" }).unwrap();
    let email = Email::new(mailbox("hello@example.com"), address("ann@example.net"), content);
    let message = acme.send(email).await.unwrap().message;
    assert_eq!(message.subject, "Welcome, Ann");
    assert_eq!(message.text.as_deref(), Some("Hello, Ann."));
    assert_eq!(message.template_id, Some(template.id));
}

#[tokio::test]
async fn an_idempotency_key_replays_the_first_send() {
    let t = TestCore::new();
    let (acme, _) = verified(&t).await;
    let first = acme.send(welcome().idempotency_key("welcome-ann")).await.unwrap();
    let again = acme.send(welcome().idempotency_key("welcome-ann")).await.unwrap();
    assert!(!first.replayed && again.replayed);
    assert_eq!(again.message.id, first.message.id);
}

#[tokio::test]
async fn a_rate_limited_send_is_refused_once_the_bucket_is_empty() {
    let t = TestCore::new();
    let (acme, _) = verified(&t).await;
    let public = acme.clone().with_rate_limit(RateLimit::new(1).unwrap());
    let limits = LocalLimits::default();
    assert!(matches!(public.send_rate_limited(&limits, welcome()).await.unwrap(), Admission::Allowed(_)));
    assert!(matches!(public.send_rate_limited(&limits, welcome()).await.unwrap(), Admission::Limited { .. }));
    // The unlimited path is not held back by the route's bucket.
    acme.send(welcome()).await.unwrap();
    let listed = t.core.messages().list(acme.principal(), ListParams::default(), &Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
}

#[test]
fn tags_keep_their_order_and_maps_their_entries() {
    let (request, key) = welcome().tag("b", "2").tag("a", "1").metadata("k", "v").into_request();
    assert_eq!(key, None);
    let tags = request.tags.unwrap();
    assert_eq!(
        tags,
        [TagRequest { name: "b".into(), value: "2".into() }, TagRequest { name: "a".into(), value: "1".into() }]
    );
    assert_eq!(request.metadata, Some(serde_json::json!({"k": "v"})));
    assert_eq!(request.headers, None);
}
