//! The webhook delivery queue in the model test: deliveries queued to a few endpoints,
//! attempts recorded, and claims under random per-endpoint quotas.
//!
//! As for messages, what the contract leaves open is not asked: each endpoint's room and
//! the claim's limit are widened so that neither cuts through deliveries due at the same
//! instant, which makes the claimed set the same for any order among equal due times.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use proptest::sample::Index;

use super::{same, untied};
use crate::MemoryStore;
use crate::fixtures::{delivery, webhook};
use tidings_core::ids::{DeliveryId, WebhookId, WorkspaceId};
use tidings_core::model::{DeliveryStatus, WebhookDelivery};
use tidings_core::ports::{EndpointQuota, Store, StoreResult, WebhookStore};

/// Endpoints per workspace.
pub(super) const ENDPOINTS: usize = 2;

/// Operations on the delivery queue.
#[derive(Debug, Clone)]
pub(super) enum DeliveryOp {
    /// Queues `count` deliveries to endpoint `endpoint`, due now.
    Queue { endpoint: usize, count: usize },
    /// Records an attempt at a delivery: retried after `retry_secs`, or delivered.
    Attempt { delivery: Index, retry_secs: Option<u8> },
    /// Claims with `room[e]` more deliveries of endpoint `e` (`None`: unlimited).
    Claim { ahead_secs: i16, lease_secs: u8, limit: usize, room: Option<Vec<usize>> },
}

/// Delivery operations over `endpoints` endpoints.
pub(super) fn delivery_op(endpoints: usize) -> impl Strategy<Value = DeliveryOp> {
    let room = prop::option::weighted(0.8, prop::collection::vec(0usize..=3, endpoints));
    prop_oneof![
        3 => (0..endpoints, 1usize..=3).prop_map(|(endpoint, count)| DeliveryOp::Queue { endpoint, count }),
        2 => (any::<Index>(), prop::option::of(1u8..=60))
            .prop_map(|(delivery, retry_secs)| DeliveryOp::Attempt { delivery, retry_secs }),
        3 => (-30i16..=120, 1u8..=60, 1usize..=6, room).prop_map(|(ahead_secs, lease_secs, limit, room)| {
            DeliveryOp::Claim { ahead_secs, lease_secs, limit, room }
        }),
    ]
}

/// The endpoints and every delivery queued so far.
#[derive(Default)]
pub(super) struct Hooks {
    endpoints: Vec<(WorkspaceId, WebhookId)>,
    /// As queued.
    deliveries: Vec<WebhookDelivery>,
}

impl Hooks {
    /// Creates [`ENDPOINTS`] endpoints in each workspace, on both stores.
    pub(super) async fn set_up(
        sut: &dyn Store,
        model: &MemoryStore,
        workspaces: &[WorkspaceId],
    ) -> Result<Self, String> {
        let mut hooks = Hooks::default();
        for ws in workspaces {
            for _ in 0..ENDPOINTS {
                let endpoint = webhook(*ws);
                same("insert_webhook", &sut.insert_webhook(&endpoint).await, &model.insert_webhook(&endpoint).await)?;
                hooks.endpoints.push((*ws, endpoint.id));
            }
        }
        Ok(hooks)
    }

    pub(super) async fn apply(
        &mut self,
        sut: &dyn Store,
        model: &MemoryStore,
        clock: DateTime<Utc>,
        op: DeliveryOp,
    ) -> Result<(), String> {
        match op {
            DeliveryOp::Queue { endpoint, count } => {
                let (ws, endpoint) = self.endpoints[endpoint % self.endpoints.len()];
                let batch: Vec<WebhookDelivery> = (0..count)
                    .map(|_| WebhookDelivery {
                        next_attempt_at: Some(clock),
                        created_at: clock,
                        ..delivery(ws, endpoint)
                    })
                    .collect();
                let (a, b) =
                    (sut.insert_webhook_deliveries(&batch).await, model.insert_webhook_deliveries(&batch).await);
                same("insert_webhook_deliveries", &a, &b)?;
                self.deliveries.extend(batch);
            }
            DeliveryOp::Attempt { delivery, retry_secs } => {
                if self.deliveries.is_empty() {
                    return Ok(());
                }
                let Some(mut d) = current(model, delivery.get(&self.deliveries)).await? else { return Ok(()) };
                d.attempts += 1;
                (d.status, d.next_attempt_at) = match retry_secs {
                    Some(secs) => (DeliveryStatus::Retrying, Some(clock + Duration::seconds(i64::from(secs)))),
                    None => (DeliveryStatus::Delivered, None),
                };
                let (a, b) = (sut.update_webhook_delivery(&d).await, model.update_webhook_delivery(&d).await);
                same("update_webhook_delivery", &a, &b)?;
            }
            DeliveryOp::Claim { ahead_secs, lease_secs, limit, room } => {
                let now = clock + Duration::seconds(i64::from(ahead_secs));
                let until = now + Duration::seconds(i64::from(lease_secs));
                self.claim(sut, model, now, until, limit, room.as_deref()).await?;
            }
        }
        Ok(())
    }

    /// Claims on both stores under a quota giving endpoint `e` `room[e]` more (widened past
    /// ties), with the limit widened past ties among what the quota admits; answers are
    /// compared in (due, id) order once each is checked to come earliest first. Then every
    /// delivery must read the same on both.
    async fn claim(
        &self,
        sut: &dyn Store,
        model: &MemoryStore,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
        room: Option<&[usize]>,
    ) -> Result<(), String> {
        let mut due_at: HashMap<DeliveryId, DateTime<Utc>> = HashMap::new();
        let mut due_by_endpoint: HashMap<WebhookId, Vec<DateTime<Utc>>> = HashMap::new();
        for d in &self.deliveries {
            if let Some(at) = current(model, d).await?.and_then(|c| c.next_attempt_at).filter(|at| *at <= now) {
                due_at.insert(d.id, at);
                due_by_endpoint.entry(d.endpoint_id).or_default().push(at);
            }
        }
        let mut quota = EndpointQuota::unlimited();
        let mut admitted: Vec<DateTime<Utc>> = due_at.values().copied().collect();
        if let Some(room) = room {
            let mut rooms = HashMap::new();
            admitted.clear();
            for (i, (_, endpoint)) in self.endpoints.iter().enumerate() {
                let mut times = due_by_endpoint.remove(endpoint).unwrap_or_default();
                times.sort();
                let r = untied(&times, room[i % room.len()]);
                admitted.extend(times.into_iter().take(r));
                rooms.insert(*endpoint, r);
            }
            quota.per_endpoint = rooms.values().copied().max().unwrap_or(0);
            quota.in_flight = rooms.into_iter().map(|(e, r)| (e, quota.per_endpoint - r)).collect();
        }
        admitted.sort();
        let limit = untied(&admitted, limit);
        let a = sut.claim_due_webhook_deliveries(now, until, limit, &quota).await;
        let b = model.claim_due_webhook_deliveries(now, until, limit, &quota).await;
        let in_due_order = |answer: StoreResult<Vec<WebhookDelivery>>, who: &str| {
            let Ok(mut claimed) = answer else { return Ok(answer) };
            let keyed: Vec<DateTime<Utc>> = claimed
                .iter()
                .map(|d| due_at.get(&d.id).copied().ok_or_else(|| format!("{who} claimed {} which was not due", d.id)))
                .collect::<Result<_, String>>()?;
            if keyed.windows(2).any(|w| w[0] > w[1]) {
                return Err(format!("{who} claimed out of due order: {keyed:?}"));
            }
            claimed.sort_by_key(|d| (due_at.get(&d.id).copied(), d.id));
            Ok(Ok(claimed))
        };
        let a = in_due_order(a, "the store under test")?;
        let b = in_due_order(b, "the model")?;
        same(&format!("claim_due_webhook_deliveries(now {now}, limit {limit}, {quota:?})"), &a, &b)?;
        for d in &self.deliveries {
            let (a, b) = (sut.get_webhook_delivery(d.workspace_id, d.id).await, current(model, d).await);
            same(&format!("get_webhook_delivery({}) after a claim", d.id), &a, &Ok(b?))?;
        }
        Ok(())
    }
}

/// The delivery as the model holds it now.
async fn current(model: &MemoryStore, d: &WebhookDelivery) -> Result<Option<WebhookDelivery>, String> {
    model.get_webhook_delivery(d.workspace_id, d.id).await.map_err(|e| format!("model get_webhook_delivery: {e}"))
}
