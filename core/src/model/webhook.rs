//! Webhook endpoints and the log of deliveries to them (docs/api.md#webhooks).

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{DeliveryId, EventId, MessageId, WebhookId, WorkspaceId};
use crate::model::EventType;
use crate::random::Random;
use crate::secret::Secret;

pub use crate::net_policy::WebhookUrl;

/// What an endpoint can subscribe to: every message event type, `Test`, the reputation
/// guard's events about a workspace or domain (contract §12), and inbound mail (§13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WebhookEventType {
    /// The test event of `POST /v1/webhooks/{id}/test` (always delivered to that endpoint).
    Test,
    /// A bounce or complaint rate reached its warning threshold (contract §12).
    ReputationWarning,
    /// A bounce or complaint rate reached its pause threshold: sending is paused.
    SendingPaused,
    /// A message arrived for one of the workspace's inbound domains (contract §13).
    InboundReceived,
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
            Self::ReputationWarning => "ReputationWarning",
            Self::SendingPaused => "SendingPaused",
            Self::InboundReceived => "InboundReceived",
        }
    }

    /// Parses the API name.
    pub fn parse(text: &str) -> Option<Self> {
        for special in [Self::Test, Self::ReputationWarning, Self::SendingPaused, Self::InboundReceived] {
            if text == special.as_str() {
                return Some(special);
            }
        }
        EventType::ALL.into_iter().find(|t| t.as_str() == text).map(Self::Message)
    }
}

/// The shape of the requests an endpoint receives (docs/api.md#webhook-formats): Tidings'
/// own (Standard Webhooks), or what Resend's or Postmark's webhook handlers already parse, so
/// an application that switched provider keeps its handlers. Records written before formats
/// existed read as [`WebhookFormat::Tidings`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookFormat {
    /// `{type, createdAt, data}` with `webhook-*` Standard Webhooks headers.
    #[default]
    Tidings,
    /// Resend's `{type, created_at, data}` with `svix-*` headers (the same HMAC scheme).
    Resend,
    /// Postmark's `RecordType` objects; signed with `webhook-*` headers besides, which
    /// Postmark's receivers ignore.
    Postmark,
}

impl WebhookFormat {
    /// Every format.
    pub const ALL: [Self; 3] = [Self::Tidings, Self::Resend, Self::Postmark];

    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tidings => "tidings",
            Self::Resend => "resend",
            Self::Postmark => "postmark",
        }
    }

    /// Parses the API name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == text)
    }

    /// What this format calls a message event of type `event_type`, or `None` when it has no
    /// equivalent: such events are not sent to endpoints in this format. The one mapping
    /// the payload renderers, the fan-out and docs/api.md's table follow.
    pub fn event_name(self, event_type: EventType) -> Option<&'static str> {
        use EventType as E;
        match self {
            Self::Tidings => Some(event_type.as_str()),
            Self::Resend => match event_type {
                E::Sent => Some("email.sent"),
                E::Scheduled => Some("email.scheduled"),
                E::Delivered => Some("email.delivered"),
                E::Deferred => Some("email.delivery_delayed"),
                E::Bounced => Some("email.bounced"),
                E::Complained => Some("email.complained"),
                E::Opened => Some("email.opened"),
                E::Clicked => Some("email.clicked"),
                E::Failed => Some("email.failed"),
                E::Suppressed => Some("email.suppressed"),
                E::Queued | E::Canceled => None,
            },
            Self::Postmark => match event_type {
                E::Delivered => Some("Delivery"),
                E::Bounced => Some("Bounce"),
                E::Complained => Some("SpamComplaint"),
                E::Opened => Some("Open"),
                E::Clicked => Some("Click"),
                E::Queued | E::Sent | E::Scheduled | E::Deferred | E::Failed | E::Suppressed | E::Canceled => None,
            },
        }
    }

    /// Whether endpoints in this format are sent events of `event_type` (a `Test` always is).
    pub fn carries(self, event_type: WebhookEventType) -> bool {
        match event_type {
            WebhookEventType::Test => true,
            // Resend and Postmark have no equivalent: only Tidings' own format carries them.
            WebhookEventType::ReputationWarning | WebhookEventType::SendingPaused => self == Self::Tidings,
            // Resend's `email.received`, Postmark's inbound webhook.
            WebhookEventType::InboundReceived => true,
            WebhookEventType::Message(t) => self.event_name(t).is_some(),
        }
    }
}

impl fmt::Display for WebhookFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
    /// The shape of its requests; `Tidings` for records written before formats existed.
    #[serde(default)]
    pub format: WebhookFormat,
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
    /// Whether this endpoint wants events of `event_type`: enabled, subscribed, and its
    /// format has an equivalent of the event.
    pub fn wants(&self, event_type: WebhookEventType) -> bool {
        self.enabled && self.event_types.contains(&event_type) && self.format.carries(event_type)
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

impl WebhookDelivery {
    /// A delivery of event `event_id` (of `message_id`, for a message event) to `endpoint`,
    /// queued at `now` with its body fixed, due at once.
    pub fn queued(
        endpoint: &WebhookEndpoint,
        event: (EventId, WebhookEventType, Option<MessageId>),
        payload: String,
        now: DateTime<Utc>,
        random: &dyn Random,
    ) -> Self {
        let (event_id, event_type, message_id) = event;
        Self {
            id: DeliveryId::new_at(now, random),
            workspace_id: endpoint.workspace_id,
            endpoint_id: endpoint.id,
            event_id,
            message_id,
            event_type,
            payload,
            status: DeliveryStatus::Pending,
            attempts: 0,
            response_code: None,
            last_error: None,
            response_body: None,
            next_attempt_at: Some(now),
            created_at: now,
        }
    }
}

impl fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An enabled endpoint in `format` subscribed to every message event.
    fn endpoint(format: WebhookFormat) -> WebhookEndpoint {
        let t = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        WebhookEndpoint {
            id: WebhookId(ulid::Ulid(1)),
            workspace_id: WorkspaceId(ulid::Ulid(2)),
            url: WebhookUrl::parse("https://hooks.example.com/", false).unwrap(),
            event_types: EventType::ALL.into_iter().map(WebhookEventType::Message).collect(),
            enabled: true,
            format,
            secret: serde_json::from_value(serde_json::json!("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")).unwrap(),
            previous_secret: None,
            disabled_reason: None,
            failing_since: None,
            created_at: t,
            updated_at: t,
        }
    }

    #[test]
    fn an_endpoint_stored_before_formats_existed_reads_as_tidings() {
        let endpoint = endpoint(WebhookFormat::Resend);
        let mut stored = serde_json::to_value(&endpoint).unwrap();
        assert_eq!(stored["format"], "resend");
        stored.as_object_mut().unwrap().remove("format");
        let read: WebhookEndpoint = serde_json::from_value(stored).unwrap();
        assert_eq!(read, WebhookEndpoint { format: WebhookFormat::Tidings, ..endpoint });
    }

    #[test]
    fn an_endpoint_wants_only_events_its_format_has() {
        for format in WebhookFormat::ALL {
            let endpoint = endpoint(format);
            for t in EventType::ALL {
                let wanted = endpoint.wants(WebhookEventType::Message(t));
                assert_eq!(wanted, format.event_name(t).is_some(), "{format} {t:?}");
            }
            assert!(format.carries(WebhookEventType::Test));
        }
        assert!(!endpoint(WebhookFormat::Postmark).wants(WebhookEventType::Message(EventType::Queued)));
        let disabled = WebhookEndpoint { enabled: false, ..endpoint(WebhookFormat::Tidings) };
        assert!(!disabled.wants(WebhookEventType::Message(EventType::Delivered)));
    }
}
