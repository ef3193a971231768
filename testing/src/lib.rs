//! Test support for Tidings, a crate of its own that tests depend on (not a feature of the
//! crate under test): the reference in-memory store, one failure-injecting wrapper of any
//! store ([`FaultyStore`]: the store down, an operation failing, a concurrent writer
//! between a read and a write, call counts), builders of valid model values, the
//! conformance suites every `Store` and `Limits` implementation runs, fakes of the other
//! ports (a clock the test moves, a DNS that serves what the test publishes, a scripted
//! mailer), the service assembled over them, and an independent DKIM verifier.

pub mod clock;
pub mod conformance;
pub mod delivery;
pub mod dkim;
pub mod dns;
pub mod faulty;
pub mod fixtures;
pub mod legacy;
pub mod limits;
pub mod mailer;
mod memory;
pub mod service;
pub mod signing;
mod site_limits;
pub mod webhooks;

pub use clock::FixedClock;
pub use conformance::{StoreFactory, model_test, run_all, search_test};
pub use dns::FakeDns;
pub use faulty::FaultyStore;
pub use memory::MemoryStore;
pub use service::TestCore;
pub use webhooks::FakeWebhooks;
