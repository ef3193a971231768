//! Webhook endpoints, their delivery log and the delivery queue.

use std::sync::Arc;

use super::{Must, assert_not_found, lister, walk_all_sizes};
use crate::fixtures::{delivery, now, plus_secs, ulid, webhook};
use tidings_core::ids::{DeliveryId, MessageId, WebhookId, WorkspaceId};
use tidings_core::model::{
    DeliveryStatus, EventType, WebhookDelivery, WebhookEndpoint, WebhookEventType, WebhookFormat, WebhookUrl,
};
use tidings_core::ports::{EndpointQuota, PageRequest, Store};

fn ids(deliveries: &[WebhookDelivery]) -> Vec<DeliveryId> {
    deliveries.iter().map(|d| d.id).collect()
}

pub(super) async fn webhooks_round_trip_and_stay_in_their_workspace<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let mut made = Vec::new();
    // Every format, so each one is stored and read back (in `get`, `list` and `list_enabled`).
    for (i, format) in (0..4).zip(WebhookFormat::ALL.into_iter().cycle()) {
        let w = WebhookEndpoint { enabled: i != 1, format, ..webhook(a) };
        s.insert_webhook(&w).await.must("insert_webhook");
        made.push(w);
    }
    let in_b = webhook(b);
    s.insert_webhook(&in_b).await.must("insert_webhook in b");
    let w1 = made[0].clone();
    assert_eq!(s.get_webhook(a, w1.id).await.must("get_webhook"), Some(w1.clone()), "get_webhook round trip");
    assert_eq!(s.get_webhook(b, w1.id).await.must("get from b"), None, "another workspace does not see it");
    assert_eq!(s.get_webhook(a, WebhookId(ulid())).await.must("get unknown"), None, "unknown endpoint");
    let expected: Vec<WebhookId> = made.iter().rev().map(|w| w.id).collect();
    let list = lister!(s, |page| list_webhooks(a, page));
    walk_all_sizes("list_webhooks", &list, |w: &WebhookEndpoint| w.id, &expected).await;

    let enabled = |mut found: Vec<WebhookEndpoint>| {
        found.sort_by_key(|w| w.id);
        found
    };
    let found = enabled(s.list_enabled_webhooks(a).await.must("list_enabled_webhooks"));
    assert_eq!(found, [made[0].clone(), made[2].clone(), made[3].clone()], "the enabled endpoints (any order)");
    let found = s.list_enabled_webhooks(b).await.must("list_enabled_webhooks in b");
    assert_eq!(found, std::slice::from_ref(&in_b), "each workspace lists its own");

    let changed = WebhookEndpoint {
        url: WebhookUrl::parse("https://other.example.com/hook", false).expect("valid url"),
        event_types: vec![WebhookEventType::Message(EventType::Complained)],
        enabled: false,
        disabled_reason: Some("410 Gone".to_owned()),
        format: WebhookFormat::Postmark,
        updated_at: plus_secs(w1.updated_at, 1),
        ..w1.clone()
    };
    s.update_webhook(&changed).await.must("update_webhook");
    assert_eq!(s.get_webhook(a, w1.id).await.must("get"), Some(changed.clone()), "update_webhook replaces it");
    let found = enabled(s.list_enabled_webhooks(a).await.must("list_enabled_webhooks"));
    assert_eq!(found, [made[2].clone(), made[3].clone()], "a disabled endpoint is not listed as enabled");
    let foreign = WebhookEndpoint { workspace_id: b, enabled: true, ..changed.clone() };
    assert_not_found(s.update_webhook(&foreign).await, "update_webhook naming another workspace");
    assert_eq!(s.get_webhook(a, w1.id).await.must("get"), Some(changed.clone()), "a foreign update changes nothing");
    assert_not_found(s.update_webhook(&webhook(a)).await, "update_webhook of an unknown endpoint");

    assert_not_found(s.delete_webhook(b, w1.id).await, "delete_webhook from another workspace");
    s.delete_webhook(a, w1.id).await.must("delete_webhook");
    assert_eq!(s.get_webhook(a, w1.id).await.must("get"), None, "deleted");
    assert_not_found(s.delete_webhook(a, w1.id).await, "a second delete_webhook");
    assert_not_found(s.update_webhook(&changed).await, "update_webhook after delete");
}

pub(super) async fn deliveries_are_logged_per_endpoint<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let (w, w2, wb) = (webhook(a), webhook(a), webhook(b));
    for x in [&w, &w2, &wb] {
        s.insert_webhook(x).await.must("insert_webhook");
    }
    let mut expected = Vec::new();
    for i in 0..5 {
        let d = delivery(a, w.id);
        let batch = if i % 2 == 0 { vec![d.clone(), delivery(a, w2.id)] } else { vec![d.clone()] };
        s.insert_webhook_deliveries(&batch).await.must("insert_webhook_deliveries");
        expected.insert(0, d);
    }
    s.insert_webhook_deliveries(&[delivery(b, wb.id)]).await.must("insert in b");
    let d = expected[0].clone();
    assert_eq!(s.get_webhook_delivery(a, d.id).await.must("get"), Some(d.clone()), "get_webhook_delivery");
    assert_eq!(s.get_webhook_delivery(b, d.id).await.must("get from b"), None, "another workspace does not see it");
    let list = lister!(s, |page| list_webhook_deliveries(a, w.id, page));
    walk_all_sizes("list_webhook_deliveries", &list, |d: &WebhookDelivery| d.id, &ids(&expected)).await;
    let from_b = s.list_webhook_deliveries(b, w.id, PageRequest::first(10)).await.must("list from b");
    assert!(from_b.items.is_empty() && !from_b.has_more, "another workspace lists none of them");

    let ok = delivery(a, w.id);
    let stray = delivery(a, WebhookId(ulid()));
    assert_not_found(s.insert_webhook_deliveries(&[ok.clone(), stray]).await, "a batch naming an unknown endpoint");
    assert_eq!(s.get_webhook_delivery(a, ok.id).await.must("get"), None, "a refused batch writes nothing");
    let foreign = delivery(b, w.id);
    assert_not_found(s.insert_webhook_deliveries(&[foreign]).await, "a delivery to another workspace's endpoint");

    let attempted = WebhookDelivery {
        status: DeliveryStatus::Retrying,
        attempts: 1,
        response_code: Some(500),
        last_error: Some("HTTP 500: oops".to_owned()),
        next_attempt_at: Some(plus_secs(now(), 300)),
        ..d.clone()
    };
    s.update_webhook_delivery(&attempted).await.must("update_webhook_delivery");
    assert_eq!(s.get_webhook_delivery(a, d.id).await.must("get"), Some(attempted.clone()), "the delivery as updated");
    let foreign = WebhookDelivery { workspace_id: b, attempts: 9, ..attempted.clone() };
    assert_not_found(s.update_webhook_delivery(&foreign).await, "update_webhook_delivery naming another workspace");
    assert_eq!(s.get_webhook_delivery(a, d.id).await.must("get"), Some(attempted), "a foreign update changes nothing");
    assert_not_found(s.update_webhook_delivery(&delivery(a, w.id)).await, "update_webhook_delivery of an unknown one");
}

pub(super) async fn deliveries_are_claimed_under_a_lease<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let (w, wb) = (webhook(a), webhook(b));
    s.insert_webhook(&w).await.must("insert_webhook");
    s.insert_webhook(&wb).await.must("insert_webhook in b");
    let t0 = now();
    let at = |secs| plus_secs(t0, secs);
    let due =
        |ws, endpoint, secs: Option<i64>| WebhookDelivery { next_attempt_at: secs.map(at), ..delivery(ws, endpoint) };
    let (d1, d2, d3, d4) =
        (due(a, w.id, Some(3)), due(b, wb.id, Some(1)), due(a, w.id, Some(2)), due(a, w.id, Some(10)));
    let done = WebhookDelivery { status: DeliveryStatus::Delivered, ..due(a, w.id, None) };
    s.insert_webhook_deliveries(&[d1.clone(), d3.clone(), d4.clone(), done]).await.must("insert in a");
    s.insert_webhook_deliveries(std::slice::from_ref(&d2)).await.must("insert in b");
    let leased = |d: &WebhookDelivery, until| WebhookDelivery { next_attempt_at: Some(at(until)), ..d.clone() };

    assert!(
        s.claim_due_webhook_deliveries(at(0), at(60), 10, &EndpointQuota::unlimited()).await.must("claim").is_empty(),
        "nothing due yet"
    );
    let claimed =
        s.claim_due_webhook_deliveries(at(3), at(60), 2, &EndpointQuota::unlimited()).await.must("claim limit 2");
    assert_eq!(claimed, [leased(&d2, 60), leased(&d3, 60)], "the two earliest due across workspaces, leased");
    let claimed =
        s.claim_due_webhook_deliveries(at(3), at(60), 2, &EndpointQuota::unlimited()).await.must("claim again");
    assert_eq!(claimed, [leased(&d1, 60)], "claimed deliveries are hidden during their lease");
    assert_eq!(s.get_webhook_delivery(a, d1.id).await.must("get"), Some(leased(&d1, 60)), "the lease is stored");
    let claimed =
        s.claim_due_webhook_deliveries(at(10), at(70), 10, &EndpointQuota::unlimited()).await.must("claim d4");
    assert_eq!(claimed, [leased(&d4, 70)], "d4 once due");

    let delivered = WebhookDelivery { status: DeliveryStatus::Delivered, attempts: 1, next_attempt_at: None, ..d1 };
    s.update_webhook_delivery(&delivered).await.must("record a success");
    let retrying = WebhookDelivery { status: DeliveryStatus::Retrying, attempts: 1, ..leased(&d3, 500) };
    s.update_webhook_delivery(&retrying).await.must("record a failure");
    let claimed = s
        .claim_due_webhook_deliveries(at(100), at(1000), 10, &EndpointQuota::unlimited())
        .await
        .must("claim after the leases");
    assert_eq!(ids(&claimed), [d2.id, d4.id], "expired leases are due again, earliest first; finished ones never");
    assert!(
        s.claim_due_webhook_deliveries(at(499), at(600), 10, &EndpointQuota::unlimited())
            .await
            .must("claim")
            .is_empty(),
        "retry not yet due"
    );
    let claimed =
        s.claim_due_webhook_deliveries(at(500), at(600), 10, &EndpointQuota::unlimited()).await.must("claim the retry");
    assert_eq!(claimed, [leased(&retrying, 600)], "the retry at its time, as updated");
}

pub(super) async fn deleting_a_webhook_deletes_its_deliveries<S: Store + 'static>(s: Arc<S>) {
    let a = WorkspaceId(ulid());
    let (w, w2) = (webhook(a), webhook(a));
    s.insert_webhook(&w).await.must("insert_webhook");
    s.insert_webhook(&w2).await.must("insert_webhook 2");
    let (d1, d2, d3) = (delivery(a, w.id), delivery(a, w.id), delivery(a, w2.id));
    s.insert_webhook_deliveries(&[d1.clone(), d2.clone(), d3.clone()]).await.must("insert deliveries");

    s.delete_webhook(a, w.id).await.must("delete_webhook");
    for d in [&d1, &d2] {
        assert_eq!(s.get_webhook_delivery(a, d.id).await.must("get"), None, "its deliveries are deleted");
    }
    let listed = s.list_webhook_deliveries(a, w.id, PageRequest::first(10)).await.must("list");
    assert!(listed.items.is_empty() && !listed.has_more, "the deleted endpoint lists no deliveries");
    let claimed = s
        .claim_due_webhook_deliveries(plus_secs(now(), 60), plus_secs(now(), 120), 10, &EndpointQuota::unlimited())
        .await;
    assert_eq!(ids(&claimed.must("claim")), [d3.id], "deleted deliveries leave the queue too");
    assert_eq!(s.get_webhook_delivery(a, d3.id).await.must("get d3").map(|d| d.id), Some(d3.id), "others stay");
    assert_not_found(s.insert_webhook_deliveries(&[delivery(a, w.id)]).await, "deliveries to a deleted endpoint");
    assert_not_found(s.update_webhook_delivery(&d1).await, "update_webhook_delivery after its endpoint is gone");
}

pub(super) async fn deliveries_are_listed_per_message<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let (w, w2, wb) = (webhook(a), webhook(a), webhook(b));
    for x in [&w, &w2, &wb] {
        s.insert_webhook(x).await.must("insert_webhook");
    }
    let (m, other) = (MessageId(ulid()), MessageId(ulid()));
    let about = |ws, endpoint, message| WebhookDelivery { message_id: Some(message), ..delivery(ws, endpoint) };
    // Two endpoints, several events, another message, a test delivery and the same message
    // id in another workspace: only the first kind is this message's.
    let mut expected = Vec::new();
    for endpoint in [w.id, w2.id, w.id, w2.id] {
        let d = about(a, endpoint, m);
        let noise = [about(a, endpoint, other), delivery(a, endpoint)];
        s.insert_webhook_deliveries(&[noise[0].clone(), d.clone(), noise[1].clone()]).await.must("insert");
        expected.insert(0, d.id);
    }
    s.insert_webhook_deliveries(&[about(b, wb.id, m)]).await.must("insert in b");

    let listed = s.list_message_webhook_deliveries(a, m, 10).await.must("list_message_webhook_deliveries");
    assert_eq!(ids(&listed), expected, "the message's deliveries at every endpoint, newest first");
    let first_two = s.list_message_webhook_deliveries(a, m, 2).await.must("list 2");
    assert_eq!(ids(&first_two), expected[..2], "at most `limit`, the newest");
    let none = s.list_message_webhook_deliveries(b, other, 10).await.must("list in b");
    assert!(none.is_empty(), "another workspace lists none of them");

    s.delete_webhook(a, w.id).await.must("delete_webhook");
    let left = s.list_message_webhook_deliveries(a, m, 10).await.must("list after delete");
    assert!(left.iter().all(|d| d.endpoint_id == w2.id), "a deleted endpoint's deliveries are gone");
    assert_eq!(left.len(), 2, "the other endpoint's stay");
}
