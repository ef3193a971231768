//! The send use case and message reads: validation, `from` resolution, domain-scoped keys,
//! suppression, templates, idempotency (including racing duplicates), send-key visibility,
//! and recording later events with webhook fan-out.

use std::sync::Arc;

use chrono::Duration;
use tidings_core::ids::EventId;
use tidings_core::model::{Domain, DomainStatus, EventDetails, EventType, IdempotencyKey, KeyScope, MessageStatus};
use tidings_core::ports::{DomainStore, MessageStore, SuppressionStore};
use tidings_core::state_machine::Happening;
use tidings_core::usecases::{
    CreateTemplateRequest, CreateWebhookRequest, ListParams, MessageFilters, Principal, SendRequest,
};
use tidings_core::{Error, IdempotencyConflict};
use tidings_testing::TestCore;
use tidings_testing::fixtures;
use tidings_testing::service::{full_key, invalid_fields, key_in, send_key_beside};

fn text_send(to: &str) -> SendRequest {
    SendRequest {
        to: Some(to.into()),
        subject: Some("Your receipt".into()),
        text: Some("Thanks for your order.".into()),
        ..SendRequest::default()
    }
}

async fn verified_domain(t: &TestCore, who: &Principal, name: &str) -> Domain {
    let mut domain = fixtures::domain(who.workspace_id, name);
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(t.now());
    t.store.insert_domain(&domain).await.unwrap();
    domain
}

#[tokio::test]
async fn a_send_from_a_verified_domain_is_queued_with_one_event() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;

    let sent = t
        .core
        .messages()
        .send(&who, SendRequest { from: Some("Acme <billing@acme.com>".into()), ..text_send("u@example.com") }, None)
        .await
        .unwrap();

    assert!(!sent.replayed);
    let m = sent.message;
    assert_eq!((m.status, m.attempts, m.provider_message_id.as_deref()), (MessageStatus::Queued, 0, None));
    assert_eq!(m.from.to_string(), "\"Acme\" <billing@acme.com>");
    assert_eq!(m.next_attempt_at, Some(t.now()));
    let stored = t.core.messages().get(&who, m.id).await.unwrap();
    assert_eq!(stored, m);
    let events = t.core.messages().events(&who, m.id, ListParams::default()).await.unwrap();
    assert_eq!(events.items.iter().map(|e| e.event_type).collect::<Vec<_>>(), [EventType::Queued]);
    assert_eq!(events.items[0].provider_message_id, None);
}

#[tokio::test]
async fn without_from_the_only_verified_domain_sends_as_noreply() {
    let t = TestCore::new();
    let who = full_key();
    assert_eq!(invalid_fields(t.core.messages().send(&who, text_send("u@example.com"), None).await), ["from"]);

    verified_domain(&t, &who, "acme.com").await;
    let pending = fixtures::domain(who.workspace_id, "pending.com");
    t.store.insert_domain(&pending).await.unwrap();
    let m = t.core.messages().send(&who, text_send("u@example.com"), None).await.unwrap().message;
    assert_eq!(m.from.address.to_string(), "noreply@acme.com");

    verified_domain(&t, &who, "other.com").await;
    assert_eq!(invalid_fields(t.core.messages().send(&who, text_send("u@example.com"), None).await), ["from"]);
}

#[tokio::test]
async fn a_registered_sender_lends_its_display_name() {
    let t = TestCore::new();
    let who = full_key();
    let domain = verified_domain(&t, &who, "acme.com").await;
    t.store.insert_sender(&fixtures::sender(&domain, "support")).await.unwrap();

    let req = SendRequest { from: Some("Support@acme.com".into()), ..text_send("u@example.com") };
    let m = t.core.messages().send(&who, req, None).await.unwrap().message;
    assert_eq!(m.from.display_name.map(|n| n.as_str().to_owned()).as_deref(), Some("Acme Support"));
}

#[tokio::test]
async fn unverified_or_unknown_domains_cannot_send() {
    let t = TestCore::new();
    let who = full_key();
    t.store.insert_domain(&fixtures::domain(who.workspace_id, "pending.com")).await.unwrap();

    for from in ["a@pending.com", "a@unknown.com"] {
        let req = SendRequest { from: Some(from.into()), ..text_send("u@example.com") };
        let err = t.core.messages().send(&who, req, None).await.unwrap_err();
        assert_eq!(err.code(), "domain_not_verified", "{from}");
    }
    // Another workspace's verified domain is as good as unknown.
    let other = full_key();
    verified_domain(&t, &other, "theirs.com").await;
    let req = SendRequest { from: Some("a@theirs.com".into()), ..text_send("u@example.com") };
    assert_eq!(t.core.messages().send(&who, req, None).await.unwrap_err().code(), "domain_not_verified");
}

#[tokio::test]
async fn a_domain_scoped_key_sends_only_from_its_domain() {
    let t = TestCore::new();
    let mut who = full_key();
    let mine = verified_domain(&t, &who, "mine.com").await;
    verified_domain(&t, &who, "other.com").await;
    who.sending_domain_id = Some(mine.id);

    let req = SendRequest { from: Some("a@other.com".into()), ..text_send("u@example.com") };
    assert_eq!(
        t.core.messages().send(&who, req, None).await.unwrap_err(),
        Error::DomainNotAllowed { allowed: "mine.com".into() }
    );
    // With no `from`, the key's own domain is used even though the workspace has two.
    let m = t.core.messages().send(&who, text_send("u@example.com"), None).await.unwrap().message;
    assert_eq!(m.from.address.to_string(), "noreply@mine.com");
}

#[tokio::test]
async fn suppressed_recipients_are_refused_case_insensitively_and_nothing_is_queued() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;
    t.store.insert_suppression(&fixtures::suppression(who.workspace_id, "gone@example.com")).await.unwrap();

    let err = t.core.messages().send(&who, text_send("Gone@Example.com"), None).await.unwrap_err();
    assert_eq!(err.code(), "recipient_suppressed");
    let listed = t.core.messages().list(&who, ListParams::default(), &MessageFilters::default()).await.unwrap();
    assert!(listed.items.is_empty());
}

#[tokio::test]
async fn bad_fields_are_all_reported_and_nothing_is_stored() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;

    let req = SendRequest {
        to: Some("not-an-address".into()),
        from: Some("Evil\r\nBcc: x@y.com <a@acme.com>".into()),
        subject: Some("Hello\r\nBcc: victim@example.com".into()),
        ..SendRequest::default()
    };
    assert_eq!(invalid_fields(t.core.messages().send(&who, req, None).await), ["to", "from", "subject", "html"]);
    assert_eq!(
        invalid_fields(t.core.messages().send(&who, SendRequest::default(), None).await),
        ["to", "subject", "html"]
    );
    let long = SendRequest { subject: Some("x".repeat(999)), ..text_send("u@example.com") };
    assert_eq!(invalid_fields(t.core.messages().send(&who, long, None).await), ["subject"]);
    let vars = SendRequest { variables: Some(serde_json::json!([1])), ..text_send("u@example.com") };
    assert_eq!(invalid_fields(t.core.messages().send(&who, vars, None).await), ["variables", "variables"]);

    let listed = t.core.messages().list(&who, ListParams::default(), &MessageFilters::default()).await.unwrap();
    assert!(listed.items.is_empty());
}

#[tokio::test]
async fn subjects_with_any_control_character_or_line_separator_are_refused() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;
    for bad in ["\0", "\x0b", "\x0c", "\x1b", "\x7f", "\u{85}", "\u{9b}", "\u{2028}", "\u{2029}"] {
        let req = SendRequest { subject: Some(format!("Your receipt{bad}Bcc: x@y.com")), ..text_send("u@example.com") };
        assert_eq!(invalid_fields(t.core.messages().send(&who, req, None).await), ["subject"], "{bad:?}");
    }
    let template = t
        .core
        .templates()
        .create(
            &who,
            CreateTemplateRequest {
                name: Some("hello".into()),
                subject: Some("Hello {{ name }}".into()),
                html: None,
                text: Some("Hi".into()),
            },
        )
        .await
        .unwrap();
    // What a variable puts into the subject is held to the same rule.
    let rendered = SendRequest {
        to: Some("u@example.com".into()),
        template_id: Some(template.id.to_string()),
        variables: Some(serde_json::json!({"name": "Ann\u{85}Bcc: x@y.com"})),
        ..SendRequest::default()
    };
    assert_eq!(invalid_fields(t.core.messages().send(&who, rendered, None).await), ["subject"]);
    let listed = t.core.messages().list(&who, ListParams::default(), &MessageFilters::default()).await.unwrap();
    assert!(listed.items.is_empty());

    let refused_template = CreateTemplateRequest {
        name: Some("bad".into()),
        subject: Some("Hello\u{85}{{ name }}".into()),
        html: None,
        text: Some("Hi".into()),
    };
    assert_eq!(invalid_fields(t.core.templates().create(&who, refused_template).await.map(|_| ())), ["subject"]);

    let tab = SendRequest { subject: Some("Order\t42".into()), ..text_send("u@example.com") };
    assert_eq!(t.core.messages().send(&who, tab, None).await.unwrap().message.subject, "Order\t42");
}

#[tokio::test]
async fn templates_render_and_the_version_is_recorded() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;
    let template = t
        .core
        .templates()
        .create(
            &who,
            CreateTemplateRequest {
                name: Some("welcome".into()),
                subject: Some("Welcome, {{ name }}".into()),
                html: Some("<p>Hi {{ name }}</p>".into()),
                text: Some("Hi {{ name }}".into()),
            },
        )
        .await
        .unwrap();

    let req = SendRequest {
        to: Some("u@example.com".into()),
        template_id: Some(template.id.to_string()),
        variables: Some(serde_json::json!({"name": "<Ann>"})),
        ..SendRequest::default()
    };
    let m = t.core.messages().send(&who, req.clone(), None).await.unwrap().message;
    assert_eq!(m.subject, "Welcome, <Ann>");
    assert_eq!(m.html.as_deref(), Some("<p>Hi &lt;Ann&gt;</p>"));
    assert_eq!(m.text.as_deref(), Some("Hi <Ann>"));
    assert_eq!(m.template_version_id, Some(template.current_version_id));

    let missing = SendRequest { variables: None, ..req.clone() };
    let err = t.core.messages().send(&who, missing, None).await.unwrap_err();
    assert_eq!(err.code(), "template_render_error");
    assert!(err.to_string().contains("name"), "{err}");

    let overridden = SendRequest { subject: Some("Custom {{ name }}".into()), ..req };
    assert_eq!(t.core.messages().send(&who, overridden, None).await.unwrap().message.subject, "Custom <Ann>");
}

#[tokio::test]
async fn an_idempotent_retry_returns_the_original_and_another_body_is_refused() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;

    let first = t.core.messages().send(&who, text_send("u@example.com"), Some("order-1")).await.unwrap();
    let again = t.core.messages().send(&who, text_send("u@example.com"), Some("order-1")).await.unwrap();
    assert!(!first.replayed && again.replayed);
    assert_eq!(again.message.id, first.message.id);

    let other = t.core.messages().send(&who, text_send("v@example.com"), Some("order-1")).await.unwrap_err();
    assert_eq!(other, Error::IdempotencyKeyReused(IdempotencyConflict::OtherRequest));
    let bad = t.core.messages().send(&who, text_send("u@example.com"), Some("")).await.unwrap_err();
    assert_eq!(bad.code(), "invalid_idempotency_key");
    let long = "k".repeat(257);
    assert_eq!(
        t.core.messages().send(&who, text_send("u@example.com"), Some(&long)).await.unwrap_err().code(),
        "invalid_idempotency_key"
    );

    // After the window the key is forgotten.
    t.clock.advance(Duration::hours(24) + Duration::seconds(1));
    let later = t.core.messages().send(&who, text_send("u@example.com"), Some("order-1")).await.unwrap();
    assert!(!later.replayed);
    assert_ne!(later.message.id, first.message.id);

    // Keys are per workspace.
    let stranger = full_key();
    verified_domain(&t, &stranger, "stranger.com").await;
    assert!(!t.core.messages().send(&stranger, text_send("u@example.com"), Some("order-1")).await.unwrap().replayed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_duplicates_create_exactly_one_message() {
    let t = Arc::new(TestCore::new());
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;

    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (t, who) = (Arc::clone(&t), who.clone());
            tokio::spawn(async move { t.core.messages().send(&who, text_send("u@example.com"), Some("race")).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap().unwrap());
    }
    assert_eq!(outcomes.iter().filter(|o| !o.replayed).count(), 1);
    assert!(outcomes.iter().all(|o| o.message.id == outcomes[0].message.id));
    let listed = t.core.messages().list(&who, ListParams::default(), &MessageFilters::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
}

/// The error code and message of a refused send.
fn refusal<T: std::fmt::Debug>(result: tidings_core::Result<T>) -> (&'static str, String) {
    let err = result.expect_err("a refusal");
    (err.code(), err.to_string())
}

const OTHER_REQUEST: &str = "this Idempotency-Key was already used with a different request";

#[tokio::test]
async fn full_keys_share_idempotency_keys_and_each_send_key_has_its_own() {
    let t = TestCore::new();
    let admin = full_key();
    verified_domain(&t, &admin, "acme.com").await;
    let other_admin = key_in(admin.workspace_id, KeyScope::Full);
    let sender = send_key_beside(&admin);
    let other_sender = send_key_beside(&admin);
    let send = |who: &Principal, to: &str, key: &str| {
        let (who, req, key) = (who.clone(), text_send(to), key.to_owned());
        let core = t.core.clone();
        async move { core.messages().send(&who, req, Some(&key)).await }
    };

    // Two full keys: the second gets the first's message.
    let first = send(&admin, "u@example.com", "order-1").await.unwrap();
    let again = send(&other_admin, "u@example.com", "order-1").await.unwrap();
    assert!(again.replayed, "a full key repeating another full key's send is a replay");
    assert_eq!(again.message.id, first.message.id);
    // Another body is still another request for a full key.
    assert_eq!(
        refusal(send(&other_admin, "v@example.com", "order-1").await),
        ("idempotency_key_reused", OTHER_REQUEST.into())
    );
    // A send key's Idempotency-Keys are its own: the full keys' "order-1" is not in its way,
    // whatever its body, and the read-only check a front end asks says the same.
    for to in ["u@example.com", "v@example.com"] {
        let peek = t.core.messages().idempotent_replay(&sender, &text_send(to), Some("order-1")).await.unwrap();
        assert!(peek.is_none(), "{to}: nothing to replay for the send key");
    }
    let its_own = send(&sender, "u@example.com", "order-1").await.unwrap();
    assert!(!its_own.replayed && its_own.message.id != first.message.id, "a send of its own");
    let own_again = send(&sender, "u@example.com", "order-1").await.unwrap();
    assert!(own_again.replayed && own_again.message.id == its_own.message.id, "its own repeat is a replay");
    assert_eq!(
        refusal(send(&sender, "v@example.com", "order-1").await),
        ("idempotency_key_reused", OTHER_REQUEST.into()),
        "its own key with another body"
    );
    // Another send key: exactly what a free key gets.
    let theirs = send(&other_sender, "u@example.com", "order-1").await.unwrap();
    assert!(!theirs.replayed && theirs.message.id != its_own.message.id, "another send key sends anew");

    let all = t.core.messages().list(&admin, ListParams::default(), &MessageFilters::default()).await.unwrap();
    assert_eq!(all.items.len(), 3, "one message per full-key space and per send key");
}

/// A record a `send` key made before records were scoped per send key sits under the bare
/// Idempotency-Key (a full principal with the send key's id makes the same record): that key's
/// retry is still a replay; another send key treats it as absent.
#[tokio::test]
async fn a_send_keys_record_from_before_scoping_is_still_its_own_replay() {
    let t = TestCore::new();
    let admin = full_key();
    verified_domain(&t, &admin, "acme.com").await;
    let sender = send_key_beside(&admin);
    let other_sender = send_key_beside(&admin);
    let as_before = Principal { scope: KeyScope::Full, ..sender.clone() };
    let old = t.core.messages().send(&as_before, text_send("u@example.com"), Some("legacy")).await.unwrap();

    let retry = t.core.messages().send(&sender, text_send("u@example.com"), Some("legacy")).await.unwrap();
    assert!(retry.replayed && retry.message.id == old.message.id, "the retry across the upgrade is a replay");
    let changed = t.core.messages().send(&sender, text_send("v@example.com"), Some("legacy")).await;
    assert_eq!(refusal(changed), ("idempotency_key_reused", OTHER_REQUEST.into()));
    let other = t.core.messages().send(&other_sender, text_send("u@example.com"), Some("legacy")).await.unwrap();
    assert!(!other.replayed && other.message.id != old.message.id, "another send key does not see it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn full_keys_racing_with_one_idempotency_key_create_one_message() {
    let t = Arc::new(TestCore::new());
    let admin = full_key();
    verified_domain(&t, &admin, "acme.com").await;

    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (t, who) = (Arc::clone(&t), key_in(admin.workspace_id, KeyScope::Full));
            tokio::spawn(async move { t.core.messages().send(&who, text_send("u@example.com"), Some("race")).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap().unwrap());
    }
    assert_eq!(outcomes.iter().filter(|o| !o.replayed).count(), 1);
    assert!(outcomes.iter().all(|o| o.message.id == outcomes[0].message.id));
    let listed = t.core.messages().list(&admin, ListParams::default(), &MessageFilters::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
}

#[tokio::test]
async fn a_send_key_sees_only_its_own_messages() {
    let t = TestCore::new();
    let admin = full_key();
    verified_domain(&t, &admin, "acme.com").await;
    let sender = send_key_beside(&admin);
    let other_sender = send_key_beside(&admin);

    let mine = t.core.messages().send(&sender, text_send("a@example.com"), None).await.unwrap().message;
    let theirs = t.core.messages().send(&other_sender, text_send("b@example.com"), None).await.unwrap().message;

    let listed = t.core.messages().list(&sender, ListParams::default(), &MessageFilters::default()).await.unwrap();
    assert_eq!(listed.items.iter().map(|m| m.id).collect::<Vec<_>>(), [mine.id]);
    assert_eq!(t.core.messages().get(&sender, theirs.id).await.unwrap_err(), Error::NotFound("message"));
    let events = t.core.messages().events(&sender, theirs.id, ListParams::default()).await;
    assert_eq!(events.unwrap_err(), Error::NotFound("message"));
    let all = t.core.messages().list(&admin, ListParams::default(), &MessageFilters::default()).await.unwrap();
    assert_eq!(all.items.len(), 2);
    // Another workspace's full key sees nothing.
    assert_eq!(t.core.messages().get(&full_key(), mine.id).await.unwrap_err(), Error::NotFound("message"));
}

#[tokio::test]
async fn lists_page_newest_first_and_filter() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;
    let mut ids = Vec::new();
    for n in 0..5 {
        t.clock.advance(Duration::milliseconds(1));
        ids.push(
            t.core.messages().send(&who, text_send(&format!("u{}@example.com", n % 2)), None).await.unwrap().message.id,
        );
    }
    let first = t
        .core
        .messages()
        .list(&who, ListParams { limit: Some(2), cursor: None }, &MessageFilters::default())
        .await
        .unwrap();
    assert_eq!(first.items.iter().map(|m| m.id).collect::<Vec<_>>(), [ids[4], ids[3]]);
    assert!(first.has_more);
    let second = t
        .core
        .messages()
        .list(&who, ListParams { limit: Some(2), cursor: first.next_cursor }, &MessageFilters::default())
        .await
        .unwrap();
    assert_eq!(second.items.iter().map(|m| m.id).collect::<Vec<_>>(), [ids[2], ids[1]]);

    let to = MessageFilters { to: Some("U1@example.com".into()), ..MessageFilters::default() };
    let filtered = t.core.messages().list(&who, ListParams::default(), &to).await.unwrap();
    assert_eq!(filtered.items.iter().map(|m| m.id).collect::<Vec<_>>(), [ids[3], ids[1]]);

    let bad = MessageFilters { status: Some("Lost".into()), to: Some("nope".into()), ..MessageFilters::default() };
    assert_eq!(invalid_fields(t.core.messages().list(&who, ListParams::default(), &bad).await), ["status", "to"]);
    let limit = ListParams { limit: Some(201), cursor: None };
    assert_eq!(invalid_fields(t.core.messages().list(&who, limit, &MessageFilters::default()).await), ["limit"]);
    let cursor = ListParams { limit: None, cursor: Some("garbage".into()) };
    assert_eq!(invalid_fields(t.core.messages().list(&who, cursor, &MessageFilters::default()).await), ["cursor"]);
}

#[tokio::test]
async fn recorded_events_move_the_message_and_reach_subscribed_webhooks() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;
    let hook = t
        .core
        .webhooks()
        .create(
            &who,
            CreateWebhookRequest {
                url: Some("https://hooks.example.com/tidings".into()),
                event_types: Some(vec!["Delivered".into()]),
                enabled: None,
                format: None,
            },
        )
        .await
        .unwrap();
    let m = t.core.messages().send(&who, text_send("u@example.com"), None).await.unwrap().message;
    let happening = |event_type, pmid: Option<&str>| Happening {
        event_id: EventId::new_at(t.now(), &tidings_core::ports::SystemRandom),
        event_type,
        at: t.now(),
        details: EventDetails::default(),
        provider_message_id: pmid.map(str::to_owned),
        next_attempt_at: None,
    };

    let (sent, _) = t.core.messages().record_event(&m, happening(EventType::Sent, Some("abc@acme.com"))).await.unwrap();
    let (delivered, event) =
        t.core.messages().record_event(&sent, happening(EventType::Delivered, None)).await.unwrap();
    assert_eq!(delivered.status, MessageStatus::Delivered);
    assert_eq!(event.provider_message_id.as_deref(), Some("abc@acme.com"));

    // A stale copy cannot move the message again, and a refused event records nothing.
    assert_eq!(
        t.core.messages().record_event(&sent, happening(EventType::Deferred, None)).await.unwrap_err().code(),
        "conflict"
    );
    assert_eq!(
        t.core.messages().record_event(&delivered, happening(EventType::Queued, None)).await.unwrap_err().code(),
        "conflict"
    );

    let events =
        t.store.list_events(who.workspace_id, m.id, tidings_core::ports::PageRequest::first(10)).await.unwrap();
    assert_eq!(
        events.items.iter().map(|e| e.event_type).collect::<Vec<_>>(),
        [EventType::Queued, EventType::Sent, EventType::Delivered]
    );
    let deliveries = t.core.webhooks().deliveries(&who, hook.id, ListParams::default()).await.unwrap();
    assert_eq!(deliveries.items.len(), 1, "only the Delivered event is subscribed");
    let payload: serde_json::Value = serde_json::from_str(&deliveries.items[0].payload).unwrap();
    assert_eq!(payload["type"], "Delivered");
    assert_eq!(payload["data"]["messageId"], m.id.to_string());
    assert_eq!(payload["data"]["providerMessageId"], "abc@acme.com");
}

#[tokio::test]
async fn expired_idempotency_keys_are_purged_and_live_ones_kept() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;
    t.core.messages().send(&who, text_send("u@example.com"), Some("old")).await.unwrap();
    t.clock.advance(Duration::hours(23));
    t.core.messages().send(&who, text_send("u@example.com"), Some("young")).await.unwrap();
    t.clock.advance(Duration::hours(2));

    assert_eq!(t.core.messages().purge_expired_idempotency_keys(100).await.unwrap(), 1);
    let key = |k: &str| IdempotencyKey::parse(k).unwrap();
    assert!(t.store.get_idempotency(who.workspace_id, &key("old")).await.unwrap().is_none());
    assert!(t.store.get_idempotency(who.workspace_id, &key("young")).await.unwrap().is_some());
    assert!(t.core.messages().send(&who, text_send("u@example.com"), Some("young")).await.unwrap().replayed);
}
