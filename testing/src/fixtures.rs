//! Builders of valid model values, so a test states only what it is about.
//!
//! Every id comes from [`ulid`]: unique and strictly increasing in creation order across all
//! threads of the process, so "newest first" is "last built first". Times are whole
//! milliseconds (what ULIDs and most databases keep), so values round-trip exactly through
//! any store. Nothing here generates real keys: DKIM keys are dummy bytes.

use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Duration, Utc};
use ulid::Ulid;

use tidings_core::activity::ActivityDelta;
use tidings_core::domain_name::DomainName;
use tidings_core::email::{DisplayName, EmailAddress, Mailbox};
use tidings_core::ids::{
    ApiKeyId, DeliveryId, DomainId, EventId, MessageId, SenderId, SuppressionId, TemplateId, TemplateVersionId,
    WebhookId, WorkspaceId,
};
use tidings_core::model::{
    ApiKey, ApiKeyPlaintext, DeliveryStatus, DkimKeys, DnsRecord, Domain, DomainKind, DomainStatus, EventDetails,
    EventType, IdempotencyKey, IdempotencyRecord, KeyScope, Message, MessageEvent, MessageStatus, RateLimit, Recipient,
    RecipientKind, RecordKind, RecordStatus, RequestHash, Sender, SenderUsername, Suppression, SuppressionReason,
    SuppressionSource, Template, TemplateVersion, WebhookDelivery, WebhookEndpoint, WebhookEventType, WebhookFormat,
    WebhookSecret, WebhookUrl, Workspace,
};
use tidings_core::ports::{EventWrite, NewMessage, NewTemplateVersion, SystemRandom};
use tidings_core::sealing::{Sealer, SealingKey};
use tidings_core::secret::Secret;
use tidings_core::state_machine::{Happening, apply_event, apply_recipient_event};

/// The sealing key of [`sealer`]: fixed, so that a store reopened in a test opens.
pub const SEALING_KEY: [u8; 32] = [0x5e; 32];

/// A sealer with [`SEALING_KEY`], for stores opened in tests.
pub fn sealer() -> Sealer {
    Sealer::new(&sealing_key(SEALING_KEY))
}

/// The key of `bytes`.
pub fn sealing_key(bytes: [u8; 32]) -> SealingKey {
    use base64::Engine as _;
    SealingKey::from_base64(&base64::engine::general_purpose::STANDARD.encode(bytes))
        .unwrap_or_else(|e| panic!("a 32-byte key: {e}"))
}

static LAST_ULID: Mutex<Ulid> = Mutex::new(Ulid::nil());

/// A fresh ULID, greater than every one this function returned before (in any thread).
pub fn ulid() -> Ulid {
    let mut last = LAST_ULID.lock().unwrap_or_else(PoisonError::into_inner);
    let fresh = Ulid::new();
    let next = if fresh > *last {
        fresh
    } else {
        // Same millisecond (or the clock stepped back): count up from the last one.
        #[allow(clippy::expect_used)]
        last.increment().expect("ULID random bits exhausted within one millisecond")
    };
    *last = next;
    next
}

/// The current time, truncated to whole milliseconds.
pub fn now() -> DateTime<Utc> {
    millis(Utc::now())
}

/// `at` truncated to whole milliseconds.
pub fn millis(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

/// Parses an address known to be valid; panics otherwise.
pub fn email(text: &str) -> EmailAddress {
    EmailAddress::parse(text).unwrap_or_else(|e| panic!("fixture address {text:?}: {e}"))
}

/// Parses a domain name known to be valid; panics otherwise.
pub fn domain_name(text: &str) -> DomainName {
    DomainName::parse(text).unwrap_or_else(|e| panic!("fixture domain {text:?}: {e}"))
}

/// Parses an idempotency key known to be valid; panics otherwise.
pub fn idempotency_key(text: &str) -> IdempotencyKey {
    IdempotencyKey::parse(text).unwrap_or_else(|e| panic!("fixture idempotency key {text:?}: {e}"))
}

/// Parses a sender username known to be valid; panics otherwise.
pub fn username(text: &str) -> SenderUsername {
    SenderUsername::parse(text).unwrap_or_else(|e| panic!("fixture username {text:?}: {e}"))
}

/// A workspace created now.
pub fn workspace() -> Workspace {
    let id = WorkspaceId(ulid());
    Workspace { id, name: format!("workspace {id}"), created_at: now() }
}

/// A `full` key of `ws` with a fresh random plaintext (hence a unique hash), never used.
pub fn api_key(ws: WorkspaceId) -> ApiKey {
    let plaintext = ApiKeyPlaintext::generate(&SystemRandom);
    ApiKey {
        id: ApiKeyId(ulid()),
        workspace_id: ws,
        name: "default".to_owned(),
        prefix: plaintext.prefix(),
        key_hash: plaintext.hash(),
        scope: KeyScope::Full,
        sending_domain_id: None,
        rate_limit: RateLimit::DEFAULT,
        created_at: now(),
        last_used_at: None,
        revoked_at: None,
    }
}

/// A session of `key`, signed in now, expiring `ttl_secs` from now, with a fresh random
/// token (hence a unique hash).
pub fn session(key: &ApiKey, ttl_secs: i64) -> tidings_core::model::DashboardSession {
    let token = tidings_core::model::SessionToken::generate(&SystemRandom);
    tidings_core::model::DashboardSession {
        id: tidings_core::ids::SessionId(ulid()),
        token_hash: token.hash(),
        workspace_id: key.workspace_id,
        api_key_id: key.id,
        csrf_token: Secret::new(format!("csrf-{}", ulid())),
        created_at: now(),
        last_seen_at: now(),
        expires_at: plus_secs(now(), ttl_secs),
    }
}

/// A `Queued` message of `ws` sent with `key` from `domain` to `recipient@example.com`,
/// created now and due now.
pub fn message(ws: WorkspaceId, key: ApiKeyId, domain: DomainId) -> Message {
    let at = now();
    Message {
        id: MessageId(ulid()),
        workspace_id: ws,
        api_key_id: key,
        domain_id: domain,
        status: MessageStatus::Queued,
        to: email("recipient@example.com"),
        from: Mailbox {
            display_name: DisplayName::parse("Acme Billing").ok(),
            address: email("billing@acme.example.com"),
        },
        subject: "Your invoice".to_owned(),
        html: Some("<p>Thanks for your order.</p>".to_owned()),
        text: Some("Thanks for your order.".to_owned()),
        template_id: None,
        template_version_id: None,
        provider_message_id: None,
        attempts: 0,
        created_at: at,
        updated_at: at,
        next_attempt_at: Some(at),
        bounce_type: None,
        last_event_id: EventId(ulid()),
        tracking: tidings_core::model::MessageTracking::default(),
        extras: tidings_core::model::MessageExtras::default(),
        scheduled_at: None,
        tracking_tally: Default::default(),
        recipients: Vec::new(),
        written_headers: None,
    }
}

/// The `Queued` event of a new message.
pub fn queued_event(message: &Message) -> MessageEvent {
    MessageEvent {
        id: message.last_event_id,
        message_id: message.id,
        event_type: EventType::Queued,
        provider_message_id: None,
        occurred_at: message.created_at,
        details: EventDetails::default(),
        recipient: None,
    }
}

/// What `create_message` takes for `message`: its `Queued` event, no idempotency key, no
/// webhook deliveries.
pub fn new_message(message: &Message) -> NewMessage {
    NewMessage {
        message: message.clone(),
        event: queued_event(message),
        recipient_events: vec![],
        idempotency: None,
        webhook_deliveries: vec![],
        activity: ActivityDelta::of_new_message(message, &[]),
    }
}

/// The write for `event_type` happening to `message` (as stored) at `at`, through the state
/// machine. `next_attempt_at` is the retry time of a `Deferred`. `Sent` gets a provider
/// Message-ID. Panics if the state machine refuses the event.
pub fn event_write(
    message: &Message,
    event_type: EventType,
    at: DateTime<Utc>,
    next_attempt_at: Option<DateTime<Utc>>,
) -> EventWrite {
    let event_id = EventId(ulid());
    let happening = Happening {
        event_id,
        event_type,
        at,
        details: EventDetails {
            attempt: (event_type == EventType::Sent).then_some(message.attempts + 1),
            next_attempt_at,
            ..EventDetails::default()
        },
        provider_message_id: (event_type == EventType::Sent).then(|| format!("{event_id}@tidings.test")),
        next_attempt_at,
    };
    let (after, event) = apply_event(message, happening).unwrap_or_else(|e| panic!("fixture event_write: {e}"));
    EventWrite {
        expected_status: message.status,
        expected_next_attempt_at: None,
        expected_last_event_id: None,
        activity: ActivityDelta::of_events(message, std::slice::from_ref(&event)),
        message: after,
        event,
        more_events: vec![],
        webhook_deliveries: vec![],
    }
}

/// A `Queued` message like [`message`] to several recipients, as `Messages::send` stores one:
/// `to`, then `cc`, then `bcc`, each entry `addr` or `Name <addr>`, every recipient `Queued`
/// and due now, the message's `to` the first and its own fields the aggregate
/// ([`Message::settle_from_recipients`]). Give at least one address in all.
pub fn message_to_several(
    ws: WorkspaceId,
    key: ApiKeyId,
    domain: DomainId,
    to: &[&str],
    cc: &[&str],
    bcc: &[&str],
) -> Message {
    let mut m = message(ws, key, domain);
    let lists = [(RecipientKind::To, to), (RecipientKind::Cc, cc), (RecipientKind::Bcc, bcc)];
    for (kind, list) in lists {
        for text in list {
            let mailbox = Mailbox::parse(text).unwrap_or_else(|e| panic!("fixture mailbox {text:?}: {e}"));
            let mut r = Recipient::new(mailbox, kind, MessageStatus::Queued, m.created_at);
            r.next_attempt_at = m.next_attempt_at;
            m.recipients.push(r);
        }
    }
    let first = m.recipients.first().unwrap_or_else(|| panic!("message_to_several without a recipient"));
    m.to = first.email.clone();
    m.settle_from_recipients();
    m
}

/// What `create_message` takes for `message` (one with a recipient list) when the
/// recipients at `suppressed` are on the suppression list, as `Messages::send` writes it: those
/// recipients `Suppressed` with nothing due, the `Queued` event, then one `Suppressed` event
/// per suppressed recipient naming it, in order, the last of them the message's
/// `last_event_id`.
pub fn new_message_suppressing(message: &Message, suppressed: &[usize]) -> NewMessage {
    let mut m = message.clone();
    let queued = queued_event(&m);
    let mut last = queued.id;
    let mut recipient_events = Vec::new();
    for &i in suppressed {
        let r = &mut m.recipients[i];
        r.status = MessageStatus::Suppressed;
        r.next_attempt_at = None;
        last = EventId(last.0.increment().unwrap_or(last.0));
        recipient_events.push(MessageEvent {
            id: last,
            message_id: m.id,
            event_type: EventType::Suppressed,
            provider_message_id: None,
            occurred_at: m.created_at,
            details: EventDetails::default(),
            recipient: Some(r.email.clone()),
        });
    }
    m.last_event_id = last;
    m.settle_from_recipients();
    let activity = ActivityDelta::of_new_message(&m, &recipient_events);
    NewMessage { message: m, event: queued, recipient_events, idempotency: None, webhook_deliveries: vec![], activity }
}

/// The write for `event_type` happening at `at` to the recipient at `index` of `message` (as
/// read), through the state machine ([`apply_recipient_event`]), as the delivery worker
/// makes it: it expects the status and the last event it read, so that it fails with
/// `Conflict` if any other event was recorded since. `next_attempt_at` is the retry time of
/// a `Deferred`; `Sent` gets a provider Message-ID. Panics if the state machine refuses.
pub fn recipient_event_write(
    message: &Message,
    index: usize,
    event_type: EventType,
    at: DateTime<Utc>,
    next_attempt_at: Option<DateTime<Utc>>,
) -> EventWrite {
    let attempts = message.recipient_list().get(index).map_or(0, |r| r.attempts);
    let event_id = EventId(ulid());
    let happening = Happening {
        event_id,
        event_type,
        at,
        details: EventDetails {
            attempt: (event_type == EventType::Sent).then_some(attempts + 1),
            next_attempt_at,
            ..EventDetails::default()
        },
        provider_message_id: (event_type == EventType::Sent)
            .then(|| message.provider_message_id.clone().unwrap_or_else(|| format!("{}@tidings.test", message.id))),
        next_attempt_at,
    };
    let (after, event) = apply_recipient_event(message, index, happening)
        .unwrap_or_else(|e| panic!("fixture recipient_event_write (recipient {index}): {e}"));
    EventWrite {
        expected_status: message.status,
        expected_next_attempt_at: None,
        expected_last_event_id: Some(message.last_event_id),
        activity: ActivityDelta::of_events(message, std::slice::from_ref(&event)),
        message: after,
        event,
        more_events: vec![],
        webhook_deliveries: vec![],
    }
}

/// An idempotency record of `ws` for `key` pointing at `message_id`.
pub fn idempotency(
    ws: WorkspaceId,
    key: &str,
    message_id: MessageId,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> IdempotencyRecord {
    IdempotencyRecord {
        workspace_id: ws,
        key: idempotency_key(key),
        request_hash: RequestHash::of(key.as_bytes()),
        message_id,
        created_at,
        expires_at,
        batch: None,
    }
}

fn record(kind: RecordKind, name: String, value: String) -> DnsRecord {
    DnsRecord {
        kind,
        record_type: "TXT".to_owned(),
        name,
        value,
        ttl: 3600,
        status: RecordStatus::Pending,
        last_checked_at: None,
        error: None,
        warning: None,
        priority: None,
    }
}

/// A `Pending` domain of `ws` named `name`, with placeholder records and dummy DKIM key bytes
/// (not usable for signing).
pub fn domain(ws: WorkspaceId, name: &str) -> Domain {
    let name = domain_name(name);
    let id = DomainId(ulid());
    let rsa_selector = format!("tid{}r", id.to_string().to_ascii_lowercase());
    let ed25519_selector = format!("tid{}e", id.to_string().to_ascii_lowercase());
    let records = vec![
        record(RecordKind::Spf, name.to_string(), "v=spf1 include:spf.tidings.test ~all".to_owned()),
        record(
            RecordKind::Dkim,
            name.with_prefix(&format!("{rsa_selector}._domainkey")),
            "v=DKIM1; k=rsa; p=AAAA".into(),
        ),
        record(
            RecordKind::Dkim2,
            name.with_prefix(&format!("{ed25519_selector}._domainkey")),
            "v=DKIM1; k=ed25519; p=AAAA".to_owned(),
        ),
        record(RecordKind::Dmarc, name.with_prefix("_dmarc"), "v=DMARC1; p=none".to_owned()),
    ];
    Domain {
        id,
        workspace_id: ws,
        name,
        status: DomainStatus::Pending,
        records,
        dkim: DkimKeys {
            rsa_selector,
            rsa_private_pkcs8: Secret::new(vec![0x30, 0x82, 1, 2, 3]),
            ed25519_selector,
            ed25519_private_pkcs8: Secret::new(vec![0x30, 0x2e, 4, 5, 6]),
            created_at: None,
        },
        dkim_rotation: Default::default(),
        open_tracking: false,
        click_tracking: false,
        created_at: now(),
        verified_at: None,
        last_checked_at: None,
        kind: DomainKind::Customer,
        inbound: false,
    }
}

/// A sender `username@<domain>` on `domain`, with a display name.
pub fn sender(domain: &Domain, name: &str) -> Sender {
    let username = username(name);
    Sender {
        id: SenderId(ulid()),
        workspace_id: domain.workspace_id,
        domain_id: domain.id,
        address: EmailAddress::from_parts(name, &domain.name)
            .unwrap_or_else(|e| panic!("fixture sender {name:?}@{}: {e}", domain.name)),
        username,
        display_name: DisplayName::parse("Acme Support").ok(),
        created_at: now(),
    }
}

/// A template of `ws` with one version (number 1, current).
pub fn template(ws: WorkspaceId) -> Template {
    let id = TemplateId(ulid());
    let version = template_version();
    let first = TemplateVersion {
        id: version.id,
        template_id: id,
        version_no: 1,
        subject: version.subject,
        html: version.html,
        text: version.text,
        created_at: version.created_at,
    };
    Template {
        id,
        workspace_id: ws,
        name: format!("template {id}"),
        current_version_id: first.id,
        created_at: first.created_at,
        versions: vec![first],
    }
}

/// A new template version (not yet numbered).
pub fn template_version() -> NewTemplateVersion {
    NewTemplateVersion {
        id: TemplateVersionId(ulid()),
        subject: "Hello {{name}}".to_owned(),
        html: Some("<p>Hello {{name}}</p>".to_owned()),
        text: Some("Hello {{name}}".to_owned()),
        created_at: now(),
    }
}

/// A `Manual` suppression of `address` in `ws`, from the API.
pub fn suppression(ws: WorkspaceId, address: &str) -> Suppression {
    Suppression {
        id: SuppressionId(ulid()),
        workspace_id: ws,
        email: email(address),
        reason: SuppressionReason::Manual,
        source: SuppressionSource::Api,
        message_id: None,
        created_at: now(),
    }
}

/// An enabled endpoint of `ws` subscribed to `Delivered` and `Bounced`.
pub fn webhook(ws: WorkspaceId) -> WebhookEndpoint {
    let at = now();
    WebhookEndpoint {
        id: WebhookId(ulid()),
        workspace_id: ws,
        url: WebhookUrl::parse("https://hooks.example.com/tidings", false)
            .unwrap_or_else(|e| panic!("fixture webhook url: {e}")),
        event_types: vec![
            WebhookEventType::Message(EventType::Delivered),
            WebhookEventType::Message(EventType::Bounced),
        ],
        enabled: true,
        format: WebhookFormat::Tidings,
        secret: WebhookSecret::generate(&SystemRandom),
        previous_secret: None,
        disabled_reason: None,
        failing_since: None,
        created_at: at,
        updated_at: at,
    }
}

/// A `Pending` delivery of a `Test` event to `endpoint` of `ws`, due now.
pub fn delivery(ws: WorkspaceId, endpoint: WebhookId) -> WebhookDelivery {
    let at = now();
    let event_id = EventId(ulid());
    WebhookDelivery {
        id: DeliveryId(ulid()),
        workspace_id: ws,
        endpoint_id: endpoint,
        event_id,
        message_id: None,
        event_type: WebhookEventType::Test,
        payload: format!(r#"{{"type":"Test","createdAt":"{}","data":{{"eventId":"{event_id}"}}}}"#, at.to_rfc3339()),
        status: DeliveryStatus::Pending,
        attempts: 0,
        response_code: None,
        last_error: None,
        response_body: None,
        next_attempt_at: Some(at),
        created_at: at,
    }
}

/// `base` plus `seconds` (negative goes back).
pub fn plus_secs(base: DateTime<Utc>, seconds: i64) -> DateTime<Utc> {
    base + Duration::seconds(seconds)
}
