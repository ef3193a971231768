//! Everything written is there after the store is dropped and opened again, indexes included.

use tidings_core::model::{EventType, MessageStatus, SuppressionReason};
use tidings_core::ports::{
    DomainStore, EndpointQuota, KeyStore, MessageQuery, MessageStore, PageRequest, SuppressionStore, TemplateStore,
    WebhookStore, WorkspaceStore,
};
use tidings_storage_sled::SledStore;
use tidings_testing::fixtures::{
    api_key, delivery, domain, event_write, idempotency, message, new_message, now, plus_secs, sender, suppression,
    template, webhook, workspace,
};

#[tokio::test]
async fn every_resource_and_index_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    let key = api_key(ws.id);
    let dom = domain(ws.id, "acme.example.com");
    let snd = sender(&dom, "billing");
    let tpl = template(ws.id);
    let sup = suppression(ws.id, "Gone@Example.com");
    let hook = webhook(ws.id);
    let dlv = delivery(ws.id, hook.id);
    let queued = message(ws.id, key.id, dom.id);
    let sent = message(ws.id, key.id, dom.id);
    let sent_write = event_write(&sent, EventType::Sent, now(), None);
    let mut with_key = new_message(&queued);
    with_key.idempotency = Some(idempotency(ws.id, "order-1", queued.id, now(), plus_secs(now(), 3600)));
    {
        let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
        store.create_workspace(&ws, &key).await.unwrap();
        store.insert_domain(&dom).await.unwrap();
        store.insert_sender(&snd).await.unwrap();
        store.insert_template(&tpl).await.unwrap();
        store.insert_suppression(&sup).await.unwrap();
        store.insert_webhook(&hook).await.unwrap();
        store.insert_webhook_deliveries(std::slice::from_ref(&dlv)).await.unwrap();
        store.create_message(&with_key).await.unwrap();
        store.create_message(&new_message(&sent)).await.unwrap();
        store.record_event(sent_write.clone()).await.unwrap();
    }

    let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
    assert_eq!(store.get_workspace(ws.id).await.unwrap(), Some(ws.clone()));
    assert_eq!(store.find_api_key_by_hash(&key.key_hash).await.unwrap(), Some(key.clone()));
    assert_eq!(store.find_domain_by_name(ws.id, &dom.name).await.unwrap(), Some(dom.clone()));
    assert_eq!(store.get_sender(ws.id, dom.id, &snd.username).await.unwrap(), Some(snd.clone()));
    assert_eq!(store.get_template(ws.id, tpl.id).await.unwrap(), Some(tpl.clone()));
    assert_eq!(store.get_suppression(ws.id, &sup.email).await.unwrap(), Some(sup.clone()));
    let by_reason = store.list_suppressions(ws.id, Some(SuppressionReason::Manual), PageRequest::first(10)).await;
    assert_eq!(by_reason.unwrap().items, vec![sup.clone()]);
    assert_eq!(store.get_webhook(ws.id, hook.id).await.unwrap(), Some(hook.clone()));
    assert_eq!(store.get_webhook_delivery(ws.id, dlv.id).await.unwrap(), Some(dlv.clone()));
    assert_eq!(store.get_message(ws.id, queued.id).await.unwrap(), Some(queued.clone()));
    assert_eq!(store.get_message(ws.id, sent.id).await.unwrap(), Some(sent_write.message.clone()));
    let events = store.list_events(ws.id, sent.id, PageRequest::first(10)).await.unwrap();
    assert_eq!(events.items.iter().map(|e| e.event_type).collect::<Vec<_>>(), [EventType::Queued, EventType::Sent]);
    let key_text = tidings_testing::fixtures::idempotency_key("order-1");
    assert!(store.get_idempotency(ws.id, &key_text).await.unwrap().is_some());

    let only_sent = MessageQuery {
        status: Some(MessageStatus::Sent),
        to: Some(sent.to.clone()),
        sent_by: Some(key.id),
        tags: Vec::new(),
        metadata: Vec::new(),
        ..MessageQuery::page(PageRequest::first(10))
    };
    let listed = store.list_messages(ws.id, &only_sent).await.unwrap();
    assert_eq!(listed.items, vec![sent_write.message.clone()]);
    // A Sent message keeps its lease, so both are due.
    let claimed = store.claim_due_messages(plus_secs(now(), 1), plus_secs(now(), 60), 10).await.unwrap();
    assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), [queued.id, sent.id]);
    let claimed = store
        .claim_due_webhook_deliveries(plus_secs(now(), 1), plus_secs(now(), 60), 10, &EndpointQuota::unlimited())
        .await
        .unwrap();
    assert_eq!(claimed.iter().map(|d| d.id).collect::<Vec<_>>(), [dlv.id]);
}

#[tokio::test]
async fn a_store_cannot_be_opened_twice_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let _first = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
    assert!(SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).is_err());
}

#[tokio::test]
async fn leases_of_the_previous_run_are_released_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    let (key, dom) = (api_key(ws.id), domain(ws.id, "acme.example.com"));
    let (queued, sent) = (message(ws.id, key.id, dom.id), message(ws.id, key.id, dom.id));
    let t0 = queued.created_at.max(sent.created_at);
    {
        let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
        store.create_message(&new_message(&queued)).await.unwrap();
        store.create_message(&new_message(&sent)).await.unwrap();
        let claimed = store.claim_due_messages(t0, plus_secs(t0, 660), 10).await.unwrap();
        assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), [queued.id, sent.id]);
        store.record_event(event_write(&claimed[1], EventType::Sent, t0, None)).await.unwrap();
    }

    let store = SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).unwrap();
    let restart = plus_secs(t0, 1);
    assert!(store.claim_due_messages(restart, plus_secs(t0, 60), 10).await.unwrap().is_empty(), "still leased");
    assert_eq!(store.release_message_leases(restart, 10).await.unwrap(), 2);
    let claimed = store.claim_due_messages(restart, plus_secs(t0, 60), 10).await.unwrap();
    assert_eq!(
        claimed.iter().map(|m| (m.id, m.status)).collect::<Vec<_>>(),
        [(queued.id, MessageStatus::Queued), (sent.id, MessageStatus::Sent)]
    );
}
