//! A mockall `Store` for failure injection (storage unavailable, a write lost to a race),
//! where the in-memory store always succeeds.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mockall::mock;
use tidings_core::activity::{HourStart, HourlyActivity};
use tidings_core::domain_name::DomainName;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{
    ApiKeyId, DeliveryId, DomainId, EventId, MessageId, SenderId, SuppressionId, TemplateId, TemplateVersionId,
    WebhookId, WorkspaceId,
};
use tidings_core::model::{
    ApiKey, DashboardSession, Domain, IdempotencyKey, IdempotencyRecord, KeyHash, Message, MessageEvent, RateLimit,
    Sender, SenderUsername, SessionTokenHash, Suppression, SuppressionReason, Template, TemplateVersion,
    WebhookDelivery, WebhookEndpoint, Workspace,
};
use tidings_core::ports::{
    ActivityStore, CreateOutcome, DomainStore, EndpointQuota, EventFeedStore, EventWrite, FeedEntry, FeedPosition,
    KeyStore, MessageQuery, MessageStore, NewBatch, NewMessage, NewTemplateVersion, Page, PageRequest, SecretStore,
    SessionStore, StoreResult, SuppressionStore, TemplateChange, TemplateStore, WebhookStore, WorkspaceStore,
};
use tidings_core::secret::{Secret, SecretName};

mock! {
    pub Store {}
    #[async_trait]
    impl WorkspaceStore for Store {
        async fn create_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<()>;
        async fn create_first_workspace(&self, workspace: &Workspace, first_key: &ApiKey) -> StoreResult<bool>;
        async fn get_workspace(&self, id: WorkspaceId) -> StoreResult<Option<Workspace>>;
        async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>>;
    }
    #[async_trait]
    impl KeyStore for Store {
        async fn insert_api_key(&self, key: &ApiKey) -> StoreResult<()>;
        async fn find_api_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<ApiKey>>;
        async fn get_api_key(&self, workspace: WorkspaceId, id: ApiKeyId) -> StoreResult<Option<ApiKey>>;
        async fn list_api_keys(&self, workspace: WorkspaceId, page: PageRequest<ApiKeyId>) -> StoreResult<Page<ApiKey>>;
        async fn revoke_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<ApiKey>;
        async fn touch_api_key(&self, workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> StoreResult<()>;
        async fn set_api_key_rate_limit(
            &self,
            workspace: WorkspaceId,
            id: ApiKeyId,
            rate_limit: RateLimit,
        ) -> StoreResult<ApiKey>;
    }
    #[async_trait]
    impl MessageStore for Store {
        async fn create_message(&self, new: &NewMessage) -> StoreResult<CreateOutcome>;
        async fn create_messages(&self, batch: &NewBatch) -> StoreResult<CreateOutcome>;
        async fn get_message(&self, workspace: WorkspaceId, id: MessageId) -> StoreResult<Option<Message>>;
        async fn find_message(&self, id: MessageId) -> StoreResult<Option<Message>>;
        async fn list_messages(&self, workspace: WorkspaceId, query: &MessageQuery) -> StoreResult<Page<Message>>;
        async fn list_events(
            &self,
            workspace: WorkspaceId,
            message: MessageId,
            page: PageRequest<EventId>,
        ) -> StoreResult<Page<MessageEvent>>;
        async fn record_event(&self, write: EventWrite) -> StoreResult<()>;
        async fn claim_due_messages(
            &self,
            now: DateTime<Utc>,
            lease_until: DateTime<Utc>,
            limit: usize,
        ) -> StoreResult<Vec<Message>>;
        async fn release_message_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
        async fn get_idempotency(
            &self,
            workspace: WorkspaceId,
            key: &IdempotencyKey,
        ) -> StoreResult<Option<IdempotencyRecord>>;
        async fn purge_expired_idempotency(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
        async fn count_pending_messages(&self, now: DateTime<Utc>) -> StoreResult<tidings_core::ports::PendingMessages>;
        async fn purge_message_content(&self, created_before: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
    }
    #[async_trait]
    impl DomainStore for Store {
        async fn insert_domain(&self, domain: &Domain) -> StoreResult<()>;
        async fn get_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<Option<Domain>>;
        async fn find_domain_by_name(&self, workspace: WorkspaceId, name: &DomainName) -> StoreResult<Option<Domain>>;
        async fn list_domains(&self, workspace: WorkspaceId, page: PageRequest<DomainId>) -> StoreResult<Page<Domain>>;
        async fn update_domain(&self, domain: &Domain) -> StoreResult<()>;
        async fn delete_domain(&self, workspace: WorkspaceId, id: DomainId) -> StoreResult<()>;
        async fn list_domains_to_recheck(&self, checked_before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Domain>>;
        async fn insert_sender(&self, sender: &Sender) -> StoreResult<()>;
        async fn get_sender(
            &self,
            workspace: WorkspaceId,
            domain: DomainId,
            username: &SenderUsername,
        ) -> StoreResult<Option<Sender>>;
        async fn list_senders(
            &self,
            workspace: WorkspaceId,
            domain: DomainId,
            page: PageRequest<SenderId>,
        ) -> StoreResult<Page<Sender>>;
        async fn delete_sender(
            &self,
            workspace: WorkspaceId,
            domain: DomainId,
            username: &SenderUsername,
        ) -> StoreResult<()>;
    }
    #[async_trait]
    impl TemplateStore for Store {
        async fn insert_template(&self, template: &Template) -> StoreResult<()>;
        async fn get_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<Option<Template>>;
        async fn template_ids_named(&self, workspace: WorkspaceId, name: &str, limit: usize)
        -> StoreResult<Vec<TemplateId>>;
        async fn list_templates(
            &self,
            workspace: WorkspaceId,
            page: PageRequest<TemplateId>,
        ) -> StoreResult<Page<Template>>;
        async fn get_template_version(
            &self,
            workspace: WorkspaceId,
            id: TemplateVersionId,
        ) -> StoreResult<Option<TemplateVersion>>;
        async fn add_template_version(
            &self,
            workspace: WorkspaceId,
            template: TemplateId,
            version: NewTemplateVersion,
            make_current: bool,
        ) -> StoreResult<TemplateVersion>;
        async fn update_template(
            &self,
            workspace: WorkspaceId,
            id: TemplateId,
            change: TemplateChange,
        ) -> StoreResult<Template>;
        async fn delete_template(&self, workspace: WorkspaceId, id: TemplateId) -> StoreResult<()>;
    }
    #[async_trait]
    impl SuppressionStore for Store {
        async fn insert_suppression(&self, suppression: &Suppression) -> StoreResult<(Suppression, bool)>;
        async fn get_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<Option<Suppression>>;
        async fn list_suppressions(
            &self,
            workspace: WorkspaceId,
            reason: Option<SuppressionReason>,
            page: PageRequest<SuppressionId>,
        ) -> StoreResult<Page<Suppression>>;
        async fn delete_suppression(&self, workspace: WorkspaceId, email: &EmailAddress) -> StoreResult<()>;
    }
    #[async_trait]
    impl SecretStore for Store {
        async fn ensure_secret(&self, name: SecretName, candidate: &Secret<Vec<u8>>) -> StoreResult<Secret<Vec<u8>>>;
    }
    #[async_trait]
    impl ActivityStore for Store {
        async fn activity(&self, workspace: WorkspaceId, from: HourStart, until: HourStart) -> StoreResult<Vec<HourlyActivity>>;
        async fn purge_activity(&self, before: HourStart, limit: usize) -> StoreResult<usize>;
    }
    #[async_trait]
    impl EventFeedStore for Store {
        async fn event_feed(&self, workspace: WorkspaceId, after: Option<FeedPosition>, limit: usize) -> StoreResult<Vec<FeedEntry>>;
    }
    #[async_trait]
    impl SessionStore for Store {
        async fn insert_session(&self, session: &DashboardSession) -> StoreResult<()>;
        async fn find_session(&self, token: &SessionTokenHash) -> StoreResult<Option<DashboardSession>>;
        async fn touch_session(
            &self,
            token: &SessionTokenHash,
            last_seen_at: DateTime<Utc>,
            expires_at: DateTime<Utc>,
        ) -> StoreResult<()>;
        async fn delete_session(&self, token: &SessionTokenHash) -> StoreResult<bool>;
        async fn delete_expired_sessions(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
    }
    #[async_trait]
    impl WebhookStore for Store {
        async fn insert_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()>;
        async fn get_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<Option<WebhookEndpoint>>;
        async fn list_webhooks(
            &self,
            workspace: WorkspaceId,
            page: PageRequest<WebhookId>,
        ) -> StoreResult<Page<WebhookEndpoint>>;
        async fn list_enabled_webhooks(&self, workspace: WorkspaceId) -> StoreResult<Vec<WebhookEndpoint>>;
        async fn update_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()>;
        async fn delete_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<()>;
        async fn insert_webhook_deliveries(&self, deliveries: &[WebhookDelivery]) -> StoreResult<()>;
        async fn get_webhook_delivery(
            &self,
            workspace: WorkspaceId,
            id: DeliveryId,
        ) -> StoreResult<Option<WebhookDelivery>>;
        async fn list_webhook_deliveries(
            &self,
            workspace: WorkspaceId,
            endpoint: WebhookId,
            page: PageRequest<DeliveryId>,
        ) -> StoreResult<Page<WebhookDelivery>>;
        async fn list_message_webhook_deliveries(
            &self,
            workspace: WorkspaceId,
            message: MessageId,
            limit: usize,
        ) -> StoreResult<Vec<WebhookDelivery>>;
        async fn update_webhook_delivery(&self, delivery: &WebhookDelivery) -> StoreResult<()>;
        async fn claim_due_webhook_deliveries(
            &self,
            now: DateTime<Utc>,
            lease_until: DateTime<Utc>,
            limit: usize,
            quota: &EndpointQuota,
        ) -> StoreResult<Vec<WebhookDelivery>>;
        async fn release_webhook_delivery_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
    }
}
