//! Connection reuse and the per-destination concurrency cap.
//!
//! A [`HostPool`] serves one destination (the relay, or one MX host): a semaphore with one
//! permit per allowed connection, and the idle sessions. A sender takes a permit first, then
//! an idle session or, only when none is idle, a new one; a finished session is parked
//! before its permit is released. So connections open to a destination never exceed the
//! permits: each was opened by a permit holder, and a parked one is reused before anyone
//! opens another.
//!
//! A session in use belongs to the sending future alone. If that future is cancelled (the
//! total timeout), the session is dropped with it and its connection closed: it never
//! returns to the pool in an unknown state.
//!
//! [`Destinations`] keeps the pools by name, bounded, with a background task (started on
//! first use, ended when the mailer is dropped) that closes connections idle for too long.
//!
//! With shaping, an MX host's pool also belongs to its delivery site
//! ([`Destinations::get_in_site`]): its settings are the site's (connections, messages per
//! connection), and a new connection also needs one of the site's seats
//! ([`crate::site_connections`]), which caps the connections open to all of the site's
//! hosts together, idle ones included.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

use tidings_core::shaping::SiteKey;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::PoolSettings;
use crate::session::Session;
use crate::site_connections::{Seating, SiteConnections, SiteSeat};

/// Connections to one destination.
pub(crate) struct HostPool {
    slots: Arc<Semaphore>,
    idle: Mutex<Vec<Session>>,
    settings: PoolSettings,
    /// The site whose connection cap this pool's connections count in, with shaping.
    site: Option<Arc<SiteConnections>>,
}

impl HostPool {
    fn new(settings: PoolSettings, site: Option<Arc<SiteConnections>>) -> Arc<Self> {
        let pool = Arc::new(Self {
            slots: Arc::new(Semaphore::new(settings.max_connections)),
            idle: Mutex::new(Vec::new()),
            settings,
            site,
        });
        if let Some(site) = &pool.site {
            site.register(&pool);
        }
        pool
    }

    /// Waits for a connection slot.
    pub(crate) async fn acquire(self: &Arc<Self>) -> Slot {
        let permit = Arc::clone(&self.slots).acquire_owned().await.expect("a pool's semaphore is never closed");
        Slot { _permit: permit, pool: Arc::clone(self) }
    }

    /// Connections in use right now.
    pub(crate) fn busy(&self) -> usize {
        self.settings.max_connections - self.slots.available_permits()
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Session>> {
        // A panic while holding this lock cannot leave the list inconsistent (push/pop/retain).
        self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops idle sessions older than the idle timeout.
    fn reap(&self) {
        let limit = self.settings.idle_timeout;
        self.idle().retain(|session| session.idle_since.elapsed() < limit);
    }

    /// The idle session parked longest ago, taken out of the pool (to be closed).
    pub(crate) fn take_oldest_idle(&self) -> Option<Session> {
        let mut idle = self.idle();
        if idle.is_empty() { None } else { Some(idle.remove(0)) }
    }

    /// Nothing in use and nothing idle: the pool can be forgotten.
    fn is_unused(&self) -> bool {
        self.slots.available_permits() == self.settings.max_connections && self.idle().is_empty()
    }
}

/// The right to use one connection to a destination, held while sending.
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    pool: Arc<HostPool>,
}

/// What a slot holder sends over.
pub(crate) enum Ready {
    /// A parked session of this pool (boxed: a session is large, a seat is not).
    Idle(Box<Session>),
    /// None was idle: open a new connection, holding this seat of the site (none without
    /// shaping).
    Open(Option<SiteSeat>),
}

impl Slot {
    /// A parked session to reuse, or the right to open a new connection. Without a site,
    /// the slot is that right. With one, a new connection also needs a seat of the site:
    /// while waiting for it, a session parked in this pool meanwhile is reused instead.
    pub(crate) async fn ready(&self) -> Ready {
        loop {
            if let Some(session) = self.reuse() {
                return Ready::Idle(Box::new(session));
            }
            let Some(site) = &self.pool.site else { return Ready::Open(None) };
            match site.seat(&self.pool).await {
                Seating::Seat(seat) => return Ready::Open(Some(seat)),
                Seating::Parked => {}
            }
        }
    }

    /// The most recently parked session that has not been idle too long.
    fn reuse(&self) -> Option<Session> {
        let limit = self.pool.settings.idle_timeout;
        let mut idle = self.pool.idle();
        while let Some(session) = idle.pop() {
            if session.idle_since.elapsed() < limit {
                return Some(session);
            }
        }
        None
    }

    /// Returns a session in a clean state (between transactions) to the pool, unless it
    /// has carried its share of messages; then the slot is freed.
    pub(crate) async fn release(self, mut session: Session) {
        if session.delivered >= self.pool.settings.max_messages_per_connection {
            session.quit().await;
            return;
        }
        session.idle_since = Instant::now();
        self.pool.idle().push(session);
        if let Some(site) = &self.pool.site {
            site.notify_parked();
        }
    }
}

/// Pools by destination name, at most `max` of them (beyond that, unused pools are
/// forgotten; pools in use are kept, so the cap on connections holds).
pub(crate) struct Destinations {
    inner: Arc<Inner>,
}

struct Inner {
    pools: Mutex<HashMap<String, Arc<HostPool>>>,
    /// The sites of the pools made by [`Destinations::get_in_site`]; weak, as a site lives
    /// as long as one of its pools.
    sites: Mutex<HashMap<SiteKey, Weak<SiteConnections>>>,
    settings: PoolSettings,
    max: usize,
    reaper: OnceLock<()>,
}

impl Destinations {
    /// No pools yet.
    pub(crate) fn new(settings: PoolSettings, max: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                pools: Mutex::new(HashMap::new()),
                sites: Mutex::new(HashMap::new()),
                settings,
                max,
                reaper: OnceLock::new(),
            }),
        }
    }

    /// The pool for `name`, created if needed. Must be called inside a Tokio runtime.
    pub(crate) fn get(&self, name: &str) -> Arc<HostPool> {
        self.get_or_make(name.to_owned(), || HostPool::new(self.inner.settings, None))
    }

    /// The pool for `name` as a host of `site`, created if needed with `settings` (the
    /// site's): its connections count in the site's cap of `settings.max_connections`. A
    /// host that is in two sites (the MX hosts of two domains overlap without the same
    /// most preferred host) has a pool in each. Must be called inside a Tokio runtime.
    pub(crate) fn get_in_site(&self, name: &str, site: &SiteKey, settings: PoolSettings) -> Arc<HostPool> {
        self.get_or_make(format!("{name} @ {site}"), || {
            let mut sites = self.inner.sites();
            let connections = match sites.get(site).and_then(Weak::upgrade) {
                Some(connections) => connections,
                None => {
                    if sites.len() >= self.inner.max {
                        sites.retain(|_, site| site.strong_count() > 0);
                    }
                    let connections = SiteConnections::new(settings.max_connections);
                    sites.insert(site.clone(), Arc::downgrade(&connections));
                    connections
                }
            };
            HostPool::new(settings, Some(connections))
        })
    }

    fn get_or_make(&self, key: String, make: impl FnOnce() -> Arc<HostPool>) -> Arc<HostPool> {
        self.inner.reaper.get_or_init(|| spawn_reaper(Arc::downgrade(&self.inner)));
        let mut pools = self.inner.pools();
        if let Some(pool) = pools.get(&key) {
            return Arc::clone(pool);
        }
        if pools.len() >= self.inner.max {
            pools.retain(|_, pool| !forgettable(pool));
        }
        let pool = make();
        pools.insert(key, Arc::clone(&pool));
        pool
    }
}

impl Inner {
    fn pools(&self) -> MutexGuard<'_, HashMap<String, Arc<HostPool>>> {
        self.pools.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn sites(&self) -> MutexGuard<'_, HashMap<SiteKey, Weak<SiteConnections>>> {
        self.sites.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Nobody holds it but the map, and it has no connections.
fn forgettable(pool: &Arc<HostPool>) -> bool {
    Arc::strong_count(pool) == 1 && pool.is_unused()
}

/// Every idle timeout, closes expired idle connections and forgets unused pools; stops
/// once the mailer (the only strong owner of `inner`) is gone.
fn spawn_reaper(inner: Weak<Inner>) {
    let Some(period) = inner.upgrade().map(|inner| inner.settings.idle_timeout) else { return };
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            let Some(inner) = inner.upgrade() else { return };
            let mut pools = inner.pools();
            for pool in pools.values() {
                pool.reap();
            }
            pools.retain(|_, pool| !forgettable(pool));
            drop(pools);
            inner.sites().retain(|_, site| site.strong_count() > 0);
        }
    });
}
