//! `UnavailableStore`: a [`Store`] whose every call fails with `StoreError::Unavailable`, as
//! a database that is down or a full disk would; for testing how front ends and workers
//! behave without storage (readiness probes, 503s).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use tidings_core::domain_name::DomainName;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{
    ApiKeyId, DeliveryId, DomainId, EventId, MessageId, SenderId, SuppressionId, TemplateId, TemplateVersionId,
    WebhookId, WorkspaceId,
};
use tidings_core::model::{
    ApiKey, Domain, IdempotencyKey, IdempotencyRecord, KeyHash, Message, MessageEvent, RateLimit, Sender,
    SenderUsername, Suppression, SuppressionReason, Template, TemplateVersion, WebhookDelivery, WebhookEndpoint,
    Workspace,
};
use tidings_core::ports::{
    CreateOutcome, DomainStore, EndpointQuota, EventWrite, KeyStore, MessageQuery, MessageStore, NewBatch, NewMessage,
    NewTemplateVersion, Page, PageRequest, SecretStore, SessionStore, StoreError, StoreResult, SuppressionStore,
    TemplateChange, TemplateStore, WebhookStore, WorkspaceStore,
};
use tidings_core::secret::{Secret, SecretName};

#[cfg(doc)]
use tidings_core::ports::Store;

/// A store that cannot be reached: every method answers `StoreError::Unavailable`.
#[derive(Debug, Default, Clone, Copy)]
pub struct UnavailableStore;

fn down<T>() -> StoreResult<T> {
    Err(StoreError::Unavailable("the test store is down".into()))
}

#[async_trait]
impl WorkspaceStore for UnavailableStore {
    async fn create_workspace(&self, _workspace: &Workspace, _first_key: &ApiKey) -> StoreResult<()> {
        down()
    }

    async fn create_first_workspace(&self, _workspace: &Workspace, _first_key: &ApiKey) -> StoreResult<bool> {
        down()
    }

    async fn get_workspace(&self, _id: WorkspaceId) -> StoreResult<Option<Workspace>> {
        down()
    }

    async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>> {
        down()
    }
}

#[async_trait]
impl KeyStore for UnavailableStore {
    async fn insert_api_key(&self, _key: &ApiKey) -> StoreResult<()> {
        down()
    }

    async fn find_api_key_by_hash(&self, _hash: &KeyHash) -> StoreResult<Option<ApiKey>> {
        down()
    }

    async fn get_api_key(&self, _workspace: WorkspaceId, _id: ApiKeyId) -> StoreResult<Option<ApiKey>> {
        down()
    }

    async fn list_api_keys(&self, _workspace: WorkspaceId, _page: PageRequest<ApiKeyId>) -> StoreResult<Page<ApiKey>> {
        down()
    }

    async fn revoke_api_key(&self, _workspace: WorkspaceId, _id: ApiKeyId, _at: DateTime<Utc>) -> StoreResult<ApiKey> {
        down()
    }

    async fn touch_api_key(&self, _workspace: WorkspaceId, _id: ApiKeyId, _at: DateTime<Utc>) -> StoreResult<()> {
        down()
    }

    async fn set_api_key_rate_limit(
        &self,
        _workspace: WorkspaceId,
        _id: ApiKeyId,
        _rate: RateLimit,
    ) -> StoreResult<ApiKey> {
        down()
    }
}

#[async_trait]
impl MessageStore for UnavailableStore {
    async fn create_message(&self, _new: &NewMessage) -> StoreResult<CreateOutcome> {
        down()
    }

    async fn create_messages(&self, _batch: &NewBatch) -> StoreResult<CreateOutcome> {
        down()
    }

    async fn get_message(&self, _workspace: WorkspaceId, _id: MessageId) -> StoreResult<Option<Message>> {
        down()
    }

    async fn find_message(&self, _id: MessageId) -> StoreResult<Option<Message>> {
        down()
    }

    async fn list_messages(&self, _workspace: WorkspaceId, _query: &MessageQuery) -> StoreResult<Page<Message>> {
        down()
    }

    async fn list_events(
        &self,
        _workspace: WorkspaceId,
        _message: MessageId,
        _page: PageRequest<EventId>,
    ) -> StoreResult<Page<MessageEvent>> {
        down()
    }

    async fn record_event(&self, _write: EventWrite) -> StoreResult<()> {
        down()
    }

    async fn claim_due_messages(
        &self,
        _now: DateTime<Utc>,
        _lease_until: DateTime<Utc>,
        _limit: usize,
    ) -> StoreResult<Vec<Message>> {
        down()
    }

    async fn release_message_leases(&self, _now: DateTime<Utc>, _limit: usize) -> StoreResult<usize> {
        down()
    }

    async fn get_idempotency(
        &self,
        _workspace: WorkspaceId,
        _key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        down()
    }

    async fn purge_expired_idempotency(&self, _now: DateTime<Utc>, _limit: usize) -> StoreResult<usize> {
        down()
    }

    async fn count_pending_messages(&self, _now: DateTime<Utc>) -> StoreResult<tidings_core::ports::PendingMessages> {
        down()
    }

    async fn purge_message_content(&self, _created_before: DateTime<Utc>, _limit: usize) -> StoreResult<usize> {
        down()
    }
}

#[async_trait]
impl DomainStore for UnavailableStore {
    async fn insert_domain(&self, _domain: &Domain) -> StoreResult<()> {
        down()
    }

    async fn get_domain(&self, _workspace: WorkspaceId, _id: DomainId) -> StoreResult<Option<Domain>> {
        down()
    }

    async fn find_domain_by_name(&self, _workspace: WorkspaceId, _name: &DomainName) -> StoreResult<Option<Domain>> {
        down()
    }

    async fn list_domains(&self, _workspace: WorkspaceId, _page: PageRequest<DomainId>) -> StoreResult<Page<Domain>> {
        down()
    }

    async fn update_domain(&self, _domain: &Domain) -> StoreResult<()> {
        down()
    }

    async fn delete_domain(&self, _workspace: WorkspaceId, _id: DomainId) -> StoreResult<()> {
        down()
    }

    async fn list_domains_to_recheck(&self, _checked_before: DateTime<Utc>, _limit: usize) -> StoreResult<Vec<Domain>> {
        down()
    }

    async fn insert_sender(&self, _sender: &Sender) -> StoreResult<()> {
        down()
    }

    async fn get_sender(
        &self,
        _workspace: WorkspaceId,
        _domain: DomainId,
        _username: &SenderUsername,
    ) -> StoreResult<Option<Sender>> {
        down()
    }

    async fn list_senders(
        &self,
        _workspace: WorkspaceId,
        _domain: DomainId,
        _page: PageRequest<SenderId>,
    ) -> StoreResult<Page<Sender>> {
        down()
    }

    async fn delete_sender(
        &self,
        _workspace: WorkspaceId,
        _domain: DomainId,
        _username: &SenderUsername,
    ) -> StoreResult<()> {
        down()
    }
}

#[async_trait]
impl TemplateStore for UnavailableStore {
    async fn insert_template(&self, _template: &Template) -> StoreResult<()> {
        down()
    }

    async fn get_template(&self, _workspace: WorkspaceId, _id: TemplateId) -> StoreResult<Option<Template>> {
        down()
    }

    async fn template_ids_named(
        &self,
        _workspace: WorkspaceId,
        _name: &str,
        _limit: usize,
    ) -> StoreResult<Vec<TemplateId>> {
        down()
    }

    async fn list_templates(
        &self,
        _workspace: WorkspaceId,
        _page: PageRequest<TemplateId>,
    ) -> StoreResult<Page<Template>> {
        down()
    }

    async fn get_template_version(
        &self,
        _workspace: WorkspaceId,
        _id: TemplateVersionId,
    ) -> StoreResult<Option<TemplateVersion>> {
        down()
    }

    async fn add_template_version(
        &self,
        _workspace: WorkspaceId,
        _template: TemplateId,
        _version: NewTemplateVersion,
        _make_current: bool,
    ) -> StoreResult<TemplateVersion> {
        down()
    }

    async fn update_template(
        &self,
        _workspace: WorkspaceId,
        _id: TemplateId,
        _change: TemplateChange,
    ) -> StoreResult<Template> {
        down()
    }

    async fn delete_template(&self, _workspace: WorkspaceId, _id: TemplateId) -> StoreResult<()> {
        down()
    }
}

#[async_trait]
impl SuppressionStore for UnavailableStore {
    async fn insert_suppression(&self, _suppression: &Suppression) -> StoreResult<(Suppression, bool)> {
        down()
    }

    async fn get_suppression(
        &self,
        _workspace: WorkspaceId,
        _email: &EmailAddress,
    ) -> StoreResult<Option<Suppression>> {
        down()
    }

    async fn list_suppressions(
        &self,
        _workspace: WorkspaceId,
        _reason: Option<SuppressionReason>,
        _page: PageRequest<SuppressionId>,
    ) -> StoreResult<Page<Suppression>> {
        down()
    }

    async fn delete_suppression(&self, _workspace: WorkspaceId, _email: &EmailAddress) -> StoreResult<()> {
        down()
    }
}

#[async_trait]
impl WebhookStore for UnavailableStore {
    async fn insert_webhook(&self, _endpoint: &WebhookEndpoint) -> StoreResult<()> {
        down()
    }

    async fn get_webhook(&self, _workspace: WorkspaceId, _id: WebhookId) -> StoreResult<Option<WebhookEndpoint>> {
        down()
    }

    async fn list_webhooks(
        &self,
        _workspace: WorkspaceId,
        _page: PageRequest<WebhookId>,
    ) -> StoreResult<Page<WebhookEndpoint>> {
        down()
    }

    async fn list_enabled_webhooks(&self, _workspace: WorkspaceId) -> StoreResult<Vec<WebhookEndpoint>> {
        down()
    }

    async fn update_webhook(&self, _endpoint: &WebhookEndpoint) -> StoreResult<()> {
        down()
    }

    async fn delete_webhook(&self, _workspace: WorkspaceId, _id: WebhookId) -> StoreResult<()> {
        down()
    }

    async fn insert_webhook_deliveries(&self, _deliveries: &[WebhookDelivery]) -> StoreResult<()> {
        down()
    }

    async fn get_webhook_delivery(
        &self,
        _workspace: WorkspaceId,
        _id: DeliveryId,
    ) -> StoreResult<Option<WebhookDelivery>> {
        down()
    }

    async fn list_webhook_deliveries(
        &self,
        _workspace: WorkspaceId,
        _endpoint: WebhookId,
        _page: PageRequest<DeliveryId>,
    ) -> StoreResult<Page<WebhookDelivery>> {
        down()
    }

    async fn list_message_webhook_deliveries(
        &self,
        _workspace: WorkspaceId,
        _message: MessageId,
        _limit: usize,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        down()
    }

    async fn update_webhook_delivery(&self, _delivery: &WebhookDelivery) -> StoreResult<()> {
        down()
    }

    async fn claim_due_webhook_deliveries(
        &self,
        _now: DateTime<Utc>,
        _lease_until: DateTime<Utc>,
        _limit: usize,
        _quota: &EndpointQuota,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        down()
    }

    async fn release_webhook_delivery_leases(&self, _now: DateTime<Utc>, _limit: usize) -> StoreResult<usize> {
        down()
    }
}

#[async_trait]
impl SecretStore for UnavailableStore {
    async fn ensure_secret(&self, _name: SecretName, _candidate: &Secret<Vec<u8>>) -> StoreResult<Secret<Vec<u8>>> {
        down()
    }
}

#[async_trait]
impl tidings_core::ports::ActivityStore for UnavailableStore {
    async fn activity(
        &self,
        _workspace: WorkspaceId,
        _from: tidings_core::activity::HourStart,
        _until: tidings_core::activity::HourStart,
    ) -> StoreResult<Vec<tidings_core::activity::HourlyActivity>> {
        down()
    }
    async fn purge_activity(&self, _before: tidings_core::activity::HourStart, _limit: usize) -> StoreResult<usize> {
        down()
    }
}

#[async_trait]
impl tidings_core::ports::EventFeedStore for UnavailableStore {
    async fn event_feed(
        &self,
        _workspace: WorkspaceId,
        _after: Option<tidings_core::ports::FeedPosition>,
        _limit: usize,
    ) -> StoreResult<Vec<tidings_core::ports::FeedEntry>> {
        down()
    }
}

#[async_trait]
impl SessionStore for UnavailableStore {
    async fn insert_session(&self, _session: &tidings_core::model::DashboardSession) -> StoreResult<()> {
        down()
    }
    async fn find_session(
        &self,
        _token: &tidings_core::model::SessionTokenHash,
    ) -> StoreResult<Option<tidings_core::model::DashboardSession>> {
        down()
    }
    async fn touch_session(
        &self,
        _token: &tidings_core::model::SessionTokenHash,
        _last_seen_at: DateTime<Utc>,
        _expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        down()
    }
    async fn delete_session(&self, _token: &tidings_core::model::SessionTokenHash) -> StoreResult<bool> {
        down()
    }
    async fn delete_expired_sessions(&self, _now: DateTime<Utc>, _limit: usize) -> StoreResult<usize> {
        down()
    }
}
