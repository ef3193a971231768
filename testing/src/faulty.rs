//! [`FaultyStore`]: a [`Store`] that passes every call on to another store (the in-memory
//! one, usually) unless the test injected a fault for it: the whole store down, one
//! operation failing with a chosen [`StoreError`] (always, once, the nth time, from the nth
//! on), or a hook run before an operation reaches the store (another writer getting in
//! between a read and a write). It counts the calls of each operation.
//!
//! It is the one failure-injecting `Store` of the workspace: the list of operations at the
//! bottom of this file is the only restatement of the trait outside the real stores, so a
//! change of the port is one more line here, not an edit per fake.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tidings_core::activity::{HourStart, HourlyActivity};
use tidings_core::domain_name::DomainName;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{
    ApiKeyId, DeliveryId, DomainId, EventId, InboundMessageId, InboundRouteId, MessageId, SenderId, SuppressionId,
    TemplateId, TemplateVersionId, WebhookId, WorkspaceId,
};
use tidings_core::model::{
    ApiKey, DashboardSession, Domain, IdempotencyKey, IdempotencyRecord, InboundMessage, InboundRoute, KeyHash,
    Message, MessageEvent, RateLimit, Sender, SenderUsername, SessionTokenHash, Suppression, SuppressionReason,
    Template, TemplateVersion, WebhookDelivery, WebhookEndpoint, Workspace,
};
use tidings_core::ports::{
    ActivityStore, CreateOutcome, DomainStore, EndpointQuota, EventFeedStore, EventWrite, FeedEntry, FeedPosition,
    InboundQuery, InboundQuota, InboundStore, InboundUsage, KeyStore, MessageQuery, MessageStore, NewBatch, NewMessage,
    NewTemplateVersion, Page, PageRequest, PendingMessages, ReputationStore, SecretStore, SessionStore, Store,
    StoreError, StoreResult, SuppressionStore, TemplateChange, TemplateStore, WebhookStore, WorkspaceStore,
};
use tidings_core::reputation::ScopeReputation;
use tidings_core::secret::{Secret, SecretName};

use crate::MemoryStore;

/// A [`Store`] over another one, failing the calls a test chose (see the module docs).
/// Faults and hooks apply to calls made through it; what a test does on the inner store
/// directly bypasses them and is not counted.
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    faults: Mutex<Faults>,
}

/// Which calls of an operation a fault or hook applies to, counted from when it was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Every call, until [`FaultyStore::heal`].
    Always,
    /// The next call only.
    Once,
    /// Only the nth call (1 is the next one).
    Nth(usize),
    /// The nth call and every later one, until [`FaultyStore::heal`].
    FromNth(usize),
}

impl When {
    fn covers(self, call: usize) -> bool {
        match self {
            Self::Always => true,
            Self::Once => call == 1,
            Self::Nth(n) => call == n,
            Self::FromNth(n) => call >= n,
        }
    }

    /// Whether no call after `call` can be covered any more.
    fn spent(self, call: usize) -> bool {
        match self {
            Self::Once => call >= 1,
            Self::Nth(n) => call >= n,
            Self::Always | Self::FromNth(_) => false,
        }
    }
}

/// What a test runs before a call: a future, so that it can drive the inner store (or a
/// service over it) as a concurrent writer would.
type Hook = Arc<dyn Fn() -> HookRun + Send + Sync>;

/// One run of a [`Hook`].
type HookRun = Pin<Box<dyn Future<Output = ()> + Send>>;

#[derive(Default)]
struct Faults {
    /// Every call fails with this, hooks and rules aside.
    down: Option<StoreError>,
    /// In the order they were set: the first failure that covers a call is its answer.
    rules: Vec<Rule>,
    calls: HashMap<Op, usize>,
}

struct Rule {
    op: Op,
    when: When,
    /// Calls of `op` since the rule was set, this one included.
    seen: usize,
    action: Action,
}

enum Action {
    Fail(StoreError),
    Run(Hook),
}

impl FaultyStore {
    /// `inner` with no fault: every call is passed on.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self { inner, faults: Mutex::default() }
    }

    /// A store that cannot be reached, as a database that is down or a full disk: every
    /// call fails with `StoreError::Unavailable` ("the test store is down").
    pub fn down() -> Self {
        let store = Self::new(Arc::new(MemoryStore::new()));
        store.fail_all(StoreError::Unavailable("the test store is down".into()));
        store
    }

    /// Every call of every operation fails with `error` from now on, until [`Self::heal`].
    pub fn fail_all(&self, error: StoreError) {
        self.lock().down = Some(error);
    }

    /// The calls of `op` that `when` names fail with `error`, without reaching the inner
    /// store.
    pub fn fail(&self, op: Op, when: When, error: StoreError) {
        self.lock().rules.push(Rule { op, when, seen: 0, action: Action::Fail(error) });
    }

    /// Before the calls of `op` that `when` names reach the inner store, `hook` runs to
    /// completion: what it writes to the inner store happened just before the call.
    pub fn before<F, Fut>(&self, op: Op, when: When, hook: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let hook: Hook = Arc::new(move || -> HookRun { Box::pin(hook()) });
        self.lock().rules.push(Rule { op, when, seen: 0, action: Action::Run(hook) });
    }

    /// Removes every fault and hook: from now on every call is passed on. The counts stay.
    pub fn heal(&self) {
        let mut faults = self.lock();
        faults.down = None;
        faults.rules.clear();
    }

    /// How many calls of `op` were made through this store, failed ones included.
    pub fn calls(&self, op: Op) -> usize {
        self.lock().calls.get(&op).copied().unwrap_or(0)
    }

    /// How many calls of any operation were made through this store.
    pub fn total_calls(&self) -> usize {
        self.lock().calls.values().sum()
    }

    fn lock(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a call of `op`, runs the hooks that cover it and answers the failure that
    /// covers it, if any; `Ok` lets the call through.
    async fn enter(&self, op: Op) -> StoreResult<()> {
        let (hooks, failure) = {
            let mut faults = self.lock();
            *faults.calls.entry(op).or_default() += 1;
            if let Some(error) = &faults.down {
                return Err(error.clone());
            }
            let (mut hooks, mut failure) = (Vec::new(), None);
            for rule in faults.rules.iter_mut().filter(|r| r.op == op) {
                rule.seen += 1;
                if rule.when.covers(rule.seen) {
                    match &rule.action {
                        Action::Run(hook) => hooks.push(Arc::clone(hook)),
                        Action::Fail(error) => {
                            failure.get_or_insert_with(|| error.clone());
                        }
                    }
                }
            }
            faults.rules.retain(|r| !r.when.spent(r.seen));
            (hooks, failure)
        };
        // Outside the lock: a hook may call this store again.
        for hook in hooks {
            hook().await;
        }
        failure.map_or(Ok(()), Err)
    }
}

/// Defines [`Op`] and implements every sub-trait of [`Store`] for [`FaultyStore`] from one
/// list: per trait, each async method's name, arguments (after `&self`) and what its
/// `StoreResult` holds, then, in a second block, the trait's other methods as written
/// (they are no storage call, so they pass through unfaulted and uncounted).
macro_rules! operations {
    ($(
        $store:ident { $($name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)* }
        $({ $($other:item)* })?
    )*) => {
        pastey::paste! {
            /// A [`Store`] operation: one per method, named as the method in upper camel
            /// case (`record_event`: `Op::RecordEvent`).
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub enum Op {
                $($(
                    #[doc = "[`" $store "::" $name "`]"]
                    [<$name:camel>],
                )*)*
            }

            $(
                #[async_trait]
                impl $store for FaultyStore {
                    $(
                        async fn $name(&self, $($arg: $ty),*) -> StoreResult<$ret> {
                            self.enter(Op::[<$name:camel>]).await?;
                            self.inner.$name($($arg),*).await
                        }
                    )*
                    $($($other)*)?
                }
            )*
        }
    };
}

operations! {
    WorkspaceStore {
        create_workspace(workspace: &Workspace, first_key: &ApiKey) -> ();
        create_first_workspace(workspace: &Workspace, first_key: &ApiKey) -> bool;
        get_workspace(id: WorkspaceId) -> Option<Workspace>;
        list_workspaces() -> Vec<Workspace>;
    }
    KeyStore {
        insert_api_key(key: &ApiKey) -> ();
        find_api_key_by_hash(hash: &KeyHash) -> Option<ApiKey>;
        get_api_key(workspace: WorkspaceId, id: ApiKeyId) -> Option<ApiKey>;
        list_api_keys(workspace: WorkspaceId, page: PageRequest<ApiKeyId>) -> Page<ApiKey>;
        revoke_api_key(workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> ApiKey;
        touch_api_key(workspace: WorkspaceId, id: ApiKeyId, at: DateTime<Utc>) -> ();
        set_api_key_rate_limit(workspace: WorkspaceId, id: ApiKeyId, rate_limit: RateLimit) -> ApiKey;
    }
    MessageStore {
        create_message(new: &NewMessage) -> CreateOutcome;
        create_messages(batch: &NewBatch) -> CreateOutcome;
        get_message(workspace: WorkspaceId, id: MessageId) -> Option<Message>;
        find_message(id: MessageId) -> Option<Message>;
        list_messages(workspace: WorkspaceId, query: &MessageQuery) -> Page<Message>;
        list_events(workspace: WorkspaceId, message: MessageId, page: PageRequest<EventId>) -> Page<MessageEvent>;
        record_event(write: EventWrite) -> ();
        claim_due_messages(now: DateTime<Utc>, lease_until: DateTime<Utc>, limit: usize) -> Vec<Message>;
        release_message_leases(now: DateTime<Utc>, limit: usize) -> usize;
        requeue_message(workspace: WorkspaceId, id: MessageId, lease: DateTime<Utc>, due: DateTime<Utc>) -> bool;
        count_pending_messages(now: DateTime<Utc>) -> PendingMessages;
        purge_message_content(created_before: DateTime<Utc>, limit: usize) -> usize;
        get_idempotency(workspace: WorkspaceId, key: &IdempotencyKey) -> Option<IdempotencyRecord>;
        purge_expired_idempotency(now: DateTime<Utc>, limit: usize) -> usize;
    } {
        fn is_exclusive(&self) -> bool {
            self.inner.is_exclusive()
        }

        fn failure(&self) -> Option<Arc<str>> {
            self.inner.failure()
        }
    }
    DomainStore {
        insert_domain(domain: &Domain) -> ();
        get_domain(workspace: WorkspaceId, id: DomainId) -> Option<Domain>;
        find_domain_by_name(workspace: WorkspaceId, name: &DomainName) -> Option<Domain>;
        list_domains(workspace: WorkspaceId, page: PageRequest<DomainId>) -> Page<Domain>;
        update_domain(domain: &Domain) -> ();
        update_domain_keys(domain: &Domain, expected: &Domain) -> ();
        delete_domain(workspace: WorkspaceId, id: DomainId) -> ();
        list_domains_to_recheck(checked_before: DateTime<Utc>, limit: usize) -> Vec<Domain>;
        list_domains_to_rotate(made_before: DateTime<Utc>, limit: usize) -> Vec<Domain>;
        insert_sender(sender: &Sender) -> ();
        get_sender(workspace: WorkspaceId, domain: DomainId, username: &SenderUsername) -> Option<Sender>;
        list_senders(workspace: WorkspaceId, domain: DomainId, page: PageRequest<SenderId>) -> Page<Sender>;
        delete_sender(workspace: WorkspaceId, domain: DomainId, username: &SenderUsername) -> ();
    }
    TemplateStore {
        insert_template(template: &Template) -> ();
        get_template(workspace: WorkspaceId, id: TemplateId) -> Option<Template>;
        template_ids_named(workspace: WorkspaceId, name: &str, limit: usize) -> Vec<TemplateId>;
        list_templates(workspace: WorkspaceId, page: PageRequest<TemplateId>) -> Page<Template>;
        get_template_version(workspace: WorkspaceId, id: TemplateVersionId) -> Option<TemplateVersion>;
        add_template_version(
            workspace: WorkspaceId,
            template: TemplateId,
            version: NewTemplateVersion,
            make_current: bool,
        ) -> TemplateVersion;
        update_template(workspace: WorkspaceId, id: TemplateId, change: TemplateChange) -> Template;
        delete_template(workspace: WorkspaceId, id: TemplateId) -> ();
    }
    SuppressionStore {
        insert_suppression(suppression: &Suppression) -> (Suppression, bool);
        get_suppression(workspace: WorkspaceId, email: &EmailAddress) -> Option<Suppression>;
        list_suppressions(
            workspace: WorkspaceId,
            reason: Option<SuppressionReason>,
            page: PageRequest<SuppressionId>,
        ) -> Page<Suppression>;
        delete_suppression(workspace: WorkspaceId, email: &EmailAddress) -> ();
    }
    WebhookStore {
        insert_webhook(endpoint: &WebhookEndpoint) -> ();
        get_webhook(workspace: WorkspaceId, id: WebhookId) -> Option<WebhookEndpoint>;
        list_webhooks(workspace: WorkspaceId, page: PageRequest<WebhookId>) -> Page<WebhookEndpoint>;
        list_enabled_webhooks(workspace: WorkspaceId) -> Vec<WebhookEndpoint>;
        update_webhook(endpoint: &WebhookEndpoint) -> ();
        delete_webhook(workspace: WorkspaceId, id: WebhookId) -> ();
        insert_webhook_deliveries(deliveries: &[WebhookDelivery]) -> ();
        get_webhook_delivery(workspace: WorkspaceId, id: DeliveryId) -> Option<WebhookDelivery>;
        list_webhook_deliveries(
            workspace: WorkspaceId,
            endpoint: WebhookId,
            page: PageRequest<DeliveryId>,
        ) -> Page<WebhookDelivery>;
        list_message_webhook_deliveries(
            workspace: WorkspaceId,
            message: MessageId,
            limit: usize,
        ) -> Vec<WebhookDelivery>;
        update_webhook_delivery(delivery: &WebhookDelivery) -> ();
        claim_due_webhook_deliveries(
            now: DateTime<Utc>,
            lease_until: DateTime<Utc>,
            limit: usize,
            quota: &EndpointQuota,
        ) -> Vec<WebhookDelivery>;
        release_webhook_delivery_leases(now: DateTime<Utc>, limit: usize) -> usize;
    }
    SecretStore {
        ensure_secret(name: SecretName, candidate: &Secret<Vec<u8>>) -> Secret<Vec<u8>>;
    }
    SessionStore {
        insert_session(session: &DashboardSession) -> ();
        find_session(token: &SessionTokenHash) -> Option<DashboardSession>;
        touch_session(token: &SessionTokenHash, last_seen_at: DateTime<Utc>, expires_at: DateTime<Utc>) -> ();
        delete_session(token: &SessionTokenHash) -> bool;
        delete_expired_sessions(now: DateTime<Utc>, limit: usize) -> usize;
    }
    ActivityStore {
        activity(workspace: WorkspaceId, from: HourStart, until: HourStart) -> Vec<HourlyActivity>;
        purge_activity(before: HourStart, limit: usize) -> usize;
    }
    EventFeedStore {
        event_feed(workspace: WorkspaceId, after: Option<FeedPosition>, limit: usize) -> Vec<FeedEntry>;
    }
    ReputationStore {
        reputation(workspace: WorkspaceId) -> Vec<ScopeReputation>;
        change_reputation(next: &ScopeReputation, expected: u64, deliveries: &[WebhookDelivery]) -> bool;
    }
    InboundStore {
        insert_inbound_route(route: &InboundRoute) -> ();
        list_inbound_routes(workspace: WorkspaceId) -> Vec<InboundRoute>;
        update_inbound_route(route: &InboundRoute) -> ();
        delete_inbound_route(workspace: WorkspaceId, id: InboundRouteId) -> ();
        insert_inbound(message: &InboundMessage, raw: &[u8], deliveries: &[WebhookDelivery], quota: &InboundQuota) -> bool;
        get_inbound(workspace: WorkspaceId, id: InboundMessageId) -> Option<InboundMessage>;
        inbound_raw(workspace: WorkspaceId, id: InboundMessageId) -> Option<Vec<u8>>;
        list_inbound(workspace: WorkspaceId, query: &InboundQuery, page: PageRequest<InboundMessageId>) -> Page<InboundMessage>;
        inbound_usage(workspace: WorkspaceId) -> InboundUsage;
        inbound_domains() -> Vec<Domain>;
        purge_inbound(before: DateTime<Utc>, limit: usize) -> usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn over_memory() -> (FaultyStore, Arc<MemoryStore>) {
        let memory = Arc::new(MemoryStore::new());
        (FaultyStore::new(Arc::clone(&memory) as _), memory)
    }

    fn busy() -> StoreError {
        StoreError::Unavailable("busy".into())
    }

    #[tokio::test]
    async fn calls_are_passed_on_and_counted() {
        let (store, memory) = over_memory();
        let ws = fixtures::workspace();
        store.create_workspace(&ws, &fixtures::api_key(ws.id)).await.unwrap();
        assert_eq!(memory.get_workspace(ws.id).await.unwrap(), Some(ws.clone()));
        assert_eq!(store.list_workspaces().await.unwrap(), [ws]);
        assert_eq!((store.calls(Op::CreateWorkspace), store.calls(Op::GetWorkspace), store.total_calls()), (1, 0, 2));
        assert!(store.is_exclusive(), "as the memory store is");
    }

    #[tokio::test]
    async fn a_fault_covers_the_calls_its_when_names_counted_from_when_it_was_set() {
        let cases = [
            (When::Once, [true, false, false, false]),
            (When::Nth(2), [false, true, false, false]),
            (When::FromNth(3), [false, false, true, true]),
            (When::Always, [true; 4]),
        ];
        for (when, failing) in cases {
            let (store, _) = over_memory();
            store.list_workspaces().await.unwrap();
            store.fail(Op::ListWorkspaces, when, busy());
            let mut failed = [false; 4];
            for f in &mut failed {
                *f = store.list_workspaces().await.is_err();
            }
            assert_eq!(failed, failing, "{when:?}");
            assert!(store.get_workspace(WorkspaceId(fixtures::ulid())).await.is_ok(), "other operations pass");
            assert_eq!(store.calls(Op::ListWorkspaces), 5, "failed calls count too");
        }
    }

    #[tokio::test]
    async fn a_failed_call_answers_the_chosen_error_and_changes_nothing() {
        let (store, memory) = over_memory();
        let ws = fixtures::workspace();
        store.fail(Op::CreateWorkspace, When::Once, StoreError::Conflict("lost".into()));
        let created = store.create_workspace(&ws, &fixtures::api_key(ws.id)).await;
        assert_eq!(created, Err(StoreError::Conflict("lost".into())));
        assert_eq!(memory.get_workspace(ws.id).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_store_down_fails_every_call_until_healed() {
        let store = FaultyStore::down();
        let id = WorkspaceId(fixtures::ulid());
        assert_eq!(store.get_workspace(id).await, Err(StoreError::Unavailable("the test store is down".into())));
        assert!(store.list_enabled_webhooks(id).await.is_err());
        store.fail(Op::ListWorkspaces, When::Always, busy());
        store.heal();
        assert_eq!(store.get_workspace(id).await, Ok(None));
        assert_eq!(store.list_workspaces().await, Ok(vec![]));
        assert_eq!(store.total_calls(), 4);
    }

    #[tokio::test]
    async fn a_hook_runs_just_before_the_call_it_covers() {
        let (store, memory) = over_memory();
        let ws = fixtures::workspace();
        let (inner, written) = (Arc::clone(&memory), ws.clone());
        store.before(Op::ListWorkspaces, When::Nth(2), move || {
            let (inner, ws) = (Arc::clone(&inner), written.clone());
            // Once only: a second run would fail on the workspace it already wrote.
            async move { inner.create_workspace(&ws, &fixtures::api_key(ws.id)).await.unwrap() }
        });
        assert!(store.list_workspaces().await.unwrap().is_empty());
        assert_eq!(store.list_workspaces().await.unwrap(), std::slice::from_ref(&ws), "written before the call read");
        assert_eq!(store.list_workspaces().await.unwrap(), [ws], "and not again");
    }
}
