//! The integration tests of `tidings-storage-sled`, one binary: the `Store` conformance
//! suite, crash durability (SIGKILL), reopening, the message indexes and sealing at rest.

mod conformance;
mod kill9;
mod message_indexes;
mod reopen;
mod sealing;
