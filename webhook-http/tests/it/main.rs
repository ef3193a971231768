//! The integration tests of `tidings-webhook-http`, one binary: the sender against real
//! receivers on loopback (plain and TLS), its address guard and its failures; the file
//! fetcher against servers on loopback.

mod common;
mod failures;
mod fetch;
mod guard;
mod receivers;
mod tls;
