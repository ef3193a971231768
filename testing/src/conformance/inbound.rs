//! Inbound mail (`InboundStore`): routes unique per matcher within a workspace; messages
//! written with their raw bytes and event deliveries, within the workspace's quota, or not
//! at all (racing writers never overshoot it); lists newest first with the `to` and `from`
//! filters; retention purges earliest first and gives the usage back; whatever text a
//! message holds (a NUL included) is kept and filtered on as sent.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use super::{Must, assert_conflict, assert_not_found, walk_pages};
use crate::fixtures::{delivery, email, now, ulid, webhook};
use tidings_core::ids::{InboundMessageId, InboundRouteId, WebhookId, WorkspaceId};
use tidings_core::model::{
    AuthResults, InboundEnvelope, InboundMailbox, InboundMessage, InboundRoute, ParsedInbound, RouteAction, RouteMatch,
    Truncation,
};
use tidings_core::ports::{InboundQuery, InboundQuota, InboundUsage, PageRequest, Store};

const ROOMY: InboundQuota = InboundQuota { max_messages: 1_000, max_bytes: 1 << 30 };

fn route(ws: WorkspaceId, matcher: &str, action: RouteAction) -> InboundRoute {
    let at = now();
    let matcher = RouteMatch::parse(matcher).unwrap_or_else(|| panic!("fixture matcher {matcher}"));
    InboundRoute { id: InboundRouteId(ulid()), workspace_id: ws, matcher, action, created_at: at, updated_at: at }
}

/// A message to `to` from `from`, received at `at`, `size` raw bytes.
fn message(ws: WorkspaceId, to: &str, from: &str, at: DateTime<Utc>) -> InboundMessage {
    let parsed = ParsedInbound {
        from: Some(InboundMailbox { name: Some("Ada".to_owned()), address: from.to_owned() }),
        to: vec![InboundMailbox { name: None, address: to.to_owned() }],
        cc: Vec::new(),
        subject: Some("Re: your receipt".to_owned()),
        text: Some("Thanks!\n\n> quoted".to_owned()),
        html: None,
        stripped_text_reply: Some("Thanks!".to_owned()),
        headers: Vec::new(),
        attachments: Vec::new(),
        message_id: Some(format!("{}@mail.example.net", ulid())),
        in_reply_to: Vec::new(),
        references: Vec::new(),
        truncated: Truncation::default(),
    };
    InboundMessage {
        id: InboundMessageId(ulid()),
        workspace_id: ws,
        received_at: at,
        envelope: InboundEnvelope {
            mail_from: Some(from.to_owned()),
            recipients: vec![email(to)],
            client_ip: "192.0.2.25".parse().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
            helo: "mail.example.net".to_owned(),
        },
        parsed,
        auth: AuthResults::unchecked(),
        in_reply_to_message_id: None,
        route_id: None,
        size: 120,
    }
}

fn raw_of(m: &InboundMessage) -> Vec<u8> {
    format!("From: {}\r\nSubject: hi\r\n\r\n{}\r\n", m.envelope.mail_from.as_deref().unwrap_or(""), m.id).into_bytes()
}

pub(super) async fn routes_are_unique_per_match_within_a_workspace<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let support = route(ws, "support@in.example.com", RouteAction::Store);
    let all = route(ws, "*@in.example.com", RouteAction::Webhook { webhook_id: WebhookId(ulid()) });
    s.insert_inbound_route(&support).await.must("insert support");
    s.insert_inbound_route(&all).await.must("insert catch-all");
    assert_eq!(s.list_inbound_routes(ws).await.must("list"), vec![support.clone(), all.clone()], "oldest first");

    let twin = route(ws, "Support@in.example.com", RouteAction::Reject);
    assert_conflict(s.insert_inbound_route(&twin).await, "a second route with the same address");
    assert_conflict(s.insert_inbound_route(&support).await, "the same id again");
    let elsewhere = route(WorkspaceId(ulid()), "support@in.example.com", RouteAction::Reject);
    s.insert_inbound_route(&elsewhere).await.must("the same match in another workspace");
    assert_eq!(s.list_inbound_routes(ws).await.must("list").len(), 2, "workspaces are apart");

    let rejecting = InboundRoute { action: RouteAction::Reject, ..support.clone() };
    s.update_inbound_route(&rejecting).await.must("update action");
    let onto_all = InboundRoute { matcher: all.matcher.clone(), ..support.clone() };
    assert_conflict(s.update_inbound_route(&onto_all).await, "update onto another route's match");
    let foreign = InboundRoute { workspace_id: elsewhere.workspace_id, ..support.clone() };
    assert_not_found(s.update_inbound_route(&foreign).await, "update through another workspace");
    assert_eq!(s.list_inbound_routes(ws).await.must("list"), vec![rejecting, all.clone()]);

    assert_not_found(s.delete_inbound_route(elsewhere.workspace_id, support.id).await, "delete from elsewhere");
    s.delete_inbound_route(ws, support.id).await.must("delete");
    assert_not_found(s.delete_inbound_route(ws, support.id).await, "delete twice");
    assert_not_found(s.update_inbound_route(&support).await, "update a deleted route");
    assert_eq!(s.list_inbound_routes(ws).await.must("list"), vec![all]);
    // The deleted route's match is free again.
    s.insert_inbound_route(&route(ws, "support@in.example.com", RouteAction::Store)).await.must("reuse the match");
}

pub(super) async fn messages_are_stored_with_raw_and_deliveries_within_the_quota<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let endpoint = webhook(ws);
    s.insert_webhook(&endpoint).await.must("insert_webhook");
    let first = message(ws, "support@in.example.com", "ada@example.org", now());
    let said = delivery(ws, endpoint.id);
    assert!(s.insert_inbound(&first, &raw_of(&first), std::slice::from_ref(&said), &ROOMY).await.must("insert"));
    assert_eq!(s.get_inbound(ws, first.id).await.must("get"), Some(first.clone()));
    assert_eq!(s.inbound_raw(ws, first.id).await.must("raw"), Some(raw_of(&first)), "raw bytes as received");
    assert!(s.get_webhook_delivery(ws, said.id).await.must("delivery").is_some(), "written with the message");
    let usage = InboundUsage { messages: 1, bytes: first.stored_bytes() };
    assert_eq!(s.inbound_usage(ws).await.must("usage"), usage);
    assert_conflict(s.insert_inbound(&first, b"x", &[], &ROOMY).await, "the same id again");

    let other = WorkspaceId(ulid());
    assert_eq!(s.get_inbound(other, first.id).await.must("get elsewhere"), None, "workspaces are apart");
    assert_eq!(s.inbound_raw(other, first.id).await.must("raw elsewhere"), None);
    assert_eq!(s.inbound_usage(other).await.must("usage elsewhere"), InboundUsage::default());

    // Over the message count: nothing written, delivery neither.
    let second = message(ws, "support@in.example.com", "bob@example.org", now());
    let refused = delivery(ws, endpoint.id);
    let one = InboundQuota { max_messages: 1, max_bytes: 1 << 30 };
    assert!(!s.insert_inbound(&second, &raw_of(&second), std::slice::from_ref(&refused), &one).await.must("full"));
    assert_eq!(s.get_inbound(ws, second.id).await.must("get"), None);
    assert!(
        s.get_webhook_delivery(ws, refused.id).await.must("delivery").is_none(),
        "a refused message queues nothing"
    );
    // Over the bytes: likewise; exactly at them: taken.
    let exact = InboundQuota { max_messages: 10, max_bytes: first.stored_bytes() + second.stored_bytes() };
    let under = InboundQuota { max_bytes: exact.max_bytes - 1, ..exact };
    assert!(!s.insert_inbound(&second, &raw_of(&second), &[], &under).await.must("over bytes"));
    assert!(s.insert_inbound(&second, &raw_of(&second), &[], &exact).await.must("at bytes"));
    assert_eq!(s.inbound_usage(ws).await.must("usage").messages, 2);

    // A delivery to an endpoint deleted meanwhile is dropped, the message still stored.
    let gone = webhook(ws);
    s.insert_webhook(&gone).await.must("insert_webhook");
    s.delete_webhook(ws, gone.id).await.must("delete_webhook");
    let third = message(ws, "support@in.example.com", "cy@example.org", now());
    let orphan = delivery(ws, gone.id);
    assert!(s.insert_inbound(&third, &raw_of(&third), std::slice::from_ref(&orphan), &ROOMY).await.must("insert"));
    assert!(s.get_webhook_delivery(ws, orphan.id).await.must("get").is_none());
}

pub(super) async fn messages_are_listed_newest_first_with_filters<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let mut all = Vec::new();
    for (to, from) in [
        ("support@in.example.com", "ada@example.org"),
        ("sales@in.example.com", "Bob@Example.org"),
        ("support@in.example.com", "bob@example.org"),
        ("Support@in.example.com", "cy@example.org"),
        ("support@in.example.com", "ada@example.org"),
    ] {
        let m = message(ws, to, from, now());
        assert!(s.insert_inbound(&m, &raw_of(&m), &[], &ROOMY).await.must("insert"));
        all.push(m);
    }
    let elsewhere = message(WorkspaceId(ulid()), "support@in.example.com", "ada@example.org", now());
    assert!(s.insert_inbound(&elsewhere, &raw_of(&elsewhere), &[], &ROOMY).await.must("insert elsewhere"));
    let newest_first = |keep: &dyn Fn(&InboundMessage) -> bool| -> Vec<InboundMessageId> {
        all.iter().rev().filter(|m| keep(m)).map(|m| m.id).collect()
    };

    let cases = [
        (InboundQuery::default(), newest_first(&|_| true)),
        (
            InboundQuery { to: Some(email("SUPPORT@in.example.com")), from: None },
            newest_first(&|m| m.envelope.recipients[0].normalized() == email("support@in.example.com").normalized()),
        ),
        (InboundQuery { to: None, from: Some("BOB@example.org".to_owned()) }, vec![all[2].id, all[1].id]),
        (
            InboundQuery { to: Some(email("support@in.example.com")), from: Some("ada@example.org".to_owned()) },
            vec![all[4].id, all[0].id],
        ),
        (InboundQuery { to: Some(email("nobody@in.example.com")), from: None }, Vec::new()),
    ];
    for (query, expected) in cases {
        let query = Arc::new(query);
        for limit in [1, 2, 10] {
            let (s, q) = (Arc::clone(&s), Arc::clone(&query));
            let lister = Box::new(move |page: PageRequest<InboundMessageId>| {
                let (s, q) = (Arc::clone(&s), Arc::clone(&q));
                Box::pin(async move { s.list_inbound(ws, &q, page).await }) as super::Fut<_>
            }) as super::Lister<_, _>;
            walk_pages(&format!("list_inbound {query:?}"), &lister, |m: &InboundMessage| m.id, limit, &expected).await;
        }
    }
}

pub(super) async fn purges_take_old_messages_earliest_first_and_give_usage_back<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let start = now() - Duration::days(40);
    let mut all = Vec::new();
    for day in 0..5 {
        let m = message(ws, "support@in.example.com", "ada@example.org", start + Duration::days(day * 10));
        assert!(s.insert_inbound(&m, &raw_of(&m), &[], &ROOMY).await.must("insert"));
        all.push(m);
    }
    let cutoff = start + Duration::days(25);
    assert_eq!(s.purge_inbound(cutoff, 2).await.must("purge"), 2, "up to the limit");
    assert_eq!(s.get_inbound(ws, all[0].id).await.must("get"), None, "earliest first");
    assert_eq!(s.get_inbound(ws, all[1].id).await.must("get"), None);
    assert!(s.get_inbound(ws, all[2].id).await.must("get").is_some(), "past the limit, left for the next call");
    assert_eq!(s.purge_inbound(cutoff, 2).await.must("purge"), 1, "what is left before the cutoff");
    assert_eq!(s.purge_inbound(cutoff, 2).await.must("purge"), 0);
    assert_eq!(s.inbound_raw(ws, all[2].id).await.must("raw"), None, "the raw bytes go with it");
    let kept = &all[3..];
    let usage = InboundUsage { messages: 2, bytes: kept.iter().map(InboundMessage::stored_bytes).sum() };
    assert_eq!(s.inbound_usage(ws).await.must("usage"), usage, "the purged messages' usage is given back");
    // Room given back is room to store again.
    let quota = InboundQuota { max_messages: 3, max_bytes: 1 << 30 };
    let fresh = message(ws, "support@in.example.com", "ada@example.org", now());
    assert!(s.insert_inbound(&fresh, &raw_of(&fresh), &[], &quota).await.must("insert after purge"));
}

pub(super) async fn racing_messages_never_overshoot_the_quota<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let quota = InboundQuota { max_messages: 3, max_bytes: 1 << 30 };
    let mut racers = tokio::task::JoinSet::new();
    for n in 0..8 {
        let s = Arc::clone(&s);
        racers.spawn(async move {
            let m = message(ws, &format!("user{n}@in.example.com"), "ada@example.org", now());
            s.insert_inbound(&m, &raw_of(&m), &[], &quota).await.must("racing insert")
        });
    }
    let stored = racers.join_all().await.into_iter().filter(|won| *won).count();
    assert_eq!(stored, 3, "exactly the quota's 3 of 8 racing messages are stored");
    assert_eq!(s.inbound_usage(ws).await.must("usage").messages, 3);
    let listed = s.list_inbound(ws, &InboundQuery::default(), PageRequest::first(50)).await.must("list");
    assert_eq!(listed.items.len(), 3);
}

pub(super) async fn messages_keep_whatever_text_they_were_sent<S: Store + 'static>(s: Arc<S>) {
    // Received text is as the sender wrote it: a NUL (which PostgreSQL's `text` and
    // `jsonb` refuse) in the body, the subject or the `From` address is kept, and found.
    let ws = WorkspaceId(ulid());
    let mut odd = message(ws, "support@in.example.com", "Nul\0Byte@example.org", now());
    odd.parsed.subject = Some("zero \0 here".to_owned());
    odd.parsed.text = Some("a\0b\u{fffd}\u{1F600}".to_owned());
    let raw = b"Subject: zero \0 here\r\n\r\na\0b\xff\r\n".to_vec();
    assert!(s.insert_inbound(&odd, &raw, &[], &ROOMY).await.must("insert"));
    assert_eq!(s.get_inbound(ws, odd.id).await.must("get"), Some(odd.clone()));
    assert_eq!(s.inbound_raw(ws, odd.id).await.must("raw"), Some(raw), "bytes that are no UTF-8 too");
    let plain = message(ws, "support@in.example.com", "nulbyte@example.org", now());
    assert!(s.insert_inbound(&plain, &raw_of(&plain), &[], &ROOMY).await.must("insert"));
    let by_from = |from: &str| InboundQuery { to: None, from: Some(from.to_owned()) };
    let found = s.list_inbound(ws, &by_from("nul\0byte@EXAMPLE.org"), PageRequest::first(10)).await.must("list");
    assert_eq!(found.items.iter().map(|m| m.id).collect::<Vec<_>>(), vec![odd.id]);
    let found = s.list_inbound(ws, &by_from("nulbyte@example.org"), PageRequest::first(10)).await.must("list");
    assert_eq!(found.items.iter().map(|m| m.id).collect::<Vec<_>>(), vec![plain.id], "the NUL is not dropped");
}

pub(super) async fn inbound_domains_are_those_with_inbound_on_in_any_workspace<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let on_a = tidings_core::model::Domain { inbound: true, ..crate::fixtures::domain(a, "in.a.example") };
    let on_b = tidings_core::model::Domain { inbound: true, ..crate::fixtures::domain(b, "in.a.example") };
    let off = crate::fixtures::domain(a, "send.a.example");
    for d in [&on_a, &on_b, &off] {
        s.insert_domain(d).await.must("insert_domain");
    }
    let mut found: Vec<_> = s.inbound_domains().await.must("inbound_domains").into_iter().map(|d| d.id).collect();
    found.sort();
    let mut wanted = vec![on_a.id, on_b.id];
    wanted.sort();
    assert_eq!(found, wanted, "every workspace's domains with inbound on, and no other");
    let switched = tidings_core::model::Domain { inbound: false, ..on_b.clone() };
    s.update_domain(&switched).await.must("switch inbound off");
    let found: Vec<_> = s.inbound_domains().await.must("inbound_domains").into_iter().map(|d| d.id).collect();
    assert_eq!(found, vec![on_a.id], "a domain switched off is no longer listed");
}
