//! Open and click tracking (docs/api.md#tracking): the choice resolved at send time, the events the
//! public endpoints record, and every way a token is refused without recording anything.

use std::sync::Arc;

use tidings_core::ids::{EventId, MessageId, WorkspaceId};
use tidings_core::model::{
    Domain, DomainStatus, EventDetails, EventType, Message, MessageEvent, MessageStatus, MessageTracking,
};
use tidings_core::ports::{DomainStore, SecretStore, StoreError, SystemRandom};
use tidings_core::secret::Secret;
use tidings_core::state_machine::Happening;
use tidings_core::tracking::{
    MAX_OPENS_KEPT, MAX_REPEAT_CLICKS_KEPT, PublicUrl, TRACKING_KEY_SECRET, TrackedUrl, TrackingConfig, TrackingKey,
};
use tidings_core::usecases::{
    CoreConfig, CreateWebhookRequest, ListParams, MAX_USER_AGENT_CHARS, Principal, SendRequest, Tidings,
    TrackingRequest,
};
use tidings_core::{Error, IdempotencyConflict};
use tidings_testing::faulty::{Op, When};
use tidings_testing::service::full_key;
use tidings_testing::{FakeDns, TestCore};
use tidings_testing::{MemoryStore, fixtures};

const TARGET: &str = "https://shop.example.com/orders/42";
const NOT_FOUND: Error = Error::NotFound("tracking link");

fn key() -> TrackingKey {
    TrackingKey::from_bytes([5; 32])
}

fn tracking_config() -> CoreConfig {
    let tracking = TrackingConfig { public_url: PublicUrl::parse("https://t.example.com").unwrap(), key: key() };
    CoreConfig { tracking: Some(tracking), ..CoreConfig::default() }
}

fn target() -> TrackedUrl {
    TrackedUrl::parse(TARGET).unwrap()
}

async fn verified_domain(t: &TestCore, who: &Principal, opens: bool, clicks: bool) -> Domain {
    let mut domain = fixtures::domain(who.workspace_id, "acme.com");
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(t.now());
    domain.open_tracking = opens;
    domain.click_tracking = clicks;
    t.store.insert_domain(&domain).await.unwrap();
    domain
}

fn html_send(tracking: Option<TrackingRequest>) -> SendRequest {
    SendRequest {
        to: Some("ann@example.net".into()),
        subject: Some("Your order".into()),
        html: Some(format!(r#"<a href="{TARGET}">order</a>"#)),
        tracking,
        ..SendRequest::default()
    }
}

fn happening(t: &TestCore, event_type: EventType) -> Happening {
    Happening {
        event_id: EventId::new_at(t.now(), &SystemRandom),
        event_type,
        at: t.now(),
        details: EventDetails::default(),
        provider_message_id: (event_type == EventType::Sent).then(|| "x@acme.com".to_owned()),
        next_attempt_at: None,
    }
}

/// A tracked message of `who` that has been handed to the transport (status Sent).
async fn sent_message(t: &TestCore, who: &Principal) -> Message {
    verified_domain(t, who, true, true).await;
    let queued = t.core.messages().send(who, html_send(None), None).await.unwrap().message;
    t.core.messages().record_event(&queued, happening(t, EventType::Sent)).await.unwrap().0
}

async fn events(t: &TestCore, who: &Principal, message: &Message) -> Vec<MessageEvent> {
    t.core.messages().events(who, message.id, ListParams::default()).await.unwrap().items
}

async fn event_types(t: &TestCore, who: &Principal, message: &Message) -> Vec<EventType> {
    events(t, who, message).await.into_iter().map(|e| e.event_type).collect()
}

#[tokio::test]
async fn a_send_takes_each_tracking_choice_it_makes_and_the_domain_default_for_the_rest() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    verified_domain(&t, &who, true, false).await;
    let cases = [
        (None, (true, false)),
        (Some(TrackingRequest::default()), (true, false)),
        (Some(TrackingRequest { opens: Some(false), clicks: None }), (false, false)),
        (Some(TrackingRequest { opens: None, clicks: Some(true) }), (true, true)),
        (Some(TrackingRequest { opens: Some(false), clicks: Some(true) }), (false, true)),
    ];
    for (request, (opens, clicks)) in cases {
        let sent = t.core.messages().send(&who, html_send(request), None).await.unwrap().message;
        assert_eq!(sent.tracking, MessageTracking { opens, clicks }, "{request:?}");
        let stored = t.core.messages().get(&who, sent.id).await.unwrap();
        assert_eq!(stored.tracking, sent.tracking, "{request:?}");
    }
}

#[tokio::test]
async fn an_idempotent_replay_with_another_tracking_choice_is_another_request() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    verified_domain(&t, &who, false, false).await;
    t.core.messages().send(&who, html_send(None), Some("k1")).await.unwrap();
    assert!(t.core.messages().send(&who, html_send(None), Some("k1")).await.unwrap().replayed);
    let other = html_send(Some(TrackingRequest { opens: Some(true), clicks: None }));
    assert_eq!(
        t.core.messages().send(&who, other, Some("k1")).await.map(drop),
        Err(Error::IdempotencyKeyReused(IdempotencyConflict::OtherRequest))
    );
}

#[tokio::test]
async fn an_open_records_opened_with_the_user_agent_and_keeps_the_status() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let sent = sent_message(&t, &who).await;

    t.core
        .tracking()
        .record_open(&key().sign_open(sent.workspace_id, sent.id, None), Some("Mozilla/5.0"))
        .await
        .unwrap();

    let timeline = events(&t, &who, &sent).await;
    let opened = timeline.last().unwrap();
    assert_eq!(opened.event_type, EventType::Opened);
    assert_eq!(opened.details, EventDetails { user_agent: Some("Mozilla/5.0".into()), ..EventDetails::default() });
    assert_eq!(opened.provider_message_id.as_deref(), Some("x@acme.com"));
    assert_eq!(t.core.messages().get(&who, sent.id).await.unwrap().status, MessageStatus::Sent);
}

#[tokio::test]
async fn a_click_records_clicked_and_answers_the_signed_url() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let sent = sent_message(&t, &who).await;
    let delivered = t.core.messages().record_event(&sent, happening(&t, EventType::Delivered)).await.unwrap().0;

    let url = t
        .core
        .tracking()
        .record_click(&key().sign_click(sent.workspace_id, sent.id, None, &target()), None)
        .await
        .unwrap();

    assert_eq!(url.as_str(), TARGET);
    let clicked = events(&t, &who, &sent).await.pop().unwrap();
    assert_eq!(clicked.event_type, EventType::Clicked);
    assert_eq!(clicked.details, EventDetails { url: Some(TARGET.into()), ..EventDetails::default() });
    assert_eq!(t.core.messages().get(&who, sent.id).await.unwrap().status, delivered.status);
}

#[tokio::test]
async fn opens_and_clicks_fan_out_to_webhooks() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let hook = CreateWebhookRequest {
        url: Some("https://hooks.example.com/t".into()),
        event_types: Some(vec!["Opened".into(), "Clicked".into()]),
        enabled: None,
        format: None,
    };
    let hook = t.core.webhooks().create(&who, hook).await.unwrap();
    let sent = sent_message(&t, &who).await;

    t.core.tracking().record_open(&key().sign_open(sent.workspace_id, sent.id, None), None).await.unwrap();
    t.core.tracking().record_click(&key().sign_click(sent.workspace_id, sent.id, None, &target()), None).await.unwrap();

    let log = t.core.webhooks().deliveries(&who, hook.id, ListParams::default()).await.unwrap();
    let mut types: Vec<String> = log.items.iter().map(|d| format!("{:?}", d.event_type)).collect();
    types.sort();
    assert_eq!(types, ["Message(Clicked)", "Message(Opened)"]);
}

#[tokio::test]
async fn a_long_user_agent_is_cut_to_the_limit() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let sent = sent_message(&t, &who).await;
    let agent = "é".repeat(MAX_USER_AGENT_CHARS + 10);

    t.core.tracking().record_open(&key().sign_open(sent.workspace_id, sent.id, None), Some(&agent)).await.unwrap();

    let stored = events(&t, &who, &sent).await.pop().unwrap().details.user_agent.unwrap();
    assert_eq!(stored.chars().count(), MAX_USER_AGENT_CHARS);
    assert!(agent.starts_with(&stored));
}

#[tokio::test]
async fn refused_tokens_are_not_found_and_record_nothing() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let sent = sent_message(&t, &who).await;
    let open = key().sign_open(sent.workspace_id, sent.id, None);
    let click = key().sign_click(sent.workspace_id, sent.id, None, &target());
    let before = event_types(&t, &who, &sent).await;
    let mut altered = open.clone().into_bytes();
    altered[40] = if altered[40] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();

    let refused_opens = [
        altered,
        open[..open.len() - 1].to_owned(),
        format!("{open}A"),
        click.clone(),
        TrackingKey::from_bytes([6; 32]).sign_open(sent.workspace_id, sent.id, None),
        key().sign_open(WorkspaceId(fixtures::ulid()), sent.id, None),
        key().sign_open(sent.workspace_id, MessageId(fixtures::ulid()), None),
        String::new(),
        "not a token".into(),
    ];
    for token in &refused_opens {
        assert_eq!(t.core.tracking().record_open(token, Some("ua")).await, Err(NOT_FOUND), "{token}");
        assert_eq!(t.core.tracking().check_open(token).await, Err(NOT_FOUND), "{token}");
    }
    for token in [open.as_str(), &click[..click.len() - 2]] {
        assert_eq!(t.core.tracking().record_click(token, None).await, Err(NOT_FOUND), "{token}");
        assert_eq!(t.core.tracking().check_click(token).await, Err(NOT_FOUND), "{token}");
    }
    assert_eq!(event_types(&t, &who, &sent).await, before);
}

#[tokio::test]
async fn without_tracking_configured_every_token_is_unknown() {
    let t = TestCore::new();
    let who = full_key();
    let sent = sent_message(&t, &who).await;
    assert_eq!(
        t.core.tracking().record_open(&key().sign_open(sent.workspace_id, sent.id, None), None).await,
        Err(NOT_FOUND)
    );
}

#[tokio::test]
async fn head_probes_answer_like_gets_and_record_nothing() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let sent = sent_message(&t, &who).await;
    let before = event_types(&t, &who, &sent).await;

    t.core.tracking().check_open(&key().sign_open(sent.workspace_id, sent.id, None)).await.unwrap();
    let url =
        t.core.tracking().check_click(&key().sign_click(sent.workspace_id, sent.id, None, &target())).await.unwrap();

    assert_eq!(url.as_str(), TARGET);
    assert_eq!(event_types(&t, &who, &sent).await, before);
}

#[tokio::test]
async fn a_message_that_never_left_answers_but_records_nothing() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    verified_domain(&t, &who, true, true).await;
    let queued = t.core.messages().send(&who, html_send(None), None).await.unwrap().message;

    t.core.tracking().record_open(&key().sign_open(queued.workspace_id, queued.id, None), None).await.unwrap();
    let url = t
        .core
        .tracking()
        .record_click(&key().sign_click(queued.workspace_id, queued.id, None, &target()), None)
        .await
        .unwrap();

    assert_eq!(url.as_str(), TARGET);
    assert_eq!(event_types(&t, &who, &queued).await, [EventType::Queued]);
}

/// The service of another node sharing `t`'s store: its writes bypass `t.faults`.
fn other_node(t: &TestCore) -> Tidings {
    Tidings::new(
        Arc::clone(&t.store) as _,
        Arc::clone(&t.clock) as _,
        Arc::new(SystemRandom),
        Arc::new(FakeDns::default()),
        tracking_config(),
    )
}

#[tokio::test]
async fn a_bad_token_is_refused_before_the_store_is_asked() {
    let t = TestCore::with_config(tracking_config());
    let (ws, msg) = (WorkspaceId(fixtures::ulid()), MessageId(fixtures::ulid()));
    let forged = TrackingKey::from_bytes([6; 32]);
    assert_eq!(t.core.tracking().record_open(&forged.sign_open(ws, msg, None), None).await, Err(NOT_FOUND));
    assert_eq!(
        t.core.tracking().record_click(&forged.sign_click(ws, msg, None, &target()), None).await,
        Err(NOT_FOUND)
    );
    assert_eq!(
        t.core.tracking().record_click(&key().sign_open(ws, msg, None), None).await,
        Err(NOT_FOUND),
        "wrong kind"
    );
    assert_eq!(t.faults.total_calls(), 0);
}

#[tokio::test]
async fn an_open_that_races_a_delivery_event_is_retried_on_the_fresh_message() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let sent = sent_message(&t, &who).await;
    // The delivery report, on another node, is written between the open's read and its write.
    let (node, read, delivered) = (other_node(&t), sent.clone(), happening(&t, EventType::Delivered));
    t.faults.before(Op::RecordEvent, When::Once, move || {
        let (node, read, delivered) = (node.clone(), read.clone(), delivered.clone());
        async move { node.messages().record_event(&read, delivered).await.map(drop).unwrap() }
    });
    let (reads, writes) = (t.faults.calls(Op::GetMessage), t.faults.calls(Op::RecordEvent));

    t.core.tracking().record_open(&key().sign_open(sent.workspace_id, sent.id, None), None).await.unwrap();

    assert_eq!(t.faults.calls(Op::RecordEvent) - writes, 2, "the lost write and the retry");
    assert_eq!(t.faults.calls(Op::GetMessage) - reads, 2, "read again after the lost write");
    let stored = t.core.messages().get(&who, sent.id).await.unwrap();
    assert_eq!((stored.status, stored.tracking_tally.opens), (MessageStatus::Delivered, 1));
    assert_eq!(
        event_types(&t, &who, &sent).await,
        [EventType::Queued, EventType::Sent, EventType::Delivered, EventType::Opened]
    );
}

#[tokio::test]
async fn replayed_opens_and_clicks_stop_at_the_caps_keeping_the_first_of_each() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let hook = CreateWebhookRequest {
        url: Some("https://hooks.example.com/t".into()),
        event_types: Some(vec!["Opened".into(), "Clicked".into()]),
        enabled: None,
        format: None,
    };
    let hook = t.core.webhooks().create(&who, hook).await.unwrap();
    let sent = sent_message(&t, &who).await;
    let open = key().sign_open(sent.workspace_id, sent.id, None);
    let click = key().sign_click(sent.workspace_id, sent.id, None, &target());
    let other =
        key().sign_click(sent.workspace_id, sent.id, None, &TrackedUrl::parse("https://shop.example.com/x").unwrap());

    t.core.tracking().record_open(&open, Some("first")).await.unwrap();
    t.core.tracking().record_click(&click, Some("first")).await.unwrap();
    for _ in 0..200 {
        t.core.tracking().record_open(&open, Some("replay")).await.unwrap();
        assert_eq!(
            t.core.tracking().record_click(&click, Some("replay")).await.unwrap(),
            target(),
            "always redirected"
        );
    }
    t.core.tracking().record_click(&other, Some("later")).await.unwrap();

    let timeline = events(&t, &who, &sent).await;
    let opened: Vec<_> = timeline.iter().filter(|e| e.event_type == EventType::Opened).collect();
    let clicked: Vec<_> = timeline.iter().filter(|e| e.event_type == EventType::Clicked).collect();
    assert_eq!(opened.len(), MAX_OPENS_KEPT as usize);
    assert_eq!(opened[0].details.user_agent.as_deref(), Some("first"));
    assert_eq!(clicked.len(), 1 + MAX_REPEAT_CLICKS_KEPT as usize + 1, "first, repeats, the other link's first");
    assert_eq!(clicked[0].details.user_agent.as_deref(), Some("first"));
    assert_eq!(clicked.last().unwrap().details.url.as_deref(), Some("https://shop.example.com/x"));
    let log = t.core.webhooks().deliveries(&who, hook.id, ListParams::default()).await.unwrap();
    assert_eq!(log.items.len(), opened.len() + clicked.len(), "a delivery per kept event only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_replays_cannot_slip_past_the_cap_together() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let sent = sent_message(&t, &who).await;
    let open = key().sign_open(sent.workspace_id, sent.id, None);
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let (core, open) = (t.core.clone(), open.clone());
            tokio::spawn(async move { core.tracking().record_open(&open, None).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let opened = event_types(&t, &who, &sent).await.into_iter().filter(|e| *e == EventType::Opened).count();
    assert_eq!(opened, MAX_OPENS_KEPT as usize, "64 racing opens keep exactly the cap");
    let stored = t.core.messages().get(&who, sent.id).await.unwrap();
    assert_eq!(stored.tracking_tally.opens, MAX_OPENS_KEPT);
}

#[tokio::test]
async fn an_open_written_only_if_no_event_came_in_between() {
    let t = TestCore::with_config(tracking_config());
    let who = full_key();
    let sent = sent_message(&t, &who).await;
    let open = key().sign_open(sent.workspace_id, sent.id, None);
    // Another open, on another node, is written between this open's read and its write: it
    // changes no status, only the tally and the last event.
    let (node, token) = (other_node(&t), open.clone());
    t.faults.before(Op::RecordEvent, When::Once, move || {
        let (node, token) = (node.clone(), token.clone());
        async move { node.tracking().record_open(&token, Some("other")).await.unwrap() }
    });
    let writes = t.faults.calls(Op::RecordEvent);

    t.core.tracking().record_open(&open, None).await.unwrap();

    assert_eq!(t.faults.calls(Op::RecordEvent) - writes, 2, "the write naming the event it read lost, then the retry");
    let stored = t.core.messages().get(&who, sent.id).await.unwrap();
    assert_eq!(stored.tracking_tally.opens, 2, "neither open's count is lost");
    let opened = event_types(&t, &who, &sent).await.into_iter().filter(|e| *e == EventType::Opened).count();
    assert_eq!(opened, 2);
}

/// Whether two keys sign alike (keys cannot be compared otherwise: nothing exposes them).
fn same_key(a: &TrackingKey, b: &TrackingKey) -> bool {
    let (ws, msg) = (WorkspaceId(fixtures::ulid()), MessageId(fixtures::ulid()));
    a.sign_open(ws, msg, None) == b.sign_open(ws, msg, None)
}

#[tokio::test]
async fn the_first_tracking_key_a_store_gets_is_every_later_caller_s() {
    let store = MemoryStore::new();
    let made = TrackingKey::shared(&store, &SystemRandom, None).await.unwrap();
    let again = TrackingKey::shared(&store, &SystemRandom, None).await.unwrap();
    let kept = TrackingKey::shared(&store, &SystemRandom, Some([8; 32])).await.unwrap();
    assert!(same_key(&made, &again), "a second start gets the stored key, not a new random one");
    assert!(same_key(&made, &kept), "a key kept by another node does not replace the stored one");
    assert!(!same_key(&made, &TrackingKey::from_bytes([8; 32])));
    let stored = store.ensure_secret(TRACKING_KEY_SECRET, &Secret::new(vec![0; 32])).await.unwrap();
    assert_eq!(stored.expose().len(), 32, "it is stored as its 32 bytes");
}

#[tokio::test]
async fn a_kept_tracking_key_becomes_the_key_of_a_store_without_one() {
    let store = MemoryStore::new();
    let kept = TrackingKey::shared(&store, &SystemRandom, Some([7; 32])).await.unwrap();
    assert!(same_key(&kept, &TrackingKey::from_bytes([7; 32])), "links signed with the kept key still verify");
    let other_node = TrackingKey::shared(&store, &SystemRandom, None).await.unwrap();
    assert!(same_key(&other_node, &kept), "and every node now uses it");
}

#[tokio::test]
async fn a_stored_tracking_key_of_the_wrong_length_is_corrupt() {
    let store = MemoryStore::new();
    store.ensure_secret(TRACKING_KEY_SECRET, &Secret::new(vec![1; 5])).await.unwrap();
    let shared = TrackingKey::shared(&store, &SystemRandom, None).await;
    assert!(matches!(shared, Err(StoreError::Corrupt(_))), "{shared:?}");
}
