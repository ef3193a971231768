//! The integration tests of `tidings-webhook-http`, one binary: the sender against real
//! receivers on loopback (plain and TLS), its address guard and its failures.

mod common;
mod failures;
mod guard;
mod receivers;
mod tls;
