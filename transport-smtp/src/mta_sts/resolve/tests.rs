//! The cache's decisions against a fake resolver, a fake policy source and a clock the
//! tests move.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tidings_core::ports::DnsError;

use super::*;
use crate::mta_sts::fetch::FetchError;
use crate::mta_sts::policy::{Mode, Policy};

/// `_mta-sts.<domain>` TXT answers; a missing name is NXDOMAIN, `Err` a SERVFAIL.
#[derive(Default)]
struct FakeDns(Mutex<HashMap<String, Result<Vec<String>, ()>>>);

impl FakeDns {
    fn set(&self, name: &str, records: &[&str]) {
        let records = records.iter().map(|record| (*record).to_owned()).collect();
        self.0.lock().unwrap().insert(name.to_owned(), Ok(records));
    }

    fn fail(&self, name: &str) {
        self.0.lock().unwrap().insert(name.to_owned(), Err(()));
    }

    fn remove(&self, name: &str) {
        self.0.lock().unwrap().remove(name);
    }
}

#[async_trait]
impl StsLookup for FakeDns {
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError> {
        match self.0.lock().unwrap().get(name.as_str()) {
            Some(Ok(records)) => Ok(records.clone()),
            Some(Err(())) => Err(DnsError::Failed { name: name.to_string(), reason: "SERVFAIL".to_owned() }),
            None => Err(DnsError::NxDomain(name.to_string())),
        }
    }

    async fn host_addrs(&self, _host: &str) -> Result<Vec<IpAddr>, DnsError> {
        Ok(Vec::new())
    }
}

/// Serves the policy it holds (or fails), counting fetches.
struct FakeSource {
    policy: Mutex<Result<Policy, ()>>,
    fetches: AtomicUsize,
}

impl FakeSource {
    fn serving(policy: Policy) -> Self {
        Self { policy: Mutex::new(Ok(policy)), fetches: AtomicUsize::new(0) }
    }

    fn set(&self, policy: Result<Policy, ()>) {
        *self.policy.lock().unwrap() = policy;
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl PolicySource for FakeSource {
    async fn fetch(&self, domain: &DomainName) -> Result<Policy, FetchError> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        self.policy
            .lock()
            .unwrap()
            .clone()
            .map_err(|()| FetchError::Status { host: domain.with_prefix("mta-sts"), status: 500 })
    }
}

struct TestClock(Mutex<DateTime<Utc>>);

impl TestClock {
    fn advance(&self, seconds: i64) {
        *self.0.lock().unwrap() += TimeDelta::seconds(seconds);
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

struct Setup {
    dns: Arc<FakeDns>,
    source: Arc<FakeSource>,
    clock: Arc<TestClock>,
    sts: MtaSts,
}

const NAME: &str = "_mta-sts.acme.test";

fn policy(mode: Mode, max_age: u32) -> Policy {
    Policy::parse(&format!("version: STSv1\nmode: {}\nmx: *.acme.test\nmax_age: {max_age}\n", mode.as_str())).unwrap()
}

fn setup(settings: CacheSettings) -> Setup {
    let dns = Arc::new(FakeDns::default());
    let source = Arc::new(FakeSource::serving(policy(Mode::Enforce, 3600)));
    let clock = Arc::new(TestClock(Mutex::new(DateTime::from_timestamp(1_800_000_000, 0).unwrap())));
    let sts = MtaSts::new(dns.clone(), source.clone(), clock.clone(), settings);
    Setup { dns, source, clock, sts }
}

fn acme() -> DomainName {
    DomainName::parse("acme.test").unwrap()
}

#[tokio::test]
async fn without_a_record_a_domain_has_no_policy_and_nothing_is_fetched() {
    let s = setup(CacheSettings::default());
    assert_eq!(s.sts.policy_for(&acme()).await, None);
    s.dns.set(NAME, &["v=spf1 -all"]);
    assert_eq!(s.sts.policy_for(&acme()).await, None);
    s.dns.set(NAME, &["v=STSv1; id=1", "v=STSv1; id=2"]);
    assert_eq!(s.sts.policy_for(&acme()).await, None, "two records mean no policy");
    s.dns.set(NAME, &["v=STSv1; id=not-valid"]);
    assert_eq!(s.sts.policy_for(&acme()).await, None);
    assert_eq!(s.source.fetches(), 0);
}

#[tokio::test]
async fn a_policy_is_fetched_once_per_id_and_kept_for_its_max_age() {
    let s = setup(CacheSettings::default());
    s.dns.set(NAME, &["v=STSv1; id=one"]);
    let first = s.sts.policy_for(&acme()).await.unwrap();
    assert_eq!((first.id.as_str(), first.policy.mode), ("one", Mode::Enforce));
    assert_eq!(first.expires - first.fetched_at, TimeDelta::seconds(3600));
    s.clock.advance(3599);
    assert_eq!(s.sts.policy_for(&acme()).await, Some(first.clone()));
    assert_eq!(s.source.fetches(), 1, "the same id reuses the cached policy");
    // Expired: fetched again, even under the same id.
    s.clock.advance(1);
    let second = s.sts.policy_for(&acme()).await.unwrap();
    assert_eq!(s.source.fetches(), 2);
    assert_eq!(second.fetched_at, first.expires);
}

#[tokio::test]
async fn a_new_id_fetches_the_new_policy() {
    let s = setup(CacheSettings::default());
    s.dns.set(NAME, &["v=STSv1; id=one"]);
    s.sts.policy_for(&acme()).await.unwrap();
    s.dns.set(NAME, &["v=STSv1; id=two"]);
    s.source.set(Ok(policy(Mode::Testing, 60)));
    let now = s.sts.policy_for(&acme()).await.unwrap();
    assert_eq!((now.id.as_str(), now.policy.mode), ("two", Mode::Testing));
    assert_eq!(s.source.fetches(), 2);
}

#[tokio::test]
async fn a_failed_refetch_keeps_the_cached_policy_while_it_is_valid() {
    let s = setup(CacheSettings::default());
    s.dns.set(NAME, &["v=STSv1; id=one"]);
    let cached = s.sts.policy_for(&acme()).await.unwrap();
    s.dns.set(NAME, &["v=STSv1; id=two"]);
    s.source.set(Err(()));
    assert_eq!(s.sts.policy_for(&acme()).await, Some(cached.clone()));
    // Nor do a lookup failure, a vanished record or a broken one end it.
    s.dns.fail(NAME);
    assert_eq!(s.sts.policy_for(&acme()).await, Some(cached.clone()));
    s.dns.remove(NAME);
    assert_eq!(s.sts.policy_for(&acme()).await, Some(cached.clone()));
    s.dns.set(NAME, &["v=STSv1; id=one", "v=STSv1; id=two"]);
    assert_eq!(s.sts.policy_for(&acme()).await, Some(cached));
    // Once it expires, nothing is left.
    s.clock.advance(3600);
    assert_eq!(s.sts.policy_for(&acme()).await, None);
}

#[tokio::test]
async fn a_failed_fetch_is_not_retried_for_the_same_id_for_a_while() {
    let settings = CacheSettings { retry_after_failure: Duration::from_secs(300), ..CacheSettings::default() };
    let s = setup(settings);
    s.dns.set(NAME, &["v=STSv1; id=one"]);
    s.source.set(Err(()));
    assert_eq!(s.sts.policy_for(&acme()).await, None);
    assert_eq!(s.sts.policy_for(&acme()).await, None);
    assert_eq!(s.source.fetches(), 1);
    // A new id is worth a try at once.
    s.dns.set(NAME, &["v=STSv1; id=two"]);
    assert_eq!(s.sts.policy_for(&acme()).await, None);
    assert_eq!(s.source.fetches(), 2);
    // And the old failure is over after its time.
    s.clock.advance(300);
    s.source.set(Ok(policy(Mode::Enforce, 10)));
    assert_eq!(s.sts.policy_for(&acme()).await.map(|p| p.id), Some("two".to_owned()));
    assert_eq!(s.source.fetches(), 3);
}

#[tokio::test]
async fn mode_none_is_cached_like_any_policy() {
    let s = setup(CacheSettings::default());
    s.source.set(Ok(Policy::parse("version: STSv1\nmode: none\nmax_age: 100\n").unwrap()));
    s.dns.set(NAME, &["v=STSv1; id=gone"]);
    assert_eq!(s.sts.policy_for(&acme()).await.map(|p| p.policy.mode), Some(Mode::None));
    assert_eq!(s.sts.policy_for(&acme()).await.map(|p| p.policy.mode), Some(Mode::None));
    assert_eq!(s.source.fetches(), 1);
}

#[tokio::test]
async fn the_cache_holds_at_most_its_capacity() {
    let s = setup(CacheSettings { capacity: 2, ..CacheSettings::default() });
    for name in ["a.test", "b.test", "c.test"] {
        s.dns.set(&format!("_mta-sts.{name}"), &["v=STSv1; id=1"]);
        s.sts.policy_for(&DomainName::parse(name).unwrap()).await.unwrap();
    }
    assert_eq!(s.sts.cache().len(), 2);
    // a.test was dropped, so it is fetched again; c.test is still there.
    s.sts.policy_for(&DomainName::parse("c.test").unwrap()).await.unwrap();
    assert_eq!(s.source.fetches(), 3);
    s.sts.policy_for(&DomainName::parse("a.test").unwrap()).await.unwrap();
    assert_eq!(s.source.fetches(), 4);
}
