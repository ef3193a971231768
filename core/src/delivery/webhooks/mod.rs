//! The webhook worker's step function (contract §7): claim due deliveries under a lease,
//! and for each load its endpoint, sign, POST through the [`WebhookSender`] and record the
//! outcome in the delivery log.
//!
//! Per delivery:
//! 1. Endpoint deleted → `Failed`, "endpoint deleted" (the stores delete an endpoint's log
//!    with it, so usually the delivery is gone too and is just skipped). Endpoint disabled
//!    → `Failed`, "endpoint disabled": the owner disabled it, or it was disabled for
//!    answering 410; after re-enabling, the manual retry endpoint sends it again.
//! 2. Sign the fixed payload with the current secret, and the previous one while its
//!    rotation overlap lasts ([`signing_secrets`]); `webhook-id` is the delivery id, the
//!    same on every attempt so receivers can de-duplicate.
//! 3. POST and classify ([`classify_webhook`]): 2xx → `Delivered`; 410 → the endpoint is
//!    disabled (`disabled_reason` says why) and the delivery `Failed`; anything else →
//!    `Retrying` after the schedule's delay (or `Retry-After`, capped at a day, if later),
//!    or `Failed` once the schedule is used up.
//!
//! Isolation between endpoints: every claimed delivery of a step runs at once unless
//! `concurrency` is set below `batch_size`, and each POST is cut off after `post_timeout`,
//! so one slow or dead endpoint delays the other deliveries of its step by nothing (and the
//! step by at most `post_timeout` per wave). When `concurrency` is lower, the batch is
//! interleaved by endpoint so that a backlog for one endpoint cannot take every slot of the
//! first wave. A driver that wants steps to not wait for each other may run them
//! concurrently; the store's claims keep them apart.
//!
//! Crash safety is the lease's: a crash after the POST but before the record leaves the
//! delivery leased, and it is sent again (same `webhook-id`) when the lease ends, or at once
//! after a restart on a single-process store ([`WebhookWorker::release_leases_after_restart`]).
//!
//! Endpoint health: the first failed attempt sets the endpoint's `failing_since`, any 2xx
//! clears it, and a failed attempt once it is `disable_after_failing` old (default 5 days)
//! disables the endpoint with `disabled_reason` saying so. The endpoint is written only when
//! that state changes, not on every attempt.

mod classify;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;

pub use classify::{MAX_RETRY_AFTER, WebhookVerdict, classify_webhook, describe_webhook_response};

use crate::Result;
use crate::delivery::schedule::RetrySchedule;
use crate::ids::{DeliveryId, WebhookId};
use crate::model::{DeliveryStatus, WebhookDelivery, WebhookEndpoint};
use crate::ports::{StoreError, WebhookRequest, WebhookResponse, WebhookSender};
use crate::usecases::{Tidings, sign_webhook, signing_secrets};

/// Recorded as `disabled_reason` when an endpoint answers 410.
pub const GONE_REASON: &str = "the endpoint answered 410 Gone";

/// The webhook retry schedule of contract §7: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h
/// (eight attempts over about 27.5 hours).
pub fn webhook_retry_schedule() -> RetrySchedule {
    let secs = [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000];
    RetrySchedule::new(secs.into_iter().map(Duration::from_secs).collect())
        .unwrap_or_else(|_| unreachable!("the contract schedule is whole seconds under 30 days"))
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
    /// An endpoint whose every attempt has failed for this long is disabled (issue #5:
    /// 5 days by default).
    pub disable_after_failing: chrono::Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            batch_size: 64,
            concurrency: 64,
            post_timeout: Duration::from_secs(10),
            schedule: webhook_retry_schedule(),
            disable_after_failing: chrono::Duration::days(5),
        }
    }
}

impl WebhookSettings {
    /// How long a claim lasts: `post_timeout` for each wave of `concurrency` POSTs the batch
    /// needs, plus a minute for signing and storage.
    pub fn lease(&self) -> chrono::Duration {
        let waves = self.batch_size.max(1).div_ceil(self.concurrency.max(1));
        let busy = self.post_timeout.saturating_mul(u32::try_from(waves).unwrap_or(u32::MAX));
        chrono::Duration::from_std(busy + Duration::from_secs(60)).unwrap_or(chrono::Duration::days(1))
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

enum Outcome {
    Delivered,
    Retrying,
    Failed { disabled_endpoint: bool },
    Skipped,
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
        let claimed = self.core.store().claim_due_webhook_deliveries(now, lease_until, limit).await?;
        let mut report = WebhookReport { claimed: claimed.len(), ..WebhookReport::default() };
        let mut outcomes = futures::stream::iter(interleave_by_endpoint(claimed))
            .map(|delivery| async move { (delivery.id, self.deliver_one(delivery).await) })
            .buffer_unordered(self.settings.concurrency.max(1));
        while let Some((id, outcome)) = outcomes.next().await {
            match outcome {
                Ok(Outcome::Delivered) => report.delivered += 1,
                Ok(Outcome::Retrying) => report.retrying += 1,
                Ok(Outcome::Failed { disabled_endpoint }) => {
                    report.failed += 1;
                    report.endpoints_disabled += usize::from(disabled_endpoint);
                }
                Ok(Outcome::Skipped) => report.skipped += 1,
                Err(e) => report.errors.push((id, e.to_string())),
            }
        }
        Ok(report)
    }

    async fn deliver_one(&self, mut delivery: WebhookDelivery) -> Result<Outcome> {
        if matches!(delivery.status, DeliveryStatus::Delivered | DeliveryStatus::Failed) {
            return Ok(Outcome::Skipped);
        }
        let store = self.core.store();
        let endpoint = match store.get_webhook(delivery.workspace_id, delivery.endpoint_id).await? {
            Some(endpoint) if endpoint.enabled => endpoint,
            found => {
                let reason = if found.is_some() { "endpoint disabled" } else { "endpoint deleted" };
                delivery.status = DeliveryStatus::Failed;
                delivery.last_error = Some(reason.to_owned());
                delivery.next_attempt_at = None;
                return self.record(&delivery, Outcome::Failed { disabled_endpoint: false }).await;
            }
        };

        let request = self.sign(&delivery, &endpoint);
        let response = match tokio::time::timeout(self.settings.post_timeout, self.sender.post(&request)).await {
            Ok(response) => response,
            Err(_) => WebhookResponse::Failed { reason: format!("timeout after {:?}", self.settings.post_timeout) },
        };

        let now = self.core.clock().now();
        delivery.attempts = delivery.attempts.saturating_add(1);
        (delivery.response_code, delivery.last_error) = describe_webhook_response(&response);
        let outcome = match classify_webhook(&response) {
            WebhookVerdict::Delivered => {
                self.track_health(&endpoint, true, now).await?;
                delivery.status = DeliveryStatus::Delivered;
                delivery.next_attempt_at = None;
                Outcome::Delivered
            }
            WebhookVerdict::Gone => {
                // Disable first: if the process dies before the delivery is recorded, the
                // re-claimed delivery finds the endpoint disabled and fails without a POST.
                let disabled_endpoint = self.disable_gone(&endpoint, now).await?;
                delivery.status = DeliveryStatus::Failed;
                delivery.next_attempt_at = None;
                Outcome::Failed { disabled_endpoint }
            }
            WebhookVerdict::Retry { not_before } => match self.settings.schedule.delay_after(delivery.attempts) {
                _ if self.track_health(&endpoint, false, now).await? => {
                    // The endpoint was just disabled for failing too long: this delivery
                    // ends with it.
                    delivery.status = DeliveryStatus::Failed;
                    delivery.next_attempt_at = None;
                    Outcome::Failed { disabled_endpoint: true }
                }
                Some(delay) => {
                    let wait = delay.max(not_before.unwrap_or_default());
                    delivery.status = DeliveryStatus::Retrying;
                    delivery.next_attempt_at =
                        Some(now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::days(30)));
                    Outcome::Retrying
                }
                None => {
                    delivery.status = DeliveryStatus::Failed;
                    delivery.next_attempt_at = None;
                    Outcome::Failed { disabled_endpoint: false }
                }
            },
        };
        self.record(&delivery, outcome).await
    }

    /// The signed request for this attempt, timestamped by the service's clock.
    fn sign(&self, delivery: &WebhookDelivery, endpoint: &WebhookEndpoint) -> WebhookRequest {
        let now = self.core.clock().now();
        let webhook_id = delivery.id.to_string();
        let timestamp = now.timestamp();
        let secrets = signing_secrets(endpoint, now);
        let signature = sign_webhook(&secrets, &webhook_id, timestamp, delivery.payload.as_bytes());
        WebhookRequest {
            url: endpoint.url.clone(),
            webhook_id,
            webhook_timestamp: timestamp,
            webhook_signature: signature,
            body: delivery.payload.clone(),
        }
    }

    /// Keeps the endpoint's `failing_since` (see the module docs) after an attempt that
    /// succeeded or failed; returns whether this call disabled the endpoint. Re-reads the
    /// endpoint before writing, and writes only when something changes.
    async fn track_health(&self, endpoint: &WebhookEndpoint, succeeded: bool, now: DateTime<Utc>) -> Result<bool> {
        // Most attempts change nothing: skip the read when the copy in hand says so.
        if succeeded == endpoint.failing_since.is_none() && !self.failing_too_long(endpoint, now) {
            return Ok(false);
        }
        let store = self.core.store();
        let Some(mut fresh) = store.get_webhook(endpoint.workspace_id, endpoint.id).await? else {
            return Ok(false);
        };
        let disable = !succeeded && fresh.enabled && self.failing_too_long(&fresh, now);
        match (succeeded, fresh.failing_since) {
            (true, None) => return Ok(false),
            (true, Some(_)) => fresh.failing_since = None,
            (false, None) => fresh.failing_since = Some(now),
            (false, Some(_)) if disable => {
                fresh.enabled = false;
                fresh.disabled_reason =
                    Some(format!("every delivery failed for {}", period(self.settings.disable_after_failing)));
            }
            (false, Some(_)) => return Ok(false),
        }
        fresh.updated_at = now;
        match store.update_webhook(&fresh).await {
            Ok(()) => Ok(disable),
            Err(StoreError::NotFound) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn failing_too_long(&self, endpoint: &WebhookEndpoint, now: DateTime<Utc>) -> bool {
        endpoint.failing_since.is_some_and(|since| now - since >= self.settings.disable_after_failing)
    }

    /// Disables an endpoint that answered 410, re-reading it just before the write so that
    /// an owner's change made during the POST is not overwritten. Returns whether this call
    /// disabled it (false if it was already disabled or is gone).
    async fn disable_gone(&self, endpoint: &WebhookEndpoint, now: DateTime<Utc>) -> Result<bool> {
        let store = self.core.store();
        let Some(mut fresh) = store.get_webhook(endpoint.workspace_id, endpoint.id).await? else {
            return Ok(false);
        };
        if !fresh.enabled {
            return Ok(false);
        }
        fresh.enabled = false;
        fresh.disabled_reason = Some(GONE_REASON.to_owned());
        fresh.updated_at = now;
        match store.update_webhook(&fresh).await {
            Ok(()) => Ok(true),
            Err(StoreError::NotFound) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes the delivery; a delivery deleted meanwhile (with its endpoint) is skipped.
    async fn record(&self, delivery: &WebhookDelivery, outcome: Outcome) -> Result<Outcome> {
        match self.core.store().update_webhook_delivery(delivery).await {
            Ok(()) => Ok(outcome),
            Err(StoreError::NotFound) => Ok(Outcome::Skipped),
            Err(e) => Err(e.into()),
        }
    }
}

/// `5 days`, `1 day`, `36 hours`, `1 hour`: a period as the endpoint's `disabled_reason`
/// names it.
fn period(length: chrono::Duration) -> String {
    let plural = |n: i64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    let days = length.num_days();
    if days >= 1 && length == chrono::Duration::days(days) {
        plural(days, "day")
    } else {
        plural(length.num_hours().max(1), "hour")
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
    fn periods_read_naturally() {
        let d = chrono::Duration::days;
        let h = chrono::Duration::hours;
        assert_eq!(
            [period(d(5)), period(d(1)), period(h(36)), period(h(1))],
            ["5 days", "1 day", "36 hours", "1 hour"]
        );
    }

    #[test]
    fn the_default_schedule_is_the_contracts() {
        assert_eq!(webhook_retry_schedule().to_string(), "5s,5m,30m,2h,5h,10h,10h");
        assert_eq!(WebhookSettings::default().schedule, webhook_retry_schedule());
    }

    #[test]
    fn the_lease_outlasts_every_wave_of_posts() {
        let settings = WebhookSettings { batch_size: 64, concurrency: 16, ..WebhookSettings::default() };
        assert_eq!(settings.lease(), chrono::Duration::seconds(4 * 10 + 60));
        assert_eq!(WebhookSettings::default().lease(), chrono::Duration::seconds(70));
    }

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
