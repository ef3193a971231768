//! The service assembled over the fakes ([`TestCore`]), and callers to drive it with.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tidings_core::ids::{ApiKeyId, WorkspaceId};
use tidings_core::model::{KeyScope, RateLimit};
use tidings_core::ports::{Clock, DnsCheck, SystemRandom};
use tidings_core::usecases::{CoreConfig, Principal, Tidings};

use crate::fixtures::{millis, ulid};
use crate::{FakeDns, FaultyStore, FixedClock, MemoryStore};

/// The service over a fresh in-memory store (behind a [`FaultyStore`]), a fixed clock and a
/// fake DNS.
pub struct TestCore {
    /// The service under test.
    pub core: Tidings,
    /// Its store, for arranging and inspecting state directly: what is done here bypasses
    /// `faults` and is not counted there.
    pub store: Arc<MemoryStore>,
    /// The store as the service sees it: `store` behind a wrapper that passes every call on
    /// until the test injects a fault or a hook, and counts the calls.
    pub faults: Arc<FaultyStore>,
    /// Its DNS.
    pub dns: Arc<FakeDns>,
    /// Its clock.
    pub clock: Arc<FixedClock>,
}

impl TestCore {
    /// A fresh service; the clock starts at the current time (whole milliseconds).
    #[allow(clippy::new_without_default)] // a service, not a value
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
        let faults = Arc::new(FaultyStore::new(Arc::clone(&store) as _));
        let core = Tidings::new(Arc::clone(&faults) as _, Arc::clone(&clock) as _, Arc::new(SystemRandom), dns, config);
        Self { core, store, faults, dns: fake, clock }
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
