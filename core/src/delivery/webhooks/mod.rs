//! The webhook worker's step function (docs/api.md#webhooks): claim due deliveries under a
//! lease, and for each load its endpoint, sign, POST through the [`WebhookSender`] and record
//! the outcome in the delivery log.
//!
//! Per delivery:
//! 1. Endpoint deleted → `Failed`, "endpoint deleted" (the stores delete an endpoint's log
//!    with it, so usually the delivery is gone too and is just skipped). Endpoint disabled
//!    → `Failed`, "endpoint disabled": the owner disabled it, or it was disabled for
//!    answering 410; after re-enabling, the manual retry endpoint sends it again.
//! 2. Sign the fixed payload with the current secret, and the previous one while its
//!    rotation overlap lasts ([`signing_secrets`](crate::usecases::signing_secrets));
//!    `webhook-id` is the delivery id, the same on every attempt so receivers can
//!    de-duplicate.
//! 3. POST and classify ([`classify_webhook`]): 2xx → `Delivered`; 410 → the endpoint is
//!    disabled (`disabled_reason` says why) and the delivery `Failed`; anything else →
//!    `Retrying` after the schedule's delay (or `Retry-After`, capped at a day, if later),
//!    or `Failed` once the schedule is used up.
//!
//! Isolation between endpoints: every claimed delivery of a step runs at once unless
//! `concurrency` is set below `batch_size`, and each POST is cut off after `post_timeout`,
//! so one slow or dead endpoint delays the other deliveries of its step by nothing. But the
//! step returns only when its slowest POST does, so a loop of steps delays everyone's next
//! events by up to `post_timeout` whenever a dead endpoint is in the batch. When
//! `concurrency` is lower, the batch is interleaved by endpoint so that a backlog for one
//! endpoint cannot take every slot of the first wave. The server drives the
//! [`WebhookDispatcher`] instead, which runs each delivery as its own task and caps what one
//! endpoint may hold ([`dispatch`]); steps remain for tests and simple drivers.
//!
//! Crash safety is the lease's: a crash after the POST but before the record leaves the
//! delivery leased, and it is sent again (same `webhook-id`) when the lease ends, or at once
//! after a restart on a single-process store ([`WebhookWorker::release_leases_after_restart`]).
//!
//! Endpoint health: the first failed attempt sets the endpoint's `failing_since`, any 2xx
//! clears it, and a failed attempt once it is `disable_after_failing` old (default 5 days)
//! disables the endpoint with `disabled_reason` saying so. The endpoint is written only when
//! that state changes, not on every attempt.

mod attempt;
mod classify;
pub mod dispatch;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;

pub use attempt::AttemptOutcome;
pub use classify::{MAX_RETRY_AFTER, WebhookVerdict, classify_webhook, describe_webhook_response, response_body};
pub use dispatch::{DispatchPass, DispatchSettings, WebhookDispatcher};

use crate::Result;
use crate::delivery::schedule::RetrySchedule;
use crate::ids::{DeliveryId, WebhookId};
use crate::model::WebhookDelivery;
use crate::ports::{EndpointQuota, WebhookSender};
use crate::usecases::Tidings;

/// Recorded as `disabled_reason` when an endpoint answers 410.
pub const GONE_REASON: &str = "the endpoint answered 410 Gone";

/// The default webhook retry schedule (docs/api.md#webhook-retries): 5 s, 5 min, 30 min, 2 h,
/// 5 h, 10 h, 10 h (eight attempts over about 27.5 hours).
pub fn webhook_retry_schedule() -> RetrySchedule {
    let secs = [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000];
    RetrySchedule::new(secs.into_iter().map(Duration::from_secs).collect())
        .unwrap_or_else(|_| unreachable!("the default schedule is whole seconds under 30 days"))
}

/// How the webhook worker runs.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Deliveries claimed per step (at least 1).
    pub batch_size: usize,
    /// POSTs in flight at once within a step (at least 1).
    pub concurrency: usize,
    /// Longest one POST may take; a longer one is cut off and retried like a timeout. The
    /// adapter enforces the same limit itself; this is the backstop.
    pub post_timeout: Duration,
    /// Delays between attempts.
    pub schedule: RetrySchedule,
    /// An endpoint whose every attempt has failed for this long is disabled (5 days by
    /// default).
    pub disable_after_failing: chrono::Duration,
    /// Added to the longest time the POSTs of a claim can take to make its lease: time for
    /// signing and storage (a minute by default). Shorter lets other nodes take over a
    /// crashed node's deliveries sooner; too short for the store's pace, and a lease can end
    /// while its attempt still runs, so that the event is posted twice (same `webhook-id`).
    pub lease_margin: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            batch_size: 64,
            concurrency: 64,
            post_timeout: Duration::from_secs(10),
            schedule: webhook_retry_schedule(),
            disable_after_failing: chrono::Duration::days(5),
            lease_margin: Duration::from_secs(60),
        }
    }
}

impl WebhookSettings {
    /// How long a claim lasts: `post_timeout` for each wave of `concurrency` POSTs the batch
    /// needs, plus `lease_margin` for signing and storage.
    pub fn lease(&self) -> chrono::Duration {
        let waves = self.batch_size.max(1).div_ceil(self.concurrency.max(1));
        let busy = self.post_timeout.saturating_mul(u32::try_from(waves).unwrap_or(u32::MAX));
        chrono::Duration::from_std(busy.saturating_add(self.lease_margin)).unwrap_or(chrono::Duration::days(1))
    }

    /// How long the claim of one dispatched delivery lasts: one `post_timeout` plus the same
    /// `lease_margin` for signing and storage. [`Self::lease`] covers every wave of a step, because
    /// a step's last wave starts only when the ones before it end; the
    /// [`WebhookDispatcher`] claims no more than it has free slots for and starts each
    /// delivery's POST at once, so one POST is all its lease has to outlast. A shorter lease
    /// also means a delivery whose attempt hit an error is retried sooner.
    pub fn attempt_lease(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.post_timeout.saturating_add(self.lease_margin))
            .unwrap_or(chrono::Duration::days(1))
    }
}

/// What one step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookReport {
    /// Deliveries claimed.
    pub claimed: usize,
    /// Answered with a 2xx.
    pub delivered: usize,
    /// Failed this time; another attempt is scheduled.
    pub retrying: usize,
    /// Given up: schedule used up, 410, endpoint deleted or disabled.
    pub failed: usize,
    /// Endpoints disabled because they answered 410.
    pub endpoints_disabled: usize,
    /// Left alone: already finished, or gone from the store meanwhile.
    pub skipped: usize,
    /// Deliveries whose processing hit an error (storage unavailable, ...), with the error;
    /// they stay leased and are tried again when the lease ends.
    pub errors: Vec<(DeliveryId, String)>,
}

/// Delivers due webhook deliveries through a [`WebhookSender`]. Cheap to share behind an
/// `Arc`; steps may run concurrently (the store's claims keep them apart).
pub struct WebhookWorker {
    core: Tidings,
    sender: Arc<dyn WebhookSender>,
    settings: WebhookSettings,
}

impl WebhookWorker {
    /// A worker posting through `sender` by `settings`, recording through `core`.
    pub fn new(core: Tidings, sender: Arc<dyn WebhookSender>, settings: WebhookSettings) -> Self {
        Self { core, sender, settings }
    }

    /// The settings.
    pub fn settings(&self) -> &WebhookSettings {
        &self.settings
    }

    /// Makes the deliveries that the previous run of this process left claimed (`Pending`
    /// under a lease, after a crash) due at `now`, so the first step posts them instead of
    /// waiting for their leases to end; returns how many. Like
    /// [`DeliveryWorker::release_leases_after_restart`](crate::delivery::DeliveryWorker::release_leases_after_restart),
    /// only for a store that one process alone can open, before the first step.
    pub async fn release_leases_after_restart(&self, now: DateTime<Utc>) -> Result<usize> {
        const BATCH: usize = 1_000;
        let mut total = 0;
        loop {
            let released = self.core.store().release_webhook_delivery_leases(now, BATCH).await?;
            total += released;
            if released < BATCH {
                return Ok(total);
            }
        }
    }

    /// One step: claims up to `batch_size` deliveries due at `now` (leased until `now` +
    /// [`WebhookSettings::lease`]) and makes one attempt at each, `concurrency` at a time.
    /// Fails only if the claim fails; per-delivery errors are in the report. Signing and
    /// retry times come from the service's clock.
    pub async fn deliver_due(&self, now: DateTime<Utc>) -> Result<WebhookReport> {
        let lease_until = now + self.settings.lease();
        let limit = self.settings.batch_size.max(1);
        let store = self.core.store();
        let claimed = store.claim_due_webhook_deliveries(now, lease_until, limit, &EndpointQuota::unlimited()).await?;
        let mut report = WebhookReport { claimed: claimed.len(), ..WebhookReport::default() };
        let mut outcomes = futures::stream::iter(interleave_by_endpoint(claimed))
            .map(|delivery| async move { (delivery.id, self.attempt(delivery).await) })
            .buffer_unordered(self.settings.concurrency.max(1));
        while let Some((id, outcome)) = outcomes.next().await {
            match outcome {
                Ok(AttemptOutcome::Delivered) => report.delivered += 1,
                Ok(AttemptOutcome::Retrying) => report.retrying += 1,
                Ok(AttemptOutcome::Failed { disabled_endpoint }) => {
                    report.failed += 1;
                    report.endpoints_disabled += usize::from(disabled_endpoint);
                }
                Ok(AttemptOutcome::Skipped) => report.skipped += 1,
                Err(e) => report.errors.push((id, e.to_string())),
            }
        }
        Ok(report)
    }
}

/// Reorders a batch so that each endpoint's first delivery comes before any endpoint's
/// second, and so on, keeping claim order within each round.
fn interleave_by_endpoint(claimed: Vec<WebhookDelivery>) -> Vec<WebhookDelivery> {
    let mut seen: HashMap<WebhookId, usize> = HashMap::new();
    let mut ranked: Vec<(usize, usize, WebhookDelivery)> = claimed
        .into_iter()
        .enumerate()
        .map(|(index, delivery)| {
            let count = seen.entry(delivery.endpoint_id).or_default();
            let round = *count;
            *count += 1;
            (round, index, delivery)
        })
        .collect();
    ranked.sort_by_key(|(round, index, _)| (*round, *index));
    ranked.into_iter().map(|(_, _, delivery)| delivery).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_schedule_is_the_documented_one() {
        assert_eq!(webhook_retry_schedule().to_string(), "5s,5m,30m,2h,5h,10h,10h");
        assert_eq!(WebhookSettings::default().schedule, webhook_retry_schedule());
    }

    #[test]
    fn the_lease_outlasts_every_wave_of_posts() {
        let settings = WebhookSettings { batch_size: 64, concurrency: 16, ..WebhookSettings::default() };
        assert_eq!(settings.lease(), chrono::Duration::seconds(4 * 10 + 60));
        assert_eq!(WebhookSettings::default().lease(), chrono::Duration::seconds(70));
        assert_eq!(settings.attempt_lease(), chrono::Duration::seconds(10 + 60), "one POST, whatever the batch");
    }

    #[test]
    fn a_shorter_margin_shortens_the_leases_but_never_below_the_posts() {
        let settings = WebhookSettings {
            batch_size: 64,
            concurrency: 16,
            lease_margin: Duration::from_secs(2),
            ..WebhookSettings::default()
        };
        assert_eq!(settings.lease(), chrono::Duration::seconds(4 * 10 + 2));
        assert_eq!(settings.attempt_lease(), chrono::Duration::seconds(10 + 2));
    }

    use crate::model::DeliveryStatus;

    fn delivery(id: u128, endpoint: WebhookId) -> WebhookDelivery {
        let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        WebhookDelivery {
            id: DeliveryId(ulid::Ulid(id)),
            workspace_id: crate::ids::WorkspaceId(ulid::Ulid(9)),
            endpoint_id: endpoint,
            event_id: crate::ids::EventId(ulid::Ulid(id)),
            message_id: None,
            event_type: crate::model::WebhookEventType::Test,
            payload: "{}".into(),
            status: DeliveryStatus::Pending,
            attempts: 0,
            response_code: None,
            last_error: None,
            response_body: None,
            next_attempt_at: Some(at),
            created_at: at,
        }
    }

    #[test]
    fn a_backlog_for_one_endpoint_does_not_take_the_first_wave() {
        let (a, b, c) = (WebhookId(ulid::Ulid(1)), WebhookId(ulid::Ulid(2)), WebhookId(ulid::Ulid(3)));
        let batch: Vec<WebhookDelivery> =
            [a, a, a, b, a, c, b].into_iter().enumerate().map(|(i, endpoint)| delivery(i as u128, endpoint)).collect();
        let order: Vec<u128> = interleave_by_endpoint(batch).iter().map(|d| d.id.0.0).collect();
        assert_eq!(order, [0, 3, 5, 1, 6, 2, 4]);
    }
}
