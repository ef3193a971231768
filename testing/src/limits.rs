//! The conformance suite of [`Limits`]: exact answers every implementation must give, so
//! a node on a shared database limits exactly as a single node does in memory.
//!
//! [`run_limits_checks`] makes a fresh `Limits` per check from a factory given the throttle
//! settings (20 failures per 60 s unless a check says otherwise) and panics on the first
//! wrong answer. `core` runs it on [`LocalLimits`](tidings_core::usecases::LocalLimits); every
//! shared implementation runs it too.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use tidings_core::ids::ApiKeyId;
use tidings_core::model::RateLimit;
use tidings_core::ports::Limits;
use tidings_core::usecases::{Admission, AuthThrottleConfig, RateLimitState, RetryAfter};

use crate::site_limits as sites;

/// Makes a fresh `Limits` with these throttle settings, and a guard dropped after it.
pub trait LimitsFactory {
    /// The limits under test.
    type Limits: Limits + 'static;
    /// Dropped when the check is over.
    type Guard;
    /// Fresh limits.
    fn make(&self, throttle: AuthThrottleConfig) -> impl Future<Output = (Self::Limits, Self::Guard)>;
}

/// Runs every check, each on fresh limits.
pub async fn run_limits_checks<F: LimitsFactory>(factory: &F) {
    let throttle = AuthThrottleConfig { max_failures: 3, window: Duration::seconds(60), max_clients: 1_000 };
    let fresh = || factory.make(throttle);
    let (limits, _guard) = fresh().await;
    a_bucket_holds_one_second_of_sends(&limits).await;
    let (limits, _guard) = fresh().await;
    a_bucket_refills_continuously(&limits).await;
    let (limits, _guard) = fresh().await;
    refunds_give_back_tokens_up_to_capacity(&limits).await;
    let (limits, _guard) = fresh().await;
    a_batch_takes_all_its_tokens_or_none(&limits).await;
    let (limits, _guard) = fresh().await;
    keys_have_their_own_buckets_and_a_clock_stepped_back_refills_nothing(&limits).await;
    let (limits, _guard) = fresh().await;
    racing_sends_get_exactly_the_capacity(Arc::new(limits)).await;
    let (limits, _guard) = fresh().await;
    failures_block_a_client_until_its_window_ends(&limits).await;
    let (limits, _guard) = fresh().await;
    racing_failures_all_count(Arc::new(limits)).await;
    let (limits, _guard) = fresh().await;
    purging_changes_no_answer(&limits).await;
    let (limits, _guard) = fresh().await;
    sites::a_site_admits_its_burst_then_one_per_interval(&limits).await;
    let (limits, _guard) = fresh().await;
    sites::connections_are_leases_that_end(&limits).await;
    let (limits, _guard) = fresh().await;
    sites::an_ended_lease_is_not_kept_again(&limits).await;
    let (limits, _guard) = fresh().await;
    sites::suspensions_and_throttles_end(&limits).await;
    let (limits, _guard) = fresh().await;
    sites::racing_deliveries_get_exactly_the_connections(Arc::new(limits)).await;
    let (limits, _guard) = fresh().await;
    sites::purging_sites_changes_no_answer(&limits).await;
}

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).expect("valid time")
}

fn ms(n: i64) -> Duration {
    Duration::milliseconds(n)
}

fn key(n: u64) -> ApiKeyId {
    ApiKeyId(ulid::Ulid::from_parts(n, u128::from(n)))
}

fn rate(per_sec: u32) -> RateLimit {
    RateLimit::new(per_sec).expect("valid rate")
}

fn ip(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(203, 0, 113, n))
}

async fn acquire(
    limits: &impl Limits,
    key: ApiKeyId,
    limit: RateLimit,
    at: DateTime<Utc>,
) -> Admission<RateLimitState> {
    limits.acquire_send(key, limit, at).await.expect("limits reachable")
}

fn state(limit: u32, remaining: u32, reset: u64) -> Admission<RateLimitState> {
    Admission::Allowed(RateLimitState { limit, remaining, reset })
}

fn wait(seconds: u64) -> Admission<RateLimitState> {
    Admission::Limited { retry_after: RetryAfter { seconds } }
}

/// Capacity = the rate; the headers count down; the next send waits.
async fn a_bucket_holds_one_second_of_sends(limits: &impl Limits) {
    let (k, r) = (key(1), rate(3));
    assert_eq!(acquire(limits, k, r, t0()).await, state(3, 2, 1), "first of 3");
    assert_eq!(acquire(limits, k, r, t0()).await, state(3, 1, 1), "second of 3");
    assert_eq!(acquire(limits, k, r, t0()).await, state(3, 0, 1), "third of 3");
    assert_eq!(acquire(limits, k, r, t0()).await, wait(1), "fourth at once");
    let (k, r) = (key(2), rate(2));
    assert_eq!(acquire(limits, k, r, t0()).await, state(2, 1, 1));
    assert_eq!(acquire(limits, k, r, t0()).await, state(2, 0, 1));
    assert_eq!(acquire(limits, k, r, t0()).await, wait(1));
    assert_eq!(acquire(limits, k, r, t0() + ms(1_000)).await, state(2, 1, 1), "full again after a second");
}

/// `r` tokens per second, to the millisecond: with 3/s the next token is there after 1/3 s.
async fn a_bucket_refills_continuously(limits: &impl Limits) {
    let (k, r) = (key(1), rate(3));
    for _ in 0..3 {
        assert!(acquire(limits, k, r, t0()).await.is_allowed());
    }
    assert_eq!(acquire(limits, k, r, t0() + ms(333)).await, wait(1), "0.999 of a token");
    assert_eq!(acquire(limits, k, r, t0() + ms(334)).await, state(3, 0, 1), "a whole token");
    assert_eq!(acquire(limits, k, r, t0() + ms(334)).await, wait(1));
    let (k, r) = (key(2), rate(10));
    for _ in 0..10 {
        assert!(acquire(limits, k, r, t0()).await.is_allowed());
    }
    assert_eq!(acquire(limits, k, r, t0() + ms(99)).await, wait(1));
    assert_eq!(acquire(limits, k, r, t0() + ms(100)).await, state(10, 0, 1));
    assert_eq!(acquire(limits, k, r, t0() + ms(5_000)).await, state(10, 9, 1), "never more than full");
}

/// A batch of `n` takes `n` tokens at once or none; its refund gives `n` back, up to the
/// capacity.
async fn a_batch_takes_all_its_tokens_or_none(limits: &impl Limits) {
    let (k, r) = (key(1), rate(10));
    let take = |n: u32, at: DateTime<Utc>| async move { limits.acquire_sends(k, r, n, at).await.expect("reachable") };
    assert_eq!(take(7, t0()).await, state(10, 3, 1), "7 of 10");
    assert_eq!(take(4, t0()).await, wait(1), "4 when 3 are left");
    assert_eq!(take(3, t0()).await, state(10, 0, 1), "the refused batch took nothing");
    assert_eq!(take(5, t0() + ms(499)).await, wait(1), "4.99 tokens after 499 ms");
    assert_eq!(take(5, t0() + ms(500)).await, state(10, 0, 1), "5 tokens after half a second");
    limits.refund_sends(k, r, 4, t0() + ms(500)).await.expect("refund");
    assert_eq!(acquire(limits, k, r, t0() + ms(500)).await, state(10, 3, 1), "4 given back, one taken");
    limits.refund_sends(k, r, 50, t0() + ms(500)).await.expect("refund");
    assert_eq!(take(10, t0() + ms(600)).await, state(10, 0, 1), "refunds stop at the capacity");
    assert_eq!(take(1, t0() + ms(600)).await, wait(1));
}

async fn refunds_give_back_tokens_up_to_capacity(limits: &impl Limits) {
    let (k, r) = (key(1), rate(2));
    assert!(acquire(limits, k, r, t0()).await.is_allowed());
    assert!(acquire(limits, k, r, t0()).await.is_allowed());
    assert_eq!(acquire(limits, k, r, t0()).await, wait(1));
    limits.refund_send(k, r, t0()).await.expect("refund");
    assert_eq!(acquire(limits, k, r, t0()).await, state(2, 0, 1), "the refunded token");
    assert_eq!(acquire(limits, k, r, t0()).await, wait(1));
    // Refunds on a full bucket do not make it hold more than its capacity.
    let (k, r) = (key(2), rate(2));
    assert!(acquire(limits, k, r, t0()).await.is_allowed());
    for _ in 0..5 {
        limits.refund_send(k, r, t0()).await.expect("refund");
    }
    let later = t0() + ms(10);
    let granted =
        [acquire(limits, k, r, later).await, acquire(limits, k, r, later).await, acquire(limits, k, r, later).await];
    assert_eq!(granted.iter().filter(|g| g.is_allowed()).count(), 2, "capacity stays 2: {granted:?}");
}

async fn keys_have_their_own_buckets_and_a_clock_stepped_back_refills_nothing(limits: &impl Limits) {
    let r = rate(1);
    assert!(acquire(limits, key(1), r, t0()).await.is_allowed());
    assert!(acquire(limits, key(2), r, t0()).await.is_allowed(), "another key is not limited by the first");
    assert_eq!(acquire(limits, key(1), r, t0()).await, wait(1));
    // How long it says to wait then is measured on one clock or the other; either is fine.
    assert!(acquire(limits, key(1), r, t0() - ms(5_000)).await.is_limited(), "clock stepped back");
    assert!(acquire(limits, key(1), r, t0() + ms(1_000)).await.is_allowed());
}

/// The property nodes rely on: however many ask at once, the capacity is granted once.
async fn racing_sends_get_exactly_the_capacity<L: Limits + 'static>(limits: Arc<L>) {
    let (k, r) = (key(1), rate(10));
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let limits = Arc::clone(&limits);
            tokio::spawn(async move { acquire(&*limits, k, r, t0()).await.is_allowed() })
        })
        .collect();
    let mut granted = 0;
    for task in tasks {
        granted += usize::from(task.await.expect("task"));
    }
    assert_eq!(granted, 10, "40 racing sends on a 10/s key");
}

async fn failures_block_a_client_until_its_window_ends(limits: &impl Limits) {
    let check = |client, at| async move { limits.check_auth(client, at).await.expect("limits reachable") };
    let fail = |client, at| async move { limits.record_auth_failure(client, at).await.expect("limits reachable") };
    let (a, b) = (ip(1), ip(2));
    for i in 0..3 {
        assert_eq!(check(a, t0() + ms(i * 1_000)).await, Admission::Allowed(()), "before failure {i}");
        assert_eq!(fail(a, t0() + ms(i * 1_000)).await, Admission::Allowed(()), "failure {i} is within the allowance");
    }
    assert_eq!(
        check(a, t0() + ms(3_000)).await,
        Admission::Limited { retry_after: RetryAfter { seconds: 57 } },
        "blocked until t0 + 60 s"
    );
    assert_eq!(
        fail(a, t0() + ms(3_000)).await,
        Admission::Limited { retry_after: RetryAfter { seconds: 57 } },
        "a failure past the allowance"
    );
    assert_eq!(check(a, t0() + ms(59_500)).await, Admission::Limited { retry_after: RetryAfter { seconds: 1 } });
    assert_eq!(check(b, t0() + ms(3_000)).await, Admission::Allowed(()), "another client is not blocked");
    assert_eq!(check(a, t0() + ms(60_000)).await, Admission::Allowed(()), "the window is over");
    // A failure after the window starts a new one, counting from 1.
    assert_eq!(fail(a, t0() + ms(61_000)).await, Admission::Allowed(()), "a new window");
    assert_eq!(fail(a, t0() + ms(62_000)).await, Admission::Allowed(()));
    assert_eq!(check(a, t0() + ms(62_000)).await, Admission::Allowed(()), "two failures in the new window");
    assert_eq!(fail(a, t0() + ms(63_000)).await, Admission::Allowed(()));
    assert_eq!(check(a, t0() + ms(63_000)).await, Admission::Limited { retry_after: RetryAfter { seconds: 58 } });
}

async fn racing_failures_all_count<L: Limits + 'static>(limits: Arc<L>) {
    let client = ip(7);
    // Twenty racing failures on an allowance of three: exactly three are counted as 401s,
    // whatever the interleaving; the others learn the wait.
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let limits = Arc::clone(&limits);
            tokio::spawn(async move { limits.record_auth_failure(client, t0()).await.expect("limits reachable") })
        })
        .collect();
    let mut allowed = 0;
    for task in tasks {
        match task.await.expect("task") {
            Admission::Allowed(()) => allowed += 1,
            Admission::Limited { retry_after } => {
                assert_eq!(retry_after, RetryAfter { seconds: 60 }, "refused until the window ends")
            }
        }
    }
    assert_eq!(allowed, 3, "exactly the allowance of racing failures passes");
    let answer = limits.check_auth(client, t0()).await.expect("limits reachable");
    assert_eq!(answer, Admission::Limited { retry_after: RetryAfter { seconds: 60 } }, "three racing failures block");
}

async fn purging_changes_no_answer(limits: &impl Limits) {
    let r = rate(1);
    assert!(acquire(limits, key(1), r, t0()).await.is_allowed());
    assert!(acquire(limits, key(2), r, t0() + ms(60_000)).await.is_allowed());
    for i in 0..3 {
        assert_eq!(limits.record_auth_failure(ip(1), t0()).await.expect("fail"), Admission::Allowed(()));
        assert_eq!(
            limits.record_auth_failure(ip(2), t0() + ms(30_000 + i)).await.expect("fail"),
            Admission::Allowed(())
        );
    }
    // At `now`, key 1's bucket is full and ip 1's window over: those may go. Key 2's bucket
    // and ip 2's window still count.
    let now = t0() + ms(60_500);
    limits.purge(now, 100).await.expect("purge");
    assert_eq!(acquire(limits, key(2), r, now).await, wait(1));
    assert_eq!(acquire(limits, key(1), r, now).await, state(1, 0, 1));
    assert_eq!(
        limits.check_auth(ip(2), now).await.expect("check"),
        Admission::Limited { retry_after: RetryAfter { seconds: 30 } }
    );
    assert_eq!(limits.check_auth(ip(1), now).await.expect("check"), Admission::Allowed(()));
}
