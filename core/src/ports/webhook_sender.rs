//! `WebhookSender`: the port through which the webhook worker POSTs one signed request and
//! learns what happened. The adapter enforces the transport rules of docs/api.md#webhooks (a
//! 10 s timeout, no redirects, https only, and the SSRF guard at connect time); core decides
//! what the observed outcome means.

use std::time::Duration;

use async_trait::async_trait;

use crate::model::WebhookUrl;

/// Longest prefix of a response body an adapter reports, in bytes (into `lastError`).
pub const MAX_BODY_PREFIX: usize = 1_024;

/// One signed POST, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    /// Where to POST.
    pub url: WebhookUrl,
    /// The `webhook-id` header: the delivery id, the same on every retry.
    pub webhook_id: String,
    /// The `webhook-timestamp` header: unix seconds when this attempt was signed.
    pub webhook_timestamp: i64,
    /// The `webhook-signature` header: one `v1,<base64>` per signing secret, space separated.
    pub webhook_signature: String,
    /// The exact body, the JSON fixed when the delivery was queued.
    pub body: String,
}

impl WebhookRequest {
    /// Every header to send, by name, `content-type` included.
    pub fn headers(&self) -> [(&'static str, String); 4] {
        [
            ("content-type", "application/json".to_owned()),
            ("webhook-id", self.webhook_id.clone()),
            ("webhook-timestamp", self.webhook_timestamp.to_string()),
            ("webhook-signature", self.webhook_signature.clone()),
        ]
    }
}

/// What the adapter observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookResponse {
    /// The receiver answered with an HTTP status (any status: redirects are not followed, so
    /// a 3xx arrives here too).
    Answered {
        /// The status code.
        status: u16,
        /// The `Retry-After` header as a delay from now, if present and readable.
        retry_after: Option<Duration>,
        /// The first [`MAX_BODY_PREFIX`] bytes of the body, lossily decoded.
        body_prefix: String,
    },
    /// No HTTP answer: timeout, connection refused, TLS error, or the SSRF guard refused the
    /// address ("address 10.0.0.1 is not public"). `reason` is shown in the delivery log.
    Failed {
        /// Human-readable cause.
        reason: String,
    },
}

/// Sends webhook requests. Implementations never follow redirects and give up after their
/// timeout (10 s by default), reporting it as [`WebhookResponse::Failed`].
#[async_trait]
pub trait WebhookSender: Send + Sync {
    /// POSTs `request` once and reports what happened.
    async fn post(&self, request: &WebhookRequest) -> WebhookResponse;
}
