//! [`WebhookDispatcher`]: runs each claimed delivery as its own task, so that no delivery
//! waits for another: one slow or dead endpoint never delays other endpoints, and no
//! workspace's endpoints, however many are dead, delay other workspaces.
//!
//! [`WebhookWorker::deliver_due`] posts a batch and returns when its slowest POST does: a loop
//! of steps holds everyone's next events back by up to `post_timeout` whenever a dead
//! endpoint is in the batch, and a dead endpoint with a big backlog can fill every batch.
//! The dispatcher removes both:
//! - **No waiting for a batch**: [`WebhookDispatcher::dispatch_due`] claims, spawns one task
//!   per delivery and returns at once; each task holds a slot (of `max_in_flight`) until its
//!   attempt is recorded, and the next pass claims as soon as a slot is free.
//! - **No endpoint takes every slot**: each pass claims under an [`EndpointQuota`] of
//!   `per_endpoint_in_flight` minus what that endpoint already has in flight, so a dead
//!   endpoint holds at most that many slots (each for at most `post_timeout`) and its backlog
//!   stays in the store, due and unclaimed, behind nobody else's deliveries.
//! - **No workspace takes every slot**: the same quota caps each workspace at
//!   `per_workspace_in_flight` minus what it has in flight, all its endpoints together. A
//!   per-endpoint cap alone lets one workspace with `max_in_flight / per_endpoint_in_flight`
//!   dead endpoints (16 of 16 slots each, 256 slots) hold every slot for `post_timeout` at a
//!   time, while its backlog, due earlier than everyone else's events, is claimed first each
//!   time slots free: other workspaces' webhooks then waited minutes. With the default
//!   quarter of the slots per workspace, three quarters stay free for the others whatever
//!   one workspace does; the claim skips a capped workspace's backlog untouched.
//!
//! The quota is per dispatcher: with several nodes claiming from one store, a workspace may
//! hold `per_workspace_in_flight` slots on each node, as many as each node has.
//!
//! Each dispatched delivery is leased for [`WebhookSettings::attempt_lease`] (one POST plus
//! a margin). A task's error is logged (warn) and the delivery stays leased, to be claimed
//! again when the lease ends; a task that panics or is dropped at shutdown frees its slot and
//! leaves its delivery leased the same way.
//!
//! A driver loop, roughly:
//! ```text
//! loop {
//!     let pass = dispatcher.dispatch_due(clock.now()).await?;
//!     if pass.free_slots_before == 0 {
//!         dispatcher.slot_free().await;      // every slot busy: wait for one
//!     } else if !pass.may_have_more() {
//!         sleep(poll_interval).await;        // nothing more due (or every due endpoint capped)
//!     }
//! }
//! // shutdown: timeout(grace, dispatcher.idle()).await
//! ```
//!
//! [`WebhookSettings::attempt_lease`]: super::WebhookSettings::attempt_lease

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::WebhookWorker;
use crate::Result;
use crate::ids::{WebhookId, WorkspaceId};
use crate::model::WebhookDelivery;
use crate::ports::{EndpointQuota, InFlightCounts};

/// How many deliveries the dispatcher runs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchSettings {
    /// Deliveries in flight at once, all endpoints together (at least 1).
    pub max_in_flight: usize,
    /// Deliveries of one endpoint in flight at once (at least 1).
    pub per_endpoint_in_flight: usize,
    /// Deliveries of one workspace in flight at once, all its endpoints together (at least
    /// 1). Below `max_in_flight`, so that the slots one workspace's dead endpoints hold
    /// leave room for every other workspace.
    pub per_workspace_in_flight: usize,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        Self { max_in_flight: 256, per_endpoint_in_flight: 16, per_workspace_in_flight: 64 }
    }
}

/// What one [`WebhookDispatcher::dispatch_due`] pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchPass {
    /// Deliveries claimed and started.
    pub claimed: usize,
    /// Free slots when the pass began; 0 means it claimed nothing because all were busy.
    pub free_slots_before: usize,
    /// How many the pass asked the store for: `batch_size` or the free slots if fewer.
    pub asked: usize,
}

impl DispatchPass {
    /// Whether the store may hold more due deliveries that the pass could not take: it got
    /// all it asked for. A driver then passes again at once (after [`WebhookDispatcher::slot_free`]
    /// if no slot is left) instead of waiting for its poll interval.
    pub fn may_have_more(&self) -> bool {
        self.asked > 0 && self.claimed == self.asked
    }
}

/// Runs due webhook deliveries as independent tasks over a [`WebhookWorker`]; see the module
/// docs. Share it as the `Arc` that [`WebhookDispatcher::new`] returns.
pub struct WebhookDispatcher {
    worker: Arc<WebhookWorker>,
    settings: DispatchSettings,
    slots: Arc<Semaphore>,
    /// Deliveries in flight per endpoint and per workspace (absent: none); a std mutex,
    /// never held across an `.await`.
    counts: Mutex<Counts>,
    /// Deliveries in flight, all endpoints.
    total: watch::Sender<usize>,
    /// Serialises passes: each computes its quota from the counts, which another pass
    /// claiming at the same moment would not see yet.
    pass: tokio::sync::Mutex<()>,
    /// Signalled (one stored permit) whenever a delivery stops being in flight.
    finished: tokio::sync::Notify,
}

impl WebhookDispatcher {
    /// A dispatcher running `worker`'s attempts within `settings` (limits below 1 count as 1).
    pub fn new(worker: Arc<WebhookWorker>, settings: DispatchSettings) -> Arc<Self> {
        let settings = DispatchSettings {
            max_in_flight: settings.max_in_flight.clamp(1, Semaphore::MAX_PERMITS),
            per_endpoint_in_flight: settings.per_endpoint_in_flight.max(1),
            per_workspace_in_flight: settings.per_workspace_in_flight.max(1),
        };
        Arc::new(Self {
            worker,
            settings,
            slots: Arc::new(Semaphore::new(settings.max_in_flight)),
            counts: Mutex::new(Counts::default()),
            total: watch::Sender::new(0),
            pass: tokio::sync::Mutex::new(()),
            finished: tokio::sync::Notify::new(),
        })
    }

    /// The settings (as clamped).
    pub fn settings(&self) -> DispatchSettings {
        self.settings
    }

    /// One pass: claims up to `batch_size` deliveries due at `now`, no more than there are
    /// free slots, under the per-endpoint and per-workspace quota left by what is in flight;
    /// leases each for
    /// [`attempt_lease`](super::WebhookSettings::attempt_lease) and spawns one task per
    /// delivery, then returns without waiting for the POSTs. Fails only if the claim fails.
    /// Must run inside a tokio runtime.
    pub async fn dispatch_due(self: &Arc<Self>, now: DateTime<Utc>) -> Result<DispatchPass> {
        let _pass = self.pass.lock().await;
        let free_slots_before = self.slots.available_permits();
        let want = self.worker.settings().batch_size.max(1).min(free_slots_before);
        let permits: Vec<OwnedSemaphorePermit> =
            std::iter::from_fn(|| Arc::clone(&self.slots).try_acquire_owned().ok()).take(want).collect();
        let asked = permits.len();
        if asked == 0 {
            return Ok(DispatchPass { claimed: 0, free_slots_before, asked });
        }
        let quota = {
            let counts = self.counts();
            EndpointQuota {
                per_endpoint: self.settings.per_endpoint_in_flight,
                in_flight: counts.endpoints.counts().clone(),
                per_workspace: self.settings.per_workspace_in_flight,
                workspace_in_flight: counts.workspaces.counts().clone(),
            }
        };
        let lease_until = now + self.worker.settings().attempt_lease();
        let store = self.worker.core.store();
        let claimed = store.claim_due_webhook_deliveries(now, lease_until, asked, &quota).await?;
        let count = claimed.len();
        // Unused permits go back when the iterator is dropped.
        for (delivery, permit) in claimed.into_iter().zip(permits) {
            let guard = self.hold(delivery.workspace_id, delivery.endpoint_id, permit);
            tokio::spawn(Arc::clone(self).run(delivery, guard));
        }
        Ok(DispatchPass { claimed: count, free_slots_before, asked })
    }

    /// Deliveries in flight: claimed and not yet recorded (or given up on by an error).
    pub fn in_flight(&self) -> usize {
        *self.total.borrow()
    }

    /// Resolves when nothing is in flight. For tests, and for a graceful shutdown with a
    /// timeout around it (what is still in flight then stays leased).
    pub async fn idle(&self) {
        let mut total = self.total.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = total.wait_for(|n| *n == 0).await;
    }

    /// Waits until a delivery has finished since the last call returned (at once if one
    /// did meanwhile). A driver whose pass claimed less than it asked for because endpoints
    /// were at their quota waits on this (with its poll interval as a bound) rather than
    /// only on the poll interval: the finished delivery's endpoint may have more due, and
    /// sleeping a fixed interval would cap each endpoint at `per_endpoint_in_flight` per
    /// interval.
    pub async fn delivery_finished(&self) {
        self.finished.notified().await;
    }

    /// Waits until at least one slot is free. A driver calls it when a pass found every slot
    /// busy. The slot is not reserved: the next pass takes what is free then.
    pub async fn slot_free(&self) {
        // The semaphore is never closed; dropping the permit frees the slot again.
        let _ = self.slots.acquire().await;
    }

    /// The attempt of one delivery, in its own task; `guard` frees the slot when it ends.
    async fn run(self: Arc<Self>, delivery: WebhookDelivery, guard: InFlight) {
        let (id, endpoint) = (delivery.id, delivery.endpoint_id);
        if let Err(error) = self.worker.attempt(delivery).await {
            tracing::warn!(
                delivery = %id,
                endpoint = %endpoint,
                error = %error,
                "webhook delivery attempt failed; it stays leased and is retried when the lease ends"
            );
        }
        drop(guard);
    }

    /// Deliveries of `workspace` in flight now (for tests and metrics).
    pub fn in_flight_of(&self, workspace: WorkspaceId) -> usize {
        self.counts().workspaces.of(&workspace)
    }

    /// Counts a delivery of `endpoint` in `workspace` in flight until the returned guard is
    /// dropped.
    fn hold(self: &Arc<Self>, workspace: WorkspaceId, endpoint: WebhookId, permit: OwnedSemaphorePermit) -> InFlight {
        {
            let mut counts = self.counts();
            counts.endpoints.start(endpoint);
            counts.workspaces.start(workspace);
        }
        self.total.send_modify(|n| *n += 1);
        InFlight { dispatcher: Arc::clone(self), workspace, endpoint, _permit: permit }
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // Every update is a single step under the lock, so a poisoned lock is consistent.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Deliveries in flight per endpoint and per workspace.
#[derive(Debug, Default)]
struct Counts {
    endpoints: InFlightCounts<WebhookId>,
    workspaces: InFlightCounts<WorkspaceId>,
}

/// One delivery in flight: holds its slot and its endpoint's and workspace's counts, and
/// gives them back when dropped, whether its task finished, panicked or was cancelled.
struct InFlight {
    dispatcher: Arc<WebhookDispatcher>,
    workspace: WorkspaceId,
    endpoint: WebhookId,
    _permit: OwnedSemaphorePermit,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut counts = self.dispatcher.counts();
            counts.endpoints.finish(&self.endpoint);
            counts.workspaces.finish(&self.workspace);
        }
        self.dispatcher.total.send_modify(|n| *n = n.saturating_sub(1));
        self.dispatcher.finished.notify_one();
        // `_permit` is dropped after this, freeing the slot once the counts are down, so a
        // pass that gets the slot sees the counts without this delivery.
    }
}
