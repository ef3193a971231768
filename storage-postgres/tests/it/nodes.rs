//! Several `PgStore`s on one database, as several nodes would share it: claims never hand
//! one record to two nodes, racing idempotent sends create one message, and a delivery
//! site's connections are shared.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::common::{database_url, fresh_store, options, reachable};
use tidings_core::ids::{ApiKeyId, DomainId, SiteLeaseId, WorkspaceId};
use tidings_core::model::DomainStatus;
use tidings_core::ports::{
    CreateOutcome, DomainStore, EndpointQuota, Limits, MessageStore, SiteLease, SiteQuota, WebhookStore,
};
use tidings_core::shaping::{MessageRate, RatePeriod, SiteKey};
use tidings_core::usecases::AuthThrottleConfig;
use tidings_storage_postgres::PgStore;
use tidings_testing::fixtures::{self, delivery, idempotency, message, new_message, now, plus_secs, ulid, webhook};

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

/// Deliveries on every node admitted to one site and released again: at no moment do more
/// hold a connection than the site has, and every lease is gone at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deliveries_on_several_nodes_never_hold_more_connections_than_their_site_has() {
    const CONNECTIONS: u32 = 3;
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (nodes, _guard) = nodes(&url).await;
    let site = SiteKey::parse(".example.net").expect("a site key");
    let rate = MessageRate::new(1_000_000, RatePeriod::Second).expect("a rate");
    let quota = SiteQuota { connections: CONNECTIONS, rate };
    let at = now();
    let (holding, admitted) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let mut racers = tokio::task::JoinSet::new();
    for node in nodes.iter().cycle().take(NODES * 4) {
        let limits = node.limits(AuthThrottleConfig::default());
        let (site, holding, admitted) = (site.clone(), Arc::clone(&holding), Arc::clone(&admitted));
        racers.spawn(async move {
            for _ in 0..25 {
                let lease = SiteLease { id: SiteLeaseId(ulid()), until: plus_secs(at, 60) };
                if limits.admit_delivery(&site, quota, lease, at).await.expect("admit").is_admitted() {
                    // Counted only while the database holds the lease: after the admission,
                    // before the release.
                    let held = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(held <= CONNECTIONS, "{held} connections held at once");
                    admitted.fetch_add(1, Ordering::SeqCst);
                    // The delivery, for long enough that deliveries overlap.
                    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
                    holding.fetch_sub(1, Ordering::SeqCst);
                    limits.release_delivery(&site, lease.id, None, at).await.expect("release");
                }
            }
        });
    }
    while let Some(done) = racers.join_next().await {
        done.expect("racer");
    }
    assert!(admitted.load(Ordering::SeqCst) >= CONNECTIONS, "deliveries went");
    let states = nodes[0].limits(AuthThrottleConfig::default()).site_states(at).await.expect("states");
    assert!(states.is_empty(), "every lease released: {states:?}");
}

/// Waits up to five seconds for `read` on a node to give `want`.
async fn sees<T, F, Fut>(what: &str, want: &T, mut read: F)
where
    T: PartialEq + std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let got = read().await;
        if &got == want {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: another node still reads {got:?}, not {want:?}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Waits up to five seconds for `node`'s enabled webhooks of `ws` to be `want` (by id).
async fn sees_webhooks(node: &PgStore, ws: WorkspaceId, want: &[tidings_core::ids::WebhookId], what: &str) {
    sees(what, &want.to_vec(), || async {
        node.list_enabled_webhooks(ws).await.expect("list_enabled_webhooks").iter().map(|w| w.id).collect::<Vec<_>>()
    })
    .await;
}

/// Each node keeps the enabled webhooks of a workspace (the fan-out reads them at every
/// event); a change made on another node reaches it through the database's notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhook_changes_on_one_node_reach_the_lists_of_the_others() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (nodes, _guard) = nodes(&url).await;
    let ws = WorkspaceId(ulid());
    // Node 1 reads (and keeps) the empty list, repeatedly, so a later change must reach it.
    for _ in 0..3 {
        assert!(nodes[1].list_enabled_webhooks(ws).await.expect("list").is_empty(), "no webhooks yet");
    }
    let mut endpoint = webhook(ws);
    nodes[0].insert_webhook(&endpoint).await.expect("insert_webhook");
    assert_eq!(
        nodes[0].list_enabled_webhooks(ws).await.expect("list").iter().map(|w| w.id).collect::<Vec<_>>(),
        vec![endpoint.id],
        "the node that made the change lists it at once"
    );
    sees_webhooks(&nodes[1], ws, &[endpoint.id], "after an insert").await;
    sees_webhooks(&nodes[1], ws, &[endpoint.id], "kept").await;
    endpoint.enabled = false;
    nodes[0].update_webhook(&endpoint).await.expect("update_webhook");
    assert!(nodes[0].list_enabled_webhooks(ws).await.expect("list").is_empty(), "disabled at once on its node");
    sees_webhooks(&nodes[1], ws, &[], "after disabling").await;
    endpoint.enabled = true;
    nodes[2].update_webhook(&endpoint).await.expect("update_webhook");
    sees_webhooks(&nodes[1], ws, &[endpoint.id], "after enabling on a third node").await;
    sees_webhooks(&nodes[0], ws, &[endpoint.id], "after enabling on a third node").await;
    nodes[1].delete_webhook(ws, endpoint.id).await.expect("delete_webhook");
    assert!(nodes[1].list_enabled_webhooks(ws).await.expect("list").is_empty(), "deleted at once on its node");
    sees_webhooks(&nodes[0], ws, &[], "after a delete").await;
    sees_webhooks(&nodes[2], ws, &[], "after a delete").await;
}

/// Each node keeps the domains and senders it reads (every send and delivery reads them),
/// absences included; a change made on another node reaches it through the database's
/// notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn domain_and_sender_changes_on_one_node_reach_the_others() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (nodes, _guard) = nodes(&url).await;
    let ws = WorkspaceId(ulid());
    let mut domain = fixtures::domain(ws, "kept.example");
    let sender = fixtures::sender(&domain, "support");
    let username = sender.username.clone();
    let (domain_id, domain_name) = (domain.id, domain.name.clone());
    let status = |node: &Arc<PgStore>| {
        let (node, name, id) = (Arc::clone(node), domain_name.clone(), domain_id);
        move || {
            let (node, name) = (Arc::clone(&node), name.clone());
            async move {
                let by_id = node.get_domain(ws, id).await.expect("get_domain").map(|d| d.status);
                let by_name = node.find_domain_by_name(ws, &name).await.expect("find_domain_by_name").map(|d| d.status);
                (by_id, by_name)
            }
        }
    };
    let sender_of = |node: &Arc<PgStore>| {
        let (node, username) = (Arc::clone(node), username.clone());
        move || {
            let (node, username) = (Arc::clone(&node), username.clone());
            async move { node.get_sender(ws, domain_id, &username).await.expect("get_sender").map(|s| s.id) }
        }
    };
    // Node 1 reads (and keeps) the absences, repeatedly, so each later change must reach it.
    for _ in 0..3 {
        assert_eq!(status(&nodes[1])().await, (None, None), "no domain yet");
        assert_eq!(sender_of(&nodes[1])().await, None, "no sender yet");
    }
    nodes[0].insert_domain(&domain).await.expect("insert_domain");
    let pending = (Some(DomainStatus::Pending), Some(DomainStatus::Pending));
    assert_eq!(status(&nodes[0])().await, pending, "the node that added it reads it at once");
    sees("after an insert", &pending, status(&nodes[1])).await;
    sees("kept", &pending, status(&nodes[1])).await;
    domain.status = DomainStatus::Verified;
    nodes[2].update_domain(&domain).await.expect("update_domain");
    let verified = (Some(DomainStatus::Verified), Some(DomainStatus::Verified));
    assert_eq!(status(&nodes[2])().await, verified, "verified at once on its node");
    sees("after verifying on a third node", &verified, status(&nodes[1])).await;
    sees("after verifying on a third node", &verified, status(&nodes[0])).await;
    nodes[0].insert_sender(&sender).await.expect("insert_sender");
    sees("after adding a sender", &Some(sender.id), sender_of(&nodes[1])).await;
    nodes[2].delete_sender(ws, domain.id, &username).await.expect("delete_sender");
    sees("after deleting the sender", &None, sender_of(&nodes[1])).await;
    let again = fixtures::sender(&domain, "support");
    nodes[0].insert_sender(&again).await.expect("insert the sender again");
    sees("after adding it again", &Some(again.id), sender_of(&nodes[1])).await;
    sees("after adding it again", &Some(again.id), sender_of(&nodes[2])).await;
    nodes[1].delete_domain(ws, domain.id).await.expect("delete_domain");
    assert_eq!(status(&nodes[1])().await, (None, None), "deleted at once on its node");
    sees("after deleting the domain", &(None, None), status(&nodes[0])).await;
    sees("after deleting the domain", &(None, None), status(&nodes[2])).await;
    sees("its senders went with it", &None, sender_of(&nodes[0])).await;
}

/// A node whose listening connection is cut stops using its kept lists until it listens
/// again, so a change made meanwhile on another node is not missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_whose_listener_is_cut_does_not_miss_changes() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (nodes, _guard) = nodes(&url).await;
    let ws = WorkspaceId(ulid());
    // Wait until node 1 listens (its list is then kept): a change on node 0 reaches it.
    let first = webhook(ws);
    nodes[0].insert_webhook(&first).await.expect("insert_webhook");
    sees_webhooks(&nodes[1], ws, &[first.id], "before the cut").await;
    // Cut every listener on this database (other tests' stores reconnect as well).
    let admin = nodes[2].list_enabled_webhooks(ws).await.expect("list");
    assert_eq!(admin.len(), 1, "node 2 lists the webhook");
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    let driver = tokio::spawn(connection);
    let cut = client
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = $1 AND datname = current_database()",
            &[&tidings_storage_postgres::LISTENER_NAME],
        )
        .await
        .expect("terminate the listeners");
    assert!(cut >= 1, "the listeners were found and cut");
    drop(client);
    let _ = driver.await;
    // Long enough for node 1 to see its connection end; shorter than its reconnection (1 s).
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let second = webhook(ws);
    nodes[0].insert_webhook(&second).await.expect("insert_webhook");
    let mut both = vec![first.id, second.id];
    both.sort();
    let listed: Vec<_> = nodes[1].list_enabled_webhooks(ws).await.expect("list").iter().map(|w| w.id).collect();
    assert_eq!(listed, both, "while it does not listen, node 1 reads the database");
    sees_webhooks(&nodes[1], ws, &both, "once it listens again").await;
}
