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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::PoolSettings;
use crate::session::Session;

/// Connections to one destination.
pub(crate) struct HostPool {
    slots: Arc<Semaphore>,
    idle: Mutex<Vec<Session>>,
    settings: PoolSettings,
}

impl HostPool {
    fn new(settings: PoolSettings) -> Arc<Self> {
        Arc::new(Self {
            slots: Arc::new(Semaphore::new(settings.max_connections)),
            idle: Mutex::new(Vec::new()),
            settings,
        })
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

impl Slot {
    /// The most recently parked session that has not been idle too long.
    pub(crate) fn reuse(&self) -> Option<Session> {
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
    }
}

/// Pools by destination name, at most `max` of them (beyond that, unused pools are
/// forgotten; pools in use are kept, so the cap on connections holds).
pub(crate) struct Destinations {
    inner: Arc<Inner>,
}

struct Inner {
    pools: Mutex<HashMap<String, Arc<HostPool>>>,
    settings: PoolSettings,
    max: usize,
    reaper: OnceLock<()>,
}

impl Destinations {
    /// No pools yet.
    pub(crate) fn new(settings: PoolSettings, max: usize) -> Self {
        Self { inner: Arc::new(Inner { pools: Mutex::new(HashMap::new()), settings, max, reaper: OnceLock::new() }) }
    }

    /// The pool for `name`, created if needed. Must be called inside a Tokio runtime.
    pub(crate) fn get(&self, name: &str) -> Arc<HostPool> {
        self.inner.reaper.get_or_init(|| spawn_reaper(Arc::downgrade(&self.inner)));
        let mut pools = self.inner.pools();
        if let Some(pool) = pools.get(name) {
            return Arc::clone(pool);
        }
        if pools.len() >= self.inner.max {
            pools.retain(|_, pool| !forgettable(pool));
        }
        let pool = HostPool::new(self.inner.settings);
        pools.insert(name.to_owned(), Arc::clone(&pool));
        pool
    }
}

impl Inner {
    fn pools(&self) -> MutexGuard<'_, HashMap<String, Arc<HostPool>>> {
        self.pools.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
        }
    });
}
