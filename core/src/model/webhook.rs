//! Webhook endpoints and the log of deliveries to them (docs/api.md#webhooks).

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{DeliveryId, EventId, MessageId, WebhookId, WorkspaceId};
use crate::model::EventType;
use crate::ports::Random;
use crate::secret::Secret;

pub use crate::net_policy::WebhookUrl;

/// What an endpoint can subscribe to: every message event type, plus `Test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WebhookEventType {
    /// The test event of `POST /v1/webhooks/{id}/test` (always delivered to that endpoint).
    Test,
    /// A message event.
    #[serde(untagged)]
    Message(EventType),
}

impl WebhookEventType {
    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message(t) => t.as_str(),
            Self::Test => "Test",
        }
    }

    /// Parses the API name.
    pub fn parse(text: &str) -> Option<Self> {
        if text == "Test" {
            return Some(Self::Test);
        }
        EventType::ALL.into_iter().find(|t| t.as_str() == text).map(Self::Message)
    }
}

/// A signing secret: `whsec_` + base64 of 32 random bytes. The HMAC key is the decoded bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookSecret(Secret<String>);

impl WebhookSecret {
    /// A fresh secret.
    pub fn generate(random: &dyn Random) -> Self {
        use base64::Engine as _;
        let mut bytes = [0u8; 32];
        random.fill(&mut bytes);
        Self(Secret::new(format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))))
    }

    /// The `whsec_…` text, for the responses that show it.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// The secret itself, for sealing it in place ([`crate::sealing`]).
    pub(crate) fn secret_mut(&mut self) -> &mut Secret<String> {
        &mut self.0
    }

    /// The HMAC key bytes.
    pub fn key_bytes(&self) -> Vec<u8> {
        use base64::Engine as _;
        let b64 = self.0.expose().strip_prefix("whsec_").unwrap_or(self.0.expose());
        base64::engine::general_purpose::STANDARD.decode(b64).unwrap_or_default()
    }
}

/// A webhook endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookEndpoint {
    /// Id.
    pub id: WebhookId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// Receiving URL.
    pub url: WebhookUrl,
    /// Subscribed event types (non-empty).
    pub event_types: Vec<WebhookEventType>,
    /// Disabled endpoints get no deliveries.
    pub enabled: bool,
    /// Current signing secret.
    pub secret: WebhookSecret,
    /// The secret before the last rotation and when it stops signing.
    pub previous_secret: Option<(WebhookSecret, DateTime<Utc>)>,
    /// Why the endpoint was disabled automatically (410, or failing too long), if it was.
    pub disabled_reason: Option<String>,
    /// Start of the current run of failed deliveries, if failing.
    pub failing_since: Option<DateTime<Utc>>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

impl WebhookEndpoint {
    /// Whether this endpoint wants events of `event_type`.
    pub fn wants(&self, event_type: WebhookEventType) -> bool {
        self.enabled && self.event_types.contains(&event_type)
    }
}

/// The state of one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DeliveryStatus {
    /// Not attempted yet.
    Pending,
    /// Failed at least once; another attempt is due.
    Retrying,
    /// A 2xx was received.
    Delivered,
    /// Given up (schedule exhausted, endpoint disabled or deleted).
    Failed,
}

impl DeliveryStatus {
    /// Whether a `next_attempt_at` after now can only be a claim's lease: a `Pending`
    /// delivery is due from its creation, while a `Retrying` one's time is its retry time.
    /// Decides what [`WebhookStore::release_webhook_delivery_leases`] releases.
    ///
    /// [`WebhookStore::release_webhook_delivery_leases`]: crate::ports::WebhookStore::release_webhook_delivery_leases
    pub fn next_attempt_is_lease(self) -> bool {
        match self {
            Self::Pending => true,
            Self::Retrying | Self::Delivered | Self::Failed => false,
        }
    }
}

/// One event to one endpoint, with its attempts so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookDelivery {
    /// Id; also the `webhook-id` header, stable across retries.
    pub id: DeliveryId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// The endpoint.
    pub endpoint_id: WebhookId,
    /// The event delivered (a fresh id for `Test`).
    pub event_id: EventId,
    /// The message, if the event is a message event.
    pub message_id: Option<MessageId>,
    /// Event type.
    pub event_type: WebhookEventType,
    /// The JSON body, fixed when queued so every retry sends the same bytes.
    pub payload: String,
    /// Status.
    pub status: DeliveryStatus,
    /// Attempts made.
    pub attempts: u32,
    /// Last HTTP status received.
    pub response_code: Option<u16>,
    /// Last error (timeout, connection refused, `HTTP 500: <first 1 KiB>`...).
    pub last_error: Option<String>,
    /// The first 1 KiB of the last answer's body, a 2xx's too (what the receiver said, for
    /// the dashboard); `None` before an answer, for an empty body, and in records written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_body: Option<String>,
    /// When the next attempt is due; `None` when finished. The stores index this.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
