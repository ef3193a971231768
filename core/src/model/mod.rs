//! The domain model of the API (docs/api.md): plain data, validated at construction by the
//! use cases, persisted by `Store` implementations.

mod api_key;
mod connection_tls;
mod domain;
pub mod extras;
mod idempotency;
mod inbound;
mod inbound_auth;
mod inbound_parsed;
mod message;
pub mod recipients;
mod sender;
mod session;
mod suppression;
mod template;
mod tracked_url;
pub mod tracking_tally;
mod webhook;
mod workspace;

pub use api_key::{ApiKey, ApiKeyPlaintext, KeyHash, KeyScope, RateLimit};
pub use connection_tls::{CertificateCheck, ConnectionTls, TlsVersion};
pub use domain::{
    DkimKeyState, DkimKeys, DkimRotation, DnsRecord, Domain, DomainKind, DomainStatus, RecordKind, RecordStatus,
    RetiredDkimKeys, RetiringDkimKeys,
};
pub use extras::MessageExtras;
pub use idempotency::{
    BatchItemRecord, IdempotencyKey, IdempotencyKeyError, IdempotencyRecord, RequestHash, StoredError,
};
pub use inbound::{InboundEnvelope, InboundMessage, InboundRoute, RouteAction, RouteMatch};
pub use inbound_auth::{AuthCheck, AuthOutcome, AuthResults};
pub use inbound_parsed::{AttachmentMeta, InboundHeader, InboundMailbox, ParsedInbound, Truncation};
pub use message::{BounceType, EventDetails, EventType, Message, MessageEvent, MessageStatus};
pub use message::{MessageContent, MessageTracking};
pub use recipients::{MAX_RECIPIENTS, Recipient, RecipientKind, WrittenHeaders};
pub use sender::{Sender, SenderUsername};
pub(crate) use session::new_csrf_token;
pub use session::{DashboardSession, SessionToken, SessionTokenHash};
pub use suppression::{Suppression, SuppressionReason, SuppressionSource};
pub use template::{Template, TemplateVersion};
pub use tracked_url::{MAX_TRACKED_URL_BYTES, TrackedUrl};
pub use tracking_tally::{Engagement, TrackingTally};
pub use webhook::{
    DeliveryStatus, WebhookDelivery, WebhookEndpoint, WebhookEventType, WebhookFormat, WebhookSecret, WebhookUrl,
};
pub use workspace::Workspace;
