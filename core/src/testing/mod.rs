//! Test support for Tidings and its storage crates (feature `testing`): the reference
//! in-memory store, a store that is always down, builders of valid model values, and the conformance suite every `Store`
//! implementation runs.

pub mod conformance;
pub mod dkim;
pub mod fixtures;
pub mod limits;
mod memory;
mod unavailable;

pub use conformance::{StoreFactory, model_test, run_all};
pub use memory::MemoryStore;
pub use unavailable::UnavailableStore;
