//! The key layout: every record and index lives in one sled tree, told apart by a leading
//! tag byte.
//!
//! One tree, because sled's `Tree::apply_batch` is crash-atomic only within a tree, and an
//! atomic batch under our writer lock (see `db.rs`) is how every multi-record write is done.
//!
//! Workspace-scoped keys are `tag ‖ workspace id ‖ ...`, so a read with another workspace's
//! id simply finds nothing. A few keys are global by nature and documented as such: the
//! workspaces themselves, the key hash index (authentication happens before the workspace is
//! known), the due-time queues, the idempotency expiry index and the inbound receipt-time
//! index that workers walk across workspaces (their entries name the workspace after the
//! time), the store's secrets, and the redo record.
//!
//! Ids are the 16 big-endian ULID bytes (byte order = creation order), times are
//! sign-flipped big-endian microseconds (byte order = time order), variable-length text that
//! is followed by more key parts carries a two-byte length prefix so one value can never be a
//! prefix of another.

use chrono::{DateTime, Utc};
use tidings_core::ids::{
    ApiKeyId, DeliveryId, DomainId, EventId, InboundMessageId, InboundRouteId, MessageId, WebhookId, WorkspaceId,
};
use tidings_core::model::{KeyHash, MessageStatus, RouteMatch, SuppressionReason};
use tidings_core::secret::SecretName;

/// The pending multi-key write (redo record, see `db.rs`): `INTENT` → encoded operations.
pub const INTENT: u8 = 0x00;
/// Workspace record: `WS ‖ ws` → `Workspace`.
pub const WORKSPACE: u8 = 0x01;
/// API key record: `KEY ‖ ws ‖ key` → `ApiKey`.
pub const API_KEY: u8 = 0x02;
/// Global key hash index: `KEY_HASH ‖ sha256` → `ws ‖ key`.
pub const API_KEY_HASH: u8 = 0x03;
/// Unrevoked keys, for listing: `KEY_ACTIVE ‖ ws ‖ key` → ``.
pub const API_KEY_ACTIVE: u8 = 0x04;
/// Message record: `MSG ‖ ws ‖ msg` → `Message` without its content (see `content.rs`).
pub const MESSAGE: u8 = 0x10;
/// Timeline: `EVT ‖ ws ‖ msg ‖ event` → `MessageEvent`.
pub const EVENT: u8 = 0x11;
/// Messages by status: `MSG_STATUS ‖ ws ‖ status ‖ msg` → ``.
pub const MESSAGE_BY_STATUS: u8 = 0x12;
/// Messages by normalized recipient: `MSG_TO ‖ ws ‖ len ‖ address ‖ msg` → ``.
pub const MESSAGE_BY_TO: u8 = 0x13;
/// Messages by sending key: `MSG_KEY ‖ ws ‖ key ‖ msg` → ``.
pub const MESSAGE_BY_KEY: u8 = 0x14;
/// Search trigrams: `MSG_TRIGRAM ‖ ws ‖ len ‖ trigram ‖ msg` → `` (see `search_index.rs`).
pub const MESSAGE_BY_TRIGRAM: u8 = 0x15;
/// Global delivery queue: `MSG_DUE ‖ time ‖ msg ‖ ws` → ``.
pub const MESSAGE_DUE: u8 = 0x16;
/// Global message id index: `MSG_ID ‖ msg` → ws, for `find_message` (inbound reports
/// name a message but no workspace). Built once for stores made before it (see `lib.rs`).
pub const MESSAGE_BY_ID: u8 = 0x17;
/// Messages with something for retention to purge (written since their last purge):
/// `MSG_PURGE ‖ msg` → ws, global like the id index and in id (= creation) order. Built once
/// for stores made before it (see `retention.rs`).
pub const MESSAGE_PURGE: u8 = 0x18;
/// What a message said: `MSG_CONTENT ‖ ws ‖ msg` → `MessageContent`, absent when it has
/// none or retention removed it (see `content.rs`).
pub const MESSAGE_CONTENT: u8 = 0x19;
/// The event feed (`event_feed.rs`): `EVENT_FEED ‖ ws ‖ commit (u64 BE) ‖ event` → message
/// id; the event itself is its `EVENT` key.
pub const EVENT_FEED: u8 = 0x1e;
/// Idempotency record: `IDEM ‖ ws ‖ key text` → `IdempotencyRecord`.
pub const IDEMPOTENCY: u8 = 0x20;
/// Global expiry index: `IDEM_EXP ‖ time ‖ ws ‖ key text` → ``.
pub const IDEMPOTENCY_EXPIRY: u8 = 0x21;
/// Domain record: `DOM ‖ ws ‖ domain` → `Domain`.
pub const DOMAIN: u8 = 0x30;
/// Domain by name: `DOM_NAME ‖ ws ‖ name` → domain id.
pub const DOMAIN_BY_NAME: u8 = 0x31;
/// Sender record: `SND ‖ ws ‖ domain ‖ sender` → `Sender`.
pub const SENDER: u8 = 0x32;
/// Sender by lower-cased username: `SND_NAME ‖ ws ‖ domain ‖ username` → sender id.
pub const SENDER_BY_NAME: u8 = 0x33;
/// Template with its versions: `TPL ‖ ws ‖ template` → `Template`.
pub const TEMPLATE: u8 = 0x40;
/// Version to template: `TPL_VER ‖ ws ‖ version` → template id.
pub const TEMPLATE_VERSION: u8 = 0x41;
/// Suppression by normalized address: `SUP ‖ ws ‖ address` → `Suppression`.
pub const SUPPRESSION: u8 = 0x50;
/// Suppressions by id, for listing: `SUP_ID ‖ ws ‖ suppression` → address.
pub const SUPPRESSION_BY_ID: u8 = 0x51;
/// Suppressions by reason: `SUP_REASON ‖ ws ‖ reason ‖ suppression` → address.
pub const SUPPRESSION_BY_REASON: u8 = 0x52;
/// A secret of the store: `SECRET ‖ name` → its bytes (global: it belongs to no workspace).
pub const SECRET: u8 = 0x70;
/// Store metadata: `META ‖ name` → value (e.g. which one-time migrations are done).
pub const META: u8 = 0x7f;
/// Webhook endpoint: `WH ‖ ws ‖ endpoint` → `WebhookEndpoint`.
pub const WEBHOOK: u8 = 0x60;
/// Delivery record: `DLV ‖ ws ‖ delivery` → `WebhookDelivery`.
pub const DELIVERY: u8 = 0x61;
/// Deliveries of an endpoint: `DLV_EP ‖ ws ‖ endpoint ‖ delivery` → ``.
pub const DELIVERY_BY_ENDPOINT: u8 = 0x62;
/// Global webhook queue: `DLV_DUE ‖ time ‖ delivery ‖ ws` → endpoint id, so that a claim
/// can skip the deliveries of an endpoint over its quota without reading them (entries
/// written before the endpoint was kept here have an empty value).
pub const DELIVERY_DUE: u8 = 0x63;
/// Deliveries of a message's events: `DLV_MSG ‖ ws ‖ message ‖ delivery` → ``.
pub const DELIVERY_BY_MESSAGE: u8 = 0x64;
/// Activity counters of a workspace's sending domain in one hour:
/// `ACTIVITY ‖ ws ‖ hour ‖ domain` → the counters, 8 big-endian bytes each in the order of
/// `ActivityCounts::NAMES` (see `activity.rs`).
pub const ACTIVITY: u8 = 0x90;
/// Global hour index of the counters, for their purge: `ACTIVITY_HOUR ‖ hour ‖ ws ‖ domain`
/// → ``.
pub const ACTIVITY_HOUR: u8 = 0x91;
/// The reputation guard's standing of a workspace or one of its domains:
/// `REPUTATION ‖ ws ‖ 0x00` (the workspace) or `REPUTATION ‖ ws ‖ 0x01 ‖ domain` →
/// `ScopeReputation` (JSON), so a workspace's records are one prefix scan.
pub const REPUTATION: u8 = 0xa0;
/// Inbound route: `INBOUND_ROUTE ‖ ws ‖ route` → `InboundRoute` (JSON).
pub const INBOUND_ROUTE: u8 = 0xb0;
/// A workspace's routes by matcher, for their uniqueness:
/// `INBOUND_ROUTE_MATCH ‖ ws ‖ RouteMatch::normalized` → route id.
pub const INBOUND_ROUTE_MATCH: u8 = 0xb1;
/// Inbound message: `INBOUND_MESSAGE ‖ ws ‖ message` → `InboundMessage` (JSON), without
/// its raw bytes, so a list never reads them.
pub const INBOUND_MESSAGE: u8 = 0xb2;
/// An inbound message's raw bytes, as received: `INBOUND_RAW ‖ ws ‖ message` → bytes.
pub const INBOUND_RAW: u8 = 0xb3;
/// What a workspace's inbound mail takes: `INBOUND_USAGE ‖ ws` → messages and bytes, 8
/// big-endian bytes each (see `inbound.rs`).
pub const INBOUND_USAGE: u8 = 0xb4;
/// Global receipt-time index of inbound messages, for retention:
/// `INBOUND_RECEIVED ‖ time ‖ message ‖ ws` → the message's stored bytes (8 big-endian).
pub const INBOUND_RECEIVED: u8 = 0xb5;
/// Dashboard session: `SESSION ‖ token sha256` → `DashboardSession` (global: the cookie
/// names no workspace).
pub const SESSION: u8 = 0x80;
/// Session ids in use: `SESSION_ID ‖ session` → `` (ids are unique).
pub const SESSION_ID: u8 = 0x81;
/// Global session expiry index: `SESSION_EXP ‖ time ‖ token sha256` → ``.
pub const SESSION_EXPIRY: u8 = 0x82;

/// A key under construction: `Key::new(TAG).id(ws).id(msg).0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(pub Vec<u8>);

impl Key {
    /// A key starting with `tag`.
    pub fn new(tag: u8) -> Self {
        let mut bytes = Vec::with_capacity(64);
        bytes.push(tag);
        Self(bytes)
    }

    /// Appends 16 id bytes.
    pub fn id(mut self, bytes: [u8; 16]) -> Self {
        self.0.extend_from_slice(&bytes);
        self
    }

    /// Appends raw bytes (only as the last part, or of fixed length).
    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    /// Appends text with a two-byte length prefix, for text followed by more parts.
    pub fn text(mut self, text: &str) -> Self {
        // Addresses are at most 320 bytes and keys 256 characters; saturating keeps a
        // longer text from wrapping into another text's length.
        let len = u16::try_from(text.len()).unwrap_or(u16::MAX);
        self.0.extend_from_slice(&len.to_be_bytes());
        self.0.extend_from_slice(text.as_bytes());
        self
    }

    /// Appends a time in byte-sortable form.
    pub fn time(mut self, at: DateTime<Utc>) -> Self {
        self.0.extend_from_slice(&time_bytes(at));
        self
    }

    /// Appends one byte.
    pub fn byte(mut self, b: u8) -> Self {
        self.0.push(b);
        self
    }
}

/// Sign-flipped big-endian microseconds: unsigned byte order equals time order, also
/// before 1970.
pub fn time_bytes(at: DateTime<Utc>) -> [u8; 8] {
    (at.timestamp_micros().cast_unsigned() ^ (1 << 63)).to_be_bytes()
}

/// Reads 16 id bytes at `at`; `None` if the key is too short.
pub fn id_at(key: &[u8], at: usize) -> Option<[u8; 16]> {
    key.get(at..at + 16)?.try_into().ok()
}

/// Reads the last 16 bytes of a key as an id.
pub fn trailing_id(key: &[u8]) -> Option<[u8; 16]> {
    id_at(key, key.len().checked_sub(16)?)
}

/// The stable one-byte code of a status in index keys (never reorder: it is on disk).
pub fn status_code(status: MessageStatus) -> u8 {
    match status {
        MessageStatus::Queued => 0,
        MessageStatus::Scheduled => 1,
        MessageStatus::Sent => 2,
        MessageStatus::Deferred => 3,
        MessageStatus::Delivered => 4,
        MessageStatus::Bounced => 5,
        MessageStatus::Complained => 6,
        MessageStatus::Failed => 7,
        MessageStatus::Suppressed => 8,
        MessageStatus::Canceled => 9,
        MessageStatus::PartiallyDelivered => 10,
    }
}

/// The stable one-byte code of a suppression reason in index keys.
pub fn reason_code(reason: SuppressionReason) -> u8 {
    match reason {
        SuppressionReason::Manual => 0,
        SuppressionReason::HardBounce => 1,
        SuppressionReason::Complaint => 2,
    }
}

/// `WS ‖ ws`.
pub fn workspace(ws: WorkspaceId) -> Key {
    Key::new(WORKSPACE).id(ws.to_bytes())
}

/// `KEY ‖ ws ‖ key`.
pub fn api_key(ws: WorkspaceId, id: ApiKeyId) -> Key {
    Key::new(API_KEY).id(ws.to_bytes()).id(id.to_bytes())
}

/// `KEY_HASH ‖ hash`.
pub fn api_key_hash(hash: &KeyHash) -> Key {
    Key::new(API_KEY_HASH).raw(&hash.0)
}

/// `KEY_ACTIVE ‖ ws ‖ key`.
pub fn api_key_active(ws: WorkspaceId, id: ApiKeyId) -> Key {
    Key::new(API_KEY_ACTIVE).id(ws.to_bytes()).id(id.to_bytes())
}

/// `MSG ‖ ws ‖ msg`.
pub fn message(ws: WorkspaceId, id: MessageId) -> Key {
    Key::new(MESSAGE).id(ws.to_bytes()).id(id.to_bytes())
}

/// `MSG_CONTENT ‖ ws ‖ msg`.
pub fn message_content(ws: WorkspaceId, id: MessageId) -> Key {
    Key::new(MESSAGE_CONTENT).id(ws.to_bytes()).id(id.to_bytes())
}

/// `MSG_ID ‖ msg`.
pub fn message_by_id(id: MessageId) -> Key {
    Key::new(MESSAGE_BY_ID).id(id.to_bytes())
}

/// `META ‖ name`.
/// A message's entry in the retention index.
pub fn message_purge(id: MessageId) -> Key {
    Key::new(MESSAGE_PURGE).id(id.to_bytes())
}

/// Store metadata.
pub fn meta(name: &str) -> Key {
    Key::new(META).raw(name.as_bytes())
}

/// `SESSION ‖ token sha256`.
pub fn session(hash: &tidings_core::model::SessionTokenHash) -> Key {
    Key::new(SESSION).raw(&hash.0)
}

/// `SESSION_ID ‖ session`.
pub fn session_id(id: tidings_core::ids::SessionId) -> Key {
    Key::new(SESSION_ID).id(id.to_bytes())
}

/// `SESSION_EXP ‖ time ‖ token sha256`.
pub fn session_expiry(at: DateTime<Utc>, hash: &tidings_core::model::SessionTokenHash) -> Key {
    Key::new(SESSION_EXPIRY).time(at).raw(&hash.0)
}

/// `SECRET ‖ name`.
pub fn secret(name: SecretName) -> Key {
    Key::new(SECRET).raw(name.as_str().as_bytes())
}

/// `EVT ‖ ws ‖ msg` (prefix of a timeline).
pub fn events(ws: WorkspaceId, id: MessageId) -> Key {
    Key::new(EVENT).id(ws.to_bytes()).id(id.to_bytes())
}

/// `EVENT_FEED ‖ ws ‖ commit ‖ event`.
pub fn event_feed(ws: WorkspaceId, commit: u64, event: EventId) -> Key {
    Key::new(EVENT_FEED).id(ws.to_bytes()).raw(&commit.to_be_bytes()).id(event.to_bytes())
}

/// `MSG_DUE ‖ time ‖ msg ‖ ws`.
pub fn message_due(at: DateTime<Utc>, ws: WorkspaceId, id: MessageId) -> Key {
    Key::new(MESSAGE_DUE).time(at).id(id.to_bytes()).id(ws.to_bytes())
}

/// `IDEM ‖ ws ‖ key`.
pub fn idempotency(ws: WorkspaceId, key: &str) -> Key {
    Key::new(IDEMPOTENCY).id(ws.to_bytes()).raw(key.as_bytes())
}

/// `IDEM_EXP ‖ time ‖ ws ‖ key`.
pub fn idempotency_expiry(at: DateTime<Utc>, ws: WorkspaceId, key: &str) -> Key {
    Key::new(IDEMPOTENCY_EXPIRY).time(at).id(ws.to_bytes()).raw(key.as_bytes())
}

/// `DOM ‖ ws ‖ domain`.
pub fn domain(ws: WorkspaceId, id: DomainId) -> Key {
    Key::new(DOMAIN).id(ws.to_bytes()).id(id.to_bytes())
}

/// `ACTIVITY ‖ ws ‖ hour ‖ domain`.
pub fn activity(ws: WorkspaceId, hour: DateTime<Utc>, domain: DomainId) -> Key {
    Key::new(ACTIVITY).id(ws.to_bytes()).time(hour).id(domain.to_bytes())
}

/// `REPUTATION ‖ ws ‖ scope`.
pub fn reputation(ws: WorkspaceId, scope: tidings_core::reputation::Scope) -> Key {
    let key = Key::new(REPUTATION).id(ws.to_bytes());
    match scope {
        tidings_core::reputation::Scope::Workspace => key.byte(0),
        tidings_core::reputation::Scope::Domain(id) => key.byte(1).id(id.to_bytes()),
    }
}

/// `INBOUND_ROUTE ‖ ws ‖ route`.
pub fn inbound_route(ws: WorkspaceId, id: InboundRouteId) -> Key {
    Key::new(INBOUND_ROUTE).id(ws.to_bytes()).id(id.to_bytes())
}

/// `INBOUND_ROUTE_MATCH ‖ ws ‖ normalized matcher`.
pub fn inbound_route_match(ws: WorkspaceId, matcher: &RouteMatch) -> Key {
    Key::new(INBOUND_ROUTE_MATCH).id(ws.to_bytes()).raw(matcher.normalized().as_bytes())
}

/// `INBOUND_MESSAGE ‖ ws ‖ message`.
pub fn inbound_message(ws: WorkspaceId, id: InboundMessageId) -> Key {
    Key::new(INBOUND_MESSAGE).id(ws.to_bytes()).id(id.to_bytes())
}

/// `INBOUND_RAW ‖ ws ‖ message`.
pub fn inbound_raw(ws: WorkspaceId, id: InboundMessageId) -> Key {
    Key::new(INBOUND_RAW).id(ws.to_bytes()).id(id.to_bytes())
}

/// `INBOUND_USAGE ‖ ws`.
pub fn inbound_usage(ws: WorkspaceId) -> Key {
    Key::new(INBOUND_USAGE).id(ws.to_bytes())
}

/// `INBOUND_RECEIVED ‖ time ‖ message ‖ ws`.
pub fn inbound_received(at: DateTime<Utc>, id: InboundMessageId, ws: WorkspaceId) -> Key {
    Key::new(INBOUND_RECEIVED).time(at).id(id.to_bytes()).id(ws.to_bytes())
}

/// `ACTIVITY_HOUR ‖ hour ‖ ws ‖ domain`.
pub fn activity_hour(hour: DateTime<Utc>, ws: WorkspaceId, domain: DomainId) -> Key {
    Key::new(ACTIVITY_HOUR).time(hour).id(ws.to_bytes()).id(domain.to_bytes())
}

/// `DLV ‖ ws ‖ delivery`.
pub fn delivery(ws: WorkspaceId, id: DeliveryId) -> Key {
    Key::new(DELIVERY).id(ws.to_bytes()).id(id.to_bytes())
}

/// `DLV_EP ‖ ws ‖ endpoint ‖ delivery`.
pub fn delivery_by_endpoint(ws: WorkspaceId, endpoint: WebhookId, id: DeliveryId) -> Key {
    Key::new(DELIVERY_BY_ENDPOINT).id(ws.to_bytes()).id(endpoint.to_bytes()).id(id.to_bytes())
}

/// `DLV_MSG ‖ ws ‖ message ‖ delivery`.
pub fn delivery_by_message(ws: WorkspaceId, message: MessageId, id: DeliveryId) -> Key {
    Key::new(DELIVERY_BY_MESSAGE).id(ws.to_bytes()).id(message.to_bytes()).id(id.to_bytes())
}

/// `DLV_DUE ‖ time ‖ delivery ‖ ws` (its value is the endpoint id).
pub fn delivery_due(at: DateTime<Utc>, ws: WorkspaceId, id: DeliveryId) -> Key {
    Key::new(DELIVERY_DUE).time(at).id(id.to_bytes()).id(ws.to_bytes())
}

/// `WH ‖ ws ‖ endpoint`.
pub fn webhook(ws: WorkspaceId, id: WebhookId) -> Key {
    Key::new(WEBHOOK).id(ws.to_bytes()).id(id.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn time_bytes_sort_like_times_across_the_epoch() {
        let times = [
            Utc.timestamp_opt(-5_000_000_000, 0).unwrap(),
            Utc.timestamp_opt(-1, 999_999_000).unwrap(),
            Utc.timestamp_opt(0, 0).unwrap(),
            Utc.timestamp_opt(0, 1_000).unwrap(),
            Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
        ];
        for pair in times.windows(2) {
            assert!(time_bytes(pair[0]) < time_bytes(pair[1]), "{pair:?}");
        }
    }

    #[test]
    fn length_prefixed_text_never_makes_one_bucket_a_prefix_of_another() {
        let a = Key::new(MESSAGE_BY_TO).text("a@b.co").0;
        let b = Key::new(MESSAGE_BY_TO).text("a@b.com").0;
        assert!(!b.starts_with(&a));
    }
}
