//! The per-key send rate limit (docs/api.md#rate-limits): a token bucket holding
//! `rateLimitPerSec` tokens, refilled continuously at `rateLimitPerSec` per second; each send
//! takes one.
//!
//! Tokens are counted in integer units of 10⁻⁹ token, so refilling `rate` tokens per second
//! over `n` nanoseconds adds exactly `n * rate` units: no floating point drift, and the
//! guarantee "at most `capacity + rate * elapsed` sends in any interval" holds exactly.
//! The front end calls [`RateLimiter::try_acquire`] only for a send that will be queued
//! (after validation, not for idempotent replays), as docs/api.md#rate-limits says.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};

use super::{RetryAfter, elapsed_nanos};
use crate::ids::ApiKeyId;
use crate::model::RateLimit;
use crate::ports::RateLimitState;

/// Units per token.
const UNIT: i128 = 1_000_000_000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Units available at `at`.
    units: i128,
    at: DateTime<Utc>,
    /// The limit the bucket was last used with (keys do not change it, but be safe).
    per_sec: i128,
}

impl Bucket {
    fn capacity(per_sec: i128) -> i128 {
        per_sec * UNIT
    }

    /// Units available at `now`.
    fn refilled(&self, now: DateTime<Utc>, per_sec: i128) -> i128 {
        let cap = Self::capacity(per_sec);
        // Clamp before multiplying: a second refills any bucket, and this avoids overflow.
        let elapsed = elapsed_nanos(self.at, now).min(UNIT);
        (self.units.min(cap) + elapsed * per_sec).min(cap)
    }

    fn is_full_at(&self, now: DateTime<Utc>) -> bool {
        self.refilled(now, self.per_sec) >= Self::capacity(self.per_sec)
    }
}

/// Token buckets per API key, held by the front end and shared between requests (the
/// methods take `&self`). Memory is bounded: a full bucket is the same as no bucket, so
/// full ones are dropped when the table reaches `max_keys`; if it is still full after that
/// (more than `max_keys` keys sent within the last second), the least recently used bucket
/// is dropped, which can grant that key up to one extra bucket — choose `max_keys` above
/// the number of keys that send within one second.
#[derive(Debug)]
pub struct RateLimiter {
    max_keys: usize,
    buckets: Mutex<HashMap<ApiKeyId, Bucket>>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::new(100_000)
    }
}

impl RateLimiter {
    /// A limiter tracking at most `max_keys` keys (at least 1).
    pub fn new(max_keys: usize) -> Self {
        Self { max_keys: max_keys.max(1), buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes one token from `key`'s bucket at `now`. `Ok` with the header values if the
    /// send may proceed; `Err` with the whole seconds (≥ 1) until a token is available if
    /// not, in which case nothing is taken.
    pub fn try_acquire(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        now: DateTime<Utc>,
    ) -> Result<RateLimitState, RetryAfter> {
        self.try_acquire_n(key, limit, 1, now)
    }

    /// Takes `n` tokens at once (a batch of `n` messages), all or none: `Err` with the whole
    /// seconds until `n` are available if fewer are. `n` above the capacity can never be
    /// granted (the wait is capped at what refilling the whole bucket takes); the caller
    /// refuses such a request before asking.
    pub fn try_acquire_n(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        n: u32,
        now: DateTime<Utc>,
    ) -> Result<RateLimitState, RetryAfter> {
        let wanted = UNIT * i128::from(n.max(1));
        let per_sec = i128::from(limit.per_sec());
        let cap = Bucket::capacity(per_sec);
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if !buckets.contains_key(&key) && buckets.len() >= self.max_keys {
            self.make_room(&mut buckets, now);
        }
        let bucket = buckets.entry(key).or_insert(Bucket { units: cap, at: now, per_sec });
        let available = bucket.refilled(now, per_sec);
        // A clock stepped back must not refill: keep the later instant as the reference.
        let at = now.max(bucket.at);
        if available < wanted {
            *bucket = Bucket { units: available, at, per_sec };
            let missing = wanted.min(cap) - available;
            return Err(RetryAfter::from_nanos(div_ceil(missing.max(1), per_sec)));
        }
        let units = available - wanted;
        *bucket = Bucket { units, at, per_sec };
        Ok(RateLimitState {
            limit: limit.per_sec(),
            remaining: u32::try_from(units / UNIT).unwrap_or(u32::MAX),
            reset: u64::try_from((div_ceil(cap - units, per_sec) + UNIT - 1) / UNIT).unwrap_or(u64::MAX),
        })
    }

    /// Gives back the token of a send that turned out not to queue anything (rejected, or
    /// an idempotent replay): those take none. Never fills past capacity.
    pub fn refund(&self, key: ApiKeyId, limit: RateLimit) {
        self.refund_n(key, limit, 1);
    }

    /// Gives back `n` tokens (the refused items of a batch). Never fills past capacity.
    pub fn refund_n(&self, key: ApiKeyId, limit: RateLimit, n: u32) {
        let cap = Bucket::capacity(i128::from(limit.per_sec()));
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(bucket) = buckets.get_mut(&key) {
            bucket.units = (bucket.units + UNIT * i128::from(n)).min(cap);
        }
    }

    /// How many keys have a bucket (for tests and metrics).
    pub fn tracked_keys(&self) -> usize {
        self.buckets.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Drops full buckets; if none was full, the least recently used one.
    fn make_room(&self, buckets: &mut HashMap<ApiKeyId, Bucket>, now: DateTime<Utc>) {
        buckets.retain(|_, b| !b.is_full_at(now));
        if buckets.len() >= self.max_keys {
            let oldest = buckets.iter().min_by_key(|(_, b)| b.at).map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                buckets.remove(&oldest);
            }
        }
    }
}

/// `a / b` rounded up, for positive `b` and non-negative `a` (nanoseconds to refill `a`
/// units at `b` units per nanosecond).
fn div_ceil(a: i128, b: i128) -> i128 {
    (a.max(0) + b - 1) / b
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    #[test]
    fn a_batch_takes_all_its_tokens_or_none() {
        let limiter = RateLimiter::default();
        let key = ApiKeyId(ulid::Ulid::from_parts(1, 2));
        let limit = RateLimit::new(10).unwrap();
        let now = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let state = limiter.try_acquire_n(key, limit, 7, now).unwrap();
        assert_eq!(state.remaining, 3);
        assert!(limiter.try_acquire_n(key, limit, 4, now).is_err(), "3 left: a batch of 4 is refused");
        assert_eq!(limiter.try_acquire_n(key, limit, 3, now).unwrap().remaining, 0, "the refusal took nothing");
        limiter.refund_n(key, limit, 25);
        assert_eq!(limiter.try_acquire_n(key, limit, 10, now).unwrap().remaining, 0, "refunds stop at capacity");
    }
}

#[cfg(test)]
mod refund_tests {
    use super::*;
    use crate::ids::ApiKeyId;

    #[test]
    fn a_refunded_token_can_be_taken_again_but_never_beyond_capacity() {
        let limiter = RateLimiter::default();
        let key = ApiKeyId(ulid::Ulid::from_parts(1, 1));
        let limit = RateLimit::new(1).unwrap();
        let now = Utc::now();
        assert!(limiter.try_acquire(key, limit, now).is_ok());
        assert!(limiter.try_acquire(key, limit, now).is_err());
        limiter.refund(key, limit);
        limiter.refund(key, limit);
        assert!(limiter.try_acquire(key, limit, now).is_ok());
        assert!(limiter.try_acquire(key, limit, now).is_err(), "two refunds must not exceed capacity 1");
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use proptest::prelude::*;
    use ulid::Ulid;

    use super::*;

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap()
    }

    fn key(n: u128) -> ApiKeyId {
        ApiKeyId(Ulid(n))
    }

    fn limit(n: u32) -> RateLimit {
        RateLimit::new(n).unwrap()
    }

    #[test]
    fn a_fresh_key_may_burst_its_limit_then_waits() {
        let limiter = RateLimiter::default();
        for i in 0..10u32 {
            let state = limiter.try_acquire(key(1), limit(10), t0()).unwrap();
            assert_eq!(state, RateLimitState { limit: 10, remaining: 9 - i, reset: 1 });
        }
        assert_eq!(limiter.try_acquire(key(1), limit(10), t0()), Err(RetryAfter { seconds: 1 }));
    }

    #[test]
    fn tokens_refill_continuously() {
        let limiter = RateLimiter::default();
        for _ in 0..10 {
            limiter.try_acquire(key(1), limit(10), t0()).unwrap();
        }
        let later = t0() + Duration::milliseconds(100);
        assert!(limiter.try_acquire(key(1), limit(10), later).is_ok());
        assert!(limiter.try_acquire(key(1), limit(10), later).is_err());
        let full = t0() + Duration::seconds(5);
        let state = limiter.try_acquire(key(1), limit(10), full).unwrap();
        assert_eq!(state.remaining, 9, "the bucket never holds more than its capacity");
    }

    #[test]
    fn a_refused_attempt_takes_nothing() {
        let limiter = RateLimiter::default();
        limiter.try_acquire(key(1), limit(1), t0()).unwrap();
        for ms in [100, 200, 900] {
            assert!(limiter.try_acquire(key(1), limit(1), t0() + Duration::milliseconds(ms)).is_err());
        }
        assert!(limiter.try_acquire(key(1), limit(1), t0() + Duration::seconds(1)).is_ok());
    }

    #[test]
    fn keys_are_limited_independently() {
        let limiter = RateLimiter::default();
        limiter.try_acquire(key(1), limit(1), t0()).unwrap();
        assert!(limiter.try_acquire(key(1), limit(1), t0()).is_err());
        assert!(limiter.try_acquire(key(2), limit(1), t0()).is_ok());
    }

    #[test]
    fn a_clock_stepped_back_refills_nothing() {
        let limiter = RateLimiter::default();
        limiter.try_acquire(key(1), limit(1), t0()).unwrap();
        assert!(limiter.try_acquire(key(1), limit(1), t0() - Duration::seconds(10)).is_err());
        assert!(limiter.try_acquire(key(1), limit(1), t0() + Duration::milliseconds(999)).is_err());
        assert!(limiter.try_acquire(key(1), limit(1), t0() + Duration::seconds(1)).is_ok());
    }

    #[test]
    fn memory_is_bounded() {
        let limiter = RateLimiter::new(10);
        for n in 0..1000 {
            limiter.try_acquire(key(n), limit(5), t0() + Duration::microseconds(n as i64)).unwrap();
            assert!(limiter.tracked_keys() <= 10);
        }
        // Once their buckets are full again, old keys are dropped before any active one.
        let later = t0() + Duration::seconds(2);
        limiter.try_acquire(key(5000), limit(5), later).unwrap();
        assert_eq!(limiter.tracked_keys(), 1);
    }

    #[test]
    fn the_largest_limit_does_not_overflow() {
        let limiter = RateLimiter::default();
        let state = limiter.try_acquire(key(1), limit(10_000), t0()).unwrap();
        assert_eq!(state, RateLimitState { limit: 10_000, remaining: 9_999, reset: 1 });
        let far = DateTime::<Utc>::MAX_UTC;
        assert_eq!(limiter.try_acquire(key(1), limit(10_000), far).unwrap().remaining, 9_999);
    }

    proptest! {
        /// In any interval [a, b] between two granted sends, at most
        /// `capacity + rate * (b - a)` sends are granted.
        #[test]
        fn never_more_than_capacity_plus_refill(
            per_sec in 1u32..50,
            steps in proptest::collection::vec((0i64..200_000_000, 1usize..8), 1..150),
        ) {
            let limiter = RateLimiter::default();
            let mut now = t0();
            let mut granted: Vec<DateTime<Utc>> = Vec::new();
            for (advance_ns, attempts) in steps {
                now += Duration::nanoseconds(advance_ns);
                for _ in 0..attempts {
                    match limiter.try_acquire(key(7), limit(per_sec), now) {
                        Ok(state) => {
                            prop_assert!(state.remaining < per_sec);
                            prop_assert!(state.reset <= 1);
                            granted.push(now);
                        }
                        Err(wait) => prop_assert!(wait.seconds >= 1),
                    }
                }
            }
            let rate = i128::from(per_sec);
            for i in 0..granted.len() {
                for j in i..granted.len() {
                    let count = (j - i + 1) as i128;
                    let elapsed = (granted[j] - granted[i]).num_nanoseconds().unwrap() as i128;
                    prop_assert!(count * UNIT <= rate * UNIT + rate * elapsed,
                        "{count} sends in {elapsed} ns at {per_sec}/s");
                }
            }
        }

        /// The limiter is not stingier than the bucket: after waiting the Retry-After it
        /// was given, a send succeeds.
        #[test]
        fn waiting_retry_after_is_enough(per_sec in 1u32..10_001, burst in 1u32..100) {
            let limiter = RateLimiter::default();
            let mut now = t0();
            let mut refused = None;
            for _ in 0..burst.max(per_sec).saturating_add(1) {
                if let Err(wait) = limiter.try_acquire(key(3), limit(per_sec), now) {
                    refused = Some(wait);
                    break;
                }
            }
            let wait = refused.expect("a burst above capacity is refused");
            now += Duration::seconds(wait.seconds as i64);
            prop_assert!(limiter.try_acquire(key(3), limit(per_sec), now).is_ok());
        }
    }
}
