//! What each node keeps of a workspace's settings while it listens for their changes: the
//! enabled webhooks, the domains (by id and by name) and the senders looked up.
//!
//! Why: every event read its workspace's enabled endpoints to fan out (three reads per
//! delivered message), and every send read its domain twice (the send, the delivery) and
//! its sender once: six of the twelve statements of a delivered message (bench/README.md),
//! for settings that change when an operator edits them.
//!
//! How the cache stays true on every node: each change to `webhooks`, `domains` or `senders`
//! notifies the channel [`CHANNEL`] with its workspace, in the same statement or
//! transaction, so the notification leaves at commit. Each store keeps one connection of its
//! own listening on it and forgets all it keeps of a workspace when its notification arrives.
//! The cache is used only while that connection is listening: it is emptied, and bypassed,
//! from the moment the connection fails (or leaves a query unanswered for [`PING`]: it is
//! asked one every [`PING`]) until it listens again (reconnecting every second). A value read
//! from the database is kept only if no notification (and no loss of the connection) came
//! while it was being read, so a read that raced a change cannot put back what was before it.
//!
//! What remains is the delivery time of a notification: a read on another node within a
//! moment (normally under a millisecond) after the commit of a change may still see what was
//! before it, as it would had it been made a moment earlier. For a domain that means a send
//! or a delivery may use a domain deleted, or unverified, that moment before; a domain's
//! name never changes, and its DKIM keys change only by a rotation's switch, whose old keys
//! stay published (Retiring) for days: a domain read a moment before the switch signs with
//! a key receivers still find.
//!
//! Absences are kept too (no such domain, no such sender): a notification forgets them like
//! anything else. What is kept is bounded by [`MAX_ENTRIES`] over all workspaces, however
//! many names clients look up: past it the cache starts over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use tidings_core::ids::WorkspaceId;
use tidings_core::model::{Domain, Sender, WebhookEndpoint};
use tokio::sync::watch;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{AsyncMessage, Config, Socket};
use uuid::Uuid;

/// The channel that changes to `webhooks`, `domains` and `senders` notify, with the
/// workspace's id as the payload.
pub(crate) const CHANNEL: &str = "tidings_workspace_changes";

/// The `application_name` of the listening connections.
pub const LISTENER_NAME: &str = "tidings-change-listener";

/// Most values kept, over all workspaces; past that the cache starts over.
const MAX_ENTRIES: usize = 100_000;

/// How long the listener waits before connecting again.
const RECONNECT: Duration = Duration::from_secs(1);

/// How often the listener checks that its connection answers, and how long it waits for the
/// answer: a connection that stops answering is given up within twice this.
const PING: Duration = Duration::from_secs(2);

/// What is kept of one workspace; `None` values are kept absences.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// The enabled webhooks, in id order.
    pub(crate) webhooks: Option<Vec<WebhookEndpoint>>,
    /// Domains by id.
    pub(crate) domains: HashMap<Uuid, Option<Domain>>,
    /// Domains by name.
    pub(crate) domains_by_name: HashMap<String, Option<Domain>>,
    /// Senders by domain and lower-cased username.
    pub(crate) senders: HashMap<(Uuid, String), Option<Sender>>,
    /// How many values were kept here, toward [`MAX_ENTRIES`].
    entries: usize,
}

/// The workspaces' kept values, and whether they may be used.
#[derive(Debug, Default)]
struct State {
    /// Whether the listener is listening: the cache is used only then.
    live: bool,
    /// Counts invalidations: a value read across one is not kept.
    generation: u64,
    workspaces: HashMap<Uuid, Kept>,
    /// Values kept over all workspaces.
    entries: usize,
}

/// One store's cache (shared by its clones). Dropping it stops its listener.
#[derive(Debug)]
pub(crate) struct WorkspaceCache {
    state: Mutex<State>,
    /// Dropped with the cache: the listener then stops.
    _stop: watch::Sender<()>,
}

/// A read's ticket: the generation when it started.
pub(crate) struct Ticket(u64);

impl WorkspaceCache {
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

    /// What `find` finds kept of `workspace`, or a ticket to keep what is about to be read
    /// (none while the cache is not in use).
    pub(crate) fn get<R>(
        &self,
        workspace: WorkspaceId,
        find: impl FnOnce(&Kept) -> Option<R>,
    ) -> Result<R, Option<Ticket>> {
        let state = self.state();
        if !state.live {
            return Err(None);
        }
        match state.workspaces.get(&crate::db::uuid(workspace.0)).and_then(find) {
            Some(found) => Ok(found),
            None => Err(Some(Ticket(state.generation))),
        }
    }

    /// Keeps one value in `workspace` by `put`, read after `ticket` was taken, unless
    /// something was invalidated since.
    pub(crate) fn keep(&self, workspace: WorkspaceId, ticket: Ticket, put: impl FnOnce(&mut Kept)) {
        let mut state = self.state();
        if !state.live || state.generation != ticket.0 {
            return;
        }
        if state.entries >= MAX_ENTRIES {
            state.workspaces.clear();
            state.entries = 0;
        }
        let kept = state.workspaces.entry(crate::db::uuid(workspace.0)).or_default();
        put(kept);
        kept.entries += 1;
        state.entries += 1;
    }

    /// Forgets what is kept of `workspace` (of all of them if `None`: a payload that names
    /// none). The store calls it after its own changes too, so that this node never waits
    /// for its own notification.
    pub(crate) fn invalidate(&self, workspace: Option<Uuid>) {
        let mut state = self.state();
        state.generation += 1;
        match workspace {
            Some(ws) => {
                if let Some(kept) = state.workspaces.remove(&ws) {
                    state.entries -= kept.entries;
                }
            }
            None => {
                state.workspaces.clear();
                state.entries = 0;
            }
        }
    }

    /// Starts or stops using the cache; either way it starts empty.
    fn set_live(&self, live: bool) {
        let mut state = self.state();
        state.generation += 1;
        state.workspaces.clear();
        state.entries = 0;
        state.live = live;
    }
}

/// Listens until the cache is dropped, reconnecting after a failure.
async fn listen<T>(config: Config, tls: T, cache: Weak<WorkspaceCache>, mut stopped: watch::Receiver<()>)
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
async fn listen_once<T>(config: &Config, tls: T, cache: &Weak<WorkspaceCache>)
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
        // Changes committed from now on are notified; what is read from now on is current.
        cache.set_live(true);
    }
    // A connection that dies without a word (a dropped route, a NAT that forgot it) would
    // leave what is kept in use with no notification coming: a query every PING keeps the
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache in use, without a listener (its `live` is set by hand).
    fn live_cache() -> WorkspaceCache {
        let cache = WorkspaceCache { state: Mutex::new(State::default()), _stop: watch::channel(()).0 };
        cache.set_live(true);
        cache
    }

    fn keep_absent_sender(cache: &WorkspaceCache, ws: WorkspaceId, name: String) {
        let Err(Some(ticket)) = cache.get(ws, |kept| kept.senders.get(&(Uuid::nil(), name.clone())).cloned()) else {
            panic!("{name} is not kept yet, and the cache is in use");
        };
        cache.keep(ws, ticket, |kept| drop(kept.senders.insert((Uuid::nil(), name), None)));
    }

    #[test]
    fn what_is_kept_is_bounded_however_many_names_are_looked_up() {
        let cache = live_cache();
        let ws = WorkspaceId(ulid::Ulid::new());
        for i in 0..MAX_ENTRIES + 10 {
            keep_absent_sender(&cache, ws, format!("user{i}"));
            assert!(cache.state().entries <= MAX_ENTRIES, "at most {MAX_ENTRIES} values after {i}");
        }
        let kept = cache.state().workspaces.get(&crate::db::uuid(ws.0)).map_or(0, |k| k.senders.len());
        assert_eq!(kept, 10, "the cache started over when full");
    }

    #[test]
    fn a_read_across_an_invalidation_is_not_kept_and_invalidation_frees_its_count() {
        let cache = live_cache();
        let (ws, other) = (WorkspaceId(ulid::Ulid::new()), WorkspaceId(ulid::Ulid::new()));
        keep_absent_sender(&cache, ws, "a".into());
        keep_absent_sender(&cache, other, "b".into());
        let Err(Some(ticket)) = cache.get(ws, |kept| kept.webhooks.clone()) else { panic!("no list kept yet") };
        cache.invalidate(Some(crate::db::uuid(ws.0)));
        cache.keep(ws, ticket, |kept| kept.webhooks = Some(Vec::new()));
        assert!(matches!(cache.get(ws, |kept| kept.webhooks.clone()), Err(Some(_))), "the raced read is not kept");
        assert_eq!(cache.state().entries, 1, "only the other workspace's value is counted");
    }
}
