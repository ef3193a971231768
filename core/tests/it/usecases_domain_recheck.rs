//! The periodic re-verification of domains that are not Verified yet.

use chrono::Duration;
use tidings_core::model::{Domain, DomainStatus, RecordKind};
use tidings_core::ports::DomainStore;
use tidings_core::usecases::{AddDomainRequest, Principal};
use tidings_testing::TestCore;
use tidings_testing::service::full_key;

async fn add(t: &TestCore, who: &Principal, name: &str) -> Domain {
    t.core.domains().add(who, AddDomainRequest { domain: Some(name.into()) }).await.unwrap()
}

async fn status(t: &TestCore, d: &Domain) -> DomainStatus {
    t.store.get_domain(d.workspace_id, d.id).await.unwrap().unwrap().status
}

#[tokio::test]
async fn a_domain_is_rechecked_once_the_interval_has_passed_and_verifies_when_published() {
    let t = TestCore::new();
    let who = full_key();
    let domain = add(&t, &who, "acme.example.com").await;
    t.dns.publish_all(&domain);

    let report = t.core.domains().recheck(t.now(), 10).await.unwrap();
    assert_eq!(report.checked, 0, "added just now: not due");
    assert_eq!(status(&t, &domain).await, DomainStatus::Pending);

    t.clock.advance(Duration::minutes(10) + Duration::milliseconds(1));
    let report = t.core.domains().recheck(t.now(), 10).await.unwrap();

    assert_eq!((report.checked, report.verified), (1, 1), "{report:?}");
    let checked = t.store.get_domain(who.workspace_id, domain.id).await.unwrap().unwrap();
    assert_eq!(checked.status, DomainStatus::Verified);
    assert_eq!((checked.verified_at, checked.last_checked_at), (Some(t.now()), Some(t.now())));

    t.clock.advance(Duration::hours(1));
    assert_eq!(t.core.domains().recheck(t.now(), 10).await.unwrap().checked, 0, "Verified domains are left alone");
}

#[tokio::test]
async fn failed_and_partially_verified_domains_keep_being_rechecked() {
    let t = TestCore::new();
    let who = full_key();
    let nothing = add(&t, &who, "nothing.example.com").await;
    let partial = add(&t, &who, "partial.example.com").await;
    t.dns.publish(&partial, &[RecordKind::Spf]);

    t.clock.advance(Duration::minutes(11));
    let report = t.core.domains().recheck(t.now(), 10).await.unwrap();
    assert_eq!((report.checked, report.verified), (2, 0));
    assert_eq!(status(&t, &nothing).await, DomainStatus::Failed);
    assert_eq!(status(&t, &partial).await, DomainStatus::PartiallyVerified);

    t.clock.advance(Duration::minutes(5));
    assert_eq!(t.core.domains().recheck(t.now(), 10).await.unwrap().checked, 0, "checked 5 minutes ago");

    t.dns.publish_all(&nothing);
    t.dns.publish(&partial, &[RecordKind::Dkim, RecordKind::Dkim2]);
    t.clock.advance(Duration::minutes(6));
    let report = t.core.domains().recheck(t.now(), 10).await.unwrap();
    assert_eq!((report.checked, report.verified), (2, 2));
}

#[tokio::test]
async fn a_pass_checks_at_most_limit_domains_least_recently_checked_first() {
    let t = TestCore::new();
    let who = full_key();
    let mut domains = Vec::new();
    for name in ["a.example.com", "b.example.com", "c.example.com"] {
        domains.push(add(&t, &who, name).await);
        t.clock.advance(Duration::seconds(1));
    }
    t.clock.advance(Duration::minutes(10));

    assert_eq!(t.core.domains().recheck(t.now(), 2).await.unwrap().checked, 2);
    assert_eq!(status(&t, &domains[2]).await, DomainStatus::Pending, "the newest waits for the next pass");
    assert_eq!(status(&t, &domains[0]).await, DomainStatus::Failed);

    assert_eq!(t.core.domains().recheck(t.now(), 2).await.unwrap().checked, 1, "only the one left is due");
    assert_eq!(status(&t, &domains[2]).await, DomainStatus::Failed);
}
