//! Per-endpoint and per-workspace quotas of `claim_due_webhook_deliveries`: a capped
//! endpoint's or workspace's due deliveries are skipped untouched and the claim goes on to
//! other endpoints' and workspaces'.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Must;
use crate::fixtures::{delivery, now, plus_secs, ulid, webhook};
use tidings_core::ids::{DeliveryId, WebhookId, WorkspaceId};
use tidings_core::model::{WebhookDelivery, WebhookEndpoint};
use tidings_core::ports::{EndpointQuota, Store};

fn ids(deliveries: &[WebhookDelivery]) -> Vec<DeliveryId> {
    deliveries.iter().map(|d| d.id).collect()
}

fn quota(per_endpoint: usize, in_flight: &[(WebhookId, usize)]) -> EndpointQuota {
    EndpointQuota {
        in_flight: in_flight.iter().copied().collect::<HashMap<_, _>>(),
        ..EndpointQuota::per_endpoint(per_endpoint)
    }
}

fn workspace_quota(per_endpoint: usize, per_workspace: usize, in_flight: &[(WorkspaceId, usize)]) -> EndpointQuota {
    EndpointQuota {
        per_workspace,
        workspace_in_flight: in_flight.iter().copied().collect::<HashMap<_, _>>(),
        ..EndpointQuota::per_endpoint(per_endpoint)
    }
}

/// Endpoints A and C in workspace `a`, B in workspace `b`, with due deliveries
/// A1@1 C1@2 A2@3 B1@4 C2@5 A3@6 B2@7 (seconds after `t0`), in that order.
struct WorkspaceScene {
    t0: DateTime<Utc>,
    a: WorkspaceId,
    /// In due order.
    due: Vec<WebhookDelivery>,
}

impl WorkspaceScene {
    async fn arrange<S: Store>(s: &S) -> Self {
        let (wa, wb) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
        let (a, b, c) = (webhook(wa), webhook(wb), webhook(wa));
        for w in [&a, &b, &c] {
            s.insert_webhook(w).await.must("insert_webhook");
        }
        let t0 = now();
        let due = queue_one_a_second(s, t0, &[&a, &c, &a, &b, &c, &a, &b]).await;
        WorkspaceScene { t0, a: wa, due }
    }

    fn at(&self, secs: i64) -> DateTime<Utc> {
        plus_secs(self.t0, secs)
    }

    /// The deliveries named by their place in the due order (A1 C1 A2 B1 C2 A3 B2 = 0..7).
    fn pick(&self, places: &[usize]) -> Vec<DeliveryId> {
        places.iter().map(|i| self.due[*i].id).collect()
    }

    /// Asserts that the deliveries at `places` are stored as they were queued.
    async fn untouched<S: Store>(&self, s: &S, places: &[usize]) {
        for d in places.iter().map(|i| &self.due[*i]) {
            let stored = s.get_webhook_delivery(d.workspace_id, d.id).await.must("get a skipped one");
            assert_eq!(stored.as_ref(), Some(d), "a skipped delivery is untouched");
        }
    }
}

/// Queues one delivery for each endpoint of `plan`, due 1, 2, 3... seconds after `t0`, one
/// insert each (so each is its own write, as the dispatcher's fan-out makes them).
async fn queue_one_a_second<S: Store>(s: &S, t0: DateTime<Utc>, plan: &[&WebhookEndpoint]) -> Vec<WebhookDelivery> {
    let due: Vec<WebhookDelivery> = (1..)
        .zip(plan)
        .map(|(secs, w)| WebhookDelivery {
            next_attempt_at: Some(plus_secs(t0, secs)),
            ..delivery(w.workspace_id, w.id)
        })
        .collect();
    for d in &due {
        s.insert_webhook_deliveries(std::slice::from_ref(d)).await.must("insert_webhook_deliveries");
    }
    due
}

/// Two endpoints, A in workspace `a` and B in workspace `b`, with due deliveries
/// A1@1 A2@2 B1@3 A3@4 B2@5 A4@6 A5@7 (seconds after `t0`), in that order.
struct Scene {
    t0: DateTime<Utc>,
    a: WebhookId,
    /// In due order.
    due: Vec<WebhookDelivery>,
}

impl Scene {
    async fn arrange<S: Store>(s: &S) -> Self {
        let (wa, wb) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
        let (a, b) = (webhook(wa), webhook(wb));
        s.insert_webhook(&a).await.must("insert_webhook a");
        s.insert_webhook(&b).await.must("insert_webhook b");
        let t0 = now();
        let due = queue_one_a_second(s, t0, &[&a, &a, &b, &a, &b, &a, &a]).await;
        Scene { t0, a: a.id, due }
    }

    fn at(&self, secs: i64) -> DateTime<Utc> {
        plus_secs(self.t0, secs)
    }

    /// The deliveries named by their place in the due order (A1 A2 B1 A3 B2 A4 A5 = 0..7).
    fn pick(&self, places: &[usize]) -> Vec<DeliveryId> {
        places.iter().map(|i| self.due[*i].id).collect()
    }
}

pub(super) async fn claims_take_each_endpoint_up_to_its_quota<S: Store + 'static>(s: Arc<S>) {
    let scene = Scene::arrange(&*s).await;
    let (now, until) = (scene.at(10), scene.at(100));

    let claimed = s.claim_due_webhook_deliveries(now, until, 10, &quota(2, &[])).await.must("claim with quota 2");

    assert_eq!(ids(&claimed), scene.pick(&[0, 1, 2, 4]), "A1 A2 B1 B2: two of each, in due order, past A3");
    assert!(claimed.iter().all(|d| d.next_attempt_at == Some(until)), "claimed ones are leased: {claimed:?}");
    for d in [3, 5, 6].map(|i| &scene.due[i]) {
        let stored = s.get_webhook_delivery(d.workspace_id, d.id).await.must("get a skipped one");
        assert_eq!(stored.as_ref(), Some(d), "a skipped delivery is untouched");
    }
    let rest = s.claim_due_webhook_deliveries(now, until, 10, &EndpointQuota::unlimited()).await.must("claim rest");
    assert_eq!(ids(&rest), scene.pick(&[3, 5, 6]), "the skipped ones are still due, in due order");
}

pub(super) async fn in_flight_deliveries_count_against_the_quota<S: Store + 'static>(s: Arc<S>) {
    let scene = Scene::arrange(&*s).await;
    let (now, until) = (scene.at(10), scene.at(100));

    let full = quota(2, &[(scene.a, 2)]);
    let claimed = s.claim_due_webhook_deliveries(now, until, 10, &full).await.must("claim with A full");
    assert_eq!(ids(&claimed), scene.pick(&[2, 4]), "none of A, both of B");

    let one_left = quota(2, &[(scene.a, 1), (WebhookId(ulid()), 7)]);
    let claimed = s.claim_due_webhook_deliveries(now, until, 10, &one_left).await.must("claim with one left");
    assert_eq!(ids(&claimed), scene.pick(&[0]), "one more of A; others' counts do not matter");

    let none = quota(0, &[]);
    assert!(s.claim_due_webhook_deliveries(now, until, 10, &none).await.must("quota 0").is_empty(), "quota 0");
    let claimed = s.claim_due_webhook_deliveries(now, until, 10, &EndpointQuota::unlimited()).await.must("rest");
    assert_eq!(ids(&claimed), scene.pick(&[1, 3, 5, 6]), "the rest of A, untouched by the capped claims");
}

pub(super) async fn quota_claims_keep_the_limit_due_times_and_leases<S: Store + 'static>(s: Arc<S>) {
    let scene = Scene::arrange(&*s).await;
    let claim = async |now, until, limit, per_endpoint| {
        let quota = quota(per_endpoint, &[]);
        let found = s.claim_due_webhook_deliveries(scene.at(now), scene.at(until), limit, &quota).await;
        ids(&found.must("claim"))
    };

    assert_eq!(claim(10, 100, 3, 2).await, scene.pick(&[0, 1, 2]), "the limit cuts the quota's answer: A1 A2 B1");
    assert_eq!(claim(4, 200, 10, 1).await, scene.pick(&[3]), "leased ones are hidden, later ones not yet due");
    assert_eq!(claim(7, 300, 10, 1).await, scene.pick(&[4, 5]), "B2 and one of A (A4); A5 waits");
    // At t+100 the first leases end: A5 (due at t+7) comes first and takes A's one place,
    // so of A1 A2 B1 (due at t+100) only B1 is taken.
    assert_eq!(claim(100, 400, 10, 1).await, scene.pick(&[6, 2]), "earliest first, across ended leases");
    assert_eq!(claim(100, 400, 10, 5).await, scene.pick(&[0, 1]), "then the rest of the ended leases");
    assert!(claim(199, 500, 10, 5).await.is_empty(), "the other leases hold");
}

pub(super) async fn claims_take_each_workspace_up_to_its_quota<S: Store + 'static>(s: Arc<S>) {
    let scene = WorkspaceScene::arrange(&*s).await;
    let (now, until) = (scene.at(10), scene.at(100));

    let claimed = s
        .claim_due_webhook_deliveries(now, until, 10, &workspace_quota(2, 3, &[]))
        .await
        .must("claim with 3 per workspace");

    assert_eq!(ids(&claimed), scene.pick(&[0, 1, 2, 3, 6]), "A1 C1 A2 of workspace a, then only B's: past C2 A3");
    scene.untouched(&*s, &[4, 5]).await;
    let rest = s.claim_due_webhook_deliveries(now, until, 10, &EndpointQuota::unlimited()).await.must("claim rest");
    assert_eq!(ids(&rest), scene.pick(&[4, 5]), "the skipped ones are still due, in due order");
}

pub(super) async fn in_flight_deliveries_count_against_the_workspace_quota<S: Store + 'static>(s: Arc<S>) {
    let scene = WorkspaceScene::arrange(&*s).await;
    let (now, until) = (scene.at(10), scene.at(100));

    let one_left = workspace_quota(usize::MAX, 3, &[(scene.a, 2), (WorkspaceId(ulid()), 9)]);
    let claimed = s.claim_due_webhook_deliveries(now, until, 10, &one_left).await.must("claim with one left");
    assert_eq!(ids(&claimed), scene.pick(&[0, 3, 6]), "one more of workspace a; others' counts do not matter");

    let full = workspace_quota(usize::MAX, 3, &[(scene.a, 3)]);
    let claimed = s.claim_due_webhook_deliveries(now, until, 10, &full).await.must("claim with a full");
    assert!(claimed.is_empty(), "nothing of workspace a, and b's are leased: {claimed:?}");
    scene.untouched(&*s, &[1, 2, 4, 5]).await;
    let none = workspace_quota(usize::MAX, 0, &[]);
    assert!(s.claim_due_webhook_deliveries(now, until, 10, &none).await.must("quota 0").is_empty(), "quota 0");
    let rest = s.claim_due_webhook_deliveries(now, until, 10, &EndpointQuota::unlimited()).await.must("rest");
    assert_eq!(ids(&rest), scene.pick(&[1, 2, 4, 5]), "the rest of workspace a, untouched by the capped claims");
}
