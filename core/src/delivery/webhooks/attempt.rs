//! One attempt at one claimed delivery, shared by [`WebhookWorker::deliver_due`] and the
//! [`WebhookDispatcher`](super::WebhookDispatcher): endpoint checks, signing, the POST, the
//! outcome, and the endpoint's health.

use chrono::{DateTime, Utc};

use super::{GONE_REASON, WebhookVerdict, WebhookWorker, classify_webhook, describe_webhook_response, response_body};
use crate::Result;
use crate::model::{DeliveryStatus, WebhookDelivery, WebhookEndpoint};
use crate::ports::{EventObserver, StoreError, WebhookAttemptResult, WebhookRequest, WebhookResponse};
use crate::usecases::{sign_webhook, signing_secrets};

/// What one attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// Answered with a 2xx.
    Delivered,
    /// Failed this time; another attempt is scheduled.
    Retrying,
    /// Given up: schedule used up, 410, endpoint deleted or disabled.
    Failed {
        /// Whether this attempt disabled the endpoint (410, or failing for too long).
        disabled_endpoint: bool,
    },
    /// Left alone: already finished, or gone from the store meanwhile.
    Skipped,
}

impl WebhookWorker {
    /// One attempt at a claimed delivery (the steps of the [module docs](super)): loads its
    /// endpoint, signs, POSTs (cut off after `post_timeout`), and records the outcome in the
    /// delivery log. An error (storage unavailable, ...) leaves the delivery as claimed: it
    /// stays leased and is tried again when the lease ends.
    pub async fn attempt(&self, mut delivery: WebhookDelivery) -> Result<AttemptOutcome> {
        if matches!(delivery.status, DeliveryStatus::Delivered | DeliveryStatus::Failed) {
            return Ok(AttemptOutcome::Skipped);
        }
        let store = self.core.store();
        let endpoint = match store.get_webhook(delivery.workspace_id, delivery.endpoint_id).await? {
            Some(endpoint) if endpoint.enabled => endpoint,
            found => {
                let reason = if found.is_some() { "endpoint disabled" } else { "endpoint deleted" };
                delivery.status = DeliveryStatus::Failed;
                delivery.last_error = Some(reason.to_owned());
                delivery.next_attempt_at = None;
                return self.record(&delivery, AttemptOutcome::Failed { disabled_endpoint: false }, false).await;
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
        delivery.response_body = response_body(&response);
        let outcome = match classify_webhook(&response) {
            WebhookVerdict::Delivered => {
                self.track_health(&endpoint, true, now).await?;
                delivery.status = DeliveryStatus::Delivered;
                delivery.next_attempt_at = None;
                AttemptOutcome::Delivered
            }
            WebhookVerdict::Gone => {
                // Disable first: if the process dies before the delivery is recorded, the
                // re-claimed delivery finds the endpoint disabled and fails without a POST.
                let disabled_endpoint = self.disable_gone(&endpoint, now).await?;
                delivery.status = DeliveryStatus::Failed;
                delivery.next_attempt_at = None;
                AttemptOutcome::Failed { disabled_endpoint }
            }
            WebhookVerdict::Retry { not_before } => match self.settings.schedule.delay_after(delivery.attempts) {
                _ if self.track_health(&endpoint, false, now).await? => {
                    // The endpoint was just disabled for failing too long: this delivery
                    // ends with it.
                    delivery.status = DeliveryStatus::Failed;
                    delivery.next_attempt_at = None;
                    AttemptOutcome::Failed { disabled_endpoint: true }
                }
                Some(delay) => {
                    let wait = delay.max(not_before.unwrap_or_default());
                    delivery.status = DeliveryStatus::Retrying;
                    delivery.next_attempt_at =
                        Some(now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::days(30)));
                    AttemptOutcome::Retrying
                }
                None => {
                    delivery.status = DeliveryStatus::Failed;
                    delivery.next_attempt_at = None;
                    AttemptOutcome::Failed { disabled_endpoint: false }
                }
            },
        };
        self.record(&delivery, outcome, true).await
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
            format: endpoint.format,
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
            Ok(()) => {
                if disable {
                    self.core.observer().webhook_endpoint_disabled(&fresh);
                }
                Ok(disable)
            }
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
            Ok(()) => {
                self.core.observer().webhook_endpoint_disabled(&fresh);
                Ok(true)
            }
            Err(StoreError::NotFound) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes the delivery; a delivery deleted meanwhile (with its endpoint) is skipped.
    /// Reports the outcome to the observer, with the response code if this attempt `posted`.
    async fn record(
        &self,
        delivery: &WebhookDelivery,
        outcome: AttemptOutcome,
        posted: bool,
    ) -> Result<AttemptOutcome> {
        match self.core.store().update_webhook_delivery(delivery).await {
            Ok(()) => {
                let result = match outcome {
                    AttemptOutcome::Delivered => Some(WebhookAttemptResult::Delivered),
                    AttemptOutcome::Retrying => Some(WebhookAttemptResult::Retrying),
                    AttemptOutcome::Failed { .. } => Some(WebhookAttemptResult::Failed),
                    AttemptOutcome::Skipped => None,
                };
                if let Some(result) = result {
                    let code = if posted { delivery.response_code } else { None };
                    self.core.observer().webhook_attempt(result, code);
                    self.core.observer().webhook_delivery(delivery, result);
                }
                Ok(outcome)
            }
            Err(StoreError::NotFound) => Ok(AttemptOutcome::Skipped),
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
}
