//! `MemoryStore`: the reference implementation of [`Store`], kept in memory.
//!
//! It is the executable form of the contract in [`crate::ports::store`]: one mutex around
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

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain_name::DomainName;
use crate::email::EmailAddress;
use crate::ids::{
    ApiKeyId, DeliveryId, DomainId, EventId, MessageId, SenderId, SuppressionId, TemplateId, TemplateVersionId,
    WebhookId, WorkspaceId,
};
use crate::model::{
    ApiKey, Domain, DomainStatus, IdempotencyKey, IdempotencyRecord, KeyHash, Message, MessageEvent, Sender,
    SenderUsername, Suppression, SuppressionReason, Template, TemplateVersion, WebhookDelivery, WebhookEndpoint,
    Workspace,
};
use crate::ports::{
    CreateOutcome, DomainStore, EndpointQuota, EventWrite, KeyStore, MessageQuery, MessageStore, NewMessage,
    NewTemplateVersion, Page, PageRequest, StoreError, StoreResult, SuppressionStore, TemplateChange, TemplateStore,
    WebhookStore, WorkspaceStore,
};

#[cfg(doc)]
use crate::ports::Store;

/// The reference in-memory [`Store`]. Cheap to create; share it as `Arc<MemoryStore>` or
/// `Arc<dyn Store>`.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    workspaces: BTreeMap<WorkspaceId, Workspace>,
    keys: BTreeMap<ApiKeyId, ApiKey>,
    messages: BTreeMap<MessageId, Message>,
    events: BTreeMap<MessageId, BTreeMap<EventId, MessageEvent>>,
    idempotency: BTreeMap<(WorkspaceId, IdempotencyKey), IdempotencyRecord>,
    domains: BTreeMap<DomainId, Domain>,
    senders: BTreeMap<SenderId, Sender>,
    templates: BTreeMap<TemplateId, Template>,
    suppressions: BTreeMap<SuppressionId, Suppression>,
    webhooks: BTreeMap<WebhookId, WebhookEndpoint>,
    deliveries: BTreeMap<DeliveryId, WebhookDelivery>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
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
        self.webhooks.get(&id).is_some_and(|w| w.workspace_id == ws)
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

#[async_trait]
impl WorkspaceStore for MemoryStore {
    async fn create_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<()> {
        let mut st = self.state();
        if st.workspaces.contains_key(&workspace.id) {
            return Err(conflict("workspace id exists"));
        }
        if let Some(e) = st.key_conflict(first_key) {
            return Err(e);
        }
        st.workspaces.insert(workspace.id, workspace.clone());
        st.keys.insert(first_key.id, first_key.clone());
        Ok(())
    }

    async fn get_workspace(&self, id: WorkspaceId) -> StoreResult<Option<Workspace>> {
        Ok(self.state().workspaces.get(&id).cloned())
    }

    async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>> {
        Ok(self.state().workspaces.values().cloned().collect())
    }
}

#[async_trait]
impl KeyStore for MemoryStore {
    async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()> {
        let mut st = self.state();
        if let Some(e) = st.key_conflict(key) {
            return Err(e);
        }
        st.keys.insert(key.id, key.clone());
        Ok(())
    }

    async fn find_api_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<ApiKey>> {
        Ok(self.state().keys.values().find(|k| k.key_hash == *hash).cloned())
    }

    async fn get_api_key(&self, workspace: WorkspaceId, id: ApiKeyId) -> StoreResult<Option<ApiKey>> {
        Ok(self.state().keys.get(&id).filter(|k| k.workspace_id == workspace).cloned())
    }

    async fn list_api_keys(&self, workspace: WorkspaceId, page: PageRequest<ApiKeyId>) -> StoreResult<Page<ApiKey>> {
        Ok(newest_first(&self.state().keys, &page, |k| k.workspace_id == workspace && k.revoked_at.is_none()))
    }

    async fn revoke_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<ApiKey> {
        let mut st = self.state();
        let key = st
            .keys
            .get_mut(&id)
            .filter(|k| k.workspace_id == workspace && k.revoked_at.is_none())
            .ok_or(StoreError::NotFound)?;
        key.revoked_at = Some(at);
        Ok(key.clone())
    }

    async fn touch_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<()> {
        let mut st = self.state();
        if let Some(key) = st.keys.get_mut(&id).filter(|k| k.workspace_id == workspace && k.revoked_at.is_none()) {
            key.last_used_at = Some(key.last_used_at.map_or(at, |last| last.max(at)));
        }
        Ok(())
    }
}

#[async_trait]
impl MessageStore for MemoryStore {
    async fn create_message(&self, new: NewMessage) -> StoreResult<CreateOutcome> {
        let mut st = self.state();
        if let Some(record) = &new.idempotency
            && let Some(existing) = st.idempotency.get(&(record.workspace_id, record.key.clone()))
            && existing.expires_at > new.message.created_at
        {
            return Ok(CreateOutcome::Duplicate(existing.clone()));
        }
        if st.messages.contains_key(&new.message.id) {
            return Err(conflict("message id exists"));
        }
        if let Some(e) = st.deliveries_conflict(&new.webhook_deliveries) {
            return Err(e);
        }
        let id = new.message.id;
        st.events.entry(id).or_default().insert(new.event.id, new.event);
        st.messages.insert(id, new.message);
        if let Some(record) = new.idempotency {
            st.idempotency.insert((record.workspace_id, record.key.clone()), record);
        }
        st.queue_deliveries(&new.webhook_deliveries);
        Ok(CreateOutcome::Created)
    }

    async fn get_message(&self, workspace: WorkspaceId, id: MessageId) -> StoreResult<Option<Message>> {
        Ok(self.state().messages.get(&id).filter(|m| m.workspace_id == workspace).cloned())
    }

    async fn find_message(&self, id: MessageId) -> StoreResult<Option<Message>> {
        Ok(self.state().messages.get(&id).cloned())
    }

    async fn list_messages(&self, workspace: WorkspaceId, query: &MessageQuery) -> StoreResult<Page<Message>> {
        let to = query.to.as_ref().map(EmailAddress::normalized);
        Ok(newest_first(&self.state().messages, &query.page, |m| {
            m.workspace_id == workspace
                && query.status.is_none_or(|s| m.status == s)
                && to.as_ref().is_none_or(|to| m.to.normalized() == *to)
                && query.sent_by.is_none_or(|k| m.api_key_id == k)
        }))
    }

    async fn list_events(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        page: PageRequest<EventId>,
    ) -> StoreResult<Page<MessageEvent>> {
        let st = self.state();
        if st.messages.get(&message).filter(|m| m.workspace_id == workspace).is_none() {
            return Err(StoreError::NotFound);
        }
        let Some(events) = st.events.get(&message) else {
            return Ok(Page { items: vec![], has_more: false });
        };
        let after_cursor = events.iter().filter(|(id, _)| page.cursor.is_none_or(|c| **id > c));
        Ok(page_of(after_cursor.map(|(_, e)| e.clone()), page.limit))
    }

    async fn record_event(&self, write: EventWrite) -> StoreResult<()> {
        let mut st = self.state();
        let id = write.message.id;
        let stored = st.messages.get(&id).filter(|m| m.workspace_id == write.message.workspace_id);
        let stored = stored.ok_or(StoreError::NotFound)?;
        if stored.status != write.expected_status {
            return Err(StoreError::Conflict(format!(
                "message is {:?}, not {:?}",
                stored.status, write.expected_status
            )));
        }
        if st.events.get(&id).is_some_and(|events| events.contains_key(&write.event.id)) {
            return Err(conflict("event id exists"));
        }
        if let Some(e) = st.deliveries_conflict(&write.webhook_deliveries) {
            return Err(e);
        }
        st.messages.insert(id, write.message);
        st.events.entry(id).or_default().insert(write.event.id, write.event);
        st.queue_deliveries(&write.webhook_deliveries);
        Ok(())
    }

    async fn claim_due_messages(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        let mut st = self.state();
        let ids = due(&st.messages, now, limit, |m| m.next_attempt_at);
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(m) = st.messages.get_mut(&id) {
                m.next_attempt_at = Some(lease_until);
                claimed.push(m.clone());
            }
        }
        Ok(claimed)
    }

    async fn release_message_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut st = self.state();
        let mut leased: Vec<(DateTime<Utc>, MessageId)> = st
            .messages
            .values()
            .filter(|m| m.status.next_attempt_is_lease())
            .filter_map(|m| m.next_attempt_at.filter(|at| *at > now).map(|at| (at, m.id)))
            .collect();
        leased.sort();
        leased.truncate(limit);
        for (_, id) in &leased {
            if let Some(m) = st.messages.get_mut(id) {
                m.next_attempt_at = Some(now);
            }
        }
        Ok(leased.len())
    }

    async fn get_idempotency(
        &self,
        workspace: WorkspaceId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        Ok(self.state().idempotency.get(&(workspace, key.clone())).cloned())
    }

    async fn purge_expired_idempotency(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut st = self.state();
        let mut expired: Vec<(DateTime<Utc>, (WorkspaceId, IdempotencyKey))> = st
            .idempotency
            .iter()
            .filter(|(_, r)| r.expires_at <= now)
            .map(|(k, r)| (r.expires_at, k.clone()))
            .collect();
        expired.sort();
        expired.truncate(limit);
        for (_, key) in &expired {
            st.idempotency.remove(key);
        }
        Ok(expired.len())
    }
}

#[async_trait]
impl DomainStore for MemoryStore {
    async fn insert_domain(&self, domain: &Domain) -> StoreResult<()> {
        let mut st = self.state();
        if st.domains.contains_key(&domain.id) {
            return Err(conflict("domain id exists"));
        }
        if st.domains.values().any(|d| d.workspace_id == domain.workspace_id && d.name == domain.name) {
            return Err(StoreError::Conflict(format!("domain {} exists", domain.name)));
        }
        st.domains.insert(domain.id, domain.clone());
        Ok(())
    }

    async fn get_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<Option<Domain>> {
        Ok(self.state().domains.get(&id).filter(|d| d.workspace_id == workspace).cloned())
    }

    async fn find_domain_by_name(&self, workspace: WorkspaceId, name: &DomainName) -> StoreResult<Option<Domain>> {
        Ok(self.state().domains.values().find(|d| d.workspace_id == workspace && d.name == *name).cloned())
    }

    async fn list_domains(&self, workspace: WorkspaceId, page: PageRequest<DomainId>) -> StoreResult<Page<Domain>> {
        Ok(newest_first(&self.state().domains, &page, |d| d.workspace_id == workspace))
    }

    async fn update_domain(&self, domain: &Domain) -> StoreResult<()> {
        let mut st = self.state();
        let stored = st.domains.get_mut(&domain.id).filter(|d| d.workspace_id == domain.workspace_id);
        let stored = stored.ok_or(StoreError::NotFound)?;
        if stored.name != domain.name || stored.dkim != domain.dkim {
            return Err(conflict("a domain's name and keys cannot change"));
        }
        *stored = domain.clone();
        Ok(())
    }

    async fn delete_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<()> {
        let mut st = self.state();
        if st.domains.get(&id).filter(|d| d.workspace_id == workspace).is_none() {
            return Err(StoreError::NotFound);
        }
        st.domains.remove(&id);
        st.senders.retain(|_, s| s.domain_id != id);
        Ok(())
    }

    async fn list_domains_to_recheck(&self, checked_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>> {
        let st = self.state();
        let mut due: Vec<&Domain> = st
            .domains
            .values()
            .filter(|d| d.status != DomainStatus::Verified && d.checked_or_created_at() < checked_before)
            .collect();
        due.sort_by_key(|d| (d.checked_or_created_at(), d.id));
        Ok(due.into_iter().take(limit).cloned().collect())
    }

    async fn insert_sender(&self, sender: &Sender) -> StoreResult<()> {
        let mut st = self.state();
        if st.domains.get(&sender.domain_id).filter(|d| d.workspace_id == sender.workspace_id).is_none() {
            return Err(StoreError::NotFound);
        }
        if st.senders.contains_key(&sender.id) {
            return Err(conflict("sender id exists"));
        }
        if st.sender_of(sender.workspace_id, sender.domain_id, &sender.username).is_some() {
            return Err(StoreError::Conflict(format!("sender {} exists", sender.username)));
        }
        st.senders.insert(sender.id, sender.clone());
        Ok(())
    }

    async fn get_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<Option<Sender>> {
        Ok(self.state().sender_of(workspace, domain, username).cloned())
    }

    async fn list_senders(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        page: PageRequest<SenderId>,
    ) -> StoreResult<Page<Sender>> {
        Ok(newest_first(&self.state().senders, &page, |s| s.workspace_id == workspace && s.domain_id == domain))
    }

    async fn delete_sender(
        &self,
        workspace: WorkspaceId,
        domain: DomainId,
        username: &SenderUsername,
    ) -> StoreResult<()> {
        let mut st = self.state();
        let id = st.sender_of(workspace, domain, username).map(|s| s.id).ok_or(StoreError::NotFound)?;
        st.senders.remove(&id);
        Ok(())
    }
}

#[async_trait]
impl TemplateStore for MemoryStore {
    async fn insert_template(&self, template: &Template) -> StoreResult<()> {
        let mut st = self.state();
        if st.templates.contains_key(&template.id) {
            return Err(conflict("template id exists"));
        }
        st.templates.insert(template.id, template.clone());
        Ok(())
    }

    async fn get_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<Option<Template>> {
        Ok(self.state().templates.get(&id).filter(|t| t.workspace_id == workspace).cloned())
    }

    async fn list_templates(
        &self,
        workspace: WorkspaceId,
        page: PageRequest<TemplateId>,
    ) -> StoreResult<Page<Template>> {
        Ok(newest_first(&self.state().templates, &page, |t| t.workspace_id == workspace))
    }

    async fn get_template_version(
        &self,
        workspace: WorkspaceId,
        id: TemplateVersionId,
    ) -> StoreResult<Option<TemplateVersion>> {
        let st = self.state();
        let mut versions = st.templates.values().filter(|t| t.workspace_id == workspace).flat_map(|t| &t.versions);
        Ok(versions.find(|v| v.id == id).cloned())
    }

    async fn add_template_version(
        &self,
        workspace: WorkspaceId,
        template: TemplateId,
        version: NewTemplateVersion,
        make_current: bool,
    ) -> StoreResult<TemplateVersion> {
        let mut st = self.state();
        if st.templates.values().flat_map(|t| &t.versions).any(|v| v.id == version.id) {
            return Err(conflict("template version id exists"));
        }
        let stored = st.template_mut(workspace, template)?;
        let added = TemplateVersion {
            id: version.id,
            template_id: template,
            version_no: stored.versions.iter().map(|v| v.version_no).max().unwrap_or(0) + 1,
            subject: version.subject,
            html: version.html,
            text: version.text,
            created_at: version.created_at,
        };
        stored.versions.push(added.clone());
        if make_current {
            stored.current_version_id = added.id;
        }
        Ok(added)
    }

    async fn update_template(
        &self,
        workspace: WorkspaceId,
        id: TemplateId,
        change: TemplateChange,
    ) -> StoreResult<Template> {
        let mut st = self.state();
        let stored = st.template_mut(workspace, id)?;
        if let Some(version) = change.current_version_id {
            if !stored.versions.iter().any(|v| v.id == version) {
                return Err(conflict("not a version of this template"));
            }
            stored.current_version_id = version;
        }
        if let Some(name) = change.name {
            stored.name = name;
        }
        Ok(stored.clone())
    }

    async fn delete_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<()> {
        let mut st = self.state();
        st.template_mut(workspace, id)?;
        st.templates.remove(&id);
        Ok(())
    }
}

#[async_trait]
impl SuppressionStore for MemoryStore {
    async fn insert_suppression(&self, suppression: &Suppression) -> StoreResult<(Suppression, bool)> {
        let mut st = self.state();
        if let Some(existing) = st.suppression_of(suppression.workspace_id, &suppression.email) {
            return Ok((existing.clone(), false));
        }
        if st.suppressions.contains_key(&suppression.id) {
            return Err(conflict("suppression id exists"));
        }
        st.suppressions.insert(suppression.id, suppression.clone());
        Ok((suppression.clone(), true))
    }

    async fn get_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<Option<Suppression>> {
        Ok(self.state().suppression_of(workspace, email).cloned())
    }

    async fn list_suppressions(
        &self,
        workspace: WorkspaceId,
        reason: Option<SuppressionReason>,
        page: PageRequest<SuppressionId>,
    ) -> StoreResult<Page<Suppression>> {
        Ok(newest_first(&self.state().suppressions, &page, |s| {
            s.workspace_id == workspace && reason.is_none_or(|r| s.reason == r)
        }))
    }

    async fn delete_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<()> {
        let mut st = self.state();
        let id = st.suppression_of(workspace, email).map(|s| s.id).ok_or(StoreError::NotFound)?;
        st.suppressions.remove(&id);
        Ok(())
    }
}

#[async_trait]
impl WebhookStore for MemoryStore {
    async fn insert_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()> {
        let mut st = self.state();
        if st.webhooks.contains_key(&endpoint.id) {
            return Err(conflict("webhook id exists"));
        }
        st.webhooks.insert(endpoint.id, endpoint.clone());
        Ok(())
    }

    async fn get_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<Option<WebhookEndpoint>> {
        Ok(self.state().webhooks.get(&id).filter(|w| w.workspace_id == workspace).cloned())
    }

    async fn list_webhooks(
        &self,
        workspace: WorkspaceId,
        page: PageRequest<WebhookId>,
    ) -> StoreResult<Page<WebhookEndpoint>> {
        Ok(newest_first(&self.state().webhooks, &page, |w| w.workspace_id == workspace))
    }

    async fn list_enabled_webhooks(&self, workspace: WorkspaceId) -> StoreResult<Vec<WebhookEndpoint>> {
        let st = self.state();
        Ok(st.webhooks.values().filter(|w| w.workspace_id == workspace && w.enabled).cloned().collect())
    }

    async fn update_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()> {
        let mut st = self.state();
        let stored = st.webhooks.get_mut(&endpoint.id).filter(|w| w.workspace_id == endpoint.workspace_id);
        *stored.ok_or(StoreError::NotFound)? = endpoint.clone();
        Ok(())
    }

    async fn delete_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<()> {
        let mut st = self.state();
        if !st.endpoint_exists(workspace, id) {
            return Err(StoreError::NotFound);
        }
        st.webhooks.remove(&id);
        st.deliveries.retain(|_, d| d.endpoint_id != id);
        Ok(())
    }

    async fn insert_webhook_deliveries(&self, deliveries: &[WebhookDelivery]) -> StoreResult<()> {
        let mut st = self.state();
        if !deliveries.iter().all(|d| st.endpoint_exists(d.workspace_id, d.endpoint_id)) {
            return Err(StoreError::NotFound);
        }
        if let Some(e) = st.deliveries_conflict(deliveries) {
            return Err(e);
        }
        st.queue_deliveries(deliveries);
        Ok(())
    }

    async fn get_webhook_delivery(
        &self,
        workspace: WorkspaceId,
        id: DeliveryId,
    ) -> StoreResult<Option<WebhookDelivery>> {
        Ok(self.state().deliveries.get(&id).filter(|d| d.workspace_id == workspace).cloned())
    }

    async fn list_webhook_deliveries(
        &self,
        workspace: WorkspaceId,
        endpoint: WebhookId,
        page: PageRequest<DeliveryId>,
    ) -> StoreResult<Page<WebhookDelivery>> {
        Ok(newest_first(&self.state().deliveries, &page, |d| d.workspace_id == workspace && d.endpoint_id == endpoint))
    }

    async fn update_webhook_delivery(&self, delivery: &WebhookDelivery) -> StoreResult<()> {
        let mut st = self.state();
        let stored = st.deliveries.get_mut(&delivery.id).filter(|d| d.workspace_id == delivery.workspace_id);
        *stored.ok_or(StoreError::NotFound)? = delivery.clone();
        Ok(())
    }

    async fn claim_due_webhook_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
        quota: &EndpointQuota,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        let mut st = self.state();
        let mut count = quota.start();
        let ids: Vec<DeliveryId> = due(&st.deliveries, now, usize::MAX, |d| d.next_attempt_at)
            .into_iter()
            .filter(|id| st.deliveries.get(id).is_some_and(|d| count.take(d.endpoint_id)))
            .take(limit)
            .collect();
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(d) = st.deliveries.get_mut(&id) {
                d.next_attempt_at = Some(lease_until);
                claimed.push(d.clone());
            }
        }
        Ok(claimed)
    }

    async fn release_webhook_delivery_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut st = self.state();
        let mut leased: Vec<(DateTime<Utc>, DeliveryId)> = st
            .deliveries
            .values()
            .filter(|d| d.status.next_attempt_is_lease())
            .filter_map(|d| d.next_attempt_at.filter(|at| *at > now).map(|at| (at, d.id)))
            .collect();
        leased.sort();
        leased.truncate(limit);
        for (_, id) in &leased {
            if let Some(d) = st.deliveries.get_mut(id) {
                d.next_attempt_at = Some(now);
            }
        }
        Ok(leased.len())
    }
}
