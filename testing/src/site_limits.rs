//! The delivery sites' part of the [`Limits`] conformance suite (contract §12): exact
//! answers of `admit_delivery`, `release_delivery`, `change_site`, `site_states` and the
//! purge, which every implementation must give so that two nodes on a shared database
//! admit exactly what one node would. Run by [`run_limits_checks`](crate::limits::run_limits_checks).

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use tidings_core::ids::SiteLeaseId;
use tidings_core::ports::site_admission::CONNECTION_WAIT;
use tidings_core::ports::{Limits, SiteAdmission, SiteChange, SiteLease, SiteQuota, SiteWait};
use tidings_core::shaping::{MessageRate, RatePeriod, SiteKey};

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).expect("valid time")
}

fn ms(n: i64) -> Duration {
    Duration::milliseconds(n)
}

fn site(name: &str) -> SiteKey {
    SiteKey::parse(name).expect("a site key")
}

fn quota(connections: u32, count: u32, period: RatePeriod) -> SiteQuota {
    SiteQuota { connections, rate: MessageRate::new(count, period).expect("a rate") }
}

fn lease(n: u64, until: DateTime<Utc>) -> SiteLease {
    SiteLease { id: lease_id(n), until }
}

fn lease_id(n: u64) -> SiteLeaseId {
    SiteLeaseId(ulid::Ulid::from_parts(n, u128::from(n)))
}

async fn admit(limits: &impl Limits, key: &SiteKey, q: SiteQuota, l: SiteLease, at: DateTime<Utc>) -> SiteAdmission {
    limits.admit_delivery(key, q, l, at).await.expect("limits reachable")
}

/// The rate's burst goes at once, the next waits exactly one interval; leases count.
pub(crate) async fn a_site_admits_its_burst_then_one_per_interval(limits: &impl Limits) {
    let (s, q) = (site(".example.net"), quota(100, 4, RatePeriod::Second));
    let far = t0() + ms(600_000);
    for n in 0..4 {
        assert_eq!(
            admit(limits, &s, q, lease(n, far), t0()).await,
            SiteAdmission::Admitted,
            "delivery {n} of the burst"
        );
    }
    let refused = admit(limits, &s, q, lease(9, far), t0()).await;
    assert_eq!(refused, SiteAdmission::Wait { until: t0() + ms(250), why: SiteWait::Rate }, "the next token");
    assert_eq!(admit(limits, &s, q, lease(9, far), t0() + ms(250)).await, SiteAdmission::Admitted);
    let other = site("mx.other.example");
    assert_eq!(admit(limits, &other, q, lease(20, far), t0()).await, SiteAdmission::Admitted, "sites apart");
    let states = limits.site_states(t0() + ms(250)).await.expect("states");
    let leases: Vec<(String, u32)> = states.iter().map(|s| (s.site.to_string(), s.leases)).collect();
    assert_eq!(leases, vec![(".example.net".to_owned(), 5), ("mx.other.example".to_owned(), 1)]);
}

/// At the connection limit a new lease waits; a held lease is taken over; a release frees
/// one; an expired lease counts no more.
pub(crate) async fn connections_are_leases_that_end(limits: &impl Limits) {
    let (s, q) = (site(".example.net"), quota(2, 1_000, RatePeriod::Second));
    let until = t0() + ms(60_000);
    assert!(admit(limits, &s, q, lease(1, until), t0()).await.is_admitted());
    assert!(admit(limits, &s, q, lease(2, until), t0()).await.is_admitted());
    let full = admit(limits, &s, q, lease(3, until), t0()).await;
    assert_eq!(full, SiteAdmission::Wait { until: t0() + CONNECTION_WAIT, why: SiteWait::Connections });
    assert!(admit(limits, &s, q, lease(2, until + ms(1)), t0()).await.is_admitted(), "a held lease is taken over");
    // Kept idle for a while: still counts.
    limits.release_delivery(&s, lease_id(1), Some(t0() + ms(5_000)), t0()).await.expect("release");
    assert!(!admit(limits, &s, q, lease(3, until), t0() + ms(10)).await.is_admitted(), "an idle lease counts");
    // Until it ends.
    assert!(admit(limits, &s, q, lease(3, until), t0() + ms(5_000)).await.is_admitted(), "an ended lease is free");
    limits.release_delivery(&s, lease_id(3), None, t0() + ms(5_000)).await.expect("release");
    assert!(admit(limits, &s, q, lease(4, until), t0() + ms(5_001)).await.is_admitted(), "a released lease is free");
    limits.release_delivery(&s, lease_id(99), None, t0()).await.expect("releasing a lease that is gone is nothing");
    // Every lease ends with its claim.
    assert!(admit(limits, &s, q, lease(5, until + ms(10)), until + ms(2)).await.is_admitted());
    assert!(admit(limits, &s, q, lease(6, until + ms(10)), until + ms(2)).await.is_admitted());
}

/// A lease that has ended is not kept by a late release: it counts no more.
pub(crate) async fn an_ended_lease_is_not_kept_again(limits: &impl Limits) {
    let (s, q) = (site(".example.net"), quota(1, 1_000, RatePeriod::Second));
    assert!(admit(limits, &s, q, lease(1, t0() + ms(1_000)), t0()).await.is_admitted());
    let late = t0() + ms(2_000);
    limits.release_delivery(&s, lease_id(1), Some(late + ms(60_000)), late).await.expect("release");
    assert!(admit(limits, &s, q, lease(2, late + ms(60_000)), late).await.is_admitted(), "the connection is free");
    let states = limits.site_states(late).await.expect("states");
    assert_eq!(states.iter().map(|s| s.leases).collect::<Vec<_>>(), [1], "only the new lease");
}

/// A suspension refuses until its end and keeps the later of two ends; resume lifts it; a
/// throttle lowers the rate until its end and never raises it.
pub(crate) async fn suspensions_and_throttles_end(limits: &impl Limits) {
    let (s, q) = (site(".example.net"), quota(10, 100, RatePeriod::Second));
    let far = t0() + ms(3_600_000);
    let suspend = |until, reason: &str| SiteChange::Suspend { until, reason: reason.to_owned() };
    limits.change_site(&s, suspend(t0() + ms(60_000), "421 4.7.28 unusual rate"), t0()).await.expect("suspend");
    limits.change_site(&s, suspend(t0() + ms(30_000), "shorter"), t0()).await.expect("suspend");
    let refused = admit(limits, &s, q, lease(1, far), t0() + ms(1)).await;
    let expected = SiteWait::Suspended("421 4.7.28 unusual rate".to_owned());
    assert_eq!(refused, SiteAdmission::Wait { until: t0() + ms(60_000), why: expected }, "the later end is kept");
    let states = limits.site_states(t0() + ms(1)).await.expect("states");
    assert_eq!(states.len(), 1);
    assert_eq!(states[0].suspended_until, Some(t0() + ms(60_000)));
    assert_eq!(states[0].suspend_reason.as_deref(), Some("421 4.7.28 unusual rate"));
    assert!(admit(limits, &s, q, lease(1, far), t0() + ms(60_000)).await.is_admitted(), "over at its end");

    limits.change_site(&s, suspend(far, "by the operator"), t0() + ms(60_000)).await.expect("suspend");
    limits.change_site(&s, SiteChange::Resume, t0() + ms(60_001)).await.expect("resume");
    assert!(admit(limits, &s, q, lease(2, far), t0() + ms(60_002)).await.is_admitted(), "resumed");

    let slow = MessageRate::new(1, RatePeriod::Minute).expect("a rate");
    let throttle = SiteChange::Throttle { rate: slow, until: t0() + ms(600_000), reason: "[TS02]".to_owned() };
    let t1 = t0() + ms(100_000);
    limits.change_site(&s, throttle, t1).await.expect("throttle");
    let states = limits.site_states(t1).await.expect("states");
    assert_eq!(states[0].throttle, Some((slow, t0() + ms(600_000), "[TS02]".to_owned())));
    assert!(admit(limits, &s, q, lease(3, far), t1).await.is_admitted(), "one token");
    let refused = admit(limits, &s, q, lease(4, far), t1).await;
    assert_eq!(refused, SiteAdmission::Wait { until: t1 + ms(60_000), why: SiteWait::Rate }, "one a minute");
    assert!(admit(limits, &s, q, lease(4, far), t1 + ms(60_000)).await.is_admitted());
    // A throttle above the site's own rate does not raise it.
    let other = site(".fast.example");
    let fast = MessageRate::new(1_000, RatePeriod::Second).expect("a rate");
    let one_per_second = quota(10, 1, RatePeriod::Second);
    let raise = SiteChange::Throttle { rate: fast, until: far, reason: "higher".to_owned() };
    limits.change_site(&other, raise, t0()).await.expect("throttle");
    assert!(admit(limits, &other, one_per_second, lease(10, far), t0()).await.is_admitted());
    assert!(!admit(limits, &other, one_per_second, lease(11, far), t0()).await.is_admitted(), "its own rate holds");
    // Ended: the site's own rate again.
    let after = t0() + ms(600_000);
    assert!(admit(limits, &s, q, lease(5, far), after).await.is_admitted());
    assert!(admit(limits, &s, q, lease(6, far), after).await.is_admitted(), "the throttle ended");
}

/// Racing admissions get exactly the connections.
pub(crate) async fn racing_deliveries_get_exactly_the_connections<L: Limits + 'static>(limits: Arc<L>) {
    let (s, q) = (site(".example.net"), quota(5, 1_000, RatePeriod::Second));
    let until = t0() + ms(60_000);
    let mut tasks = Vec::new();
    for n in 0..40 {
        let (limits, s) = (Arc::clone(&limits), s.clone());
        tasks.push(tokio::spawn(async move { admit(limits.as_ref(), &s, q, lease(n, until), t0()).await }));
    }
    let mut admitted = 0;
    for task in tasks {
        if task.await.expect("task").is_admitted() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 5, "exactly the connection limit");
}

/// Purging forgets only what limits nothing.
pub(crate) async fn purging_sites_changes_no_answer(limits: &impl Limits) {
    let q = quota(1, 1, RatePeriod::Minute);
    let (busy, idle, suspended) = (site(".busy.example"), site(".idle.example"), site(".held.example"));
    let far = t0() + ms(3_600_000);
    assert!(admit(limits, &busy, q, lease(1, far), t0()).await.is_admitted());
    assert!(admit(limits, &idle, q, lease(2, t0() + ms(1)), t0()).await.is_admitted());
    let hold = SiteChange::Suspend { until: far, reason: "held".to_owned() };
    limits.change_site(&suspended, hold, t0()).await.expect("suspend");
    let now = t0() + ms(61_000);
    limits.purge(now, 100).await.expect("purge");
    assert!(!admit(limits, &busy, q, lease(3, far), now).await.is_admitted(), "its lease still counts");
    assert!(!admit(limits, &suspended, q, lease(4, far), now).await.is_admitted(), "still suspended");
    assert!(admit(limits, &idle, q, lease(5, far), now).await.is_admitted(), "nothing held it");
    let names: Vec<String> =
        limits.site_states(now).await.expect("states").iter().map(|s| s.site.to_string()).collect();
    assert_eq!(names, vec![".busy.example", ".held.example", ".idle.example"]);
}
