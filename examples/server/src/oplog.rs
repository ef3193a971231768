//! The operator's log: what happened to mail and webhooks, one line each, from core's
//! [`EventObserver`] port (beside the metrics, which count the same things). Each line names
//! the ids an operator looks up next (`message_id`, `workspace`, `delivery`, `endpoint`) and
//! never an address, a body or a secret: the recipient is in the message, for those who may
//! read it.
//!
//! Levels: `info` for what went as it should (delivered, suppressed, an address newly
//! suppressed), `warn` for what a sender or operator may have to act on (deferred, bounced,
//! complained, failed, a webhook attempt that failed, an endpoint disabled), `debug` for the
//! rest (queued, sent, scheduled, opened, clicked, webhooks delivered). Target `tidings::ops`,
//! so `TIDINGS_LOG=info,tidings::ops=warn` keeps only the problems.

use tidings_core::model::{EventType, Message, MessageEvent, Suppression, WebhookDelivery, WebhookEndpoint};
use tidings_core::ports::{EventObserver, WebhookAttemptResult};

/// The log target of every line written here.
pub const TARGET: &str = "tidings::ops";

/// Longest remote reply or error text quoted in a line, in characters.
const MAX_QUOTED_CHARS: usize = 300;

/// Writes the operator's log lines; give it to core with the metrics
/// ([`tidings_core::ports::Observers`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct OperatorLog;

impl EventObserver for OperatorLog {
    fn message_event(&self, message: &Message, event: &MessageEvent) {
        // Called for every event of every message, most of them filtered out: what a line
        // shows is worked out inside the macros, which evaluate their fields only for a line
        // that is written.
        let (id, workspace) = (message.id, message.workspace_id);
        let d = &event.details;
        let code = || d.smtp_code.map_or_else(String::new, |c| c.to_string());
        let enhanced = || d.enhanced_code.as_deref().unwrap_or_default();
        let reply = || quoted(d.response.as_deref());
        let attempt = d.attempt.unwrap_or_default();
        match event.event_type {
            EventType::Delivered => {
                tracing::info!(target: TARGET, message_id = %id, %workspace, attempt, smtp_code = %code(), "message delivered")
            }
            EventType::Deferred => {
                let next = || {
                    d.next_attempt_at.map_or_else(String::new, |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                };
                tracing::warn!(target: TARGET, message_id = %id, %workspace, attempt, smtp_code = %code(), enhanced = enhanced(), reply = reply(), next_attempt_at = %next(), "message deferred")
            }
            EventType::Bounced => {
                let bounce = match d.bounce_type {
                    Some(tidings_core::model::BounceType::Hard) => "hard",
                    Some(tidings_core::model::BounceType::Soft) => "soft",
                    None => "",
                };
                tracing::warn!(target: TARGET, message_id = %id, %workspace, bounce, smtp_code = %code(), enhanced = enhanced(), reply = reply(), "message bounced")
            }
            EventType::Complained => tracing::warn!(target: TARGET, message_id = %id, %workspace, "complaint received"),
            EventType::Failed => {
                tracing::warn!(target: TARGET, message_id = %id, %workspace, reason = reply(), "message failed")
            }
            EventType::Suppressed => {
                tracing::info!(target: TARGET, message_id = %id, %workspace, "message not sent: the recipient is suppressed")
            }
            other => {
                tracing::debug!(target: TARGET, message_id = %id, %workspace, event = other.as_str(), "message event")
            }
        }
    }

    fn webhook_delivery(&self, delivery: &WebhookDelivery, result: WebhookAttemptResult) {
        let (id, endpoint, workspace) = (delivery.id, delivery.endpoint_id, delivery.workspace_id);
        let message = delivery.message_id.map_or_else(|| "-".to_owned(), |m| m.to_string());
        let event = delivery.event_type.as_str();
        let attempts = delivery.attempts;
        let response_code = delivery.response_code.map_or_else(|| "-".to_owned(), |c| c.to_string());
        let error = quoted(delivery.last_error.as_deref());
        match result {
            WebhookAttemptResult::Delivered => {
                tracing::debug!(target: TARGET, delivery = %id, %endpoint, %workspace, message_id = %message, event, attempts, "webhook delivered")
            }
            WebhookAttemptResult::Retrying => {
                let next = delivery
                    .next_attempt_at
                    .map_or_else(String::new, |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
                tracing::warn!(target: TARGET, delivery = %id, %endpoint, %workspace, message_id = %message, event, attempts, %response_code, error, next_attempt_at = %next, "webhook attempt failed; retrying")
            }
            WebhookAttemptResult::Failed => {
                tracing::warn!(target: TARGET, delivery = %id, %endpoint, %workspace, message_id = %message, event, attempts, %response_code, error, "webhook delivery failed; no more attempts")
            }
        }
    }

    fn webhook_endpoint_disabled(&self, endpoint: &WebhookEndpoint) {
        let host = url::Url::parse(endpoint.url.as_str())
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        let reason = quoted(endpoint.disabled_reason.as_deref());
        tracing::warn!(target: TARGET, endpoint = %endpoint.id, workspace = %endpoint.workspace_id, host, reason, "webhook endpoint disabled");
    }

    fn suppression_added(&self, suppression: &Suppression) {
        let message = suppression.message_id.map_or_else(|| "-".to_owned(), |m| m.to_string());
        let source = match suppression.source {
            tidings_core::model::SuppressionSource::Api => "api",
            tidings_core::model::SuppressionSource::Bounce => "bounce",
            tidings_core::model::SuppressionSource::Complaint => "complaint",
        };
        tracing::info!(target: TARGET, suppression = %suppression.id, workspace = %suppression.workspace_id, reason = suppression.reason.as_str(), source, message_id = %message, "address suppressed");
    }
}

/// A remote reply or error as one line of at most [`MAX_QUOTED_CHARS`]: control characters
/// (a reply's line breaks, or a hostile server's) become spaces, so no line can be forged.
fn quoted(text: Option<&str>) -> String {
    let text = text.unwrap_or_default();
    let mut out: String = text.chars().take(MAX_QUOTED_CHARS).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if text.chars().count() > MAX_QUOTED_CHARS {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn quoted_text_is_one_bounded_line() {
        assert_eq!(quoted(Some("550 5.1.1 no\r\nsuch user")), "550 5.1.1 no  such user");
        assert_eq!(quoted(None), "");
        let long = "x".repeat(400);
        assert_eq!(quoted(Some(&long)).chars().count(), 301);
    }
}
