//! [`FakeDns`]: a DNS that serves what the test publishes: core's [`StaticDns`], the one
//! in-memory DNS for tests and development alike.

pub use tidings_core::ports::StaticDns as FakeDns;
