//! The integration tests of `tidings-storage-postgres`, one binary, against the server at
//! `TIDINGS_TEST_DATABASE_URL` (each test a "skipped" pass without one): the `Store` and
//! `Limits` conformance suites, several nodes on one database, and sealing at rest.

mod common;
mod conformance;
mod limits;
mod nodes;
mod sealing;
