//! The background loops of [`Runtime`](super::Runtime): delivery, webhook delivery, domain
//! re-checks, and the purges (Idempotency-Keys, limits, dashboard sessions, retention). Each
//! calls a step function of core (which tests call directly) and sleeps when there is
//! nothing to do; each stops when the shutdown channel says so.
//!
//! Delivery is at-least-once: a step cut short by shutdown leaves its claimed messages leased,
//! and the next start (or another step, once the lease ends) picks them up again.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::delivery::{DeliveryWorker, WebhookDispatcher};
use crate::ports::Limits;
use crate::usecases::Tidings;

/// How long an idle delivery loop waits before looking for due messages again. A send is
/// picked up at most this long after it was accepted.
const DELIVERY_IDLE_POLL: Duration = Duration::from_millis(200);
/// How long a failing store is left alone before the next delivery step.
const DELIVERY_ERROR_BACKOFF: Duration = Duration::from_secs(2);
/// How long in-flight sends may finish after shutdown is asked for, before they are dropped
/// (their messages stay leased and are sent again after a restart).
const DELIVERY_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long an idle webhook loop waits before looking for due deliveries again: an event
/// reaches its endpoints at most this long after it was recorded (plus the POST).
const WEBHOOK_IDLE_POLL: Duration = Duration::from_millis(100);
/// After a delivery finishes, how long the webhook loop waits for others before the next
/// pass: each pass scans the due queue past the backlog of endpoints at their quota, so one
/// pass per finished delivery would cost more than it brings.
const WEBHOOK_COALESCE: Duration = Duration::from_millis(10);
/// How long webhook POSTs in flight may finish after shutdown is asked for; the rest stay
/// leased and are posted again after a restart (same `webhook-id`).
const WEBHOOK_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Domains checked per re-check pass.
const RECHECK_BATCH: usize = 50;
/// How often expired Idempotency-Keys are purged, and how many per store call.
const PURGE_EVERY: Duration = Duration::from_secs(60);
const PURGE_BATCH: usize = 1000;
/// Messages per retention batch: each batch is one short write (a transaction, or sled's
/// writer lock) that sends wait behind, so batches stay small.
const RETENTION_BATCH: usize = 100;

/// Delivers due messages until `stop` turns true, as a pipeline: each attempt runs on a task
/// of its own (building, signing, storage and the SMTP exchange of different messages then
/// use every core), at most `concurrency` at once, and more are claimed as attempts finish,
/// without waiting for the slowest of a batch. Claims wait until half of the slots are
/// free, so that each stays one store write for several messages; with nothing due, the
/// loop looks again after [`DELIVERY_IDLE_POLL`] (or as soon as an attempt finishes).
///
/// Each claim's lease is [`DeliverySettings::lease`](crate::delivery::DeliverySettings::lease),
/// which covers the whole batch even though its attempts start at once here.
pub(super) async fn deliver(worker: Arc<DeliveryWorker>, core: Tidings, mut stop: watch::Receiver<bool>) {
    let settings = worker.settings().clone();
    let slots = settings.concurrency.max(1);
    let claim_at = (slots / 2).max(1);
    let mut running = tokio::task::JoinSet::new();
    let mut pause = Duration::ZERO;
    loop {
        if *stop.borrow() {
            break;
        }
        let free = slots.saturating_sub(running.len());
        if pause.is_zero() && free >= claim_at {
            let asked = free.min(settings.batch_size.max(1));
            match worker.claim(core.clock().now(), asked).await {
                Ok((claimed, lease_until)) => {
                    if claimed.len() < asked {
                        pause = DELIVERY_IDLE_POLL;
                    }
                    for message in claimed {
                        running.spawn(worker.attempt(message, lease_until));
                    }
                }
                Err(e) => {
                    tracing::warn!("delivery step failed: {e}");
                    pause = DELIVERY_ERROR_BACKOFF;
                }
            }
            if pause.is_zero() && slots.saturating_sub(running.len()) >= claim_at {
                continue;
            }
        }
        // Wait for an attempt to finish (a slot to free), the pause to end, or shutdown.
        let idle =
            async { if pause.is_zero() { std::future::pending().await } else { tokio::time::sleep(pause).await } };
        tokio::select! {
            _ = stop.changed() => break,
            Some(joined) = running.join_next() => {
                log_attempt(joined);
                // A finished attempt may have made room while others are still due: a
                // failed store or an empty queue keep their pause.
                if pause == DELIVERY_IDLE_POLL {
                    pause = Duration::ZERO;
                }
            }
            () = idle => pause = Duration::ZERO,
        }
    }
    let finish = async {
        while let Some(joined) = running.join_next().await {
            log_attempt(joined);
        }
    };
    if tokio::time::timeout(DELIVERY_SHUTDOWN_GRACE, finish).await.is_err() {
        // Dropping the set aborts the attempts still running.
        tracing::warn!("shutdown: dropped in-flight deliveries; they are retried after the restart");
    }
}

/// Reports an attempt that went wrong (the store failed, or the task panicked); its
/// message stays leased and is tried again when the lease ends.
fn log_attempt(
    joined: Result<(crate::ids::MessageId, crate::Result<crate::delivery::worker::Outcome>), tokio::task::JoinError>,
) {
    match joined {
        Ok((_, Ok(_))) => {}
        Ok((message, Err(error))) => tracing::warn!(%message, "delivery step failed for a message: {error}"),
        Err(e) => tracing::error!("a delivery attempt did not finish: {e}"),
    }
}

/// Runs webhook dispatch passes until `stop` turns true. Each pass claims due deliveries
/// and starts one task per POST without waiting for them (core's [`WebhookDispatcher`]),
/// so a slow endpoint holds only its own slots: the next pass starts at once while passes
/// fill their batch, else after [`WEBHOOK_IDLE_POLL`], or when a slot frees if all are busy.
pub(super) async fn deliver_webhooks(
    dispatcher: Arc<WebhookDispatcher>,
    core: Tidings,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            break;
        }
        let pause = match dispatcher.dispatch_due(core.clock().now()).await {
            Ok(pass) if pass.free_slots_before == 0 => {
                // Every slot is busy: the next pass can take work only when one frees up.
                tokio::select! {
                    _ = stop.changed() => break,
                    () = dispatcher.slot_free() => {}
                }
                continue;
            }
            Ok(pass) if pass.may_have_more() => Duration::ZERO,
            Ok(_) if dispatcher.in_flight() > 0 => {
                // More may be due for endpoints that were at their quota: look again when one
                // of their deliveries finishes, gathering the others that finish meanwhile.
                tokio::select! {
                    _ = stop.changed() => break,
                    () = dispatcher.delivery_finished() => {}
                    () = tokio::time::sleep(WEBHOOK_IDLE_POLL) => {}
                }
                WEBHOOK_COALESCE
            }
            Ok(_) => WEBHOOK_IDLE_POLL,
            Err(e) => {
                tracing::warn!("webhook dispatch failed: {e}");
                DELIVERY_ERROR_BACKOFF
            }
        };
        if !pause.is_zero() {
            tokio::select! {
                _ = stop.changed() => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
    if tokio::time::timeout(WEBHOOK_SHUTDOWN_GRACE, dispatcher.idle()).await.is_err() {
        tracing::warn!(
            in_flight = dispatcher.in_flight(),
            "shutdown: webhook POSTs still in flight; they are sent again after the restart"
        );
    }
}

/// Every `interval / 4` (at least each second, at most each minute), re-checks the DNS of
/// domains not yet Verified, or with a DKIM rotation under way, whose last check is older
/// than `interval` (core decides which), then starts the automatic DKIM rotations that are
/// due (none unless `TIDINGS_DKIM_ROTATE_EVERY` is set).
pub(super) async fn recheck_domains(core: Tidings, interval: Duration, mut stop: watch::Receiver<bool>) {
    let every = (interval / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => {}
        }
        match core.domains().recheck(core.clock().now(), RECHECK_BATCH).await {
            Ok(report) => {
                for (domain, error) in &report.errors {
                    tracing::warn!(%domain, "domain re-check could not be stored: {error}");
                }
                if report.checked > 0 {
                    tracing::info!(checked = report.checked, verified = report.verified, "re-checked domains");
                }
            }
            Err(e) => tracing::warn!("domain re-check failed: {e}"),
        }
        match core.domains().rotate_due(core.clock().now(), RECHECK_BATCH).await {
            Ok(rotated) if !rotated.is_empty() => {
                tracing::info!(rotated = rotated.len(), "started automatic DKIM key rotations");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("automatic DKIM key rotation failed: {e}"),
        }
    }
}

/// Every `check_every` of the reputation policy, judges every workspace's rates
/// (`usecases::Reputation::judge_all`); does nothing while every threshold is off.
pub(super) async fn judge_reputation(core: Tidings, mut stop: watch::Receiver<bool>) {
    let policy = core.config().reputation.clone();
    if !policy.is_on() {
        return;
    }
    let mut tick = tokio::time::interval(policy.check_every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => {}
        }
        match core.reputation().judge_all(core.clock().now()).await {
            Ok(report) => {
                for (workspace, error) in &report.errors {
                    tracing::warn!(%workspace, "reputation check failed: {error}");
                }
            }
            Err(e) => tracing::warn!("reputation check failed: {e}"),
        }
    }
}

/// Every [`PURGE_EVERY`], removes expired Idempotency-Keys in batches until none are left.
pub(super) async fn purge_idempotency_keys(core: Tidings, stop: watch::Receiver<bool>) {
    // The handle outlives each call's future, which borrows it.
    let messages = core.messages();
    let purge = || messages.purge_expired_idempotency_keys(PURGE_BATCH);
    purge_periodically("expired Idempotency-Keys", PURGE_EVERY, PURGE_BATCH, stop, purge).await;
}

/// Every [`PURGE_EVERY`], deletes expired dashboard sessions in batches until none are left.
pub(super) async fn purge_sessions(core: Tidings, stop: watch::Receiver<bool>) {
    // Bound here: each purge's future borrows the handle, so it must outlive the closure's calls.
    let sessions = core.sessions();
    let purge = || sessions.purge_expired(PURGE_BATCH);
    purge_periodically("expired dashboard sessions", PURGE_EVERY, PURGE_BATCH, stop, purge).await;
}

/// Every `every`, purges the bodies and timelines of messages past retention (core's
/// `operations().purge_expired_message_content`), in batches of [`RETENTION_BATCH`] until
/// none are left. Does nothing when retention is off.
pub(super) async fn purge_message_content(core: Tidings, every: Duration, stop: watch::Receiver<bool>) {
    if core.config().message_retention.is_none() {
        return;
    }
    let operations = core.operations();
    let purge = || operations.purge_expired_message_content(RETENTION_BATCH);
    purge_periodically("message content past retention", every, RETENTION_BATCH, stop, purge).await;
}

/// Every `every`, deletes inbound messages past retention (core's `inbound().purge_expired`),
/// in batches of [`RETENTION_BATCH`] until none are left. Does nothing when retention is off.
pub(super) async fn purge_inbound(core: Tidings, every: Duration, stop: watch::Receiver<bool>) {
    if core.config().message_retention.is_none() {
        return;
    }
    let inbound = core.inbound();
    let purge = || inbound.purge_expired(RETENTION_BATCH);
    purge_periodically("inbound mail past retention", every, RETENTION_BATCH, stop, purge).await;
}

/// Every [`PURGE_EVERY`], deletes activity counters past their retention in batches until
/// none are left.
pub(super) async fn purge_activity(core: Tidings, stop: watch::Receiver<bool>) {
    let operations = core.operations();
    let purge = || operations.purge_expired_activity(PURGE_BATCH);
    purge_periodically("activity counters past retention", PURGE_EVERY, PURGE_BATCH, stop, purge).await;
}

/// Every [`PURGE_EVERY`], forgets rate-limit buckets that are full again, throttle windows
/// that are over, expired site leases and delivery sites that limit nothing (on PostgreSQL,
/// rows of the shared tables; in memory, the idle sites).
pub(super) async fn purge_limits(limits: Arc<dyn Limits>, core: Tidings, stop: watch::Receiver<bool>) {
    let purge = || limits.purge(core.clock().now(), PURGE_BATCH);
    purge_periodically("stale limits", PURGE_EVERY, PURGE_BATCH, stop, purge).await;
}

/// Every `every`, calls `purge` (one batch of at most `batch`) until a batch comes back
/// short, a call fails, or `stop` turns true.
async fn purge_periodically<F, Fut, E>(
    what: &str,
    every: Duration,
    batch: usize,
    mut stop: watch::Receiver<bool>,
    purge: F,
) where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<usize, E>>,
    E: std::fmt::Display,
{
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => {}
        }
        loop {
            match purge().await {
                Ok(n) if n >= batch => tracing::debug!(purged = n, "purged {what}; more left"),
                Ok(n) => {
                    if n > 0 {
                        tracing::debug!(purged = n, "purged {what}");
                    }
                    break;
                }
                Err(e) => {
                    tracing::warn!("purging {what} failed: {e}");
                    break;
                }
            }
            if *stop.borrow() {
                return;
            }
        }
    }
}
