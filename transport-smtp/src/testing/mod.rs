//! Test support (feature `testing`): [`SmtpSink`], a real SMTP server on loopback that
//! records what it receives and can be scripted to misbehave, for this crate's tests, the
//! server's end-to-end tests and benchmarks.
//!
//! What it does:
//! - records each accepted message: envelope, raw data (dot-unstuffed), whether TLS was on,
//!   the authenticated user, and which connection carried it; counts connections (total,
//!   open, most at once; over several sinks with a [`ConnectionTally`]) so tests can check
//!   reuse and concurrency caps;
//! - waits without sleeping: [`SmtpSink::wait_for`] returns once N messages have arrived;
//! - misbehaves on demand with [`Rule`]s: any reply at any [`Stage`] (e.g. `451 4.7.1` at
//!   RCPT for the next message, `550 5.1.1` for one recipient), a dropped connection (also
//!   in the middle of the message), or silence (for timeouts);
//! - TLS ([`SinkTls`]): STARTTLS or implicit TLS with a certificate from its own CA
//!   ([`SmtpSink::ca_pem`]), or a STARTTLS whose handshake fails;
//! - AUTH PLAIN/LOGIN required with given credentials ([`SinkConfig::auth`]);
//! - bounded: lines and messages over the limits are read, discarded and refused, so a
//!   runaway client cannot make it hold much memory; retaining messages can be turned off.
//!
//! And [`PolicyServer`], an HTTPS server with its own CA serving scripted answers, for
//! MTA-STS policy fetching.

mod certs;
mod conn;
mod policy_server;
mod script;
mod server;
mod sink;

pub use policy_server::{PolicyReply, PolicyServer};
pub use script::{Action, Rule, Stage};
pub use sink::{ConnectionTally, ReceivedMessage, SinkConfig, SinkTls, SmtpSink, WaitTimeout};
