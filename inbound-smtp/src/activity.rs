//! What each session is doing, so that slow holders lose their place: when a new client finds
//! every session place taken, or a message finds the data budget spent, the session that has
//! made no progress for longest (at least `evict_idle_after`) is told to close with `421`.
//!
//! *Progress* is a command line received, or another chunk of message data (the budget's
//! grain) received; a client that trickles a byte at a time makes none. A session is never
//! evicted while the server works for it (a handler call): it is *busy* then. A session
//! waiting for message data budget is not busy: sessions that all hold part of the budget
//! and wait for more would otherwise hold it until their waits run out, so the one that
//! made no progress for longest gives way. The state is one atomic per session, so that an eviction and the session
//! turning busy cannot both win: once evicted, a session can no longer turn busy, and once
//! busy it cannot be evicted, which keeps an eviction from cutting a handler call short.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The server is working for the session.
const BUSY: u64 = u64::MAX;
/// The session was told to close.
const EVICTED: u64 = u64::MAX - 1;

/// Which kind of place an eviction makes room for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// A session place: any idle session will do.
    Place,
    /// Message data budget: only a session holding some.
    Budget,
}

/// One session's state, shared with the registry.
#[derive(Debug)]
pub(crate) struct Activity {
    /// Milliseconds since the registry's epoch of the last progress, or [`BUSY`] / [`EVICTED`].
    state: AtomicU64,
    /// Message data bytes the session holds of the budget.
    held: AtomicUsize,
    /// Woken once when the session is evicted.
    evicted: Notify,
    epoch: Instant,
}

impl Activity {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(EVICTED - 1).min(EVICTED - 1)
    }

    /// The client made progress (or the server finished working for it): the session waits
    /// for the client again, from now. `false` if it was evicted.
    pub(crate) fn progress(&self) -> bool {
        let now = self.now();
        self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| (s != EVICTED).then_some(now)).is_ok()
    }

    /// The server works for the session now; `false` if it was evicted (it must then stop).
    pub(crate) fn busy(&self) -> bool {
        self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| (s != EVICTED).then_some(BUSY)).is_ok()
    }

    /// Whether the session was evicted.
    pub(crate) fn is_evicted(&self) -> bool {
        self.state.load(Ordering::Acquire) == EVICTED
    }

    /// Records how many message data bytes the session holds.
    pub(crate) fn set_held(&self, bytes: usize) {
        self.held.store(bytes, Ordering::Relaxed);
    }

    /// Completes once the session has been evicted.
    pub(crate) async fn evicted(&self) {
        self.evicted.notified().await;
    }
}

/// Every running session's [`Activity`].
#[derive(Debug)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<u64, Arc<Activity>>>,
    next: AtomicU64,
    epoch: Instant,
    /// How long without progress makes a session evictable.
    min_idle: Duration,
}

/// A session's entry in the [`Registry`]; removed when dropped.
#[derive(Debug)]
pub(crate) struct Entry {
    id: u64,
    registry: Arc<Registry>,
    activity: Arc<Activity>,
}

impl Entry {
    pub(crate) fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.registry.sessions.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
    }
}

impl Registry {
    /// A registry where sessions without progress for `min_idle` may be evicted.
    pub(crate) fn new(min_idle: Duration) -> Arc<Self> {
        Arc::new(Self { sessions: Mutex::default(), next: AtomicU64::new(0), epoch: Instant::now(), min_idle })
    }

    /// Adds a session whose last progress is now (its connection).
    pub(crate) fn register(self: &Arc<Self>) -> Entry {
        let activity = Arc::new(Activity {
            state: AtomicU64::new(0),
            held: AtomicUsize::new(0),
            evicted: Notify::new(),
            epoch: self.epoch,
        });
        activity.progress();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner).insert(id, Arc::clone(&activity));
        Entry { id, registry: Arc::clone(self), activity }
    }

    /// Evicts the session that made no progress for longest, if one has made none for the
    /// registry's `min_idle` and can give what is needed; `true` when one was told to close.
    pub(crate) fn evict_idlest(&self, need: Need) -> bool {
        self.evict_idlest_but(need, None)
    }

    /// [`Self::evict_idlest`], never choosing `spared` (the session asking).
    pub(crate) fn evict_idlest_but(&self, need: Need, spared: Option<&Arc<Activity>>) -> bool {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let min_idle = u64::try_from(self.min_idle.as_millis()).unwrap_or(u64::MAX);
        let mut candidates: Vec<(u64, &Arc<Activity>)> = sessions
            .values()
            .filter(|a| need == Need::Place || a.held.load(Ordering::Relaxed) > 0)
            .filter(|a| spared.is_none_or(|spared| !Arc::ptr_eq(a, spared)))
            .filter_map(|a| {
                let since = a.state.load(Ordering::Acquire);
                (since < EVICTED && now.saturating_sub(since) >= min_idle).then_some((since, a))
            })
            .collect();
        candidates.sort_by_key(|(since, _)| *since);
        // The state may have changed since it was read: the exchange only evicts a session
        // still idle since that moment, else the next one is tried.
        for (since, activity) in candidates {
            if activity.state.compare_exchange(since, EVICTED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                activity.evicted.notify_one();
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registers sessions a little apart, so their progress times differ.
    fn register_apart(registry: &Arc<Registry>, count: usize) -> Vec<Entry> {
        (0..count)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(20));
                registry.register()
            })
            .collect()
    }

    #[tokio::test]
    async fn the_longest_idle_session_goes_first_and_a_busy_one_never() {
        let registry = Registry::new(Duration::ZERO);
        let [old, busy, fresh] = <[Entry; 3]>::try_from(register_apart(&registry, 3)).unwrap();
        assert!(busy.activity().busy());

        assert!(!registry.evict_idlest(Need::Budget), "nobody holds message data");
        assert!(registry.evict_idlest(Need::Place));
        tokio::time::timeout(Duration::from_secs(1), old.activity().evicted()).await.expect("woken");
        assert!(old.activity().is_evicted() && !fresh.activity().is_evicted());
        assert!(!old.activity().busy(), "an evicted session cannot turn busy");
        assert!(!old.activity().progress());

        assert!(registry.evict_idlest(Need::Place));
        assert!(fresh.activity().is_evicted());
        assert!(!registry.evict_idlest(Need::Place), "the busy session stays");
        assert!(busy.activity().progress(), "and may go on");
    }

    #[test]
    fn a_session_is_evictable_only_after_the_idle_time() {
        let registry = Registry::new(Duration::from_secs(3600));
        let _entry = registry.register();
        assert!(!registry.evict_idlest(Need::Place));
    }

    #[test]
    fn only_holders_of_message_data_give_budget() {
        let registry = Registry::new(Duration::ZERO);
        let [idle, holder] = <[Entry; 2]>::try_from(register_apart(&registry, 2)).unwrap();
        holder.activity().set_held(65_536);

        assert!(registry.evict_idlest(Need::Budget));
        assert!(holder.activity().is_evicted() && !idle.activity().is_evicted());
        drop(holder);
        assert_eq!(registry.sessions.lock().unwrap().len(), 1, "a dropped entry leaves the registry");
    }
}
