//! Inbound mail's use cases over the in-memory store (contract §13): which recipients are
//! taken (a receiving domain only: inbound on, MX and domain Verified), what routes do
//! (reject at RCPT, store without an event, webhook to its endpoint alone, no route: every
//! subscribed endpoint), one copy per workspace, the quota, replies naming what they answer,
//! unreadable mail, the API's reads and retention.

use chrono::Duration as Span;
use tidings_core::Error;
use tidings_core::email::EmailAddress;
use tidings_core::inbound::InboundParseError;
use tidings_core::model::{AuthResults, DomainStatus, RecordKind, RecordStatus};
use tidings_core::ports::{DomainStore, InboundQuery, InboundQuota, InboundStore, PageRequest, WebhookStore};
use tidings_core::usecases::{
    AddDomainRequest, CoreConfig, CreateWebhookRequest, InboundPolicy, ListParams, Principal, ReceiveOutcome,
    ReceivedEnvelope, RecipientVerdict, RouteRequest, Tidings, Unreadable, UpdateDomainTrackingRequest,
};
use tidings_testing::service::{TestCore, full_key, send_key_beside};

const MX: &str = "mx.tidings.test";

fn config(quota: InboundQuota) -> CoreConfig {
    let mut config = CoreConfig {
        allow_private_webhooks: true,
        message_retention: Some(Span::days(30)),
        inbound: InboundPolicy { quota, ..InboundPolicy::default() },
        ..CoreConfig::default()
    };
    config.records.return_path_host = Some(tidings_core::domain_name::DnsName::parse(MX).unwrap());
    config
}

fn roomy() -> InboundQuota {
    InboundQuota { max_messages: 100, max_bytes: 1 << 30 }
}

fn addr(text: &str) -> EmailAddress {
    EmailAddress::parse(text).unwrap()
}

/// `name` added to `who`'s workspace with inbound on, and made to receive (the domain and
/// its MX Verified) when `receiving`.
async fn inbound_domain(t: &TestCore, who: &Principal, name: &str, receiving: bool) {
    let domain = t.core.domains().add(who, AddDomainRequest { domain: Some(name.into()) }).await.unwrap();
    let on = UpdateDomainTrackingRequest { inbound: Some(true), ..UpdateDomainTrackingRequest::default() };
    let mut domain = t.core.domains().update_tracking(who, domain.id, on).await.unwrap();
    assert!(domain.records.iter().any(|r| r.kind == RecordKind::InboundMx), "the MX is asked for");
    if receiving {
        domain.status = DomainStatus::Verified;
        domain.verified_at = Some(t.now());
        for record in &mut domain.records {
            record.status = RecordStatus::Verified;
        }
        t.store.update_domain(&domain).await.unwrap();
    }
    t.core.inbound_domains_changed();
}

fn envelope(to: &[&str]) -> ReceivedEnvelope {
    ReceivedEnvelope {
        mail_from: Some(addr("ann@sender.example")),
        recipients: to.iter().map(|t| addr(t)).collect(),
        client_ip: std::net::Ipv4Addr::new(192, 0, 2, 7).into(),
        helo: "mail.sender.example".into(),
    }
}

fn message(to: &str, extra: &str) -> Vec<u8> {
    format!("From: Ann <ann@sender.example>\r\nTo: {to}\r\nSubject: Hello\r\n{extra}\r\nHi there.\r\n").into_bytes()
}

async fn receive(core: &Tidings, to: &[&str], raw: &[u8]) -> ReceiveOutcome {
    core.inbound().receive(&envelope(to), raw, AuthResults::unchecked()).await.unwrap().unwrap()
}

async fn hook(core: &Tidings, who: &Principal, path: &str, types: &[&str]) -> tidings_core::ids::WebhookId {
    let req = CreateWebhookRequest {
        url: Some(format!("https://hooks.example.com/{path}")),
        event_types: Some(types.iter().map(|t| (*t).to_owned()).collect()),
        enabled: None,
        format: None,
    };
    core.webhooks().create(who, req).await.unwrap().id
}

async fn queued(t: &TestCore, who: &Principal, endpoint: tidings_core::ids::WebhookId) -> Vec<serde_json::Value> {
    let page = t.store.list_webhook_deliveries(who.workspace_id, endpoint, PageRequest::first(50)).await.unwrap();
    page.items.iter().map(|d| serde_json::from_str(&d.payload).unwrap()).collect()
}

#[tokio::test]
async fn only_receiving_domains_take_mail_and_routes_decide_at_rcpt() {
    let t = TestCore::with_config(config(roomy()));
    let who = full_key();
    inbound_domain(&t, &who, "in.acme.example", true).await;
    inbound_domain(&t, &who, "pending.acme.example", false).await;
    let inbound = t.core.inbound();
    let ws = who.workspace_id;
    assert_eq!(inbound.check_recipient(&addr("support@in.acme.example")).await.unwrap(), RecipientVerdict::Accept(ws));
    assert_eq!(inbound.check_recipient(&addr("x@pending.acme.example")).await.unwrap(), RecipientVerdict::NotOurs);
    assert_eq!(inbound.check_recipient(&addr("x@gmail.com")).await.unwrap(), RecipientVerdict::NotOurs);

    // Another workspace adding the same name and switching inbound on gets nothing: it
    // cannot verify the domain (the DKIM records of its keys are not published).
    let thief = full_key();
    inbound_domain(&t, &thief, "in.acme.example", false).await;
    assert_eq!(inbound.check_recipient(&addr("support@in.acme.example")).await.unwrap(), RecipientVerdict::Accept(ws));

    let routes = t.core.inbound_routes();
    let reject = RouteRequest {
        matcher: Some("noreply@in.acme.example".into()),
        action: Some("reject".into()),
        webhook_id: None,
    };
    routes.create(&who, reject).await.unwrap();
    assert_eq!(inbound.check_recipient(&addr("NoReply@in.acme.example")).await.unwrap(), RecipientVerdict::Rejected);
    let all =
        RouteRequest { matcher: Some("*@in.acme.example".into()), action: Some("reject".into()), webhook_id: None };
    routes.create(&who, all).await.unwrap();
    let store = RouteRequest {
        matcher: Some("support@in.acme.example".into()),
        action: Some("store".into()),
        webhook_id: None,
    };
    routes.create(&who, store).await.unwrap();
    assert_eq!(
        inbound.check_recipient(&addr("support@in.acme.example")).await.unwrap(),
        RecipientVerdict::Accept(ws),
        "the address's route beats its domain's"
    );
    assert_eq!(inbound.check_recipient(&addr("sales@in.acme.example")).await.unwrap(), RecipientVerdict::Rejected);

    // Switching inbound off stops it at once on this node.
    let domain = t
        .store
        .find_domain_by_name(ws, &tidings_core::domain_name::DomainName::parse("in.acme.example").unwrap())
        .await
        .unwrap()
        .unwrap();
    let off = UpdateDomainTrackingRequest { inbound: Some(false), ..UpdateDomainTrackingRequest::default() };
    let domain = t.core.domains().update_tracking(&who, domain.id, off).await.unwrap();
    assert!(domain.records.iter().all(|r| r.kind != RecordKind::InboundMx), "the MX is no longer asked for");
    assert_eq!(inbound.check_recipient(&addr("support@in.acme.example")).await.unwrap(), RecipientVerdict::NotOurs);
}

#[tokio::test]
async fn events_go_where_the_route_says_and_each_workspace_gets_one_copy() {
    let t = TestCore::with_config(config(roomy()));
    let (a, b) = (full_key(), full_key());
    inbound_domain(&t, &a, "in.a.example", true).await;
    inbound_domain(&t, &b, "in.b.example", true).await;
    let routed = hook(&t.core, &a, "routed", &["InboundReceived"]).await;
    let subscribed = hook(&t.core, &a, "all", &["InboundReceived", "Delivered"]).await;
    let other = hook(&t.core, &a, "other", &["Delivered"]).await;
    let b_hook = hook(&t.core, &b, "b", &["InboundReceived"]).await;
    let routes = t.core.inbound_routes();
    let webhook = RouteRequest {
        matcher: Some("support@in.a.example".into()),
        action: Some("webhook".into()),
        webhook_id: Some(routed.to_string()),
    };
    routes.create(&a, webhook).await.unwrap();
    let store =
        RouteRequest { matcher: Some("archive@in.a.example".into()), action: Some("store".into()), webhook_id: None };
    routes.create(&a, store).await.unwrap();

    // To a routed address and an unrouted one of `a`, and to `b`: one copy each.
    let to = ["support@in.a.example", "hello@in.a.example", "team@in.b.example"];
    let ReceiveOutcome::Stored(ids) = receive(&t.core, &to, &message("support@in.a.example", "")).await else {
        panic!("stored")
    };
    assert_eq!(ids.len(), 2, "one copy per workspace");
    let mine = t.core.inbound().get(&a, ids[0]).await.unwrap();
    assert_eq!(mine.envelope.recipients, vec![addr("support@in.a.example"), addr("hello@in.a.example")]);
    assert_eq!(queued(&t, &a, routed).await.len(), 1, "the first recipient's route picks the endpoint");
    assert!(queued(&t, &a, subscribed).await.is_empty(), "a webhook route sends to its endpoint alone");
    assert_eq!(queued(&t, &b, b_hook).await.len(), 1, "b's copy goes to b's subscribers");
    assert!(t.core.inbound().get(&b, ids[0]).await.is_err(), "a's copy is not b's");

    // No route: every subscribed endpoint; a store route: none.
    receive(&t.core, &["hello@in.a.example"], &message("hello@in.a.example", "")).await;
    let said = queued(&t, &a, subscribed).await;
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["type"], "InboundReceived");
    assert_eq!(said[0]["data"]["subject"], "Hello");
    assert!(said[0]["data"]["rawUrl"].as_str().unwrap().ends_with("/raw"));
    assert!(queued(&t, &a, other).await.is_empty(), "not subscribed");
    receive(&t.core, &["archive@in.a.example"], &message("archive@in.a.example", "")).await;
    let after = queued(&t, &a, subscribed).await;
    assert_eq!(after.len(), 1, "a store route announces nothing: {after:#?}");
    assert_eq!(queued(&t, &a, routed).await.len(), 2, "the routed endpoint subscribes too: it had the unrouted one");
    let listed = t.core.inbound().list(&a, InboundQuery::default(), ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 3, "every message is stored whatever its route");
}

#[tokio::test]
async fn routes_are_checked_and_need_a_full_key() {
    let t = TestCore::with_config(config(roomy()));
    let who = full_key();
    inbound_domain(&t, &who, "in.acme.example", true).await;
    let routes = t.core.inbound_routes();
    let req = |m: &str, a: &str, w: Option<String>| RouteRequest {
        matcher: Some(m.into()),
        action: Some(a.into()),
        webhook_id: w,
    };
    let fields = |r: tidings_core::Result<_>| match r {
        Err(Error::Validation { fields }) => fields.into_iter().map(|f| f.field).collect::<Vec<_>>(),
        other => panic!("expected a validation error, got {other:?}"),
    };
    assert_eq!(fields(routes.create(&who, req("not an address", "store", None)).await), ["match"]);
    assert_eq!(fields(routes.create(&who, req("*@elsewhere.example", "store", None)).await), ["match"]);
    assert_eq!(fields(routes.create(&who, req("a@in.acme.example", "forward", None)).await), ["action"]);
    assert_eq!(fields(routes.create(&who, req("a@in.acme.example", "webhook", None)).await), ["webhookId"]);
    let deliveries_only = hook(&t.core, &who, "d", &["Delivered"]).await;
    let wrong = req("a@in.acme.example", "webhook", Some(deliveries_only.to_string()));
    assert_eq!(
        fields(routes.create(&who, wrong).await),
        ["webhookId"],
        "the endpoint must subscribe to InboundReceived"
    );
    assert_eq!(fields(routes.create(&who, req("a@in.acme.example", "store", Some("x".into()))).await), ["webhookId"]);
    let made = routes.create(&who, req("a@in.acme.example", "store", None)).await.unwrap();
    assert!(matches!(routes.create(&who, req("A@in.acme.example", "reject", None)).await, Err(Error::Conflict(_))));
    let send_key = send_key_beside(&who);
    assert!(matches!(routes.list(&send_key).await, Err(Error::InsufficientScope)));
    assert!(matches!(
        t.core.inbound().list(&send_key, InboundQuery::default(), ListParams::default()).await,
        Err(Error::InsufficientScope)
    ));
    let stranger = full_key();
    assert!(matches!(routes.get(&stranger, made.id).await, Err(Error::NotFound(_))));
    assert!(matches!(routes.delete(&stranger, made.id).await, Err(Error::NotFound(_))));
    routes.delete(&who, made.id).await.unwrap();
    assert!(routes.list(&who).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_full_workspace_refuses_new_mail_and_retention_makes_room() {
    let t = TestCore::with_config(config(InboundQuota { max_messages: 2, max_bytes: 1 << 30 }));
    let who = full_key();
    inbound_domain(&t, &who, "in.acme.example", true).await;
    let to = ["support@in.acme.example"];
    for _ in 0..2 {
        assert!(matches!(receive(&t.core, &to, &message(to[0], "")).await, ReceiveOutcome::Stored(_)));
    }
    assert_eq!(t.core.inbound().check_recipient(&addr(to[0])).await.unwrap(), RecipientVerdict::Full);
    assert_eq!(receive(&t.core, &to, &message(to[0], "")).await, ReceiveOutcome::Full, "nothing past the quota");

    t.clock.advance(Span::days(31));
    assert_eq!(t.core.inbound().purge_expired(10).await.unwrap(), 2, "past retention, deleted whole");
    assert_eq!(t.store.inbound_usage(who.workspace_id).await.unwrap().messages, 0);
    assert_eq!(
        t.core.inbound().check_recipient(&addr(to[0])).await.unwrap(),
        RecipientVerdict::Accept(who.workspace_id)
    );
}

#[tokio::test]
async fn a_reply_names_the_message_of_its_workspace_it_answers() {
    let t = TestCore::with_config(config(roomy()));
    let who = full_key();
    inbound_domain(&t, &who, "in.acme.example", true).await;
    // A message of this workspace: sent from the receiving domain itself.
    let send = tidings_core::usecases::SendRequest {
        to: Some("ann@sender.example".into()),
        from: Some("orders@in.acme.example".into()),
        subject: Some("Shipped".into()),
        text: Some("On its way".into()),
        ..Default::default()
    };
    let sent = t.core.messages().send(&who, send, None).await.unwrap().message;
    let forged = tidings_core::ids::MessageId::new_at(t.now(), &tidings_core::ports::SystemRandom);
    let extra = format!(
        "In-Reply-To: <{forged}@in.acme.example>\r\nReferences: <{}@in.acme.example> <{forged}@in.acme.example>\r\n",
        sent.id
    );
    let ReceiveOutcome::Stored(ids) =
        receive(&t.core, &["orders@in.acme.example"], &message("orders@in.acme.example", &extra)).await
    else {
        panic!("stored")
    };
    let got = t.core.inbound().get(&who, ids[0]).await.unwrap();
    assert_eq!(
        got.in_reply_to_message_id,
        Some(sent.id),
        "the id that is a message of the workspace, not the forged one"
    );

    // Another workspace's reply naming it gets nothing.
    let other = full_key();
    inbound_domain(&t, &other, "in.other.example", true).await;
    let extra = format!("In-Reply-To: <{}@in.acme.example>\r\n", sent.id);
    let ReceiveOutcome::Stored(ids) =
        receive(&t.core, &["x@in.other.example"], &message("x@in.other.example", &extra)).await
    else {
        panic!("stored")
    };
    assert_eq!(t.core.inbound().get(&other, ids[0]).await.unwrap().in_reply_to_message_id, None);
}

#[tokio::test]
async fn unreadable_mail_is_refused_and_attachments_read_back() {
    let policy = InboundPolicy {
        quota: roomy(),
        limits: tidings_core::inbound::InboundLimits { max_message_bytes: 2048, ..Default::default() },
        ..InboundPolicy::default()
    };
    let mut config = config(roomy());
    config.inbound = policy;
    let t = TestCore::with_config(config);
    let who = full_key();
    inbound_domain(&t, &who, "in.acme.example", true).await;
    let to = ["a@in.acme.example"];
    let big = message(to[0], &format!("X-Pad: {}\r\n", "p".repeat(4000)));
    let refused = t.core.inbound().receive(&envelope(&to), &big, AuthResults::unchecked()).await.unwrap();
    assert!(matches!(refused, Err(Unreadable::Parse(InboundParseError::TooLarge { .. }))), "{refused:?}");
    let not_mail = t.core.inbound().receive(&envelope(&to), b"\r\n\r\n", AuthResults::unchecked()).await.unwrap();
    assert!(matches!(not_mail, Err(Unreadable::Parse(InboundParseError::NotAMessage))), "{not_mail:?}");

    let raw = b"From: a@sender.example\r\nTo: a@in.acme.example\r\nSubject: file\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee file\r\n--b\r\n\
Content-Type: text/csv; name=a.csv\r\nContent-Disposition: attachment; filename=a.csv\r\n\r\nx,y\r\n--b--\r\n";
    let ReceiveOutcome::Stored(ids) = receive(&t.core, &to, raw).await else { panic!("stored") };
    let (meta, bytes) = t.core.inbound().attachment(&who, ids[0], 0).await.unwrap();
    assert_eq!((meta.filename.as_deref(), bytes.as_slice()), (Some("a.csv"), b"x,y".as_slice()));
    assert!(matches!(t.core.inbound().attachment(&who, ids[0], 1).await, Err(Error::NotFound(_))));
    assert_eq!(t.core.inbound().raw(&who, ids[0]).await.unwrap(), raw);
}

#[tokio::test]
async fn a_route_that_rejects_one_recipient_after_rcpt_leaves_the_others_their_mail() {
    let t = TestCore::with_config(config(roomy()));
    let who = full_key();
    inbound_domain(&t, &who, "in.acme.example", true).await;
    let to = ["noreply@in.acme.example", "support@in.acme.example"];
    for rcpt in to {
        assert_eq!(
            t.core.inbound().check_recipient(&addr(rcpt)).await.unwrap(),
            RecipientVerdict::Accept(who.workspace_id)
        );
    }
    // Between RCPT TO and the data, the first recipient's route comes to reject.
    let reject = RouteRequest { matcher: Some(to[0].into()), action: Some("reject".into()), webhook_id: None };
    t.core.inbound_routes().create(&who, reject).await.unwrap();
    let ReceiveOutcome::Stored(ids) = receive(&t.core, &to, &message(to[0], "")).await else { panic!("stored") };
    assert_eq!(ids.len(), 1, "the support@ copy is kept");
    let kept = t.core.inbound().get(&who, ids[0]).await.unwrap();
    assert_eq!(kept.envelope.recipients, vec![addr(to[1])], "without the rejected recipient");
}
