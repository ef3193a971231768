//! What a webhook attempt's outcome means (docs/api.md#webhook-retries), decided in this one
//! place: any 2xx is delivered, `410 Gone` ends the delivery and disables the endpoint,
//! anything else (other statuses, redirects, timeouts, refused connections, TLS errors, SSRF
//! refusals) is retried on the schedule, no earlier than a `Retry-After` of at most
//! [`MAX_RETRY_AFTER`].

use std::time::Duration;

use crate::ports::{MAX_BODY_PREFIX, WebhookResponse};

/// Longest `Retry-After` honoured; a longer one is cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3_600);

/// What to do after one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookVerdict {
    /// The receiver took it.
    Delivered,
    /// The receiver said the endpoint is gone: fail the delivery and disable the endpoint.
    Gone,
    /// Try again on the schedule, but not before `not_before` (from `Retry-After`).
    Retry {
        /// The receiver's requested wait, capped at [`MAX_RETRY_AFTER`].
        not_before: Option<Duration>,
    },
}

/// The verdict for `response`.
pub fn classify_webhook(response: &WebhookResponse) -> WebhookVerdict {
    match response {
        WebhookResponse::Answered { status: 200..=299, .. } => WebhookVerdict::Delivered,
        WebhookResponse::Answered { status: 410, .. } => WebhookVerdict::Gone,
        WebhookResponse::Answered { retry_after, .. } => {
            WebhookVerdict::Retry { not_before: retry_after.map(|d| d.min(MAX_RETRY_AFTER)) }
        }
        WebhookResponse::Failed { .. } => WebhookVerdict::Retry { not_before: None },
    }
}

/// The log's `responseCode` and `lastError` for `response`: no error for a 2xx,
/// `HTTP 500: <first 1 KiB of body>` for other statuses, the adapter's reason for a failure.
pub fn describe_webhook_response(response: &WebhookResponse) -> (Option<u16>, Option<String>) {
    match response {
        WebhookResponse::Answered { status: status @ 200..=299, .. } => (Some(*status), None),
        WebhookResponse::Answered { status, body_prefix, .. } => {
            // The adapter already cuts the body; cut again so a careless adapter cannot
            // bloat the log.
            let body = truncate_at_char(body_prefix, MAX_BODY_PREFIX).trim();
            let text = if body.is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {body}") };
            (Some(*status), Some(text))
        }
        WebhookResponse::Failed { reason } => (None, Some(truncate_at_char(reason, MAX_BODY_PREFIX).to_owned())),
    }
}

/// The body the receiver answered with, cut to [`MAX_BODY_PREFIX`]; `None` without an
/// answer or for an empty body.
pub fn response_body(response: &WebhookResponse) -> Option<String> {
    match response {
        WebhookResponse::Answered { body_prefix, .. } => {
            let body = truncate_at_char(body_prefix, MAX_BODY_PREFIX);
            (!body.trim().is_empty()).then(|| body.to_owned())
        }
        WebhookResponse::Failed { .. } => None,
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn truncate_at_char(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: u16, retry_after: Option<u64>, body: &str) -> WebhookResponse {
        WebhookResponse::Answered {
            status,
            retry_after: retry_after.map(Duration::from_secs),
            body_prefix: body.to_owned(),
        }
    }

    #[test]
    fn statuses_map_to_verdicts() {
        for status in [200, 201, 204, 299] {
            assert_eq!(classify_webhook(&answered(status, Some(9), "")), WebhookVerdict::Delivered, "{status}");
        }
        assert_eq!(classify_webhook(&answered(410, Some(9), "")), WebhookVerdict::Gone);
        for status in [100, 301, 302, 400, 404, 429, 500, 503] {
            assert_eq!(classify_webhook(&answered(status, None, "")), WebhookVerdict::Retry { not_before: None });
        }
        let failed = WebhookResponse::Failed { reason: "connection refused".into() };
        assert_eq!(classify_webhook(&failed), WebhookVerdict::Retry { not_before: None });
    }

    #[test]
    fn retry_after_is_kept_up_to_a_day() {
        let short = classify_webhook(&answered(429, Some(120), ""));
        assert_eq!(short, WebhookVerdict::Retry { not_before: Some(Duration::from_secs(120)) });
        let long = classify_webhook(&answered(503, Some(7 * 86_400), ""));
        assert_eq!(long, WebhookVerdict::Retry { not_before: Some(MAX_RETRY_AFTER) });
    }

    #[test]
    fn the_log_shows_status_and_the_first_kib_of_body() {
        assert_eq!(describe_webhook_response(&answered(204, None, "ok")), (Some(204), None));
        assert_eq!(
            describe_webhook_response(&answered(500, None, " oops\n")),
            (Some(500), Some("HTTP 500: oops".into()))
        );
        assert_eq!(describe_webhook_response(&answered(502, None, "")), (Some(502), Some("HTTP 502".into())));
        let (_, long) = describe_webhook_response(&answered(500, None, &"é".repeat(1_000)));
        assert_eq!(long.unwrap(), format!("HTTP 500: {}", "é".repeat(512)));
        let failed = WebhookResponse::Failed { reason: "timeout after 10s".into() };
        assert_eq!(describe_webhook_response(&failed), (None, Some("timeout after 10s".into())));
    }
}
