//! The integration tests of `tidings-storage-sled`, one binary: the `Store` conformance
//! suite, crash durability (SIGKILL), reopening, the message indexes, sealing at rest and a
//! store written by the previous version.

mod conformance;
mod kill9;
mod message_indexes;
mod old_store;
mod reopen;
mod sealing;
