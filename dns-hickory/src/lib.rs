//! Tidings' DNS adapter: the core [`DnsCheck`](tidings_core::ports::DnsCheck) port on
//! [hickory-resolver](https://docs.rs/hickory-resolver), plus the MX and address lookups
//! direct delivery needs, and the [`MessageAuth`](tidings_core::ports::MessageAuth) port
//! (SPF, DKIM and DMARC of inbound mail) on [mail-auth](https://docs.rs/mail-auth) as
//! [`MailAuthChecker`], asking the same upstream.
//!
//! The adapter translates DNS answers into the port's [`DnsError`](tidings_core::ports::DnsError)
//! and decides nothing else: whether a TXT value is the right DKIM key is `core`'s business
//! (`dns_records::verify`).
//!
//! With the `testing` feature, [`testing::TestDnsServer`] runs a real authoritative DNS
//! server on loopback, so tests (here and the server's end-to-end tests) can publish a
//! domain's records and verify it without touching the Internet.

mod classify;
mod message_auth;
mod resolver;
#[cfg(feature = "testing")]
pub mod testing;

pub use message_auth::{DEFAULT_AUTH_DEADLINE, MAX_DKIM_SIGNATURES, MailAuthChecker};
pub use resolver::{ConfigError, HickoryDns, Settings, Upstream};

/// Results of this crate's constructors.
pub type Result<T, E = ConfigError> = std::result::Result<T, E>;
