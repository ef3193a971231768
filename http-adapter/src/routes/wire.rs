//! The wire types several resources share: ids, and the API's enumerations. Each
//! enumeration serialises as the names the API fixes (docs/api.md) and is mapped from core's enum by
//! an exhaustive match, so that a variant added in core cannot reach the wire unnamed, and a
//! rename inside core cannot silently change the API. The OpenAPI document takes its
//! `enum` lists from these types, and their doc comments as descriptions.

use std::fmt::Display;

use serde::Serialize;
use tidings_core::model;
use utoipa::ToSchema;

/// a 26-character ULID, sortable by creation time
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(transparent)]
#[schema(pattern = "^[0-9A-HJKMNP-TV-Z]{26}$")]
pub struct Ulid(String);

impl Ulid {
    /// The id as the API writes it.
    pub fn of(id: impl Display) -> Self {
        Self(id.to_string())
    }
}

/// `full` may do everything; `send` may send and read its own messages
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum KeyScope {
    Full,
    Send,
}

impl From<model::KeyScope> for KeyScope {
    fn from(s: model::KeyScope) -> Self {
        match s {
            model::KeyScope::Full => Self::Full,
            model::KeyScope::Send => Self::Send,
        }
    }
}

/// where a message is in its life
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum MessageStatus {
    Queued,
    Scheduled,
    Sent,
    Deferred,
    Delivered,
    Bounced,
    Complained,
    Failed,
    Suppressed,
    Canceled,
    PartiallyDelivered,
}

impl From<model::MessageStatus> for MessageStatus {
    fn from(s: model::MessageStatus) -> Self {
        use model::MessageStatus as S;
        match s {
            S::Queued => Self::Queued,
            S::Scheduled => Self::Scheduled,
            S::Sent => Self::Sent,
            S::Deferred => Self::Deferred,
            S::Delivered => Self::Delivered,
            S::Bounced => Self::Bounced,
            S::Complained => Self::Complained,
            S::Failed => Self::Failed,
            S::Suppressed => Self::Suppressed,
            S::Canceled => Self::Canceled,
            S::PartiallyDelivered => Self::PartiallyDelivered,
        }
    }
}

/// type of a timeline event
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum EventType {
    Queued,
    Sent,
    Delivered,
    Deferred,
    Bounced,
    Complained,
    Opened,
    Clicked,
    Failed,
    Suppressed,
    Scheduled,
    Canceled,
}

impl From<model::EventType> for EventType {
    fn from(t: model::EventType) -> Self {
        use model::EventType as T;
        match t {
            T::Queued => Self::Queued,
            T::Sent => Self::Sent,
            T::Delivered => Self::Delivered,
            T::Deferred => Self::Deferred,
            T::Bounced => Self::Bounced,
            T::Complained => Self::Complained,
            T::Opened => Self::Opened,
            T::Clicked => Self::Clicked,
            T::Failed => Self::Failed,
            T::Suppressed => Self::Suppressed,
            T::Scheduled => Self::Scheduled,
            T::Canceled => Self::Canceled,
        }
    }
}

/// what a webhook endpoint can subscribe to: `Test`, a message event type, or the reputation
/// guard's `ReputationWarning` and `SendingPaused` (tidings format only), or `InboundReceived`
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum WebhookEventType {
    Test,
    ReputationWarning,
    SendingPaused,
    InboundReceived,
    Queued,
    Sent,
    Delivered,
    Deferred,
    Bounced,
    Complained,
    Opened,
    Clicked,
    Failed,
    Suppressed,
    Scheduled,
    Canceled,
}

impl From<model::WebhookEventType> for WebhookEventType {
    fn from(t: model::WebhookEventType) -> Self {
        use model::EventType as T;
        match t {
            model::WebhookEventType::Test => Self::Test,
            model::WebhookEventType::ReputationWarning => Self::ReputationWarning,
            model::WebhookEventType::SendingPaused => Self::SendingPaused,
            model::WebhookEventType::InboundReceived => Self::InboundReceived,
            model::WebhookEventType::Message(t) => match t {
                T::Queued => Self::Queued,
                T::Sent => Self::Sent,
                T::Delivered => Self::Delivered,
                T::Deferred => Self::Deferred,
                T::Bounced => Self::Bounced,
                T::Complained => Self::Complained,
                T::Opened => Self::Opened,
                T::Clicked => Self::Clicked,
                T::Failed => Self::Failed,
                T::Suppressed => Self::Suppressed,
                T::Scheduled => Self::Scheduled,
                T::Canceled => Self::Canceled,
            },
        }
    }
}

/// Hard suppresses the address, Soft does not
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum BounceType {
    Hard,
    Soft,
}

impl From<model::BounceType> for BounceType {
    fn from(t: model::BounceType) -> Self {
        match t {
            model::BounceType::Hard => Self::Hard,
            model::BounceType::Soft => Self::Soft,
        }
    }
}

/// how the SMTP connection that carried the message was secured; `certificate`,
/// `certificateError` and `tlsVersion` only with TLS
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = ConnectionTls)]
pub struct ConnectionTls {
    /// true when the connection had no TLS (the server offered no STARTTLS, or its TLS
    /// handshake failed and opportunistic TLS went on in plaintext)
    plaintext: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    certificate: Option<CertificateCheck>,
    /// why the certificate is `invalid`
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    certificate_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    tls_version: Option<TlsVersion>,
}

/// the TLS protocol version the server chose, named as OpenSSL names it; known when the
/// connection was secured with STARTTLS, absent with TLS from the first byte (a relay on
/// `smtps://`) and in events recorded before versions were kept
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum TlsVersion {
    #[serde(rename = "TLSv1")]
    Tls1_0,
    #[serde(rename = "TLSv1.1")]
    Tls1_1,
    #[serde(rename = "TLSv1.2")]
    Tls1_2,
    #[serde(rename = "TLSv1.3")]
    Tls1_3,
}

impl From<model::TlsVersion> for TlsVersion {
    fn from(version: model::TlsVersion) -> Self {
        match version {
            model::TlsVersion::Tls1_0 => Self::Tls1_0,
            model::TlsVersion::Tls1_1 => Self::Tls1_1,
            model::TlsVersion::Tls1_2 => Self::Tls1_2,
            model::TlsVersion::Tls1_3 => Self::Tls1_3,
        }
    }
}

/// what was checked of the server's certificate: `verified` (valid for the server's name,
/// from a trusted CA), `unverified` (opportunistic TLS between mail servers, not checked),
/// `invalid` (checked and found wanting; used, since nothing required TLS)
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CertificateCheck {
    Verified,
    Unverified,
    Invalid,
}

impl From<model::ConnectionTls> for ConnectionTls {
    fn from(tls: model::ConnectionTls) -> Self {
        use model::CertificateCheck as C;
        let (certificate, version) = match tls {
            model::ConnectionTls::Plaintext => {
                return Self { plaintext: true, certificate: None, certificate_error: None, tls_version: None };
            }
            model::ConnectionTls::Tls { certificate, version } => (certificate, version),
        };
        let (certificate, certificate_error) = match certificate {
            C::Verified => (CertificateCheck::Verified, None),
            C::NotVerified => (CertificateCheck::Unverified, None),
            C::Invalid(reason) => (CertificateCheck::Invalid, Some(reason)),
        };
        let tls_version = version.map(TlsVersion::from);
        Self { plaintext: false, certificate: Some(certificate), certificate_error, tls_version }
    }
}

/// overall verification status
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum DomainStatus {
    Pending,
    Verified,
    PartiallyVerified,
    Failed,
}

impl From<model::DomainStatus> for DomainStatus {
    fn from(s: model::DomainStatus) -> Self {
        match s {
            model::DomainStatus::Pending => Self::Pending,
            model::DomainStatus::Verified => Self::Verified,
            model::DomainStatus::PartiallyVerified => Self::PartiallyVerified,
            model::DomainStatus::Failed => Self::Failed,
        }
    }
}

/// verification status of one DNS record
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum RecordStatus {
    Pending,
    Verified,
    Failed,
}

impl From<model::RecordStatus> for RecordStatus {
    fn from(s: model::RecordStatus) -> Self {
        match s {
            model::RecordStatus::Pending => Self::Pending,
            model::RecordStatus::Verified => Self::Verified,
            model::RecordStatus::Failed => Self::Failed,
        }
    }
}

/// where a DKIM record's key pair is in its life: `Active` signs; `Pending` waits for its records
/// to verify, then signs; `Retiring` no longer signs but must stay published until `retiresAt`;
/// `Retired` has its private keys deleted and is safe to remove from DNS
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum DkimKeyState {
    Active,
    Pending,
    Retiring,
    Retired,
}

impl From<model::DkimKeyState> for DkimKeyState {
    fn from(s: model::DkimKeyState) -> Self {
        match s {
            model::DkimKeyState::Active => Self::Active,
            model::DkimKeyState::Pending => Self::Pending,
            model::DkimKeyState::Retiring => Self::Retiring,
            model::DkimKeyState::Retired => Self::Retired,
        }
    }
}

/// why an address is suppressed
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum SuppressionReason {
    Manual,
    HardBounce,
    Complaint,
}

impl From<model::SuppressionReason> for SuppressionReason {
    fn from(r: model::SuppressionReason) -> Self {
        match r {
            model::SuppressionReason::Manual => Self::Manual,
            model::SuppressionReason::HardBounce => Self::HardBounce,
            model::SuppressionReason::Complaint => Self::Complaint,
        }
    }
}

/// where the entry came from
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SuppressionSource {
    Api,
    Bounce,
    Complaint,
}

impl From<model::SuppressionSource> for SuppressionSource {
    fn from(s: model::SuppressionSource) -> Self {
        match s {
            model::SuppressionSource::Api => Self::Api,
            model::SuppressionSource::Bounce => Self::Bounce,
            model::SuppressionSource::Complaint => Self::Complaint,
        }
    }
}

/// status of a webhook delivery
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum DeliveryStatus {
    Pending,
    Retrying,
    Delivered,
    Failed,
}

impl From<model::DeliveryStatus> for DeliveryStatus {
    fn from(s: model::DeliveryStatus) -> Self {
        match s {
            model::DeliveryStatus::Pending => Self::Pending,
            model::DeliveryStatus::Retrying => Self::Retrying,
            model::DeliveryStatus::Delivered => Self::Delivered,
            model::DeliveryStatus::Failed => Self::Failed,
        }
    }
}

/// the shape of an endpoint's requests: `tidings` (Standard Webhooks), `resend` (Resend's
/// events, `svix-*` signature) or `postmark` (Postmark's `RecordType` payloads); see
/// docs/api.md#webhook-formats
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WebhookFormat {
    Tidings,
    Resend,
    Postmark,
}

impl From<model::WebhookFormat> for WebhookFormat {
    fn from(f: model::WebhookFormat) -> Self {
        match f {
            model::WebhookFormat::Tidings => Self::Tidings,
            model::WebhookFormat::Resend => Self::Resend,
            model::WebhookFormat::Postmark => Self::Postmark,
        }
    }
}

#[cfg(test)]
mod tests {
    use tidings_core::model::{EventType as CoreEvent, MessageStatus as CoreStatus, WebhookEventType as CoreHook};

    use super::*;

    fn wire(value: impl Serialize) -> String {
        serde_json::to_value(value).unwrap().as_str().unwrap().to_owned()
    }

    #[test]
    fn the_wire_names_are_the_names_core_parses() {
        for s in CoreStatus::ALL {
            assert_eq!(wire(MessageStatus::from(s)), s.as_str());
        }
        for t in CoreEvent::ALL {
            assert_eq!(wire(EventType::from(t)), t.as_str());
            assert_eq!(wire(WebhookEventType::from(CoreHook::Message(t))), t.as_str());
        }
        assert_eq!(wire(WebhookEventType::from(CoreHook::Test)), CoreHook::Test.as_str());
        for f in model::WebhookFormat::ALL {
            assert_eq!(wire(WebhookFormat::from(f)), f.as_str());
        }
        for r in [
            model::SuppressionReason::Manual,
            model::SuppressionReason::HardBounce,
            model::SuppressionReason::Complaint,
        ] {
            assert_eq!(wire(SuppressionReason::from(r)), r.as_str());
        }
    }

    #[test]
    fn the_api_shows_connection_tls_as_webhooks_do() {
        use tidings_core::model::{CertificateCheck as Check, ConnectionTls as Tls, TlsVersion as V};
        // Webhook payloads serialize core's own form; the API's must be the same JSON.
        let tls = |certificate, version| Tls::Tls { certificate, version };
        for tls in [
            Tls::Plaintext,
            tls(Check::Verified, None),
            tls(Check::Verified, Some(V::Tls1_0)),
            tls(Check::NotVerified, Some(V::Tls1_1)),
            tls(Check::invalid("expired"), Some(V::Tls1_2)),
            tls(Check::Verified, Some(V::Tls1_3)),
        ] {
            let core = serde_json::to_value(&tls).unwrap();
            assert_eq!(serde_json::to_value(ConnectionTls::from(tls)).unwrap(), core);
        }
    }
}
