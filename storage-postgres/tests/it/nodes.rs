//! Several `PgStore`s on one database, as several nodes would share it: claims never hand
//! one record to two nodes, and racing idempotent sends create one message.

use std::collections::HashSet;
use std::sync::Arc;

use crate::common::{database_url, fresh_store, options, reachable};
use tidings_core::ids::{ApiKeyId, DomainId, WorkspaceId};
use tidings_core::ports::{CreateOutcome, EndpointQuota, MessageStore, WebhookStore};
use tidings_storage_postgres::PgStore;
use tidings_testing::fixtures::{delivery, idempotency, message, new_message, now, plus_secs, ulid, webhook};

const NODES: usize = 3;
const CLAIMERS_PER_NODE: usize = 3;

/// The first store and more on the same schema, as separate pools.
async fn nodes(url: &str) -> (Vec<Arc<PgStore>>, crate::common::DropSchema) {
    let (first, guard) = fresh_store(url).await;
    let mut nodes = vec![Arc::new(first)];
    for _ in 1..NODES {
        nodes.push(Arc::new(
            PgStore::connect(url, options(&guard.schema), tidings_testing::fixtures::sealer())
                .await
                .expect("connect another node"),
        ));
    }
    (nodes, guard)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_on_several_nodes_take_each_message_once() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (nodes, _guard) = nodes(&url).await;
    let ws = WorkspaceId(ulid());
    let mut ids = HashSet::new();
    for _ in 0..150 {
        let m = message(ws, ApiKeyId(ulid()), DomainId(ulid()));
        ids.insert(m.id);
        nodes[0].create_message(&new_message(&m)).await.expect("create_message");
    }
    let claim_at = plus_secs(now(), 1);
    let mut claimers = tokio::task::JoinSet::new();
    for node in nodes.iter().cycle().take(NODES * CLAIMERS_PER_NODE) {
        let node = Arc::clone(node);
        claimers.spawn(async move {
            let mut got = Vec::new();
            loop {
                let claimed = node.claim_due_messages(claim_at, plus_secs(claim_at, 60), 7).await.expect("claim");
                if claimed.is_empty() {
                    return got;
                }
                got.extend(claimed.into_iter().map(|m| m.id));
            }
        });
    }
    let mut claimed = Vec::new();
    while let Some(got) = claimers.join_next().await {
        claimed.extend(got.expect("claimer"));
    }
    assert_eq!(claimed.len(), ids.len(), "every message claimed exactly once");
    assert_eq!(claimed.into_iter().collect::<HashSet<_>>(), ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_delivery_claims_on_several_nodes_take_each_delivery_once() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (nodes, _guard) = nodes(&url).await;
    let ws = WorkspaceId(ulid());
    let endpoints = [webhook(ws), webhook(ws)];
    let mut ids = HashSet::new();
    for endpoint in &endpoints {
        nodes[0].insert_webhook(endpoint).await.expect("insert_webhook");
        let batch: Vec<_> = (0..60).map(|_| delivery(ws, endpoint.id)).collect();
        ids.extend(batch.iter().map(|d| d.id));
        nodes[0].insert_webhook_deliveries(&batch).await.expect("insert_webhook_deliveries");
    }
    let claim_at = plus_secs(now(), 1);
    let mut claimers = tokio::task::JoinSet::new();
    for node in nodes.iter().cycle().take(NODES * CLAIMERS_PER_NODE) {
        let node = Arc::clone(node);
        claimers.spawn(async move {
            let (mut got, quota) = (Vec::new(), EndpointQuota::per_endpoint(3));
            loop {
                let lease = plus_secs(claim_at, 60);
                let claimed = node.claim_due_webhook_deliveries(claim_at, lease, 5, &quota).await.expect("claim");
                if claimed.is_empty() {
                    return got;
                }
                got.extend(claimed.into_iter().map(|d| d.id));
            }
        });
    }
    let mut claimed = Vec::new();
    while let Some(got) = claimers.join_next().await {
        claimed.extend(got.expect("claimer"));
    }
    assert_eq!(claimed.len(), ids.len(), "every delivery claimed exactly once");
    assert_eq!(claimed.into_iter().collect::<HashSet<_>>(), ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_sends_with_one_key_on_several_nodes_create_one_message() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (nodes, _guard) = nodes(&url).await;
    let ws = WorkspaceId(ulid());
    for round in 0..5 {
        let barrier = Arc::new(tokio::sync::Barrier::new(NODES * 4));
        let mut racers = tokio::task::JoinSet::new();
        for node in nodes.iter().cycle().take(NODES * 4) {
            let (node, barrier) = (Arc::clone(node), Arc::clone(&barrier));
            racers.spawn(async move {
                let m = message(ws, ApiKeyId(ulid()), DomainId(ulid()));
                let mut new = new_message(&m);
                let key = format!("race-{round}");
                new.idempotency = Some(idempotency(ws, &key, m.id, m.created_at, plus_secs(m.created_at, 3600)));
                barrier.wait().await;
                node.create_message(&new).await.expect("create_message")
            });
        }
        let mut created = 0;
        while let Some(outcome) = racers.join_next().await {
            created += usize::from(matches!(outcome.expect("racer"), CreateOutcome::Created));
        }
        assert_eq!(created, 1, "round {round}: exactly one racing send is Created");
    }
}
