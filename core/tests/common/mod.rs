//! Helpers shared by the use-case tests: the service assembled over the in-memory store,
//! a clock the test sets, a DNS that serves what the test publishes, and callers.

#![allow(dead_code)] // each test crate uses a different part

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use tidings_core::ids::{ApiKeyId, WorkspaceId};
use tidings_core::model::{Domain, KeyScope, RateLimit, RecordKind};
use tidings_core::ports::{Clock, DnsCheck, DnsError, SystemRandom};
use tidings_core::testing::MemoryStore;
use tidings_core::testing::fixtures::{millis, ulid};
use tidings_core::usecases::{CoreConfig, Principal, Tidings};

/// A clock that stands still until the test moves it.
#[derive(Debug)]
pub struct FixedClock(Mutex<DateTime<Utc>>);

impl FixedClock {
    /// Stopped at `at`.
    pub fn at(at: DateTime<Utc>) -> Self {
        Self(Mutex::new(at))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) += by;
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A DNS zone held in memory: TXT values by fully qualified name. A name with no values is
/// NXDOMAIN.
#[derive(Debug, Default)]
pub struct FakeDns(Mutex<HashMap<String, Vec<String>>>);

impl FakeDns {
    /// Adds a TXT value at `name`.
    pub fn add_txt(&self, name: &str, value: &str) {
        self.zone().entry(name.to_owned()).or_default().push(value.to_owned());
    }

    /// Publishes the domain's records of the given kinds exactly as Tidings asked for them.
    pub fn publish(&self, domain: &Domain, kinds: &[RecordKind]) {
        for record in domain.records.iter().filter(|r| kinds.contains(&r.kind)) {
            self.add_txt(&record.name, &record.value);
        }
    }

    /// Publishes all four records of the domain.
    pub fn publish_all(&self, domain: &Domain) {
        self.publish(domain, &[RecordKind::Spf, RecordKind::Dkim, RecordKind::Dkim2, RecordKind::Dmarc]);
    }

    /// Removes everything.
    pub fn clear(&self) {
        self.zone().clear();
    }

    fn zone(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<String>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl DnsCheck for FakeDns {
    async fn txt_records(&self, name: &tidings_core::domain_name::DnsName) -> Result<Vec<String>, DnsError> {
        self.zone().get(name.as_str()).cloned().ok_or_else(|| DnsError::NxDomain(name.to_string()))
    }
}

/// The service over a fresh in-memory store, a fixed clock and a fake DNS.
pub struct TestCore {
    /// The service under test.
    pub core: Tidings,
    /// Its store, for arranging and inspecting state directly.
    pub store: Arc<MemoryStore>,
    /// Its DNS.
    pub dns: Arc<FakeDns>,
    /// Its clock.
    pub clock: Arc<FixedClock>,
}

impl TestCore {
    /// A fresh service; the clock starts at the current time (whole milliseconds).
    pub fn new() -> Self {
        let dns = Arc::new(FakeDns::default());
        Self::with_store_and_dns(Arc::new(MemoryStore::new()), Arc::clone(&dns) as Arc<dyn DnsCheck>, dns)
    }

    /// A service over `store` whose use cases ask `dns`; `fake` is what the test publishes
    /// into (`dns` may wrap it).
    pub fn with_store_and_dns(store: Arc<MemoryStore>, dns: Arc<dyn DnsCheck>, fake: Arc<FakeDns>) -> Self {
        Self::assemble(store, dns, fake, CoreConfig::default())
    }

    /// A fresh service with `config`.
    pub fn with_config(config: CoreConfig) -> Self {
        let dns = Arc::new(FakeDns::default());
        Self::assemble(Arc::new(MemoryStore::new()), Arc::clone(&dns) as Arc<dyn DnsCheck>, dns, config)
    }

    fn assemble(store: Arc<MemoryStore>, dns: Arc<dyn DnsCheck>, fake: Arc<FakeDns>, config: CoreConfig) -> Self {
        let clock = Arc::new(FixedClock::at(millis(Utc::now())));
        let core = Tidings::new(Arc::clone(&store) as _, Arc::clone(&clock) as _, Arc::new(SystemRandom), dns, config);
        Self { core, store, dns: fake, clock }
    }

    /// The current time of the service's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}

/// A caller with a `full` key in a workspace of its own.
pub fn full_key() -> Principal {
    key_in(WorkspaceId(ulid()), KeyScope::Full)
}

/// A caller with a key of `scope` in workspace `ws`.
pub fn key_in(ws: WorkspaceId, scope: KeyScope) -> Principal {
    Principal {
        workspace_id: ws,
        key_id: ApiKeyId(ulid()),
        scope,
        sending_domain_id: None,
        rate_limit: RateLimit::DEFAULT,
    }
}

/// A `send` key in the same workspace as `who`.
pub fn send_key_beside(who: &Principal) -> Principal {
    key_in(who.workspace_id, KeyScope::Send)
}

/// The fields named by a validation error, in order; panics on any other result.
pub fn invalid_fields<T: std::fmt::Debug>(result: tidings_core::Result<T>) -> Vec<String> {
    match result {
        Err(tidings_core::Error::Validation { fields }) => fields.into_iter().map(|f| f.field).collect(),
        other => panic!("expected a validation error, got {other:?}"),
    }
}
