//! The enabled webhooks of each workspace, kept by each node while it listens for changes.
//!
//! Why: every event reads its workspace's enabled endpoints to fan out, so a delivered
//! message read them three times (`Queued`, `Sent`, the outcome): a quarter of PostgreSQL's
//! statements per message (bench/README.md), for lists that change when an operator edits
//! an endpoint.
//!
//! How the cache stays true on every node: each change to `webhooks` notifies the channel
//! [`CHANNEL`] with its workspace, in the same statement, so the notification leaves at
//! commit. Each store keeps one connection of its own listening on it and forgets a
//! workspace's list when its notification arrives. The cache is used only while that
//! connection is listening: it is emptied, and bypassed, from the moment the connection
//! fails (or leaves a query unanswered for [`PING`]: it is asked one every [`PING`]) until
//! it listens again (reconnecting every second). A list read from the database
//! is kept only if no notification (and no loss of the connection) came while it was being
//! read, so a read that raced a change cannot put back the list from before it.
//!
//! What remains is the delivery time of a notification: an event on another node within a
//! moment (normally under a millisecond) after the commit of a change may still use the list
//! from before it, as it would had it been read a moment earlier.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use tidings_core::ids::WorkspaceId;
use tidings_core::model::WebhookEndpoint;
use tokio::sync::watch;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{AsyncMessage, Config, Socket};
use uuid::Uuid;

/// The channel that changes to `webhooks` notify, with the workspace's id as the payload.
pub(crate) const CHANNEL: &str = "tidings_webhooks";

/// The `application_name` of the listening connections.
pub const LISTENER_NAME: &str = "tidings-webhook-listener";

/// Most workspaces whose lists are kept; past that the cache starts over.
const MAX_WORKSPACES: usize = 10_000;

/// How long the listener waits before connecting again.
const RECONNECT: Duration = Duration::from_secs(1);

/// How often the listener checks that its connection answers, and how long it waits for the
/// answer: a connection that stops answering is given up within twice this.
const PING: Duration = Duration::from_secs(2);

/// The lists, and whether they may be used.
#[derive(Debug, Default)]
struct State {
    /// Whether the listener is listening: the cache is used only then.
    live: bool,
    /// Counts invalidations: a list read across one is not kept.
    generation: u64,
    lists: HashMap<Uuid, Vec<WebhookEndpoint>>,
}

/// One store's cache (shared by its clones). Dropping it stops its listener.
#[derive(Debug)]
pub(crate) struct WebhookCache {
    state: Mutex<State>,
    /// Dropped with the cache: the listener then stops.
    _stop: watch::Sender<()>,
}

/// A read's ticket: the generation when it started.
pub(crate) struct Ticket(u64);

impl WebhookCache {
    /// A cache and its listener on the database of `config`, connected through `tls`.
    pub(crate) fn start<T>(config: Config, tls: T) -> Arc<Self>
    where
        T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
        T::Stream: Send + Sync,
        T::TlsConnect: Send + Sync,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        let (stop, stopped) = watch::channel(());
        let cache = Arc::new(Self { state: Mutex::new(State::default()), _stop: stop });
        tokio::spawn(listen(config, tls, Arc::downgrade(&cache), stopped));
        cache
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Every change under this lock is a single assignment or map operation.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept list of `workspace`, or a ticket to keep the one about to be read.
    pub(crate) fn get(&self, workspace: WorkspaceId) -> Result<Vec<WebhookEndpoint>, Option<Ticket>> {
        let state = self.state();
        if !state.live {
            return Err(None);
        }
        match state.lists.get(&crate::db::uuid(workspace.0)) {
            Some(list) => Ok(list.clone()),
            None => Err(Some(Ticket(state.generation))),
        }
    }

    /// Keeps `list`, read after `ticket` was taken, unless something was invalidated since.
    pub(crate) fn keep(&self, workspace: WorkspaceId, ticket: Ticket, list: &[WebhookEndpoint]) {
        let mut state = self.state();
        if state.live && state.generation == ticket.0 {
            if state.lists.len() >= MAX_WORKSPACES {
                state.lists.clear();
            }
            state.lists.insert(crate::db::uuid(workspace.0), list.to_vec());
        }
    }

    /// Forgets `workspace`'s list (all of them if `None`: a payload that names none). The
    /// store calls it after its own changes too, so that this node never waits for its own
    /// notification.
    pub(crate) fn invalidate(&self, workspace: Option<Uuid>) {
        let mut state = self.state();
        state.generation += 1;
        match workspace {
            Some(ws) => drop(state.lists.remove(&ws)),
            None => state.lists.clear(),
        }
    }

    /// Starts or stops using the cache; either way it starts empty.
    fn set_live(&self, live: bool) {
        let mut state = self.state();
        state.generation += 1;
        state.lists.clear();
        state.live = live;
    }
}

/// Listens until the cache is dropped, reconnecting after a failure.
async fn listen<T>(config: Config, tls: T, cache: Weak<WebhookCache>, mut stopped: watch::Receiver<()>)
where
    T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send + Sync,
    T::TlsConnect: Send + Sync,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    loop {
        tokio::select! {
            () = listen_once(&config, tls.clone(), &cache) => {}
            _ = stopped.changed() => return,
        }
        match cache.upgrade() {
            Some(cache) => cache.set_live(false),
            None => return,
        }
        tokio::select! {
            () = tokio::time::sleep(RECONNECT) => {}
            _ = stopped.changed() => return,
        }
    }
}

/// One connection: listens, applies notifications, and returns when the connection ends.
async fn listen_once<T>(config: &Config, tls: T, cache: &Weak<WebhookCache>)
where
    T: MakeTlsConnect<Socket> + Send + Sync + 'static,
    T::Stream: Send + Sync,
    T::TlsConnect: Send + Sync,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    let mut config = config.clone();
    // Named, for operators (`pg_stat_activity`) and for the tests that cut it.
    config.application_name(LISTENER_NAME);
    let Ok((client, mut connection)) = config.connect(tls).await else {
        return;
    };
    let cache_for_driver = cache.clone();
    // The connection's messages: notifications invalidate; the stream also drives the
    // connection, so the `LISTEN` below completes.
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(note) = message
                && let Some(cache) = cache_for_driver.upgrade()
            {
                cache.invalidate(note.payload().parse().ok());
            }
        }
    });
    if client.batch_execute(&format!("LISTEN {CHANNEL}")).await.is_err() {
        driver.abort();
        return;
    }
    if let Some(cache) = cache.upgrade() {
        // Changes committed from now on are notified; lists read from now on are current.
        cache.set_live(true);
    }
    // A connection that dies without a word (a dropped route, a NAT that forgot it) would
    // leave the lists in use with no notification coming: a query every PING keeps the
    // connection busy and gives it up when one goes unanswered.
    let mut driver = driver;
    loop {
        tokio::select! {
            _ = &mut driver => return,
            () = tokio::time::sleep(PING) => {
                if !matches!(tokio::time::timeout(PING, client.simple_query("SELECT 1")).await, Ok(Ok(_))) {
                    driver.abort();
                    return;
                }
            }
        }
    }
}
