//! The webhook dispatcher over the in-memory store and a sender whose dead endpoints hang
//! until the test opens a gate: a dead endpoint holds at most its per-endpoint share of
//! slots while every other endpoint, in its workspace or another, is delivered; its backlog
//! stays due in the store; a workspace of dead endpoints holds at most its per-workspace
//! share, so another workspace is delivered; slots, `slot_free` and `idle` behave; nothing
//! is posted twice; a task's storage error is logged and leaves the delivery leased.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::FutureExt as _;
use tidings_core::delivery::{DispatchPass, DispatchSettings, WebhookDispatcher, WebhookSettings, WebhookWorker};
use tidings_core::ids::{DeliveryId, WorkspaceId};
use tidings_core::model::{DeliveryStatus, WebhookDelivery, WebhookEndpoint, WebhookUrl};
use tidings_core::ports::{StoreError, SystemRandom, WebhookRequest, WebhookResponse, WebhookSender, WebhookStore};
use tidings_core::usecases::{CoreConfig, Tidings};
use tidings_testing::faulty::{Op, When};
use tidings_testing::fixtures::{self, plus_secs, ulid};
use tidings_testing::{FakeDns, FixedClock};
use tidings_testing::{FaultyStore, MemoryStore};
use tokio::sync::watch;

/// How long a test waits for something that should happen at once before calling it hung.
const HUNG: Duration = Duration::from_secs(20);

fn answered(status: u16) -> WebhookResponse {
    WebhookResponse::Answered { status, retry_after: None, body_prefix: String::new() }
}

/// Answers 200 at once, except to the `dead` URLs: those hang until [`GatedSender::open`],
/// then answer as the map says. Counts POSTs per `webhook-id` and hanging POSTs per URL.
struct GatedSender {
    dead: HashMap<String, WebhookResponse>,
    gate: watch::Sender<bool>,
    posts: Mutex<HashMap<String, usize>>,
    hanging: Mutex<HashMap<String, usize>>,
}

impl GatedSender {
    fn new(dead: HashMap<String, WebhookResponse>) -> Arc<Self> {
        let (gate, _) = watch::channel(false);
        Arc::new(Self { dead, gate, posts: Mutex::default(), hanging: Mutex::default() })
    }

    fn open(&self) {
        self.gate.send_replace(true);
    }

    fn posts(&self) -> HashMap<String, usize> {
        self.posts.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn hanging(&self, url: &str) -> usize {
        self.hanging.lock().unwrap_or_else(PoisonError::into_inner).get(url).copied().unwrap_or(0)
    }

    fn hanging_total(&self) -> usize {
        self.hanging.lock().unwrap_or_else(PoisonError::into_inner).values().sum()
    }
}

#[async_trait]
impl WebhookSender for GatedSender {
    async fn post(&self, request: &WebhookRequest) -> WebhookResponse {
        *self.posts.lock().unwrap_or_else(PoisonError::into_inner).entry(request.webhook_id.clone()).or_default() += 1;
        let url = request.url.to_string();
        let Some(answer) = self.dead.get(&url) else { return answered(200) };
        *self.hanging.lock().unwrap_or_else(PoisonError::into_inner).entry(url.clone()).or_default() += 1;
        let _ = self.gate.subscribe().wait_for(|open| *open).await;
        *self.hanging.lock().unwrap_or_else(PoisonError::into_inner).entry(url).or_default() -= 1;
        answer.clone()
    }
}

/// Waits (without a fixed sleep) until `check` holds; panics if it does not within [`HUNG`].
async fn until<F: AsyncFn() -> bool>(what: &str, check: F) {
    let waited = tokio::time::timeout(HUNG, async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    waited.await.unwrap_or_else(|_| panic!("still not the case after {HUNG:?}: {what}"));
}

/// A service over a memory store, endpoints by name, and a dispatcher.
struct Scene {
    store: Arc<MemoryStore>,
    now: DateTime<Utc>,
    sender: Arc<GatedSender>,
    dispatcher: Arc<WebhookDispatcher>,
    worker: Arc<WebhookWorker>,
    endpoints: HashMap<&'static str, WebhookEndpoint>,
    /// Every delivery queued, in due order.
    queued: Vec<WebhookDelivery>,
}

fn url(name: &str) -> String {
    format!("https://{name}.example.com/hook")
}

impl Scene {
    /// Endpoints `(name, workspace number)`; those named in `dead` hang until the gate opens.
    async fn new(
        endpoints: &[(&'static str, usize)],
        dead: &[(&str, WebhookResponse)],
        batch_size: usize,
        dispatch: DispatchSettings,
    ) -> Self {
        let store = Arc::new(MemoryStore::new());
        let now = fixtures::now();
        let core = Tidings::new(
            Arc::clone(&store) as _,
            Arc::new(FixedClock::at(now)),
            Arc::new(SystemRandom),
            Arc::new(FakeDns::default()),
            CoreConfig::default(),
        );
        let workspaces: Vec<WorkspaceId> = (0..3).map(|_| WorkspaceId(ulid())).collect();
        let mut made = HashMap::new();
        for (name, ws) in endpoints {
            let url = WebhookUrl::parse(&url(name), false).unwrap();
            let endpoint = WebhookEndpoint { url, ..fixtures::webhook(workspaces[*ws]) };
            store.insert_webhook(&endpoint).await.unwrap();
            made.insert(*name, endpoint);
        }
        let sender = GatedSender::new(dead.iter().map(|(name, answer)| (url(name), answer.clone())).collect());
        // The gate, not the timeout, ends a dead POST.
        let settings = WebhookSettings { batch_size, post_timeout: Duration::from_secs(3_600), ..Default::default() };
        let worker = Arc::new(WebhookWorker::new(core, Arc::clone(&sender) as Arc<dyn WebhookSender>, settings));
        let dispatcher = WebhookDispatcher::new(Arc::clone(&worker), dispatch);
        Self { store, now, sender, dispatcher, worker, endpoints: made, queued: Vec::new() }
    }

    /// Queues `count` deliveries to `name`, due after everything queued before.
    async fn queue(&mut self, name: &str, count: usize) {
        let endpoint = &self.endpoints[name];
        for _ in 0..count {
            let due = plus_secs(self.now, -10_000 + self.queued.len() as i64);
            let d = WebhookDelivery {
                next_attempt_at: Some(due),
                ..fixtures::delivery(endpoint.workspace_id, endpoint.id)
            };
            self.store.insert_webhook_deliveries(std::slice::from_ref(&d)).await.unwrap();
            self.queued.push(d);
        }
    }

    async fn stored(&self, name: &str) -> Vec<WebhookDelivery> {
        let endpoint = self.endpoints[name].id;
        let mut found = Vec::new();
        for d in self.queued.iter().filter(|d| d.endpoint_id == endpoint) {
            found.push(self.store.get_webhook_delivery(d.workspace_id, d.id).await.unwrap().unwrap());
        }
        found
    }

    async fn count(&self, name: &str, status: DeliveryStatus) -> usize {
        self.stored(name).await.iter().filter(|d| d.status == status).count()
    }

    /// Of `name`'s deliveries: (leased by a dispatch at `now`, still due and untouched).
    async fn leased_and_untouched(&self, name: &str) -> (usize, usize) {
        let lease = Some(self.now + self.worker.settings().attempt_lease());
        let stored = self.stored(name).await;
        let queued: HashMap<DeliveryId, &WebhookDelivery> = self.queued.iter().map(|d| (d.id, d)).collect();
        let leased = stored.iter().filter(|d| d.next_attempt_at == lease && d.attempts == 0).count();
        let untouched = stored.iter().filter(|d| queued.get(&d.id).is_some_and(|q| *q == *d)).count();
        (leased, untouched)
    }

    /// One pass at `now`; it must return without waiting for any POST.
    async fn pass(&self) -> DispatchPass {
        let pass = tokio::time::timeout(HUNG, self.dispatcher.dispatch_due(self.now)).await;
        pass.expect("a pass returns at once, whatever the POSTs do").unwrap()
    }

    /// Waits for idle and passes at `now`, until a pass claims nothing.
    async fn drain(&self) {
        loop {
            tokio::time::timeout(HUNG, self.dispatcher.idle()).await.expect("idle");
            if self.pass().await.claimed == 0 {
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_holds_only_its_share_while_other_endpoints_and_workspaces_are_delivered() {
    let dispatch = DispatchSettings { max_in_flight: 64, per_endpoint_in_flight: 5, per_workspace_in_flight: 64 };
    let mut s =
        Scene::new(&[("dead", 0), ("healthy", 0), ("elsewhere", 1)], &[("dead", answered(200))], 64, dispatch).await;
    s.queue("dead", 40).await;
    s.queue("healthy", 5).await;
    s.queue("elsewhere", 3).await;

    let pass = s.pass().await;

    assert_eq!((pass.claimed, pass.free_slots_before), (5 + 5 + 3, 64), "{pass:?}");
    until("the healthy endpoints are delivered", async || {
        s.count("healthy", DeliveryStatus::Delivered).await == 5
            && s.count("elsewhere", DeliveryStatus::Delivered).await == 3
    })
    .await;
    until("five POSTs hang at the dead endpoint", async || s.sender.hanging(&url("dead")) == 5).await;
    assert_eq!(s.dispatcher.in_flight(), 5, "only the dead endpoint's share is still in flight");
    assert_eq!(s.leased_and_untouched("dead").await, (5, 35), "the rest of the backlog is untouched, still due");
    let again = s.pass().await;
    assert_eq!(again.claimed, 0, "the dead endpoint is at its share: {again:?}");
    assert!(!again.may_have_more(), "{again:?}");

    s.sender.open();
    s.drain().await;

    assert_eq!(s.count("dead", DeliveryStatus::Delivered).await, 40, "the backlog goes once the endpoint answers");
    let posts = s.sender.posts();
    assert_eq!(posts.len(), 48, "every delivery was posted");
    assert!(posts.values().all(|n| *n == 1), "none twice: {posts:?}");
    assert_eq!(s.sender.hanging_total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoints_backlog_does_not_fill_the_batch_for_another_workspace() {
    let dispatch = DispatchSettings { max_in_flight: 64, per_endpoint_in_flight: 3, per_workspace_in_flight: 64 };
    let mut s = Scene::new(&[("dead", 0), ("elsewhere", 1)], &[("dead", answered(500))], 8, dispatch).await;
    s.queue("dead", 40).await;
    s.queue("elsewhere", 3).await;

    let pass = s.pass().await;

    assert_eq!(pass.claimed, 3 + 3, "a batch of 8 takes the dead endpoint's share, then the other workspace's");
    until("the other workspace is delivered", async || s.count("elsewhere", DeliveryStatus::Delivered).await == 3)
        .await;
    assert_eq!(s.leased_and_untouched("dead").await, (3, 37));
    s.sender.open();
    tokio::time::timeout(HUNG, s.dispatcher.idle()).await.expect("idle");
    assert_eq!(s.count("dead", DeliveryStatus::Retrying).await, 3, "answered 500: retried later");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_of_dead_endpoints_holds_only_its_share_of_the_slots() {
    // Four dead endpoints of one workspace could hold 4 x 5 = 20 slots, more than there are;
    // the workspace's share is 6, so the other workspace finds slots free and is delivered.
    let dispatch = DispatchSettings { max_in_flight: 16, per_endpoint_in_flight: 5, per_workspace_in_flight: 6 };
    let names = [("d1", 0), ("d2", 0), ("d3", 0), ("d4", 0), ("victim", 1)];
    let dead: Vec<(&str, WebhookResponse)> = names[..4].iter().map(|(n, _)| (*n, answered(200))).collect();
    let mut s = Scene::new(&names, &dead, 64, dispatch).await;
    for (name, _) in &names[..4] {
        s.queue(name, 10).await;
    }

    let first = s.pass().await;
    until("six POSTs hang", async || s.sender.hanging_total() == 6).await;
    s.queue("victim", 5).await;
    let second = s.pass().await;

    assert_eq!(first.claimed, 6, "the workspace's share, though its endpoints have more room: {first:?}");
    assert_eq!((s.sender.hanging(&url("d1")), s.sender.hanging(&url("d2"))), (5, 1), "earliest first");
    assert_eq!(second.claimed, 5, "the other workspace's deliveries, past the capped backlog: {second:?}");
    until("the other workspace is delivered", async || s.count("victim", DeliveryStatus::Delivered).await == 5).await;
    let workspace = s.endpoints["d1"].workspace_id;
    assert_eq!(s.dispatcher.in_flight_of(workspace), 6);
    assert_eq!(s.pass().await.claimed, 0, "the dead workspace is still at its share");
    let untouched: usize = [s.leased_and_untouched("d3").await.1, s.leased_and_untouched("d4").await.1].iter().sum();
    assert_eq!(untouched, 20, "the capped backlog stays due, untouched");

    s.sender.open();
    s.drain().await;
    assert_eq!(s.dispatcher.in_flight_of(workspace), 0);
    for (name, _) in &names[..4] {
        assert_eq!(s.count(name, DeliveryStatus::Delivered).await, 10, "{name}'s backlog goes once it answers");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_cap_all_endpoints_together_and_free_up_when_posts_end() {
    let dispatch = DispatchSettings { max_in_flight: 6, per_endpoint_in_flight: 4, per_workspace_in_flight: 6 };
    let dead = [("one", answered(200)), ("two", answered(503)), ("three", answered(200))];
    let mut s = Scene::new(&[("one", 0), ("two", 0), ("three", 1)], &dead, 64, dispatch).await;
    for name in ["one", "two", "three"] {
        s.queue(name, 5).await;
    }

    let first = s.pass().await;
    let full = s.pass().await;

    assert_eq!((first.claimed, first.asked), (6, 6), "no more than the slots: {first:?}");
    assert!(first.may_have_more());
    assert_eq!((full.claimed, full.free_slots_before, full.asked), (0, 0, 0), "{full:?}");
    until("six POSTs hang", async || s.sender.hanging_total() == 6).await;
    assert_eq!((s.sender.hanging(&url("one")), s.sender.hanging(&url("two"))), (4, 2), "earliest first, 4 at most");
    assert_eq!(s.dispatcher.in_flight(), 6);
    assert!(s.dispatcher.slot_free().now_or_never().is_none(), "no slot is free");
    assert!(s.dispatcher.idle().now_or_never().is_none(), "not idle");

    s.sender.open();
    tokio::time::timeout(HUNG, s.dispatcher.slot_free()).await.expect("a slot frees up");
    tokio::time::timeout(HUNG, s.dispatcher.idle()).await.expect("idle");
    assert_eq!(s.dispatcher.in_flight(), 0);
    s.drain().await;

    assert_eq!(s.count("one", DeliveryStatus::Delivered).await, 5);
    assert_eq!(s.count("two", DeliveryStatus::Retrying).await, 5, "503: retried later");
    assert_eq!(s.count("three", DeliveryStatus::Delivered).await, 5);
    let posts = s.sender.posts();
    assert!(posts.len() == 15 && posts.values().all(|n| *n == 1), "each posted once: {posts:?}");
}

/// Keeps the text of every WARN event (fields as `name=value`), for the current thread.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                let _ = write!(self.0, "{}={value:?} ", field.name());
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = Text(String::new());
            event.record(&mut text);
            self.0.lock().unwrap_or_else(PoisonError::into_inner).push(text.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

// A current-thread runtime: the spawned tasks run on this thread, where `Warnings` listens.
#[tokio::test(flavor = "current_thread")]
async fn a_tasks_storage_error_is_logged_and_the_delivery_stays_leased_until_its_lease_ends() {
    let warnings = Warnings::default();
    let _listening = tracing::subscriber::set_default(warnings.clone());
    let memory = Arc::new(MemoryStore::new());
    let store = Arc::new(FaultyStore::new(Arc::clone(&memory) as _));
    store.fail(Op::UpdateWebhookDelivery, When::Always, StoreError::Unavailable("disk on fire".into()));
    let now = fixtures::now();
    let clock = Arc::new(FixedClock::at(now));
    let core = Tidings::new(
        Arc::clone(&store) as _,
        Arc::clone(&clock) as _,
        Arc::new(SystemRandom),
        Arc::new(FakeDns::default()),
        CoreConfig::default(),
    );
    let endpoint = fixtures::webhook(WorkspaceId(ulid()));
    memory.insert_webhook(&endpoint).await.unwrap();
    // Due exactly at `now`: the fixture's own clock reading may fall in the next millisecond.
    let queued = WebhookDelivery {
        next_attempt_at: Some(now),
        created_at: now,
        ..fixtures::delivery(endpoint.workspace_id, endpoint.id)
    };
    memory.insert_webhook_deliveries(std::slice::from_ref(&queued)).await.unwrap();
    let sender = GatedSender::new(HashMap::new());
    let worker = Arc::new(WebhookWorker::new(core, Arc::clone(&sender) as _, WebhookSettings::default()));
    let dispatcher = WebhookDispatcher::new(Arc::clone(&worker), DispatchSettings::default());
    let lease = worker.settings().attempt_lease();

    assert_eq!(dispatcher.dispatch_due(now).await.unwrap().claimed, 1);
    tokio::time::timeout(HUNG, dispatcher.idle()).await.expect("idle");

    let logged = warnings.all();
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].contains(&queued.id.to_string()) && logged[0].contains("disk on fire"), "{logged:?}");
    assert_eq!(dispatcher.in_flight(), 0, "the slot is free again");
    let stored = memory.get_webhook_delivery(queued.workspace_id, queued.id).await.unwrap().unwrap();
    assert_eq!((stored.status, stored.next_attempt_at), (DeliveryStatus::Pending, Some(now + lease)), "still leased");
    assert_eq!(dispatcher.dispatch_due(now + lease - chrono::Duration::seconds(1)).await.unwrap().claimed, 0);

    store.heal();
    assert_eq!(dispatcher.dispatch_due(now + lease).await.unwrap().claimed, 1, "claimed again once the lease ends");
    tokio::time::timeout(HUNG, dispatcher.idle()).await.expect("idle");
    let stored = memory.get_webhook_delivery(queued.workspace_id, queued.id).await.unwrap().unwrap();
    assert_eq!((stored.status, stored.attempts), (DeliveryStatus::Delivered, 1));
    assert_eq!(sender.posts().get(&queued.id.to_string()), Some(&2), "posted again: same webhook-id");
}
