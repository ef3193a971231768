//! `WebhookSender`: the port through which the webhook worker POSTs one signed request and
//! learns what happened. The adapter enforces the transport rules of docs/api.md#webhooks (a
//! 10 s timeout, no redirects, https only, and the SSRF guard at connect time); core decides
//! what the observed outcome means.

use std::time::Duration;

use async_trait::async_trait;

use crate::model::{WebhookFormat, WebhookUrl};

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
    /// The endpoint's format, which names the signature headers.
    pub format: WebhookFormat,
}

impl WebhookRequest {
    /// Every header to send, by name, `content-type` included. The signature is the same
    /// in every format; a `resend` endpoint gets it under Svix's names (`svix-id`,
    /// `svix-timestamp`, `svix-signature`), which Resend's SDK and the svix library read,
    /// the others under Standard Webhooks' (`webhook-*`).
    pub fn headers(&self) -> [(&'static str, String); 4] {
        let [id, timestamp, signature] = match self.format {
            WebhookFormat::Resend => ["svix-id", "svix-timestamp", "svix-signature"],
            WebhookFormat::Tidings | WebhookFormat::Postmark => {
                ["webhook-id", "webhook-timestamp", "webhook-signature"]
            }
        };
        [
            ("content-type", "application/json".to_owned()),
            (id, self.webhook_id.clone()),
            (timestamp, self.webhook_timestamp.to_string()),
            (signature, self.webhook_signature.clone()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resend_endpoints_get_the_signature_under_svix_names_the_others_under_standard_webhooks() {
        let request = |format| WebhookRequest {
            url: WebhookUrl::parse("https://hooks.example.com/", false).unwrap(),
            webhook_id: "msg_1".into(),
            webhook_timestamp: 1_700_000_000,
            webhook_signature: "v1,abc=".into(),
            body: "{}".into(),
            format,
        };
        let names = |format| request(format).headers().map(|(name, _)| name);
        assert_eq!(names(WebhookFormat::Resend), ["content-type", "svix-id", "svix-timestamp", "svix-signature"]);
        for format in [WebhookFormat::Tidings, WebhookFormat::Postmark] {
            assert_eq!(names(format), ["content-type", "webhook-id", "webhook-timestamp", "webhook-signature"]);
        }
        let values = request(WebhookFormat::Resend).headers().map(|(_, value)| value);
        assert_eq!(values, ["application/json", "msg_1", "1700000000", "v1,abc="]);
    }
}
