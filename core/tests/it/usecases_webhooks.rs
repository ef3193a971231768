//! Webhook endpoint use cases, the fan-out of message events and the delivery log, over the
//! in-memory store with a fixed clock.

use std::sync::Arc;

use base64::Engine as _;
use chrono::Duration;
use serde_json::{Value, json};
use tidings_core::Error;
use tidings_core::ids::{ApiKeyId, DeliveryId, DomainId, EventId, WebhookId};
use tidings_core::model::{
    DeliveryStatus, EventDetails, EventType, Message, MessageEvent, WebhookEndpoint, WebhookEventType, WebhookFormat,
};
use tidings_core::ports::{EndpointQuota, StoreError, SystemRandom, WebhookStore};
use tidings_core::usecases::{
    CoreConfig, CreateWebhookRequest, ListParams, Principal, Tidings, UpdateWebhookRequest, sign_webhook,
    signing_secrets,
};
use tidings_testing::faulty::{Op, When};
use tidings_testing::service::{full_key, invalid_fields, send_key_beside};
use tidings_testing::{FakeDns, FixedClock, TestCore};
use tidings_testing::{MemoryStore, fixtures};

const URL: &str = "https://hooks.example.com/tidings";

fn create(url: &str, types: &[&str]) -> CreateWebhookRequest {
    CreateWebhookRequest {
        url: Some(url.to_owned()),
        event_types: Some(types.iter().map(|s| (*s).to_owned()).collect()),
        enabled: None,
        format: None,
    }
}

async fn endpoint(t: &TestCore, who: &Principal, types: &[&str]) -> WebhookEndpoint {
    t.core.webhooks().create(who, create(URL, types)).await.unwrap()
}

fn message_of(who: &Principal) -> Message {
    fixtures::message(who.workspace_id, ApiKeyId(fixtures::ulid()), DomainId(fixtures::ulid()))
}

fn delivered_event(message: &Message, at: chrono::DateTime<chrono::Utc>) -> MessageEvent {
    MessageEvent {
        id: EventId(fixtures::ulid()),
        message_id: message.id,
        event_type: EventType::Delivered,
        provider_message_id: Some("01J0ABC@tidings.test".into()),
        occurred_at: at,
        details: EventDetails {
            smtp_code: Some(250),
            response: Some("2.0.0 OK queued".into()),
            ..EventDetails::default()
        },
        recipient: None,
    }
}

#[tokio::test]
async fn an_endpoint_is_created_enabled_with_a_fresh_secret() {
    let t = TestCore::new();
    let who = full_key();
    let created = endpoint(&t, &who, &["Delivered", "Bounced", "Delivered"]).await;
    assert_eq!(created.url.as_str(), URL);
    assert!(created.enabled);
    assert_eq!(
        created.event_types,
        [WebhookEventType::Message(EventType::Delivered), WebhookEventType::Message(EventType::Bounced)]
    );
    let secret = created.secret.expose().strip_prefix("whsec_").expect("whsec_ prefix");
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(secret).unwrap().len(), 32);
    assert_eq!((created.previous_secret.clone(), created.disabled_reason.clone()), (None, None));
    assert_eq!(created.created_at, t.now());
    assert_eq!(t.core.webhooks().get(&who, created.id).await.unwrap(), created);

    let other = endpoint(&t, &who, &["Delivered"]).await;
    assert_ne!(other.secret, created.secret);
}

#[tokio::test]
async fn an_endpoint_may_be_created_disabled() {
    let t = TestCore::new();
    let who = full_key();
    let req = CreateWebhookRequest { enabled: Some(false), ..create(URL, &["Sent"]) };
    assert!(!t.core.webhooks().create(&who, req).await.unwrap().enabled);
}

#[tokio::test]
async fn url_and_event_types_are_validated() {
    let t = TestCore::new();
    let who = full_key();
    assert_eq!(
        invalid_fields(t.core.webhooks().create(&who, CreateWebhookRequest::default()).await),
        ["url", "eventTypes"]
    );
    for url in ["http://hooks.example.com/", "https://127.0.0.1/hook", "https://[::1]/", "https://localhost/", "nope"] {
        assert_eq!(invalid_fields(t.core.webhooks().create(&who, create(url, &["Sent"])).await), ["url"], "{url}");
    }
    for types in [&[][..], &["Delivered", "delivered"], &["Bogus"]] {
        assert_eq!(
            invalid_fields(t.core.webhooks().create(&who, create(URL, types)).await),
            ["eventTypes"],
            "{types:?}"
        );
    }
    match t.core.webhooks().create(&who, create("http://hooks.example.com/", &["Sent"])).await {
        Err(Error::Validation { fields }) => assert_eq!(fields[0].message, "must use https"),
        other => panic!("{other:?}"),
    }
    assert!(t.core.webhooks().list(&who, ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn the_operator_may_allow_private_targets() {
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(FixedClock::at(fixtures::now()));
    let config = CoreConfig { allow_private_webhooks: true, ..CoreConfig::default() };
    let core = Tidings::new(store, clock, Arc::new(SystemRandom), Arc::new(FakeDns::default()), config);
    let created = core.webhooks().create(&full_key(), create("http://127.0.0.1:9000/hook", &["Sent"])).await.unwrap();
    assert_eq!(created.url.as_str(), "http://127.0.0.1:9000/hook");
}

#[tokio::test]
async fn test_is_accepted_as_an_event_type() {
    let t = TestCore::new();
    let created = endpoint(&t, &full_key(), &["Test"]).await;
    assert_eq!(created.event_types, [WebhookEventType::Test]);
}

#[tokio::test]
async fn an_update_changes_only_what_it_names() {
    let t = TestCore::new();
    let who = full_key();
    let before = endpoint(&t, &who, &["Delivered"]).await;
    t.clock.advance(Duration::seconds(10));
    let req =
        UpdateWebhookRequest { event_types: Some(vec!["Bounced".into(), "Complained".into()]), ..Default::default() };
    let after = t.core.webhooks().update(&who, before.id, req).await.unwrap();
    assert_eq!(
        after.event_types,
        [WebhookEventType::Message(EventType::Bounced), WebhookEventType::Message(EventType::Complained)]
    );
    assert_eq!((&after.url, after.enabled, &after.secret), (&before.url, before.enabled, &before.secret));
    assert_eq!(after.updated_at, t.now());
    assert_eq!(t.core.webhooks().get(&who, before.id).await.unwrap(), after);

    let req = UpdateWebhookRequest { url: Some("https://other.example.com/in".into()), ..Default::default() };
    let moved = t.core.webhooks().update(&who, before.id, req).await.unwrap();
    assert_eq!(moved.url.as_str(), "https://other.example.com/in");
    assert_eq!(moved.event_types, after.event_types);
}

#[tokio::test]
async fn an_invalid_update_changes_nothing() {
    let t = TestCore::new();
    let who = full_key();
    let before = endpoint(&t, &who, &["Delivered"]).await;
    let req = UpdateWebhookRequest {
        url: Some("http://insecure.example.com/".into()),
        event_types: Some(vec![]),
        enabled: Some(false),
        format: Some("svix".into()),
    };
    assert_eq!(invalid_fields(t.core.webhooks().update(&who, before.id, req).await), ["url", "eventTypes", "format"]);
    assert_eq!(t.core.webhooks().get(&who, before.id).await.unwrap(), before);
}

#[tokio::test]
async fn re_enabling_clears_the_automatic_disable() {
    let t = TestCore::new();
    let who = full_key();
    let created = endpoint(&t, &who, &["Delivered"]).await;
    let disabled = WebhookEndpoint {
        enabled: false,
        disabled_reason: Some("the endpoint answered 410 Gone".into()),
        failing_since: Some(t.now() - Duration::days(3)),
        ..created.clone()
    };
    t.store.update_webhook(&disabled).await.unwrap();

    let req = UpdateWebhookRequest { enabled: Some(true), ..Default::default() };
    let enabled = t.core.webhooks().update(&who, created.id, req).await.unwrap();
    assert!(enabled.enabled);
    assert_eq!((enabled.disabled_reason, enabled.failing_since), (None, None));

    let req = UpdateWebhookRequest { enabled: Some(false), ..Default::default() };
    assert!(!t.core.webhooks().update(&who, created.id, req).await.unwrap().enabled);
}

#[tokio::test]
async fn a_deleted_endpoint_is_gone() {
    let t = TestCore::new();
    let who = full_key();
    let id = endpoint(&t, &who, &["Delivered"]).await.id.to_string();
    t.core.webhooks().delete(&who, WebhookId::parse_or_none(&id)).await.unwrap();
    assert_eq!(t.core.webhooks().get(&who, WebhookId::parse_or_none(&id)).await, Err(Error::NotFound("webhook")));
    assert_eq!(t.core.webhooks().delete(&who, WebhookId::parse_or_none(&id)).await, Err(Error::NotFound("webhook")));
    assert!(t.core.webhooks().list(&who, ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn endpoints_are_listed_newest_first() {
    let t = TestCore::new();
    let who = full_key();
    let a = endpoint(&t, &who, &["Sent"]).await;
    t.clock.advance(Duration::milliseconds(5));
    let b = endpoint(&t, &who, &["Sent"]).await;
    let page = t.core.webhooks().list(&who, ListParams { limit: Some(1), cursor: None }).await.unwrap();
    assert_eq!(page.items, [b]);
    let page = t.core.webhooks().list(&who, ListParams { limit: Some(1), cursor: page.next_cursor }).await.unwrap();
    assert_eq!(page.items, [a]);
    assert!(!page.has_more);
}

#[tokio::test]
async fn a_rotated_secret_keeps_the_old_one_signing_for_the_overlap() {
    let t = TestCore::new();
    let who = full_key();
    let created = endpoint(&t, &who, &["Delivered"]).await;
    let rotated = t.core.webhooks().rotate_secret(&who, created.id).await.unwrap();
    assert_ne!(rotated.secret, created.secret);
    assert!(rotated.secret.expose().starts_with("whsec_"));
    assert_eq!(rotated.previous_secret, Some((created.secret.clone(), t.now() + Duration::hours(24))));
    assert_eq!(t.core.webhooks().get(&who, created.id).await.unwrap(), rotated);

    let body = br#"{"type":"Delivered"}"#;
    let signed = sign_webhook(&signing_secrets(&rotated, t.now()), "msg_1", 1_700_000_000, body);
    let expected = format!(
        "{} {}",
        sign_webhook(&[&rotated.secret], "msg_1", 1_700_000_000, body),
        sign_webhook(&[&created.secret], "msg_1", 1_700_000_000, body)
    );
    assert_eq!(signed, expected);
    let later = t.now() + Duration::hours(24);
    assert_eq!(signing_secrets(&rotated, later), [&rotated.secret]);
}

#[tokio::test]
async fn a_test_event_is_queued_whatever_the_event_types() {
    let t = TestCore::new();
    let who = full_key();
    let created = endpoint(&t, &who, &["Bounced"]).await;
    let delivery = t.core.webhooks().test(&who, created.id).await.unwrap();
    assert_eq!(delivery.endpoint_id, created.id);
    assert_eq!(delivery.workspace_id, who.workspace_id);
    assert_eq!(delivery.event_type, WebhookEventType::Test);
    assert_eq!((delivery.status, delivery.attempts), (DeliveryStatus::Pending, 0));
    assert_eq!(delivery.next_attempt_at, Some(t.now()));
    assert_eq!(delivery.message_id, None);

    let payload: Value = serde_json::from_str(&delivery.payload).unwrap();
    assert_eq!(payload["type"], "Test");
    assert_eq!(payload["createdAt"], json!(t.now()));
    let data = &payload["data"];
    assert_eq!(data["eventId"], delivery.event_id.to_string());
    for absent in ["messageId", "to", "from", "subject", "providerMessageId"] {
        assert_eq!(data[absent], Value::Null, "{absent}");
        assert!(data.as_object().unwrap().contains_key(absent), "{absent} is present as null");
    }
    assert_eq!(data["details"]["webhookId"], created.id.to_string());
    assert_eq!((&data["tags"], &data["metadata"]), (&json!([]), &json!({})), "no message, no labels");

    let log = t.core.webhooks().deliveries(&who, created.id, ListParams::default()).await.unwrap();
    assert_eq!(log.items, std::slice::from_ref(&delivery));
    let due = t
        .store
        .claim_due_webhook_deliveries(t.now(), t.now() + Duration::minutes(1), 10, &EndpointQuota::unlimited())
        .await
        .unwrap();
    assert_eq!(due.iter().map(|d| d.id).collect::<Vec<_>>(), [delivery.id]);
}

#[tokio::test]
async fn a_message_event_fans_out_to_the_subscribed_enabled_endpoints_of_its_workspace() {
    let t = TestCore::new();
    let who = full_key();
    let wants_delivered = endpoint(&t, &who, &["Sent", "Delivered"]).await;
    let _wants_bounced = endpoint(&t, &who, &["Bounced"]).await;
    let disabled = CreateWebhookRequest { enabled: Some(false), ..create(URL, &["Delivered"]) };
    t.core.webhooks().create(&who, disabled).await.unwrap();
    let stranger = full_key();
    endpoint(&t, &stranger, &["Delivered"]).await;

    let message = message_of(&who);
    let occurred = t.now() - Duration::seconds(2);
    let event = delivered_event(&message, occurred);
    let deliveries = t.core.webhooks().deliveries_for(&message, &event).await.unwrap();

    assert_eq!(deliveries.len(), 1);
    let d = &deliveries[0];
    assert_eq!(d.endpoint_id, wants_delivered.id);
    assert_eq!((d.workspace_id, d.event_id, d.message_id), (who.workspace_id, event.id, Some(message.id)));
    assert_eq!(d.event_type, WebhookEventType::Message(EventType::Delivered));
    assert_eq!((d.status, d.attempts, d.response_code, d.last_error.clone()), (DeliveryStatus::Pending, 0, None, None));
    assert_eq!((d.next_attempt_at, d.created_at), (Some(t.now()), t.now()));

    let payload: Value = serde_json::from_str(&d.payload).unwrap();
    assert_eq!(
        payload,
        json!({
            "type": "Delivered",
            "createdAt": occurred,
            "data": {
                "messageId": message.id.to_string(),
                "eventId": event.id.to_string(),
                "to": "recipient@example.com",
                "from": "billing@acme.example.com",
                "subject": "Your invoice",
                "providerMessageId": "01J0ABC@tidings.test",
                "tags": [],
                "metadata": {},
                "details": { "smtpCode": 250, "response": "2.0.0 OK queued" }
            }
        })
    );
}

#[tokio::test]
async fn an_event_nobody_subscribed_to_makes_no_deliveries() {
    let t = TestCore::new();
    let who = full_key();
    endpoint(&t, &who, &["Bounced"]).await;
    let message = message_of(&who);
    let event = delivered_event(&message, t.now());
    assert!(t.core.webhooks().deliveries_for(&message, &event).await.unwrap().is_empty());
}

#[tokio::test]
async fn each_subscribed_endpoint_gets_its_own_delivery_with_the_same_body() {
    let t = TestCore::new();
    let who = full_key();
    let a = endpoint(&t, &who, &["Delivered"]).await;
    let b = endpoint(&t, &who, &["Delivered", "Opened"]).await;
    let message = message_of(&who);
    let deliveries = t.core.webhooks().deliveries_for(&message, &delivered_event(&message, t.now())).await.unwrap();
    let mut endpoints: Vec<_> = deliveries.iter().map(|d| d.endpoint_id).collect();
    endpoints.sort();
    let mut expected = vec![a.id, b.id];
    expected.sort();
    assert_eq!(endpoints, expected);
    assert_ne!(deliveries[0].id, deliveries[1].id);
    assert_eq!(deliveries[0].payload, deliveries[1].payload);
}

#[tokio::test]
async fn each_endpoint_gets_the_body_of_its_format_and_only_the_events_its_format_has() {
    let t = TestCore::new();
    let who = full_key();
    let types = &["Queued", "Delivered"];
    let in_format = |format: &str| CreateWebhookRequest { format: Some(format.to_owned()), ..create(URL, types) };
    let tidings = endpoint(&t, &who, types).await;
    let resend = t.core.webhooks().create(&who, in_format("resend")).await.unwrap();
    let resend_too = t.core.webhooks().create(&who, in_format("resend")).await.unwrap();
    let postmark = t.core.webhooks().create(&who, in_format("postmark")).await.unwrap();
    assert_eq!(
        (tidings.format, resend.format, postmark.format),
        (WebhookFormat::Tidings, WebhookFormat::Resend, WebhookFormat::Postmark)
    );
    let message = message_of(&who);

    let delivered = t.core.webhooks().deliveries_for(&message, &delivered_event(&message, t.now())).await.unwrap();
    let body_of = |id| -> Value {
        let d = delivered.iter().find(|d| d.endpoint_id == id).expect("a delivery for the endpoint");
        serde_json::from_str(&d.payload).unwrap()
    };
    assert_eq!(delivered.len(), 4, "every endpoint has Delivered");
    assert_eq!(body_of(tidings.id)["type"], "Delivered");
    assert_eq!(body_of(resend.id)["type"], "email.delivered");
    assert_eq!(body_of(resend.id), body_of(resend_too.id), "one body per format");
    assert_eq!(body_of(postmark.id)["RecordType"], "Delivery");
    assert_eq!(body_of(postmark.id)["MessageID"], message.id.to_string());

    let queued =
        MessageEvent { event_type: EventType::Queued, provider_message_id: None, ..delivered_event(&message, t.now()) };
    let queued = t.core.webhooks().deliveries_for(&message, &queued).await.unwrap();
    let endpoints: Vec<WebhookId> = queued.iter().map(|d| d.endpoint_id).collect();
    assert_eq!(endpoints, [tidings.id], "neither Resend nor Postmark has Queued");

    // A test event takes the endpoint's format too.
    let test = t.core.webhooks().test(&who, postmark.id).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&test.payload).unwrap()["RecordType"], "Test");
}

#[tokio::test]
async fn a_delivery_can_be_retried_now_whatever_its_status() {
    let t = TestCore::new();
    let who = full_key();
    let created = endpoint(&t, &who, &["Delivered"]).await;
    let webhook_id = created.id.to_string();
    let queued = t.core.webhooks().test(&who, WebhookId::parse_or_none(&webhook_id)).await.unwrap();

    for (status, attempts, expected) in [
        (DeliveryStatus::Failed, 7, DeliveryStatus::Retrying),
        (DeliveryStatus::Delivered, 1, DeliveryStatus::Retrying),
        (DeliveryStatus::Pending, 0, DeliveryStatus::Pending),
    ] {
        let finished = tidings_core::model::WebhookDelivery {
            status,
            attempts,
            response_code: Some(500),
            next_attempt_at: None,
            ..queued.clone()
        };
        t.store.update_webhook_delivery(&finished).await.unwrap();
        t.clock.advance(Duration::minutes(1));

        let retried =
            t.core.webhooks().retry_delivery(&who, WebhookId::parse_or_none(&webhook_id), queued.id).await.unwrap();
        assert_eq!((retried.status, retried.attempts), (expected, attempts));
        assert_eq!(retried.next_attempt_at, Some(t.now()));
        assert_eq!((retried.id, retried.response_code), (queued.id, Some(500)));
        let due = t
            .store
            .claim_due_webhook_deliveries(t.now(), t.now() + Duration::seconds(30), 10, &EndpointQuota::unlimited())
            .await
            .unwrap();
        assert_eq!(due.iter().map(|d| d.id).collect::<Vec<_>>(), [queued.id], "{status:?}");
    }
}

#[tokio::test]
async fn a_delivery_is_retried_only_through_its_own_endpoint() {
    let t = TestCore::new();
    let who = full_key();
    let a = endpoint(&t, &who, &["Delivered"]).await;
    let b = endpoint(&t, &who, &["Delivered"]).await;
    let delivery = t.core.webhooks().test(&who, a.id).await.unwrap();
    let id = delivery.id.to_string();
    let retried = t.core.webhooks().retry_delivery(&who, b.id, DeliveryId::parse_or_none(&id)).await;
    assert_eq!(retried, Err(Error::NotFound("webhook delivery")));
    let retried = t.core.webhooks().retry_delivery(&who, a.id, DeliveryId::parse_or_none("garbage")).await;
    assert_eq!(retried, Err(Error::NotFound("webhook delivery")));
    let missing = fixtures::delivery(who.workspace_id, a.id).id.to_string();
    let retried = t.core.webhooks().retry_delivery(&who, a.id, DeliveryId::parse_or_none(&missing)).await;
    assert_eq!(retried, Err(Error::NotFound("webhook delivery")));
    let b_log = t.core.webhooks().deliveries(&who, b.id, ListParams::default()).await.unwrap();
    assert!(b_log.items.is_empty());
}

#[tokio::test]
async fn the_delivery_log_pages_newest_first() {
    let t = TestCore::new();
    let who = full_key();
    let id = endpoint(&t, &who, &["Delivered"]).await.id.to_string();
    let first = t.core.webhooks().test(&who, WebhookId::parse_or_none(&id)).await.unwrap();
    t.clock.advance(Duration::milliseconds(5));
    let second = t.core.webhooks().test(&who, WebhookId::parse_or_none(&id)).await.unwrap();
    assert_ne!(first.event_id, second.event_id);
    let page = t
        .core
        .webhooks()
        .deliveries(&who, WebhookId::parse_or_none(&id), ListParams { limit: Some(1), cursor: None })
        .await
        .unwrap();
    assert_eq!((page.items, page.has_more), (vec![second], true));
    let next = ListParams { limit: Some(1), cursor: page.next_cursor };
    assert_eq!(t.core.webhooks().deliveries(&who, WebhookId::parse_or_none(&id), next).await.unwrap().items, [first]);
    let bad = ListParams { limit: Some(0), cursor: None };
    assert_eq!(invalid_fields(t.core.webhooks().deliveries(&who, WebhookId::parse_or_none(&id), bad).await), ["limit"]);
}

#[tokio::test]
async fn a_send_key_cannot_manage_webhooks() {
    let t = TestCore::new();
    let who = full_key();
    let created = endpoint(&t, &who, &["Delivered"]).await;
    let delivery = t.core.webhooks().test(&who, created.id).await.unwrap();
    let sender = send_key_beside(&who);
    let (id, did) = (created.id.to_string(), delivery.id.to_string());
    let scope = Err::<(), _>(Error::InsufficientScope);
    assert_eq!(t.core.webhooks().create(&sender, create(URL, &["Sent"])).await.map(drop), scope);
    assert_eq!(t.core.webhooks().list(&sender, ListParams::default()).await.map(drop), scope);
    assert_eq!(t.core.webhooks().get(&sender, WebhookId::parse_or_none(&id)).await.map(drop), scope);
    assert_eq!(
        t.core
            .webhooks()
            .update(&sender, WebhookId::parse_or_none(&id), UpdateWebhookRequest::default())
            .await
            .map(drop),
        scope
    );
    assert_eq!(t.core.webhooks().rotate_secret(&sender, WebhookId::parse_or_none(&id)).await.map(drop), scope);
    assert_eq!(t.core.webhooks().test(&sender, WebhookId::parse_or_none(&id)).await.map(drop), scope);
    assert_eq!(
        t.core.webhooks().deliveries(&sender, WebhookId::parse_or_none(&id), ListParams::default()).await.map(drop),
        scope
    );
    assert_eq!(
        t.core
            .webhooks()
            .retry_delivery(&sender, WebhookId::parse_or_none(&id), DeliveryId::parse_or_none(&did))
            .await
            .map(drop),
        scope
    );
    assert_eq!(t.core.webhooks().delete(&sender, WebhookId::parse_or_none(&id)).await, scope);
    assert_eq!(t.core.webhooks().get(&who, WebhookId::parse_or_none(&id)).await.unwrap(), created);
}

#[tokio::test]
async fn another_workspaces_endpoint_is_not_found() {
    let t = TestCore::new();
    let alice = full_key();
    let bob = full_key();
    let created = endpoint(&t, &alice, &["Delivered"]).await;
    let delivery = t.core.webhooks().test(&alice, created.id).await.unwrap();
    let (id, did) = (created.id.to_string(), delivery.id.to_string());
    let missing = Err::<(), _>(Error::NotFound("webhook"));
    assert_eq!(t.core.webhooks().get(&bob, WebhookId::parse_or_none(&id)).await.map(drop), missing);
    assert_eq!(
        t.core.webhooks().update(&bob, WebhookId::parse_or_none(&id), UpdateWebhookRequest::default()).await.map(drop),
        missing
    );
    assert_eq!(t.core.webhooks().rotate_secret(&bob, WebhookId::parse_or_none(&id)).await.map(drop), missing);
    assert_eq!(t.core.webhooks().test(&bob, WebhookId::parse_or_none(&id)).await.map(drop), missing);
    assert_eq!(
        t.core.webhooks().deliveries(&bob, WebhookId::parse_or_none(&id), ListParams::default()).await.map(drop),
        missing
    );
    assert_eq!(
        t.core
            .webhooks()
            .retry_delivery(&bob, WebhookId::parse_or_none(&id), DeliveryId::parse_or_none(&did))
            .await
            .map(drop),
        missing
    );
    assert_eq!(t.core.webhooks().delete(&bob, WebhookId::parse_or_none(&id)).await, missing);
    assert!(t.core.webhooks().list(&bob, ListParams::default()).await.unwrap().items.is_empty());
    assert_eq!(t.core.webhooks().get(&alice, WebhookId::parse_or_none(&id)).await.unwrap(), created);
    // Alice's endpoint does not receive Bob's events.
    let message = message_of(&bob);
    assert!(t.core.webhooks().deliveries_for(&message, &delivered_event(&message, t.now())).await.unwrap().is_empty());
}

#[tokio::test]
async fn malformed_ids_are_not_found() {
    let t = TestCore::new();
    let who = full_key();
    for id in ["", "webhook", "01ARZ3NDEKTSV4RRFFQ69G5FA"] {
        assert_eq!(
            t.core.webhooks().get(&who, WebhookId::parse_or_none(id)).await,
            Err(Error::NotFound("webhook")),
            "{id:?}"
        );
        assert_eq!(
            t.core.webhooks().delete(&who, WebhookId::parse_or_none(id)).await,
            Err(Error::NotFound("webhook")),
            "{id:?}"
        );
        assert_eq!(
            t.core.webhooks().test(&who, WebhookId::parse_or_none(id)).await.map(drop),
            Err(Error::NotFound("webhook")),
            "{id:?}"
        );
    }
}

#[tokio::test]
async fn fan_out_fails_when_the_store_is_unavailable() {
    let t = TestCore::new();
    let who = full_key();
    endpoint(&t, &who, &["Delivered"]).await;
    t.faults.fail(Op::ListEnabledWebhooks, When::Always, StoreError::Unavailable("connection lost".into()));
    let message = message_of(&who);
    let event = delivered_event(&message, t.now());
    assert_eq!(
        t.core.webhooks().deliveries_for(&message, &event).await,
        Err(Error::Unavailable("connection lost".into()))
    );
}

#[tokio::test]
async fn an_endpoint_deleted_during_an_update_is_not_found() {
    let t = TestCore::new();
    let who = full_key();
    let created = endpoint(&t, &who, &["Delivered"]).await;
    // The deletion lands between the rotation's read and its write.
    let (store, deleted) = (Arc::clone(&t.store), created.clone());
    t.faults.before(Op::UpdateWebhook, When::Once, move || {
        let (store, deleted) = (Arc::clone(&store), deleted.clone());
        async move { store.delete_webhook(deleted.workspace_id, deleted.id).await.unwrap() }
    });
    let id = created.id.to_string();
    assert_eq!(
        t.core.webhooks().rotate_secret(&who, WebhookId::parse_or_none(&id)).await.map(drop),
        Err(Error::NotFound("webhook"))
    );
    assert_eq!(t.faults.calls(Op::UpdateWebhook), 1, "the write was tried");
}
