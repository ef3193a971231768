//! The failed-authentication throttle (docs/api.md#failed-authentication-throttle): after
//! `max_failures` 401s from one client within a window (default 20 per minute), that client is
//! refused with 429 `too_many_auth_failures` until the window is over.
//!
//! Windows are fixed, starting at a client's first failure, because the rule is "until
//! the minute is over": a blocked client learns exactly when it may try again. A
//! successful authentication does not reset the count; otherwise anyone holding one valid
//! key could interleave it with guesses and never be throttled.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Duration, Utc};

use super::{RetryAfter, elapsed_nanos};

/// Settings of [`AuthThrottle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthThrottleConfig {
    /// Failures allowed within one window; the next request is refused (default 20).
    pub max_failures: u32,
    /// Length of a window, from the client's first failure in it (default one minute).
    pub window: Duration,
    /// Most clients tracked at once. When full, the client whose window started first is
    /// forgotten: memory stays bounded even when failures come from very many addresses.
    pub max_clients: usize,
}

impl Default for AuthThrottleConfig {
    fn default() -> Self {
        Self { max_failures: 20, window: Duration::minutes(1), max_clients: 100_000 }
    }
}

/// A client's current window.
#[derive(Debug, Clone, Copy)]
struct Window {
    started: DateTime<Utc>,
    failures: u32,
}

#[derive(Debug)]
struct State<K> {
    windows: HashMap<K, Window>,
    /// Window starts in the order they began. Each live window has exactly one entry here
    /// with its `started`; entries of windows that were replaced are stale and skipped.
    /// This makes expiry and eviction O(1) amortised instead of a scan of every client.
    order: VecDeque<(DateTime<Utc>, K)>,
}

/// Counts failed authentications per client (an [`IpAddr`] by default; any hashable key
/// works) and blocks clients that fail too often. Shared by reference between requests:
/// the methods take `&self` and lock briefly inside.
#[derive(Debug)]
pub struct AuthThrottle<K = IpAddr> {
    config: AuthThrottleConfig,
    state: Mutex<State<K>>,
}

impl<K: Eq + Hash + Clone> AuthThrottle<K> {
    /// A throttle with these settings. `max_failures` and `max_clients` below 1 are taken
    /// as 1.
    pub fn new(config: AuthThrottleConfig) -> Self {
        let config = AuthThrottleConfig {
            max_failures: config.max_failures.max(1),
            max_clients: config.max_clients.max(1),
            ..config
        };
        Self { config, state: Mutex::new(State { windows: HashMap::new(), order: VecDeque::new() }) }
    }

    /// The settings in use.
    pub fn config(&self) -> AuthThrottleConfig {
        self.config
    }

    /// Called before authenticating a request: `Err` with the time until the client's
    /// window ends if it has used up its failures, `Ok` otherwise. A blocked client is
    /// refused even with a valid key, so guessing right during a block reveals nothing.
    pub fn check(&self, client: &K, now: DateTime<Utc>) -> Result<(), RetryAfter> {
        let mut state = self.lock();
        self.expire(&mut state, now);
        match state.windows.get(client) {
            Some(w) if w.failures >= self.config.max_failures && self.is_open(w, now) => Err(self.wait(w, now)),
            _ => Ok(()),
        }
    }

    /// Records one failed authentication of `client` at `now` (any 401, a missing key as
    /// much as an invalid one) if its window has room for it; `Err` with the time until the
    /// window ends if the client had used up its failures already, and then
    /// that request is a 429, not a 401. Deciding and counting under one lock is what keeps
    /// a burst of concurrent failures, which all passed [`check`](Self::check) before any
    /// was counted, from getting more than `max_failures` 401s.
    pub fn record_failure(&self, client: K, now: DateTime<Utc>) -> Result<(), RetryAfter> {
        let mut state = self.lock();
        self.expire(&mut state, now);
        if let Some(w) = state.windows.get(&client).copied()
            && self.is_open(&w, now)
        {
            if w.failures >= self.config.max_failures {
                return Err(self.wait(&w, now));
            }
            if let Some(w) = state.windows.get_mut(&client) {
                w.failures += 1;
            }
            return Ok(());
        }
        // A new window for this client (its old one, if any, is over).
        if !state.windows.contains_key(&client) {
            while state.windows.len() >= self.config.max_clients {
                Self::evict_oldest(&mut state);
            }
        }
        state.windows.insert(client.clone(), Window { started: now, failures: 1 });
        state.order.push_back((now, client));
        Ok(())
    }

    /// How many clients are tracked (for tests and metrics).
    pub fn tracked_clients(&self) -> usize {
        self.lock().windows.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // The state stays consistent between statements, so a panic elsewhere while
        // holding the lock leaves nothing half-done worth refusing service over.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The time from `now` to the end of `w`, at most a window: a request that read the
    /// clock just before another opened the window must not be told to wait longer.
    fn wait(&self, w: &Window, now: DateTime<Utc>) -> RetryAfter {
        let window = self.config.window.num_nanoseconds().map_or(i128::MAX, i128::from);
        RetryAfter::from_nanos(elapsed_nanos(now, self.window_end(w)).min(window))
    }

    fn window_end(&self, w: &Window) -> DateTime<Utc> {
        w.started.checked_add_signed(self.config.window).unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    fn is_open(&self, w: &Window, now: DateTime<Utc>) -> bool {
        now < self.window_end(w)
    }

    /// Forgets windows that are over, oldest first, stopping at the first open one.
    fn expire(&self, state: &mut State<K>, now: DateTime<Utc>) {
        while let Some((started, _)) = state.order.front() {
            let end = started.checked_add_signed(self.config.window).unwrap_or(DateTime::<Utc>::MAX_UTC);
            if now < end {
                break;
            }
            if let Some((started, client)) = state.order.pop_front()
                && state.windows.get(&client).is_some_and(|w| w.started == started)
            {
                state.windows.remove(&client);
            }
        }
    }

    /// Forgets the live window that started first.
    fn evict_oldest(state: &mut State<K>) {
        while let Some((started, client)) = state.order.pop_front() {
            if state.windows.get(&client).is_some_and(|w| w.started == started) {
                state.windows.remove(&client);
                return;
            }
        }
        // Unreachable while the invariant holds; clearing keeps the caller's loop finite.
        state.windows.clear();
    }
}

impl<K: Eq + Hash + Clone> Default for AuthThrottle<K> {
    fn default() -> Self {
        Self::new(AuthThrottleConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap()
    }

    fn secs(s: i64) -> Duration {
        Duration::seconds(s)
    }

    fn ip(n: u32) -> IpAddr {
        IpAddr::from(std::net::Ipv4Addr::from(n))
    }

    #[test]
    fn twenty_failures_block_the_client_until_the_minute_is_over() {
        let throttle = AuthThrottle::default();
        let client = ip(1);
        for i in 0..20 {
            assert_eq!(throttle.check(&client, t0() + secs(i)), Ok(()), "failure {i} should not block yet");
            let _ = throttle.record_failure(client, t0() + secs(i));
        }
        assert_eq!(throttle.check(&client, t0() + secs(20)), Err(RetryAfter { seconds: 40 }));
        assert_eq!(
            throttle.check(&client, t0() + secs(59) + Duration::milliseconds(500)),
            Err(RetryAfter { seconds: 1 })
        );
        assert_eq!(throttle.check(&client, t0() + secs(60)), Ok(()));
    }

    #[test]
    fn other_clients_are_not_affected() {
        let throttle = AuthThrottle::default();
        for _ in 0..25 {
            let _ = throttle.record_failure(ip(1), t0());
        }
        assert!(throttle.check(&ip(1), t0()).is_err());
        assert_eq!(throttle.check(&ip(2), t0()), Ok(()));
    }

    #[test]
    fn failures_spread_over_separate_windows_do_not_block() {
        let throttle = AuthThrottle::default();
        for i in 0..19 {
            let _ = throttle.record_failure(ip(1), t0() + Duration::milliseconds(i));
        }
        // The 20th comes after the first window ended: it starts a new window of one.
        let _ = throttle.record_failure(ip(1), t0() + secs(61));
        assert_eq!(throttle.check(&ip(1), t0() + secs(61)), Ok(()));
    }

    #[test]
    fn settings_are_configurable() {
        let throttle =
            AuthThrottle::new(AuthThrottleConfig { max_failures: 2, window: Duration::seconds(10), max_clients: 10 });
        let _ = throttle.record_failure("a".to_owned(), t0());
        assert_eq!(throttle.check(&"a".to_owned(), t0()), Ok(()));
        let _ = throttle.record_failure("a".to_owned(), t0() + secs(1));
        assert_eq!(throttle.check(&"a".to_owned(), t0() + secs(1)), Err(RetryAfter { seconds: 9 }));
        assert_eq!(throttle.check(&"a".to_owned(), t0() + secs(10)), Ok(()));
    }

    #[test]
    fn memory_is_bounded_by_max_clients_and_the_oldest_window_is_evicted() {
        let throttle =
            AuthThrottle::new(AuthThrottleConfig { max_failures: 1, window: Duration::hours(1), max_clients: 100 });
        for n in 0..1000 {
            let _ = throttle.record_failure(ip(n), t0() + Duration::milliseconds(i64::from(n)));
            assert!(throttle.tracked_clients() <= 100);
        }
        let now = t0() + secs(2);
        assert!(throttle.check(&ip(0), now).is_ok(), "oldest should have been evicted");
        assert!(throttle.check(&ip(999), now).is_err(), "newest is still tracked");
    }

    #[test]
    fn expired_windows_are_forgotten() {
        let throttle = AuthThrottle::default();
        for n in 0..50 {
            let _ = throttle.record_failure(ip(n), t0());
        }
        assert_eq!(throttle.tracked_clients(), 50);
        let _ = throttle.check(&ip(1), t0() + secs(60));
        assert_eq!(throttle.tracked_clients(), 0);
    }

    #[test]
    fn a_clock_stepped_back_does_not_unblock_or_panic() {
        let throttle = AuthThrottle::default();
        for _ in 0..20 {
            let _ = throttle.record_failure(ip(1), t0());
        }
        // Still blocked; the wait told is capped at one window (the window really ends 90 s
        // from the stepped-back clock, and the client is told the rest when it comes back).
        assert_eq!(throttle.check(&ip(1), t0() - secs(30)), Err(RetryAfter { seconds: 60 }));
        assert_eq!(throttle.record_failure(ip(1), t0() - secs(30)), Err(RetryAfter { seconds: 60 }));
    }

    proptest! {
        /// Whatever the sequence, a client is refused exactly when its open window has
        /// `max_failures` failures, checked against a naive model without eviction.
        #[test]
        fn agrees_with_a_naive_model(steps in proptest::collection::vec((0u32..4, 0i64..5_000, any::<bool>()), 1..200)) {
            let config = AuthThrottleConfig { max_failures: 3, window: Duration::seconds(10), max_clients: 1000 };
            let throttle = AuthThrottle::new(config);
            let mut model: HashMap<u32, (DateTime<Utc>, u32)> = HashMap::new();
            let mut now = t0();
            for (client, advance_ms, fail) in steps {
                now += Duration::milliseconds(advance_ms);
                let open = |m: &HashMap<u32, (DateTime<Utc>, u32)>| {
                    m.get(&client).copied().filter(|(start, _)| now < *start + config.window)
                };
                let expected_blocked = open(&model).is_some_and(|(_, n)| n >= config.max_failures);
                prop_assert_eq!(throttle.check(&client, now).is_err(), expected_blocked);
                if fail && !expected_blocked {
                    let _ = throttle.record_failure(client, now);
                    match open(&model) {
                        Some((start, n)) => { model.insert(client, (start, n + 1)); }
                        None => { model.insert(client, (now, 1)); }
                    }
                }
            }
        }
    }
}
