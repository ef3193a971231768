//! `Store`: persistence of everything in the model, in the domain's terms.
//!
//! The trait is split by resource (`KeyStore`, `MessageStore`, ...) to keep each readable;
//! `Store` is all of them together and is what the use cases hold (`Arc<dyn Store>`).
//!
//! Rules every implementation follows (the conformance suite in `tidings-testing` checks them):
//! - **Isolation**: every read takes the `WorkspaceId`; a record of another workspace is
//!   reported exactly as a missing one.
//! - **Lists** are newest first by id (ULIDs sort by creation), except a message's events,
//!   which are oldest first. A page holds at most `limit` items; `has_more` tells whether
//!   another exists after the last one; the next page starts strictly after the cursor
//!   (the id of the previous page's last item). Cost is O(limit), never O(store).
//! - **Atomicity**: each method is all or nothing.
//! - **Durability**: methods marked *durable* return only after their effect would survive
//!   a crash of the process or machine. Others may lose their last moments on a crash but
//!   never leave a torn record.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::activity::{ActivityDelta, HourStart, HourlyActivity};
use crate::domain_name::DomainName;
use crate::email::EmailAddress;
use crate::ids::{
    ApiKeyId, DeliveryId, DomainId, EventId, InboundMessageId, InboundRouteId, MessageId, SenderId, SuppressionId,
    TemplateId, TemplateVersionId, WebhookId, WorkspaceId,
};
use crate::message_search::{CreatedRange, SearchText};
use crate::model::{
    ApiKey, DashboardSession, Domain, IdempotencyKey, IdempotencyRecord, InboundMessage, InboundRoute, KeyHash,
    Message, MessageEvent, MessageStatus, RateLimit, Sender, SenderUsername, SessionTokenHash, Suppression,
    SuppressionReason, Template, TemplateVersion, WebhookDelivery, WebhookEndpoint, Workspace,
};
use crate::ports::{EndpointQuota, StoreResult};
use crate::reputation::ScopeReputation;
use crate::secret::{Secret, SecretName};

/// Where a list starts and how much it returns. `limit` is 1–200 (validated by core).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest<C> {
    /// Maximum items.
    pub limit: usize,
    /// Start strictly after this id (in list order); `None` for the first page.
    pub cursor: Option<C>,
}

impl<C> PageRequest<C> {
    /// The first page of `limit` items.
    pub fn first(limit: usize) -> Self {
        Self { limit, cursor: None }
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// At most `limit` items, in list order.
    pub items: Vec<T>,
    /// Whether more items follow the last one.
    pub has_more: bool,
}

/// Filters of `GET /v1/messages`. All given filters must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageQuery {
    /// Only this status.
    pub status: Option<MessageStatus>,
    /// Only messages with this recipient, in any of `to`, `cc` and `bcc` (compared by
    /// [`EmailAddress::normalized`]).
    pub to: Option<EmailAddress>,
    /// Only messages sent with this key (send-scoped keys see only their own).
    pub sent_by: Option<ApiKeyId>,
    /// Only messages carrying every one of these tags.
    pub tags: Vec<TagFilter>,
    /// Only messages whose metadata holds every one of these `(key, value)` entries.
    pub metadata: Vec<(String, String)>,
    /// Only messages whose subject, a recipient's address or a display name contains this
    /// text, ignoring case ([`SearchText::matches`]).
    pub text: Option<SearchText>,
    /// Only messages created in this range (by their ids).
    pub created: CreatedRange,
    /// Page, walking older: the first page, or the one strictly older than `page.cursor`.
    pub page: PageRequest<MessageId>,
    /// When set (then `page.cursor` is `None`), the page walks newer instead: the up to
    /// `page.limit` matching messages strictly newer than this id and nearest to it, still
    /// returned newest first, with `has_more` telling whether matching messages newer than
    /// the first one exist. Costs what a page in the other direction costs.
    pub ending_before: Option<MessageId>,
}

impl MessageQuery {
    /// A query for one page with no filter.
    pub fn page(page: PageRequest<MessageId>) -> Self {
        Self {
            status: None,
            to: None,
            sent_by: None,
            tags: Vec::new(),
            metadata: Vec::new(),
            text: None,
            created: CreatedRange::default(),
            page,
            ending_before: None,
        }
    }

    /// The ids the page may hold, from the creation range and the page's start: every id at
    /// or above `.0` and below `.1` (`None`: unbounded). `ending_before` raises the lower
    /// bound above itself; `page.cursor` lowers the upper one to itself.
    pub fn id_bounds(&self) -> (Option<MessageId>, Option<MessageId>) {
        let mut low = self.created.start;
        let mut high = self.created.end;
        if let Some(cursor) = self.page.cursor {
            high = Some(high.map_or(cursor, |h| h.min(cursor)));
        }
        if let Some(after) = self.ending_before {
            // Strictly newer: at or above the next id (none above the largest).
            let next = after.0.increment().map(MessageId);
            match next {
                Some(next) => low = Some(low.map_or(next, |l| l.max(next))),
                None => high = Some(MessageId(ulid::Ulid::nil())),
            }
        }
        (low, high)
    }

    /// Whether `message` passes the filters no store indexes everywhere: `text`, the
    /// creation range, `tags` and `metadata`. Stores check them on the record they load.
    pub fn matches_unindexed(&self, message: &Message) -> bool {
        self.created.contains(message.id)
            && self.text.as_ref().is_none_or(|t| t.matches(message))
            && self.matches_labels(message)
    }

    /// Whether `message` passes the `tags` and `metadata` filters (the others are indexed
    /// columns in every store; these are checked on the record where a store has no index).
    pub fn matches_labels(&self, message: &Message) -> bool {
        let extras = &message.extras;
        self.tags.iter().all(|t| extras.has_tag(&t.name, t.value.as_deref()))
            && self.metadata.iter().all(|(k, v)| extras.metadata.get(k) == Some(v.as_str()))
    }
}

/// A `tag` filter of `GET /v1/messages`: a tag with this name and, when given, this value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagFilter {
    /// The tag's name.
    pub name: String,
    /// The tag's value; `None` matches any value.
    pub value: Option<String>,
}

/// Everything written when a message is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// The message, status `Queued` with `next_attempt_at` set (due now), or `Scheduled`
    /// with `next_attempt_at` at its send time.
    pub message: Message,
    /// Its `Queued` (or `Scheduled`) event.
    pub event: MessageEvent,
    /// Events about single recipients written with it, after `event`: the `Suppressed` of
    /// each suppressed recipient of a send to several (contract §10). Empty for every other
    /// send. The message's `last_event_id` is the last of them.
    pub recipient_events: Vec<MessageEvent>,
    /// The idempotency record, when the request had a key.
    pub idempotency: Option<IdempotencyRecord>,
    /// Webhook deliveries for the `Queued` event.
    pub webhook_deliveries: Vec<WebhookDelivery>,
    /// What it adds to the activity counters ([`ActivityDelta::of_new_message`]), added
    /// only if the message is written.
    pub activity: ActivityDelta,
}

/// Everything written when a batch of messages is accepted (`POST /v1/messages/batch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBatch {
    /// The messages, each with its event and webhook deliveries; their own `idempotency` is
    /// `None` (the batch has one record).
    pub messages: Vec<NewMessage>,
    /// The batch's idempotency record (with its per-item results), when the request had a key.
    pub idempotency: Option<IdempotencyRecord>,
    /// When the batch was accepted: an idempotency record expired at this time is replaced.
    pub accepted_at: DateTime<Utc>,
}

/// What `create_message` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    /// Written and durable.
    Created,
    /// The idempotency key was already used (and has not expired at `message.created_at`);
    /// nothing was written. The record tells which message it created and with what request.
    Duplicate(IdempotencyRecord),
}

/// Messages waiting for a delivery attempt, for the queue-depth gauge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingMessages {
    /// Messages with a next attempt (`next_attempt_at` set): `Queued`, `Scheduled`,
    /// `Deferred`, and `Sent` ones in flight.
    pub total: u64,
    /// Of those, the ones due at the time asked about (or leased by a worker until then).
    pub due: u64,
}

/// A change of a message's state with the event that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventWrite {
    /// The status the caller read; the write fails with `Conflict` if it changed since
    /// (another worker or report got there first).
    pub expected_status: MessageStatus,
    /// When set, the write also fails with `Conflict` unless the stored `next_attempt_at` is
    /// exactly this: the delivery worker passes its lease, so a message rescheduled or
    /// released after the claim is not sent under the old claim.
    pub expected_next_attempt_at: Option<DateTime<Utc>>,
    /// When set, the write also fails with `Conflict` unless the stored message's
    /// `last_event_id` is exactly this: no event at all was recorded since the caller read
    /// it. Opens and clicks pass it, because what they may record depends on the message's
    /// tracking tally, which another open or click may have just changed. A write without
    /// it keeps the stored message's `tracking_tally` whatever `message` carries: a status
    /// write (`Delivered`, a bounce) that read the message before an open was recorded must
    /// not undo that open's count.
    pub expected_last_event_id: Option<EventId>,
    /// The message after the event (same id and workspace).
    pub message: Message,
    /// The event, appended to the timeline.
    pub event: MessageEvent,
    /// More events recorded by the same write, after `event` and in order: events of
    /// several recipients of one message that happened together (their attempts starting,
    /// outcomes that arrived at once), so that a message to 50 recipients is not rewritten
    /// 50 times. `message` is the message after all of them; the last one's id is its
    /// `last_event_id`. Empty for most writes.
    pub more_events: Vec<MessageEvent>,
    /// Webhook deliveries for the events.
    pub webhook_deliveries: Vec<WebhookDelivery>,
    /// What the events add to the activity counters ([`ActivityDelta::of_events`]), added
    /// in the same write and only if it succeeds: a write refused with `Conflict` or
    /// `NotFound` counts nothing.
    pub activity: ActivityDelta,
}

/// A new template version before the store numbers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTemplateVersion {
    /// Id.
    pub id: TemplateVersionId,
    /// Subject template.
    pub subject: String,
    /// HTML template.
    pub html: Option<String>,
    /// Text template.
    pub text: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// Changes of `PATCH /v1/templates/{id}`; `None` leaves a field as it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateChange {
    /// New name.
    pub name: Option<String>,
    /// New current version; must be a version of this template.
    pub current_version_id: Option<TemplateVersionId>,
}

/// Workspaces.
#[async_trait]
pub trait WorkspaceStore: Send + Sync {
    /// Creates a workspace together with its first key, atomically (durable). `Conflict` if
    /// the id or the key hash exists.
    async fn create_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<()>;
    /// [`Self::create_workspace`] only on a store that has no workspace at all: then creates
    /// the workspace and its key (durable; the same `Conflict`s) and returns `true`. A store
    /// that has a workspace gets nothing written and `false`, never a `Conflict`. The check
    /// and the write are one atomic step across every process sharing the store: of racing
    /// calls on an empty store exactly one returns `true`, and a racing `create_workspace`
    /// comes either before (this returns `false`) or after. For the first start of nodes
    /// that may start together on one fresh store.
    async fn create_first_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<bool>;
    /// One workspace.
    async fn get_workspace(&self, id: WorkspaceId) -> StoreResult<Option<Workspace>>;
    /// All workspaces, oldest first (operators have few).
    async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>>;
}

/// API keys.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Stores a new key (durable). `Conflict` if its id or hash exists.
    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()>;
    /// The key with this hash, in any workspace, revoked or not (authentication).
    async fn find_api_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<ApiKey>>;
    /// One key of the workspace, revoked or not.
    async fn get_api_key(&self, workspace: WorkspaceId, id: ApiKeyId) -> StoreResult<Option<ApiKey>>;
    /// Keys of the workspace that are not revoked, newest first.
    async fn list_api_keys(&self, workspace: WorkspaceId, page: PageRequest<ApiKeyId>) -> StoreResult<Page<ApiKey>>;
    /// Marks a key revoked at `at` (durable) and returns it. `NotFound` if absent or already
    /// revoked. From return on, `find_api_key_by_hash` shows it revoked.
    async fn revoke_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<ApiKey>;
    /// Records a use (not durable, may be coalesced). Unknown or revoked keys are ignored.
    async fn touch_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<()>;
    /// Sets a live key's send rate (durable) and returns the key. `NotFound` if absent or
    /// revoked. From return on, `find_api_key_by_hash` shows the new rate, so the next send
    /// on any node is limited by it.
    async fn set_api_key_rate_limit(
        &self,
        workspace: WorkspaceId,
        id: ApiKeyId,
        rate_limit: RateLimit,
    ) -> StoreResult<ApiKey>;
}

/// Messages, their timelines and the delivery queue.
#[async_trait]
pub trait MessageStore: Send + Sync {
    /// Accepts a message (durable): message, `Queued` event, idempotency record, queue entry
    /// (from `next_attempt_at`) and webhook deliveries are written together or not at all.
    /// If the idempotency key is taken and unexpired, writes nothing and returns
    /// `Duplicate`; of two racing calls with one key exactly one is `Created`. `Conflict` if
    /// the message id exists.
    async fn create_message(&self, new: &NewMessage) -> StoreResult<CreateOutcome>;
    /// Accepts several messages at once (durable, one write): every message with its event,
    /// queue entry and webhook deliveries, and the batch's idempotency record, are written
    /// together or not at all. If the idempotency key is taken and unexpired at
    /// `accepted_at`, writes nothing and returns `Duplicate`. `Conflict` (nothing written)
    /// if any message id exists. An empty `messages` with a record writes just the record.
    async fn create_messages(&self, batch: &NewBatch) -> StoreResult<CreateOutcome>;
    /// One message.
    async fn get_message(&self, workspace: WorkspaceId, id: MessageId) -> StoreResult<Option<Message>>;
    /// The message with this id in whichever workspace holds it. For inbound bounce and
    /// complaint reports, which name a message but no workspace; message ids are ULIDs, unique
    /// across workspaces. Must not cost more than a `get_message` (an index, not a scan):
    /// anyone can send a report naming a random id.
    async fn find_message(&self, id: MessageId) -> StoreResult<Option<Message>>;
    /// Messages matching the query, newest first.
    async fn list_messages(&self, workspace: WorkspaceId, query: &MessageQuery) -> StoreResult<Page<Message>>;
    /// A message's events, oldest first. `NotFound` if the message does not exist.
    async fn list_events(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        page: PageRequest<EventId>,
    ) -> StoreResult<Page<MessageEvent>>;
    /// Applies a state change (durable): replaces the message, appends the event, updates the
    /// status index and the queue entry (`message.next_attempt_at`), queues the webhook
    /// deliveries. `NotFound` if the message is gone; `Conflict` if its stored status is not
    /// `expected_status`, or `expected_next_attempt_at` or `expected_last_event_id` is set and
    /// differs from the stored one. Without `expected_last_event_id` the stored tracking tally
    /// is kept (see [`EventWrite::expected_last_event_id`]).
    async fn record_event(&self, write: EventWrite) -> StoreResult<()>;
    /// Claims up to `limit` messages whose `next_attempt_at` is at or before `now`, earliest
    /// due first, across workspaces, and moves their `next_attempt_at` to `lease_until` so
    /// that no other claimer gets them until the lease expires. Returns them as updated.
    async fn claim_due_messages(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<Message>>;
    /// Ends the leases a dead process left, for a store that only one process can open, at
    /// that process's start-up: for up to `limit` messages whose status holds a lease
    /// ([`MessageStatus::next_attempt_is_lease`]: `Queued` or `Sent`) and whose
    /// `next_attempt_at` is after `now`, earliest first, sets `next_attempt_at` to `now` and
    /// moves the queue entry with it, so that the next claim takes them at once. Nothing
    /// else changes (status, `updated_at`, events). Returns how many it released; the caller
    /// repeats until that is less than `limit`.
    ///
    /// Only `Queued` and `Sent` count as leased: a `Queued` message is due from its creation,
    /// so a later time can only be a claim's lease, and a `Sent` one is in flight. A
    /// `Deferred` message's time is its retry time and a `Scheduled` one's its send time, so
    /// both keep it; this includes the rare `Deferred` message claimed but not yet recorded
    /// `Sent` again, which keeps its lease. The other statuses are never due.
    ///
    /// Valid only while no claimer is alive: it takes away the messages a live worker is
    /// sending, which would then be sent twice. So a store that several processes or nodes
    /// share must NOT call it (it cannot tell a dead worker's lease from a live one's); there
    /// the leases simply end. Call it before this process's first claim. Not durable: a
    /// release lost in a crash leaves the leases, which the next start releases again. May
    /// cost O(messages due after `now`), retry times included: it runs once per start.
    async fn release_message_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
    /// Puts a claimed message back in the queue without an attempt (its delivery site could
    /// not take it yet): if its stored `next_attempt_at` is exactly `lease` (the claim's, so
    /// nobody changed it since), sets it to `due` and moves the queue entry with it. Nothing
    /// else changes (status, `updated_at`, events, attempts). `false`, changing nothing, if
    /// the message is gone or its `next_attempt_at` differs. Not durable: a requeue lost in
    /// a crash leaves the claim, whose lease ends.
    async fn requeue_message(
        &self,
        workspace: WorkspaceId,
        id: MessageId,
        lease: DateTime<Utc>,
        due: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Whether no other process can use this store while this one has it open (sled locks
    /// its directory; an in-memory store is the process's own). Only then was every lease
    /// found in it at start taken by a run that is gone, so that
    /// [`Self::release_message_leases`] and its webhook twin may be called. `false`, the
    /// default, for a store that several processes or nodes may share.
    fn is_exclusive(&self) -> bool {
        false
    }
    /// Why the store has failed for good, if it has: a failure that only reopening it mends
    /// (sled's flush to disk failed or stalled: every call answers `Unavailable` from then
    /// on, and the reopened store holds exactly what was durable). The process should stop
    /// and be restarted. `None`, the default, for a store that recovers by itself (a
    /// database connection is made again). Cheap: may be polled often.
    fn failure(&self) -> Option<std::sync::Arc<str>> {
        None
    }
    /// How many messages have a next attempt, and how many of those are due at `now`
    /// ([`PendingMessages`]). For the queue-depth gauge, read every few seconds at most: it
    /// may cost O(messages waiting) (a count over the due index), never O(messages).
    async fn count_pending_messages(&self, now: DateTime<Utc>) -> StoreResult<PendingMessages>;
    /// Retention: for up to `limit` messages whose id was minted before `created_before`
    /// (ids are ULIDs minted at `created_at`, so this is their age to the millisecond), that
    /// have nothing due (`next_attempt_at` is `None`: delivered or terminal) and something
    /// left to purge, earliest id first: replaces the message with
    /// [`Message::without_content`] and deletes its whole timeline, together (durable).
    /// Returns how many messages it purged; the caller repeats until that is less than
    /// `limit`. Each call is its own bounded write, so sends are never held up for long.
    ///
    /// "Something left to purge" means the message was created, or had an event recorded,
    /// since it was last purged: a message purged once is skipped (and not counted) until
    /// [`MessageStore::record_event`] writes to it again (a late bounce, an open), and is
    /// then purged again, its new events and any body that write put back included. Messages
    /// still waiting for an attempt are skipped without being counted; they may be read
    /// again by every call until they are settled, which retries and scheduling bound.
    async fn purge_message_content(&self, created_before: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
    /// The idempotency record for `key` in the workspace, expired or not.
    async fn get_idempotency(
        &self,
        workspace: WorkspaceId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyRecord>>;
    /// Deletes up to `limit` idempotency records with `expires_at <= now`, earliest first,
    /// without scanning unexpired ones; returns how many it deleted.
    async fn purge_expired_idempotency(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
}

/// Domains and their senders.
#[async_trait]
pub trait DomainStore: Send + Sync {
    /// Adds a domain (durable). `Conflict` if the workspace already has one with this name.
    async fn insert_domain(&self, domain: &Domain) -> StoreResult<()>;
    /// One domain.
    async fn get_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<Option<Domain>>;
    /// The workspace's domain with this name.
    async fn find_domain_by_name(&self, workspace: WorkspaceId, name: &DomainName) -> StoreResult<Option<Domain>>;
    /// Domains of the workspace, newest first.
    async fn list_domains(&self, workspace: WorkspaceId, page: PageRequest<DomainId>) -> StoreResult<Page<Domain>>;
    /// Replaces a domain's mutable state (status, records, tracking, timestamps). The name
    /// and keys must not change: `Conflict` if the stored domain's name or DKIM pairs
    /// ([`Domain::same_keys`](crate::model::Domain::same_keys)) differ from `domain`'s (a
    /// rotation happened since it was read). `NotFound` if it was deleted.
    async fn update_domain(&self, domain: &Domain) -> StoreResult<()>;
    /// Replaces a domain, its DKIM pairs included (a rotation starts or moves on), only if
    /// the stored pairs are still those of `expected` ([`Domain::same_keys`](crate::model::Domain::same_keys)),
    /// atomically: `Conflict` if another writer changed them meanwhile (the caller reads
    /// again and redoes its change), so two nodes rotating or verifying at once never lose a
    /// pair. The name must not change (`Conflict`). `NotFound` if it was deleted.
    async fn update_domain_keys(&self, domain: &Domain, expected: &Domain) -> StoreResult<()>;
    /// Deletes a domain and its senders (durable); its name can be added again. `NotFound`
    /// if absent.
    async fn delete_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<()>;
    /// Up to `limit` domains, of any workspace, with something left to verify
    /// ([`Domain::needs_recheck`](crate::model::Domain::needs_recheck)) and whose last
    /// check (`last_checked_at`, or `created_at` if never checked) is before
    /// `checked_before`; least recently checked first, ties by id. Drives the periodic
    /// re-verification. Unlike the lists, this may cost O(domains): there are few, and it
    /// runs every few minutes.
    async fn list_domains_to_recheck(&self, checked_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>>;
    /// Up to `limit` domains, of any workspace, whose
    /// [`Domain::rotation_due_from`](crate::model::Domain::rotation_due_from) is before
    /// `made_before`, earliest first, ties by id: the automatic DKIM rotation's work. Domains
    /// whose `rotation_due_from` is `None` are never listed. Stores may index that value.
    async fn list_domains_to_rotate(&self, made_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>>;
    /// Registers a sender. `NotFound` if the domain is gone; `Conflict` if the username
    /// (case-insensitive) is taken on that domain.
    async fn insert_sender(&self, sender: &Sender) -> StoreResult<()>;
    /// The sender with this username (case-insensitive) on the domain.
    async fn get_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<Option<Sender>>;
    /// Senders of a domain, newest first.
    async fn list_senders(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        page: PageRequest<SenderId>,
    ) -> StoreResult<Page<Sender>>;
    /// Removes a sender. `NotFound` if absent.
    async fn delete_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<()>;
}

/// Templates and versions.
#[async_trait]
pub trait TemplateStore: Send + Sync {
    /// Creates a template with its first version (in `template.versions`, number 1).
    async fn insert_template(&self, template: &Template) -> StoreResult<()>;
    /// A template with all its versions.
    async fn get_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<Option<Template>>;
    /// The ids of the workspace's templates whose name is exactly `name`, newest first, at
    /// most `limit` (names are not unique: a caller asks for 2 to tell one from several).
    async fn template_ids_named(
        &self,
        workspace: WorkspaceId,
        name: &str,
        limit: usize,
    ) -> StoreResult<Vec<TemplateId>>;
    /// Templates with their versions, newest first.
    async fn list_templates(
        &self,
        workspace: WorkspaceId,
        page: PageRequest<TemplateId>,
    ) -> StoreResult<Page<Template>>;
    /// One version by id (while its template exists).
    async fn get_template_version(
        &self,
        workspace: WorkspaceId,
        id: TemplateVersionId,
    ) -> StoreResult<Option<TemplateVersion>>;
    /// Appends a version numbered one past the highest (atomically: two concurrent calls get
    /// different numbers), optionally making it current. `NotFound` if the template is gone.
    async fn add_template_version(
        &self,
        workspace: WorkspaceId,
        template: TemplateId,
        version: NewTemplateVersion,
        make_current: bool,
    ) -> StoreResult<TemplateVersion>;
    /// Renames or changes the current version; returns the template as changed. `NotFound`
    /// if the template is gone; `Conflict` if the version is not one of its own.
    async fn update_template(
        &self,
        workspace: WorkspaceId,
        id: TemplateId,
        change: TemplateChange,
    ) -> StoreResult<Template>;
    /// Deletes a template and its versions. `NotFound` if absent.
    async fn delete_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<()>;
}

/// The suppression list.
#[async_trait]
pub trait SuppressionStore: Send + Sync {
    /// Adds an entry unless the address (case-insensitive) is already suppressed (durable).
    /// Returns the entry now stored and whether it was created by this call.
    async fn insert_suppression(&self, suppression: &Suppression) -> StoreResult<(Suppression, bool)>;
    /// The entry for an address (case-insensitive).
    async fn get_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<Option<Suppression>>;
    /// Entries, newest first, optionally of one reason.
    async fn list_suppressions(
        &self,
        workspace: WorkspaceId,
        reason: Option<SuppressionReason>,
        page: PageRequest<SuppressionId>,
    ) -> StoreResult<Page<Suppression>>;
    /// Removes the entry for an address (case-insensitive). `NotFound` if absent.
    async fn delete_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<()>;
}

/// Webhook endpoints and their delivery log and queue.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Creates an endpoint.
    async fn insert_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()>;
    /// One endpoint.
    async fn get_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<Option<WebhookEndpoint>>;
    /// Endpoints, newest first.
    async fn list_webhooks(
        &self,
        workspace: WorkspaceId,
        page: PageRequest<WebhookId>,
    ) -> StoreResult<Page<WebhookEndpoint>>;
    /// All enabled endpoints of a workspace (for fan-out; workspaces have few).
    async fn list_enabled_webhooks(&self, workspace: WorkspaceId) -> StoreResult<Vec<WebhookEndpoint>>;
    /// Replaces an endpoint. `NotFound` if deleted.
    async fn update_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()>;
    /// Deletes an endpoint and its delivery log. `NotFound` if absent.
    async fn delete_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<()>;
    /// Queues deliveries (durable), e.g. a `Test` event. `NotFound` if an endpoint is gone.
    async fn insert_webhook_deliveries(&self, deliveries: &[WebhookDelivery]) -> StoreResult<()>;
    /// One delivery.
    async fn get_webhook_delivery(
        &self,
        workspace: WorkspaceId,
        id: DeliveryId,
    ) -> StoreResult<Option<WebhookDelivery>>;
    /// An endpoint's deliveries, newest first.
    async fn list_webhook_deliveries(
        &self,
        workspace: WorkspaceId,
        endpoint: WebhookId,
        page: PageRequest<DeliveryId>,
    ) -> StoreResult<Page<WebhookDelivery>>;
    /// The deliveries of the events of one message, newest first, at most `limit`:
    /// what the message caused at every endpoint (the dashboard's message page).
    async fn list_message_webhook_deliveries(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        limit: usize,
    ) -> StoreResult<Vec<WebhookDelivery>>;
    /// Replaces a delivery after an attempt, updating the queue from `next_attempt_at`
    /// (durable). `NotFound` if gone.
    async fn update_webhook_delivery(&self, delivery: &WebhookDelivery) -> StoreResult<()>;
    /// Like [`MessageStore::claim_due_messages`], for deliveries, within a per-endpoint and
    /// per-workspace `quota`: scanning due deliveries earliest first, one is claimed only
    /// while both its endpoint and its workspace have room ([`EndpointQuota::remaining`] and
    /// [`EndpointQuota::remaining_in_workspace`] minus those this call already took, as
    /// [`QuotaCount::take`](super::QuotaCount::take) counts them); the others are skipped
    /// untouched (still due, claimable by a later call) and the scan goes on past them until
    /// `limit` are claimed or nothing due remains. So a claim may read many due deliveries
    /// of a capped endpoint or workspace; it should not load whole records to find their
    /// endpoint or workspace when an index can tell. [`EndpointQuota::unlimited`] claims
    /// exactly as `claim_due_messages` does.
    async fn claim_due_webhook_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
        quota: &EndpointQuota,
    ) -> StoreResult<Vec<WebhookDelivery>>;
    /// Like [`MessageStore::release_message_leases`], for deliveries: up to `limit`
    /// deliveries whose status holds a lease ([`DeliveryStatus::next_attempt_is_lease`]:
    /// `Pending`) and whose `next_attempt_at` is after `now` become due at `now`, earliest
    /// first; returns how many. The same restriction applies: only for a store that one
    /// process alone can open, at that process's start-up.
    ///
    /// [`DeliveryStatus::next_attempt_is_lease`]: crate::model::DeliveryStatus::next_attempt_is_lease
    async fn release_webhook_delivery_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
}

/// Secrets that belong to the store rather than to one node, so that every node sharing the
/// store uses the same (the key that signs tracking links).
#[async_trait]
pub trait SecretStore: Send + Sync {
    /// The secret stored under `name`; if there is none, stores `candidate` first and returns
    /// it (durable). Atomic across every process sharing the store: racing calls for one
    /// name all return the one value that got stored, whatever their candidates. A stored
    /// secret never changes, and names are independent of each other.
    async fn ensure_secret(&self, name: SecretName, candidate: &Secret<Vec<u8>>) -> StoreResult<Secret<Vec<u8>>>;
}

/// The kinds of record that hold sealed secrets ([`crate::sealing`]), in the order a
/// re-seal pass takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecretHolder {
    /// Domains: their DKIM private keys (every one [`crate::sealing::SecretFields`] names).
    Domains,
    /// Webhook endpoints: their signing secret and previous secret.
    Webhooks,
    /// The store's own secrets ([`SecretStore`]: the tracking key).
    StoreSecrets,
}

impl SecretHolder {
    /// Every kind, in pass order.
    pub const ALL: [Self; 3] = [Self::Domains, Self::Webhooks, Self::StoreSecrets];
}

/// Where a re-seal pass over one [`SecretHolder`] goes on from: made by the store that
/// answered [`SecretResealStore::reseal_secrets`] and meaningful to it alone (a key, an id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResealCursor(pub Vec<u8>);

/// What one [`SecretResealStore::reseal_secrets`] call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResealBatch {
    /// Records read.
    pub examined: usize,
    /// Of those, records written again with their secrets sealed with the store's key.
    pub resealed: usize,
    /// Where the next call goes on from; `None` when no record of the kind is left.
    pub next: Option<ResealCursor>,
}

/// Moving a store's secrets to a new sealing key (`crate::sealing::rotation`). The store
/// was opened with a [`Sealer`](crate::sealing::Sealer) holding the new key and the previous
/// one; its key check opened with either.
#[async_trait]
pub trait SecretResealStore: Send + Sync {
    /// Reads up to `limit` records of `kind` after `after` (from the first: `None`), in an
    /// order of the store's choosing that a pass keeps to, and writes again, durably, each
    /// whose [`Sealer::reseal_record`](crate::sealing::Sealer::reseal_record) (or
    /// [`Sealer::reseal`](crate::sealing::Sealer::reseal) for a store secret) is `Some`.
    /// Each record is decided and written atomically with respect to every other write of
    /// every process sharing the store (a lock or a transaction held over the batch, never
    /// over I/O elsewhere), so a concurrent update is never lost: it either comes before and
    /// is re-sealed, or after and is written with the new key by its writer. A record
    /// neither key opens is `Corrupt`, and nothing of its batch is written.
    async fn reseal_secrets(
        &self,
        kind: SecretHolder,
        after: Option<&ResealCursor>,
        limit: usize,
    ) -> StoreResult<ResealBatch>;
    /// Replaces the store's key check with one of the store's key (durable), so that from
    /// now on only that key opens the store. Call only once no secret is under the previous
    /// key.
    async fn replace_key_check(&self) -> StoreResult<()>;
}

/// Dashboard sessions (found by the SHA-256 of their token, across workspaces).
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Stores a new session (durable: a node that did not open it honours it at once).
    /// `Conflict` if its id or token hash exists.
    async fn insert_session(&self, session: &DashboardSession) -> StoreResult<()>;
    /// The session with this token hash, expired or not (the caller decides).
    async fn find_session(&self, token: &SessionTokenHash) -> StoreResult<Option<DashboardSession>>;
    /// Sets `last_seen_at` and `expires_at` of the session if `last_seen_at` is later than
    /// the stored one (not durable, may be coalesced: a lost touch only ends a session a
    /// little early). An unknown session is ignored.
    async fn touch_session(
        &self,
        token: &SessionTokenHash,
        last_seen_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Deletes the session (durable: from return on no node finds it). `false` if there was
    /// none.
    async fn delete_session(&self, token: &SessionTokenHash) -> StoreResult<bool>;
    /// Deletes up to `limit` sessions whose `expires_at` is at or before `now`, earliest
    /// first, and returns how many; the caller repeats until that is less than `limit`. Cost
    /// O(limit) plus, at most, O(sessions) on a store without an index on expiry.
    async fn delete_expired_sessions(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
}

/// The activity counters (`crate::activity`): per workspace, sending domain and hour, what
/// happened to its recipients. `create_message`, `create_messages` and `record_event` add
/// their writes' `activity` in the same atomic, durable write as their events; a write that
/// fails, or a create that finds its idempotency key taken, adds nothing.
#[async_trait]
pub trait ActivityStore: Send + Sync {
    /// The workspace's counter rows of the hours from `from` until `until` (excluded),
    /// by hour then domain; rows with nothing counted may be left out. Costs O(domains ×
    /// hours) of the range, never O(messages).
    async fn activity(
        &self,
        workspace: WorkspaceId,
        from: HourStart,
        until: HourStart,
    ) -> StoreResult<Vec<HourlyActivity>>;
    /// Deletes up to `limit` counter rows, of any workspace, of hours before `before`,
    /// earliest first (ties by workspace then domain, so every store purges the same
    /// rows), without reading later ones; returns how many. The caller repeats
    /// until that is less than `limit`. Not durable: a purge lost in a crash is done again.
    async fn purge_activity(&self, before: HourStart, limit: usize) -> StoreResult<usize>;
}

/// The reputation guard's standings (`crate::reputation`): one record per workspace and
/// scope that ever changed. Every node of a store reads and writes the same records.
#[async_trait]
pub trait ReputationStore: Send + Sync {
    /// Every record of `workspace` (its own scope and its domains'), in scope order. Costs
    /// O(records of the workspace): at most one per domain, plus one.
    async fn reputation(&self, workspace: WorkspaceId) -> StoreResult<Vec<ScopeReputation>>;
    /// Stores `next` (whose `version` is `expected + 1`) if the record of its
    /// workspace and scope has version `expected` (`0`: there is no record), together with
    /// `deliveries` (the webhook events the change announces) in one atomic, durable write;
    /// returns whether it did. `false` writes nothing: another writer changed the record
    /// first, and the caller judges again from what is stored. Deliveries to endpoints that
    /// no longer exist are left out.
    async fn change_reputation(
        &self,
        next: &ScopeReputation,
        expected: u64,
        deliveries: &[WebhookDelivery],
    ) -> StoreResult<bool>;
}

/// A place in a workspace's event feed ([`EventFeedStore`]): the events after it come next.
/// `commit` orders the writes as they became visible (a sequence number taken under the
/// store's writer lock on sled, the writing transaction's id on PostgreSQL); `event` orders
/// the events of one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FeedPosition {
    /// The write's place among the workspace's writes.
    pub commit: u64,
    /// The event's place within its write.
    pub event: EventId,
}

/// One event of the feed with its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedEntry {
    /// Where a reader goes on from, to read what came after this event.
    pub position: FeedPosition,
    /// The event, as recorded.
    pub event: MessageEvent,
}

/// The durable event feed: every event `create_message`, `create_messages` and
/// `record_event` write, per workspace, in an order a reader can follow without missing
/// one. Ids alone do not give that order: two writers take ids, then commit in either
/// order, and a reader between the commits that went on from the higher id would never see
/// the lower one. A position is given only to what no write still in progress can come
/// before.
#[async_trait]
pub trait EventFeedStore: Send + Sync {
    /// Up to `limit` events of `workspace` after `after` (from the feed's start: `None`),
    /// in feed order. An event recorded after this call comes after every position it
    /// returned. An event may reach the feed a moment after its write returned (a store
    /// may hold back what writes still in progress elsewhere could precede: PostgreSQL waits
    /// for every transaction older than the write), never out of place. Events leave the feed when retention purges their message's timeline (at
    /// the latest once they are older than the retention); events recorded before the
    /// store had a feed are not in it. Costs O(limit).
    async fn event_feed(
        &self,
        workspace: WorkspaceId,
        after: Option<FeedPosition>,
        limit: usize,
    ) -> StoreResult<Vec<FeedEntry>>;
}

/// Filters of `GET /v1/inbound/messages`. All given filters must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboundQuery {
    /// Only messages delivered to this address: one of the envelope's recipients (compared
    /// by [`EmailAddress::normalized`]), Bcc included.
    pub to: Option<EmailAddress>,
    /// Only messages whose `From` address is this one (ASCII case-insensitively).
    pub from: Option<String>,
}

impl InboundQuery {
    /// Whether `message` passes the filters: what every store's filtering must agree with.
    pub fn matches(&self, message: &InboundMessage) -> bool {
        let to = self.to.as_ref().is_none_or(|to| {
            let wanted = to.normalized();
            message.envelope.recipients.iter().any(|r| r.normalized() == wanted)
        });
        let from = self
            .from
            .as_ref()
            .is_none_or(|from| message.parsed.from.as_ref().is_some_and(|f| f.address.eq_ignore_ascii_case(from)));
        to && from
    }
}

/// How much inbound mail a workspace may keep (`TIDINGS_INBOUND_QUOTA_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboundQuota {
    /// Messages kept at most.
    pub max_messages: u64,
    /// Bytes kept at most, as [`InboundMessage::stored_bytes`] counts them.
    pub max_bytes: u64,
}

/// What a workspace's inbound mail takes now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboundUsage {
    /// Messages kept.
    pub messages: u64,
    /// Their [`InboundMessage::stored_bytes`], summed.
    pub bytes: u64,
}

impl InboundUsage {
    /// Whether one more message of `bytes` fits in `quota`.
    pub fn admits(&self, bytes: u64, quota: &InboundQuota) -> bool {
        self.messages < quota.max_messages && self.bytes.saturating_add(bytes) <= quota.max_bytes
    }
}

/// Inbound mail (contract §13): a workspace's routes and the messages its inbound domains
/// received, with their raw bytes. Every message counts toward the workspace's
/// [`InboundUsage`], kept exactly with each write.
#[async_trait]
pub trait InboundStore: Send + Sync {
    /// Creates a route. `Conflict` if the workspace has a route with the same matcher.
    async fn insert_inbound_route(&self, route: &InboundRoute) -> StoreResult<()>;
    /// Every route of a workspace, oldest first (workspaces have few: core caps them).
    async fn list_inbound_routes(&self, workspace: WorkspaceId) -> StoreResult<Vec<InboundRoute>>;
    /// Replaces a route. `NotFound` if it is gone; `Conflict` if another route of the
    /// workspace has its matcher.
    async fn update_inbound_route(&self, route: &InboundRoute) -> StoreResult<()>;
    /// Deletes a route. `NotFound` if absent.
    async fn delete_inbound_route(&self, workspace: WorkspaceId, id: InboundRouteId) -> StoreResult<()>;
    /// Stores a received message, its raw bytes and the deliveries of its `InboundReceived`
    /// event in one atomic, durable write (the listener says `250` after it), if the
    /// workspace's usage with it stays within `quota`; returns whether it did. `false`
    /// writes nothing. Deliveries to endpoints that no longer exist are left out.
    /// `Conflict` if the id is taken.
    async fn insert_inbound(
        &self,
        message: &InboundMessage,
        raw: &[u8],
        deliveries: &[WebhookDelivery],
        quota: &InboundQuota,
    ) -> StoreResult<bool>;
    /// One message.
    async fn get_inbound(&self, workspace: WorkspaceId, id: InboundMessageId) -> StoreResult<Option<InboundMessage>>;
    /// One message's raw bytes, as received.
    async fn inbound_raw(&self, workspace: WorkspaceId, id: InboundMessageId) -> StoreResult<Option<Vec<u8>>>;
    /// Messages passing `query`, newest first. A filtered page may read up to the
    /// workspace's whole inbound mail, which its quota bounds.
    async fn list_inbound(
        &self,
        workspace: WorkspaceId,
        query: &InboundQuery,
        page: PageRequest<InboundMessageId>,
    ) -> StoreResult<Page<InboundMessage>>;
    /// What the workspace's inbound mail takes now.
    async fn inbound_usage(&self, workspace: WorkspaceId) -> StoreResult<InboundUsage>;
    /// Every domain, of any workspace, whose `inbound` is on (whether or not it is verified:
    /// core decides). Costs O(domains); core reads it every few seconds, not per message.
    async fn inbound_domains(&self) -> StoreResult<Vec<Domain>>;
    /// Deletes up to `limit` messages, of any workspace, received before `before`, earliest
    /// first, with their raw bytes, giving their usage back; returns how many. The caller
    /// repeats until that is less than `limit`.
    async fn purge_inbound(&self, before: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
}

/// The whole store.
pub trait Store:
    WorkspaceStore
    + KeyStore
    + MessageStore
    + DomainStore
    + TemplateStore
    + SuppressionStore
    + WebhookStore
    + SecretStore
    + SessionStore
    + ActivityStore
    + EventFeedStore
    + ReputationStore
    + InboundStore
{
}

impl<T> Store for T where
    T: WorkspaceStore
        + KeyStore
        + MessageStore
        + DomainStore
        + TemplateStore
        + SuppressionStore
        + WebhookStore
        + SecretStore
        + SessionStore
        + ActivityStore
        + EventFeedStore
        + ReputationStore
        + InboundStore
{
}
