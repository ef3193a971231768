//! Sending and reading messages (docs/api.md#messages): validation, `from`
//! resolution, domain-scoped keys, suppression, templates, idempotency; and the one place
//! where a message's state changes ([`Messages::record_event`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::activity::ActivityDelta;
use crate::domain_name::DomainName;
use crate::email::{EmailAddress, Mailbox};
use crate::error::FieldError;
use crate::ids::{ApiKeyId, DomainId, EventId, MessageId, WorkspaceId};
use crate::model::{
    Domain, EventDetails, EventType, IdempotencyKey, IdempotencyRecord, KeyScope, Message, MessageEvent, MessageExtras,
    MessageStatus, Recipient, RecipientKind, RequestHash, WrittenHeaders,
};
use crate::ports::{CreateOutcome, EventObserver, EventWrite, NewMessage, PageRequest};
use crate::state_machine::{Happening, apply_event, apply_recipient_event};
use crate::text_checks::is_line_or_control;
use crate::tracking::TrackingTally;
use crate::usecases::idempotency::{RequestKind, hash_with_key};
use crate::usecases::recipient_fields::{Named, validate_recipients};
use crate::usecases::render_pool::OwnedSource;
use crate::usecases::sandbox::sandbox_off;
use crate::usecases::scheduling::parse_send_time;
use crate::usecases::send_fields::validate_extras;
use crate::usecases::{
    AttachmentRequest, ListParams, Listed, Principal, SANDBOX_DOMAIN, TagRequest, Tidings, TrackingRequest,
};
use crate::{Error, Result};

/// Longest subject RFC 5322 allows on one line.
const MAX_SUBJECT_CHARS: usize = 998;
/// Largest `html` and largest `text` of a send, in bytes (UTF-8): 5 MiB each, as Postmark
/// allows each body; with 40 MiB of attachments and the JSON around them, a send still fits
/// the send route's 56 MiB body limit. Each copy a message costs (stored, shown, rendered into
/// MIME) is bounded by it rather than by the whole request.
pub const MAX_BODY_PART_BYTES: usize = 5 * 1024 * 1024;
/// Why a subject with a control character or a line separator is refused.
pub(crate) const SUBJECT_CHARS: &str = "must not contain line breaks or control characters (TAB aside)";
/// The local part used when a send names no `from`.
const DEFAULT_LOCAL_PART: &str = "noreply";

/// `POST /v1/messages` as the client sent it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SendRequest {
    /// Recipients: one address or an array of 1–50, each `local@domain` or
    /// `Display Name <local@domain>` (docs/api.md#recipients). A string hashes as it always
    /// did for idempotency.
    pub to: Option<serde_json::Value>,
    /// Cc recipients, like `to`; absent from the idempotency hash when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<serde_json::Value>,
    /// Bcc recipients, like `to`; in no header. Absent from the idempotency hash when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bcc: Option<serde_json::Value>,
    /// `Display Name <local@domain>` or `local@domain` on a Verified domain.
    pub from: Option<String>,
    /// Subject (overrides the template's).
    pub subject: Option<String>,
    /// HTML body (overrides the template's).
    pub html: Option<String>,
    /// Text body (overrides the template's).
    pub text: Option<String>,
    /// Render the template's current version.
    pub template_id: Option<String>,
    /// Render this exact version.
    pub template_version_id: Option<String>,
    /// Values for the template's placeholders (a JSON object).
    pub variables: Option<serde_json::Value>,
    /// Open and click tracking for this message; what it leaves out follows the domain.
    /// Absent from the idempotency hash when absent, so keys stored before it existed still
    /// match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracking: Option<TrackingRequest>,
    // The optional fields below are left out of the idempotency hash when absent too.
    /// `Reply-To`: one address or an array of up to 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<serde_json::Value>,
    /// Custom headers: header name to string value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<serde_json::Value>,
    /// Up to 10 tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<TagRequest>>,
    /// String keys to string values, 10 KiB at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// Files and inline parts, 40 MiB of base64 at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<AttachmentRequest>>,
    /// Send at this time (RFC 3339) instead of now: at most 30 days ahead. Absent from the
    /// idempotency hash when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_at: Option<String>,
    /// The `To:` and `Cc:` headers as a message submitted over SMTP wrote them, when they are
    /// not simply its to and cc recipients; then `to` may be absent (every envelope
    /// recipient in `cc` or `bcc`). Never read from a client's JSON, and not hashed: the
    /// submission's Idempotency-Key comes from its `Message-ID`.
    #[serde(skip)]
    pub written_headers: Option<WrittenHeaders>,
}

/// What a send returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOutcome {
    /// The message (the original one for an idempotent replay).
    pub message: Message,
    /// True when an earlier request with the same Idempotency-Key created it
    /// (`Idempotent-Replayed: true`).
    pub replayed: bool,
}

/// A send that passed field validation.
struct ValidSend {
    recipients: Named,
    from: Option<Mailbox>,
    subject: Option<String>,
    variables: serde_json::Map<String, serde_json::Value>,
    extras: MessageExtras,
    /// `None` also for a `scheduledAt` that is not after now (sent at once).
    scheduled_at: Option<DateTime<Utc>>,
}

impl Tidings {
    /// The message use cases.
    pub fn messages(&self) -> Messages<'_> {
        Messages { core: self }
    }
}

/// The message area of [`Tidings`] ([`Tidings::messages`]): sending one message or a batch
/// (under the key's rate limit or not) with its idempotency, reading, listing and searching
/// messages with their timelines and sources, canceling and rescheduling, and recording what
/// happens to a message or to one of its recipients.
#[derive(Clone, Copy)]
pub struct Messages<'a> {
    // Its methods are spread over sibling modules (`batch`, `scheduling`, `message_list`,
    // `message_source`, `rate_limited_send`), which reach the ports through this.
    pub(super) core: &'a Tidings,
}

impl Messages<'_> {
    /// `POST /v1/messages`: validates, resolves the sender, checks the key's domain
    /// restriction and the suppression list, renders the template, and stores the message
    /// durably with its `Queued` event (or, with a `scheduledAt`, as `Scheduled` with a
    /// `Scheduled` event) and webhook deliveries. With an Idempotency-Key, a repeat of the
    /// same request by any key of the workspace that may read the original message returns
    /// it and queues nothing; the same key with another request is `IdempotencyKeyReused`. A
    /// `send` key's Idempotency-Keys are its own (the `usecases::idempotency` module).
    pub async fn send(&self, who: &Principal, req: SendRequest, idempotency_key: Option<&str>) -> Result<SendOutcome> {
        let now = self.core.clock.now();
        let key = idempotency_key
            .map(IdempotencyKey::parse)
            .transpose()
            .map_err(|e| Error::InvalidIdempotencyKey(e.to_string()))?;
        let key = match key {
            Some(key) => match self.core.find_idempotency(who, &key, now).await? {
                (_, Some(record)) => return self.replay(who, &record, &req).await,
                (stored, None) => Some(stored),
            },
            None => None,
        };

        let mut new = self.prepare_message(who, &req, now).await?;
        new.idempotency = match key {
            Some(key) => Some(IdempotencyRecord {
                workspace_id: who.workspace_id,
                key,
                request_hash: request_hash(who.key_id, &req)?,
                message_id: new.message.id,
                created_at: now,
                expires_at: now + self.core.config.idempotency_window,
                batch: None,
            }),
            None => None,
        };
        match self.core.store.create_message(&new).await? {
            CreateOutcome::Created => {
                self.core.observer.message_accepted(&new.message);
                self.core.observer.message_event(&new.message, &new.event);
                Ok(SendOutcome { message: new.message, replayed: false })
            }
            // Lost a race with an identical key: answer like a replay.
            CreateOutcome::Duplicate(record) => self.replay(who, &record, &req).await,
        }
    }

    /// Everything a send decides before it is stored: validation, sender, key restriction,
    /// suppression, template, schedule; the message with its first event and webhook
    /// deliveries, without an idempotency record. Shared by single and batch sends.
    pub(crate) async fn prepare_message(
        &self,
        who: &Principal,
        req: &SendRequest,
        now: DateTime<Utc>,
    ) -> Result<NewMessage> {
        let mut valid = validate(req, now)?;
        let (domain, from) = self.resolve_from(who, valid.from.take()).await?;
        let suppressed = self.suppressed_recipients(who.workspace_id, &valid.recipients).await?;
        let version = self
            .core
            .templates()
            .resolve_version(who.workspace_id, req.template_id.as_deref(), req.template_version_id.as_deref())
            .await?;
        // Every check that does not need the rendered text comes before the render, so that
        // a send refused after rendering was refused by its template: that one keeps its
        // rate-limit token (`rate_limited_send`), the others give it back.
        let html_source = req.html.as_ref().or(version.as_ref().and_then(|v| v.html.as_ref()));
        let text_source = req.text.as_ref().or(version.as_ref().and_then(|v| v.text.as_ref()));
        if html_source.is_none() && text_source.is_none() {
            return Err(Error::field("html", "provide html, text or a template with a body"));
        }
        if html_source.is_none()
            && let Some(i) = valid.extras.attachments.iter().position(|a| a.content_id().is_some())
        {
            // An inline part is referred to from HTML; without it, it would show as nothing.
            return Err(Error::field(format!("attachments[{i}].contentId"), "inline parts need an html body"));
        }
        let (subject, html, text) = match &version {
            Some(v) => {
                // The send's own fields override the template's (docs/api.md#templates); they
                // are rendered too, so a send may use placeholders without a stored template.
                let source = OwnedSource {
                    subject: valid.subject.take().unwrap_or_else(|| v.subject.clone()),
                    html: html_source.cloned(),
                    text: text_source.cloned(),
                };
                let rendered =
                    self.core.render_in_pool(who.workspace_id, source, std::mem::take(&mut valid.variables)).await?;
                (rendered.subject, rendered.html, rendered.text)
            }
            None => (valid.subject.take().unwrap_or_default(), req.html.clone(), req.text.clone()),
        };
        // The renderer checks a rendered subject the same way (one line, 998 characters), so
        // only a subject sent without a template can fail here.
        check_subject(&subject).map_err(|message| Error::field("subject", message))?;

        let tracking = TrackingRequest::resolve(req.tracking, &domain);
        let event_id = EventId::new_at(now, &*self.core.random);
        let (status, event_type) = match valid.scheduled_at {
            Some(_) => (MessageStatus::Scheduled, EventType::Scheduled),
            None => (MessageStatus::Queued, EventType::Queued),
        };
        let due = valid.scheduled_at.unwrap_or(now);
        let (to, recipients) = recipient_list(valid.recipients, &suppressed, status, due, now)
            .ok_or_else(|| Error::field("to", "is required"))?;
        let mut message = Message {
            id: MessageId::new_at(now, &*self.core.random),
            workspace_id: who.workspace_id,
            api_key_id: who.key_id,
            domain_id: domain.id,
            status,
            to,
            recipients,
            written_headers: req.written_headers.clone(),
            from,
            subject,
            html,
            text,
            template_id: version.as_ref().map(|v| v.template_id),
            template_version_id: version.as_ref().map(|v| v.id),
            provider_message_id: None,
            attempts: 0,
            created_at: now,
            updated_at: now,
            next_attempt_at: Some(due),
            bounce_type: None,
            last_event_id: event_id,
            tracking,
            extras: valid.extras,
            scheduled_at: valid.scheduled_at,
            tracking_tally: TrackingTally::default(),
        };
        message.settle_from_recipients();
        let event = MessageEvent {
            id: event_id,
            message_id: message.id,
            event_type,
            provider_message_id: None,
            occurred_at: now,
            details: EventDetails { scheduled_at: valid.scheduled_at, ..EventDetails::default() },
            recipient: None,
        };
        let mut webhook_deliveries = self.core.webhooks().deliveries_for(&message, &event).await?;
        // Each suppressed recipient among several is `Suppressed` at once, with an event of
        // its own after the `Queued` one.
        let mut recipient_events = Vec::with_capacity(suppressed.len());
        let mut last = event_id;
        for address in &suppressed {
            last = EventId(last.0.increment().unwrap_or(last.0));
            let skipped = MessageEvent {
                id: last,
                message_id: message.id,
                event_type: EventType::Suppressed,
                provider_message_id: None,
                occurred_at: now,
                details: EventDetails::default(),
                recipient: Some(address.clone()),
            };
            webhook_deliveries.extend(self.core.webhooks().deliveries_for(&message, &skipped).await?);
            recipient_events.push(skipped);
        }
        message.last_event_id = last;
        let activity = ActivityDelta::of_new_message(&message, &recipient_events);
        Ok(NewMessage { message, event, recipient_events, idempotency: None, webhook_deliveries, activity })
    }

    /// The answer to `req` if it repeats an earlier send with the same Idempotency-Key
    /// (docs/api.md#idempotency): `Ok(Some(..))` for a replay, `Err(IdempotencyKeyReused)` for
    /// the same key with another body, `Ok(None)` when the key is new (for a `send` key: new
    /// to that key), expired or absent. Reads only; for a caller that must answer
    /// replays without doing anything else first (a replay takes no rate-limit token, so an
    /// empty bucket must not hide it).
    pub async fn idempotent_replay(
        &self,
        who: &Principal,
        req: &SendRequest,
        idempotency_key: Option<&str>,
    ) -> Result<Option<SendOutcome>> {
        let Some(key) = idempotency_key else { return Ok(None) };
        let key = IdempotencyKey::parse(key).map_err(|e| Error::InvalidIdempotencyKey(e.to_string()))?;
        match self.core.find_idempotency(who, &key, self.core.clock.now()).await? {
            (_, Some(record)) => self.replay(who, &record, req).await.map(Some),
            (_, None) => Ok(None),
        }
    }

    /// The original message of `record` if `req` repeats it and `who` may read it
    /// ([`Tidings::check_repeat`]).
    async fn replay(&self, who: &Principal, record: &IdempotencyRecord, req: &SendRequest) -> Result<SendOutcome> {
        let message =
            self.core.check_repeat(who, record, RequestKind::Single, |maker| request_hash(maker, req)).await?;
        Ok(SendOutcome { message, replayed: true })
    }

    /// The sending domain and the full `From` mailbox (docs/api.md#sending): an explicit `from`
    /// must be on a Verified domain of the workspace (and the key's domain, if restricted); with
    /// none, the key's domain or the workspace's only Verified domain, as `noreply@`. A
    /// registered sender's display name fills in a missing one.
    ///
    /// The sandbox domain (`usecases::sandbox`) takes part only while sandbox sending is on:
    /// then it is the default when the workspace has no Verified domain of its own, and an
    /// explicit `from` at it works; off, any use of it is refused with what to do instead.
    async fn resolve_from(&self, who: &Principal, from: Option<Mailbox>) -> Result<(Domain, Mailbox)> {
        let ws = who.workspace_id;
        let key_domain = match who.sending_domain_id {
            Some(id) => {
                let domain = self.core.store.get_domain(ws, id).await?.ok_or_else(|| {
                    // The key's domain was deleted: nothing is allowed any more.
                    Error::DomainNotVerified("the sending domain of this API key no longer exists".into())
                })?;
                if !self.core.shows(&domain) {
                    return Err(sandbox_off());
                }
                Some(domain)
            }
            None => None,
        };
        let (domain, mut mailbox) = match from {
            Some(mailbox) => {
                let name = mailbox.address.domain();
                if let Some(allowed) = &key_domain
                    && &allowed.name != name
                {
                    return Err(Error::DomainNotAllowed { allowed: allowed.name.to_string() });
                }
                let domain = match &key_domain {
                    Some(d) => d.clone(),
                    None => self.domain_named(ws, name).await?,
                };
                (domain, mailbox)
            }
            None => {
                let domain = match key_domain {
                    Some(d) => d,
                    None => self.default_domain(ws).await?,
                };
                let address = EmailAddress::from_parts(DEFAULT_LOCAL_PART, &domain.name)
                    .map_err(|e| Error::Internal(crate::Cause::context("default sender address", e)))?;
                (domain, Mailbox { display_name: None, address })
            }
        };
        if !domain.is_sendable() {
            return Err(Error::DomainNotVerified(format!("domain {} is not verified", domain.name)));
        }
        self.core.reputation().check_sending(&domain).await?;
        if mailbox.display_name.is_none()
            && let Some(sender) = self.core.senders().find(ws, domain.id, mailbox.address.local_part()).await?
        {
            mailbox.display_name = sender.display_name;
        }
        Ok((domain, mailbox))
    }

    /// The workspace's domain `name`, for an explicit `from`: the sandbox (made if need be)
    /// when that is the name and sandbox sending is on, refused when it is off.
    async fn domain_named(&self, ws: WorkspaceId, name: &DomainName) -> Result<Domain> {
        if name.as_str() == SANDBOX_DOMAIN {
            if !self.core.config.sandbox_sending {
                return Err(sandbox_off());
            }
            if let Some(sandbox) = self.core.sandbox_domain(ws).await? {
                return Ok(sandbox);
            }
        }
        self.core
            .store
            .find_domain_by_name(ws, name)
            .await?
            .ok_or_else(|| Error::DomainNotVerified(format!("domain {name} is not added to this workspace")))
    }

    /// The domain of a send without `from`: the workspace's only Verified domain of its own;
    /// with none, the sandbox while sandbox sending is on. The sandbox never shadows a real
    /// domain and never counts among "several".
    async fn default_domain(&self, ws: WorkspaceId) -> Result<Domain> {
        let mut verified = Vec::new();
        let mut cursor: Option<DomainId> = None;
        loop {
            let page = self.core.store.list_domains(ws, PageRequest { limit: 200, cursor }).await?;
            cursor = page.items.last().map(|d| d.id);
            verified.extend(page.items.into_iter().filter(|d| d.is_sendable() && !d.is_sandbox()));
            if verified.len() > 1 {
                break;
            }
            if !page.has_more {
                break;
            }
        }
        let none = || Error::field("from", "is required: this workspace has no verified domain");
        match verified.len() {
            1 => Ok(verified.remove(0)),
            0 if self.core.config.sandbox_sending => self.core.sandbox_domain(ws).await?.ok_or_else(none),
            0 => Err(none()),
            _ => Err(Error::field("from", "is required: this workspace has several verified domains")),
        }
    }

    /// The recipients on the workspace's suppression list, which a send skips; refused with
    /// `recipient_suppressed` when that is every one (the details name them, as written).
    async fn suppressed_recipients(&self, ws: WorkspaceId, named: &Named) -> Result<Vec<EmailAddress>> {
        let mut found = Vec::new();
        for (_, mailbox) in named {
            if self.core.store.get_suppression(ws, &mailbox.address).await?.is_some() {
                found.push(mailbox.address.clone());
            }
        }
        if found.len() < named.len() {
            return Ok(found);
        }
        if let [(_, only)] = named.as_slice() {
            return Err(Error::RecipientSuppressed(only.address.to_string()));
        }
        let fields = named
            .iter()
            .map(|(kind, mailbox)| {
                FieldError::new(kind.as_str(), crate::error::suppressed_message(&mailbox.address.to_string()))
            })
            .collect();
        Err(Error::AllRecipientsSuppressed { fields })
    }

    /// `GET /v1/messages/{id}`.
    pub async fn get(&self, who: &Principal, id: MessageId) -> Result<Message> {
        let message = self.core.store.get_message(who.workspace_id, id).await?.ok_or(Error::NotFound("message"))?;
        if who.scope == KeyScope::Send && message.api_key_id != who.key_id {
            return Err(Error::NotFound("message"));
        }
        Ok(message)
    }

    /// `GET /v1/messages/{id}/events`: the timeline, oldest first.
    pub async fn events(&self, who: &Principal, id: MessageId, params: ListParams) -> Result<Listed<MessageEvent>> {
        let page = params.to_page(EventId::parse)?;
        let message = self.get(who, id).await?;
        let found = self
            .core
            .store
            .list_events(who.workspace_id, message.id, page)
            .await
            .map_err(crate::ports::missing("message"))?;
        Ok(Listed::from_page(found, page.limit, |e| e.id.to_string()))
    }

    /// Forgets idempotency keys whose window has passed, at most `limit` per call; returns
    /// how many. The server calls this periodically so expired keys do not grow the store.
    pub async fn purge_expired_idempotency_keys(&self, limit: usize) -> Result<usize> {
        Ok(self.core.store.purge_expired_idempotency(self.core.clock.now(), limit).await?)
    }

    /// Records that something happened to a message: applies the state machine, fans the
    /// event out to webhooks and stores both in one durable write. Returns the updated
    /// message and the event. `Conflict` if the message changed since it was read (the
    /// caller re-reads and decides again); an event the state machine refuses is
    /// `Conflict` too, and records nothing.
    pub async fn record_event(&self, message: &Message, happening: Happening) -> Result<(Message, MessageEvent)> {
        self.record_event_if_due_at(message, happening, None).await
    }

    /// [`Self::record_event`] that also requires the stored `next_attempt_at` to be
    /// `due_at` when that is set: the delivery worker passes its lease, so that a message
    /// rescheduled after its claim (the status unchanged) is not sent under the old claim.
    pub async fn record_event_if_due_at(
        &self,
        message: &Message,
        happening: Happening,
        due_at: Option<DateTime<Utc>>,
    ) -> Result<(Message, MessageEvent)> {
        let (next, event) =
            apply_event(message, happening).map_err(|e| Error::Conflict(format!("message {}: {e}", message.id)))?;
        // On a message with a recipient list, an event of one recipient need not change the
        // message's status, which is all the store checks: require that none came in between.
        let last_event_id = message.has_recipient_list().then_some(message.last_event_id);
        self.core.store_message_event(message, next, event, due_at, last_event_id).await
    }

    /// Records that something happened to the recipient at `index` of `message` (its one
    /// recipient, 0, for a message without a list): [`Self::record_event`] through
    /// [`apply_recipient_event`]. On a message with a list the write also fails with
    /// `Conflict` if any event was recorded since `message` was read, since the store checks
    /// only the message's own status, which another recipient's event need not change.
    pub async fn record_recipient_event(
        &self,
        message: &Message,
        index: usize,
        happening: Happening,
    ) -> Result<(Message, MessageEvent)> {
        let (next, event) = apply_recipient_event(message, index, happening)
            .map_err(|e| Error::Conflict(format!("message {}: {e}", message.id)))?;
        let last_event_id = message.has_recipient_list().then_some(message.last_event_id);
        self.core.store_message_event(message, next, event, None, last_event_id).await
    }
}

impl Tidings {
    /// The write of [`Messages::record_event_if_due_at`] for an event already applied:
    /// `next` and `event` are what [`apply_event`] made of `read` (the message as read), and
    /// `next` may carry more (a tracking tally). With `last_event_id`, the write also fails
    /// with `Conflict` if any event was recorded since `read`.
    pub(crate) async fn store_message_event(
        &self,
        read: &Message,
        next: Message,
        event: MessageEvent,
        due_at: Option<DateTime<Utc>>,
        last_event_id: Option<EventId>,
    ) -> Result<(Message, MessageEvent)> {
        let (next, mut events) = self.store_message_events(read, next, vec![event], due_at, last_event_id).await?;
        let event = events.pop().ok_or_else(|| Error::Internal("one event was written, none came back".into()))?;
        Ok((next, event))
    }

    /// [`Self::store_message_event`] for several events of one message written at once
    /// (several recipients' events that happened together), in order; `next` is the
    /// message after all of them. At least one event.
    pub(crate) async fn store_message_events(
        &self,
        read: &Message,
        next: Message,
        events: Vec<MessageEvent>,
        due_at: Option<DateTime<Utc>>,
        last_event_id: Option<EventId>,
    ) -> Result<(Message, Vec<MessageEvent>)> {
        if events.is_empty() {
            return Err(Error::Internal("a write of no event".into()));
        }
        let mut webhook_deliveries = Vec::new();
        for event in &events {
            webhook_deliveries.extend(self.webhooks().deliveries_for(&next, event).await?);
        }
        let activity = ActivityDelta::of_events(read, &events);
        // The store takes its own copy; `events` goes back to the caller as written.
        let write = EventWrite {
            expected_status: read.status,
            expected_next_attempt_at: due_at,
            expected_last_event_id: last_event_id,
            message: next.clone(),
            event: events[0].clone(),
            more_events: events[1..].to_vec(),
            webhook_deliveries,
            activity,
        };
        self.store.record_event(write).await?;
        for event in &events {
            self.observer.message_event(&next, event);
        }
        Ok((next, events))
    }
}

/// The message's `to` (its first recipient) and stored recipient list: none for one
/// recipient in `to` without a display name, the shape of every message before lists
/// existed; otherwise every recipient, `status` (or `Suppressed` if in `suppressed`) and
/// due at `due`.
fn recipient_list(
    named: Named,
    suppressed: &[EmailAddress],
    status: MessageStatus,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<(EmailAddress, Vec<Recipient>)> {
    let first = named.first()?.1.address.clone();
    if let [(RecipientKind::To, only)] = named.as_slice()
        && only.display_name.is_none()
    {
        return Some((first, Vec::new()));
    }
    let recipients = named
        .into_iter()
        .map(|(kind, mailbox)| {
            let skip = suppressed.iter().any(|s| s.normalized() == mailbox.address.normalized());
            let mut r = Recipient::new(mailbox, kind, if skip { MessageStatus::Suppressed } else { status }, now);
            r.next_attempt_at = (!skip).then_some(due);
            r
        })
        .collect();
    Some((first, recipients))
}

/// Field checks that need no store, reporting every bad field at once.
fn validate(req: &SendRequest, now: DateTime<Utc>) -> Result<ValidSend> {
    let mut fields = Vec::new();
    let scheduled_at = match req.scheduled_at.as_deref().map(|text| parse_send_time(text, now)) {
        None => None,
        Some(Ok(at)) => at,
        Some(Err(message)) => {
            fields.push(FieldError::new("scheduledAt", message));
            None
        }
    };
    let to_required = req.written_headers.is_none();
    let recipients = validate_recipients(req.to.as_ref(), req.cc.as_ref(), req.bcc.as_ref(), to_required)
        .map_err(|faults| fields.extend(faults))
        .ok();
    let from = req
        .from
        .as_deref()
        .map(|text| Mailbox::parse(text).map_err(|e| fields.push(FieldError::new("from", e.to_string()))).ok())
        .unwrap_or(None);
    if let Some(subject) = &req.subject
        && let Err(message) = check_subject(subject)
    {
        fields.push(FieldError::new("subject", message));
    }
    for (name, part) in [("html", &req.html), ("text", &req.text)] {
        if let Some(part) = part
            && part.len() > MAX_BODY_PART_BYTES
        {
            let mib = MAX_BODY_PART_BYTES / (1024 * 1024);
            fields.push(FieldError::new(name, format!("must be at most {mib} MiB ({MAX_BODY_PART_BYTES} bytes)")));
        }
    }
    let uses_template = req.template_id.is_some() || req.template_version_id.is_some();
    if !uses_template {
        if req.subject.as_deref().is_none_or(str::is_empty) {
            fields.push(FieldError::new("subject", "is required unless sending from a template"));
        }
        if req.html.is_none() && req.text.is_none() {
            fields.push(FieldError::new("html", "provide html, text or a template"));
        }
    }
    let variables = match &req.variables {
        None | Some(serde_json::Value::Null) => serde_json::Map::new(),
        Some(serde_json::Value::Object(map)) => map.clone(),
        Some(_) => {
            fields.push(FieldError::new("variables", "must be a JSON object"));
            serde_json::Map::new()
        }
    };
    if req.variables.is_some() && !uses_template {
        // Without a template there is nothing to fill; saying so beats silently ignoring it.
        fields.push(FieldError::new("variables", "needs templateId or templateVersionId"));
    }
    let extras = validate_extras(req).map_err(|faults| fields.extend(faults)).ok();
    match (recipients, extras, fields.is_empty()) {
        (Some(recipients), Some(extras), true) => {
            Ok(ValidSend { recipients, from, subject: req.subject.clone(), variables, extras, scheduled_at })
        }
        _ => Err(Error::Validation { fields }),
    }
}

/// A subject is one header line of text: no control character (C0, DEL, C1 with U+0085) and
/// no U+2028/U+2029, TAB aside (header whitespace, kept as it is by the MIME builder).
fn check_subject(subject: &str) -> std::result::Result<(), String> {
    if subject.chars().any(|c| c != '\t' && is_line_or_control(c)) {
        return Err(SUBJECT_CHARS.into());
    }
    if subject.chars().count() > MAX_SUBJECT_CHARS {
        return Err(format!("must be at most {MAX_SUBJECT_CHARS} characters"));
    }
    Ok(())
}

/// Hash of a single send for its idempotency record, as if `maker` sent it
/// ([`hash_with_key`]).
fn request_hash(maker: ApiKeyId, req: &SendRequest) -> Result<RequestHash> {
    hash_with_key(req, maker)
}
