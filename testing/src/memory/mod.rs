//! `MemoryStore`: the reference implementation of [`Store`], kept in memory.
//!
//! It is the executable form of the contract in [`tidings_core::ports::store`]: one mutex around
//! plain `BTreeMap`s keyed by id, every method a short scan done under the lock, so each is
//! atomic and obviously right. Nothing is durable and lists cost O(store), which is fine
//! for unit tests and as the model of the conformance suite, and nothing else.
//!
//! Where the contract leaves a choice open, this store decides as follows (the conformance
//! suite does not insist on these):
//! - Webhook deliveries written with a message or event for an endpoint that no longer
//!   exists are dropped: the endpoint was deleted, nobody wants them.
//! - `create_message` answers `Duplicate` before looking at the message id.
//! - Inserting a record whose id exists is a `Conflict`; `update_domain` that changes the
//!   name or keys is a `Conflict`.
//! - Claims and lease releases with equal due times take the lower id first.
//!
//! Like the persistent stores, it keeps domains, webhooks and secrets sealed
//! ([`tidings_core::sealing`]), under a key of its own, so that core's tests go through sealing and
//! opening on every read and write of a secret.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use tidings_core::domain_name::DomainName;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{
    ApiKeyId, DeliveryId, DomainId, EventId, MessageId, SenderId, SuppressionId, TemplateId, TemplateVersionId,
    WebhookId, WorkspaceId,
};
use tidings_core::model::{
    ApiKey, Domain, IdempotencyKey, IdempotencyRecord, KeyHash, Message, MessageEvent, Sender, SenderUsername,
    Suppression, SuppressionReason, Template, TemplateVersion, WebhookDelivery, WebhookEndpoint, Workspace,
};
use tidings_core::ports::{
    CreateOutcome, DomainStore, EndpointQuota, EventWrite, KeyStore, MessageQuery, MessageStore, NewBatch, NewMessage,
    NewTemplateVersion, Page, PageRequest, PendingMessages, SecretStore, StoreError, StoreResult, SuppressionStore,
    TemplateChange, TemplateStore, WebhookStore, WorkspaceStore,
};
use tidings_core::sealing::{Sealed, Sealer, SealingKey, SecretFields, secret_label};
use tidings_core::secret::{Secret, SecretName};

#[cfg(doc)]
use tidings_core::ports::Store;

mod accounts;
mod activity;
mod domains;
mod event_feed;
mod inbound;
mod messages;
mod reputation;
mod sealing;
mod sessions;
mod webhooks;

/// The reference in-memory [`Store`]. Cheap to create; share it as `Arc<MemoryStore>` or
/// `Arc<dyn Store>`.
#[derive(Debug)]
pub struct MemoryStore {
    state: Mutex<State>,
    sealer: Sealer,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self { state: Mutex::default(), sealer: Sealer::new(&SealingKey::generate(&tidings_core::ports::SystemRandom)) }
    }
}

#[derive(Debug, Default)]
struct State {
    workspaces: BTreeMap<WorkspaceId, Workspace>,
    keys: BTreeMap<ApiKeyId, ApiKey>,
    messages: BTreeMap<MessageId, Message>,
    events: BTreeMap<MessageId, BTreeMap<EventId, MessageEvent>>,
    /// Messages written since their last purge (see `purge_message_content`).
    purge_pending: std::collections::BTreeSet<MessageId>,
    idempotency: BTreeMap<(WorkspaceId, IdempotencyKey), IdempotencyRecord>,
    domains: BTreeMap<DomainId, Sealed<Domain>>,
    senders: BTreeMap<SenderId, Sender>,
    templates: BTreeMap<TemplateId, Template>,
    suppressions: BTreeMap<SuppressionId, Suppression>,
    webhooks: BTreeMap<WebhookId, Sealed<WebhookEndpoint>>,
    deliveries: BTreeMap<DeliveryId, WebhookDelivery>,
    /// Sealed.
    secrets: BTreeMap<SecretName, Vec<u8>>,
    sessions: BTreeMap<tidings_core::model::SessionTokenHash, tidings_core::model::DashboardSession>,
    /// The activity counters, by workspace, hour and domain.
    activity: BTreeMap<tidings_core::activity::ActivityKey, tidings_core::activity::ActivityCounts>,
    /// The event feed: where each event is, in the order of the writes (`event_feed.rs`).
    feed: BTreeMap<tidings_core::ports::FeedPosition, (WorkspaceId, MessageId)>,
    /// Writes numbered so far.
    feed_commits: u64,
    /// The reputation guard's standings, by workspace and scope.
    reputation: BTreeMap<(WorkspaceId, tidings_core::reputation::Scope), tidings_core::reputation::ScopeReputation>,
    /// Inbound routes by id.
    inbound_routes: BTreeMap<tidings_core::ids::InboundRouteId, tidings_core::model::InboundRoute>,
    /// Inbound messages by id (received order), with their raw bytes.
    inbound: BTreeMap<tidings_core::ids::InboundMessageId, (tidings_core::model::InboundMessage, Vec<u8>)>,
    /// The key check of the store's key, for [`MemoryStore::reopen`] (`sealing.rs`);
    /// `None` in a store made by [`MemoryStore::new`], whose key nobody else has.
    key_check: Option<Vec<u8>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// `record` sealed, as it is kept.
    fn seal<R: SecretFields + Clone>(&self, record: &R) -> StoreResult<Sealed<R>> {
        self.sealer.seal_record(record).map_err(|e| StoreError::Corrupt(tidings_core::Cause::new(e)))
    }

    /// A kept record, opened.
    fn open<R: SecretFields + Clone>(&self, stored: &Sealed<R>) -> StoreResult<R> {
        self.sealer.open_record(stored.clone()).map_err(|e| StoreError::Corrupt(tidings_core::Cause::new(e)))
    }

    /// A page of kept records, opened.
    fn open_page<R: SecretFields + Clone>(&self, page: Page<Sealed<R>>) -> StoreResult<Page<R>> {
        let items = page.items.iter().map(|s| self.open(s)).collect::<StoreResult<_>>()?;
        Ok(Page { items, has_more: page.has_more })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic under the lock cannot leave a torn record: every method checks before it
        // writes. So a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn conflict(what: &str) -> StoreError {
    StoreError::Conflict(what.to_owned())
}

/// Takes up to `limit` items of an iterator already in list order and filtered by cursor.
fn page_of<T>(mut items: impl Iterator<Item = T>, limit: usize) -> Page<T> {
    let page: Vec<T> = items.by_ref().take(limit).collect();
    Page { items: page, has_more: items.next().is_some() }
}

/// A newest-first page of the records of `map` that pass `keep`.
fn newest_first<K: Ord + Copy, T: Clone>(
    map: &BTreeMap<K, T>,
    page: &PageRequest<K>,
    keep: impl Fn(&T) -> bool,
) -> Page<T> {
    let items = map.iter().rev().filter(|(id, _)| page.cursor.is_none_or(|c| **id < c));
    page_of(items.filter(|(_, t)| keep(t)).map(|(_, t)| t.clone()), page.limit)
}

/// The ids of records due at `now`, earliest first (ties: lower id first), at most `limit`.
fn due<K: Ord + Copy, T>(
    map: &BTreeMap<K, T>,
    now: DateTime<Utc>,
    limit: usize,
    due_at: impl Fn(&T) -> Option<DateTime<Utc>>,
) -> Vec<K> {
    let mut found: Vec<(DateTime<Utc>, K)> =
        map.iter().filter_map(|(id, t)| due_at(t).filter(|at| *at <= now).map(|at| (at, *id))).collect();
    found.sort();
    found.into_iter().take(limit).map(|(_, id)| id).collect()
}

fn same_username(a: &SenderUsername, b: &SenderUsername) -> bool {
    a.as_str().eq_ignore_ascii_case(b.as_str())
}

impl State {
    fn key_conflict(&self, key: &ApiKey) -> Option<StoreError> {
        if self.keys.contains_key(&key.id) {
            return Some(conflict("api key id exists"));
        }
        self.keys.values().any(|k| k.key_hash == key.key_hash).then(|| conflict("api key hash exists"))
    }

    fn endpoint_exists(&self, ws: WorkspaceId, id: WebhookId) -> bool {
        self.webhooks.get(&id).is_some_and(|w| w.unopened().workspace_id == ws)
    }

    /// Queues deliveries written with a message or an event; those of deleted endpoints are
    /// dropped. The caller checked the ids are free.
    fn queue_deliveries(&mut self, deliveries: &[WebhookDelivery]) {
        for d in deliveries {
            if self.endpoint_exists(d.workspace_id, d.endpoint_id) {
                self.deliveries.insert(d.id, d.clone());
            }
        }
    }

    fn deliveries_conflict(&self, deliveries: &[WebhookDelivery]) -> Option<StoreError> {
        let mut ids: Vec<DeliveryId> = deliveries.iter().map(|d| d.id).collect();
        ids.sort();
        ids.dedup();
        let reused = ids.len() != deliveries.len() || ids.iter().any(|id| self.deliveries.contains_key(id));
        reused.then(|| conflict("webhook delivery id exists"))
    }

    fn suppression_of(&self, ws: WorkspaceId, email: &EmailAddress) -> Option<&Suppression> {
        let wanted = email.normalized();
        self.suppressions.values().find(|s| s.workspace_id == ws && s.email.normalized() == wanted)
    }

    fn sender_of(&self, ws: WorkspaceId, domain: DomainId, username: &SenderUsername) -> Option<&Sender> {
        self.senders
            .values()
            .find(|s| s.workspace_id == ws && s.domain_id == domain && same_username(&s.username, username))
    }

    fn template_mut(&mut self, ws: WorkspaceId, id: TemplateId) -> StoreResult<&mut Template> {
        self.templates.get_mut(&id).filter(|t| t.workspace_id == ws).ok_or(StoreError::NotFound)
    }
}
