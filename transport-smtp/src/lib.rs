//! Tidings' mail transports: the core [`Mailer`](tidings_core::ports::Mailer) port over
//! SMTP, on [lettre](https://docs.rs/lettre) with rustls.
//!
//! - [`RelayMailer`]: everything through one relay (`TIDINGS_SMTP_RELAY`), TLS verified.
//! - [`MxMailer`]: straight to each recipient domain's MX hosts, opportunistic TLS (required
//!   and verified where the domain's MTA-STS policy enforces it or its site's shaping
//!   requires it); with shaping, connections and messages per connection capped by site.
//! - [`OutboxMailer`]: `.eml` files in a directory, the default until delivery is configured.
//! - [`mta_sts`]: recipient domains' MTA-STS policies (RFC 8461), fetched and cached.
//!
//! The transports report what they observed, in SMTP's terms: a reply with its code and
//! text, or why there was none. Whether that is a bounce or a reason to retry is core's
//! decision (`tidings_core::classify`). The messages arrive built and DKIM-signed; these
//! transports never alter a byte of them.
//!
//! With the `testing` feature, [`testing::SmtpSink`] is a scriptable SMTP server on
//! loopback for tests and benchmarks.

mod attempt;
mod broken_tls;
mod config;
mod errors;
pub mod mta_sts;
mod mx;
mod mx_cache;
mod mx_guard;
mod outbox;
mod outbox_writes;
mod pool;
mod relay;
mod relay_config;
mod session;
mod site_connections;
#[cfg(feature = "testing")]
pub mod testing;
mod tls_version;

pub use config::{ConfigError, MxConfig, PoolSettings, Timeouts, default_ehlo_name};
pub use mx::{MxLookup, MxMailer};
pub use outbox::OutboxMailer;
pub use relay::RelayMailer;
pub use relay_config::{RelayConfig, RelayCredentials, RelayEndpoint, RelaySecurity};
