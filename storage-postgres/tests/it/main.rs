//! The integration tests of `tidings-storage-postgres`, one binary, against the server at
//! `TIDINGS_TEST_DATABASE_URL` (each test a "skipped" pass without one): the `Store` and
//! `Limits` conformance suites, several nodes on one database, sealing at rest, and a
//! database written by the previous version.

mod common;
mod conformance;
mod limits;
mod nodes;
mod old_store;
mod sealing;
mod webhook_format;
