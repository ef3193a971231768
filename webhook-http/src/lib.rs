//! The [`WebhookSender`](tidings_core::ports::WebhookSender) port on hyper + rustls:
//! [`HttpWebhookSender`] POSTs one signed request and reports what it observed
//! (docs/api.md#webhooks). [`HttpFileFetcher`], the
//! [`FileFetcher`](tidings_core::ports::FileFetcher) port, GETs a file a client named by URL
//! (Resend's attachment `path`) through the same SSRF guard.
//!
//! Decisions:
//! - **SSRF guard at connect time.** The connector (`guard.rs`) resolves the host itself (an
//!   IP literal without DNS), refuses every address [`check_address`] rejects unless
//!   [`SenderSettings::allow_private`], connects to the remaining addresses in order and
//!   checks the connected socket's `peer_addr()` again before TLS. Since the check is on the
//!   address actually connected to, DNS rebinding cannot slip past it; when every address is
//!   refused no socket is opened. Pooled connections are reused: they were checked when they
//!   were opened. Addresses are tried one after another, not raced (no happy eyeballs): an
//!   address that swallows SYNs can use up the whole deadline. When some addresses are refused
//!   and the others fail to connect, the connect failure is the reason reported.
//! - **One deadline for everything.** [`SenderSettings::timeout`] bounds DNS, connect, TLS,
//!   the response head and the body prefix together. When it expires before the response
//!   head, the outcome is `Failed { "timeout after 10s" }`. When the head arrived in time but
//!   the body is still trickling, the outcome is `Answered` with the status and the part of
//!   the prefix read so far: the receiver did answer within the deadline, and the status is
//!   what decides (docs/api.md#webhook-retries). A body that fails mid-way is treated the same way.
//! - **At most [`MAX_BODY_PREFIX`](tidings_core::ports::MAX_BODY_PREFIX) bytes are read**;
//!   the rest of the body is dropped unread (closing that connection rather than draining it).
//! - **No redirects** (hyper's client never follows them), **https only** unless
//!   `allow_private`, and **HTTP/1.1 only** (ALPN offers `http/1.1`): webhook requests are
//!   single small POSTs, for which HTTP/2 buys nothing.
//! - **Trust**: the system's CA certificates (`rustls-native-certs`, as the SMTP transport;
//!   `SSL_CERT_FILE`/`SSL_CERT_DIR` are honoured by that crate) plus
//!   [`SenderSettings::extra_roots`]. An empty store is logged, not fatal: the rest of the
//!   service works, and each delivery then fails with a readable TLS error.
//! - **Time**: a `Retry-After` HTTP-date becomes a delay from the system clock at the moment
//!   the response arrives, not from core's `Clock`: the receiver meant its own wall-clock time,
//!   and the port reports a delay precisely so core need not know when the answer came.

mod fetcher;
mod guard;
mod outcome;
mod sender;

use std::net::IpAddr;

use async_trait::async_trait;

pub use fetcher::{FetcherSettings, HttpFileFetcher};
pub use guard::{NotPublic, check_address};
pub use sender::{BuildError, HttpWebhookSender, SenderSettings};

/// Resolves a host name to addresses. Implemented for [`tidings_dns::HickoryDns`].
#[async_trait]
pub trait ResolveHost: Send + Sync {
    /// Every address of `host` (A and AAAA), or a short reason the lookup failed.
    async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, String>;
}

#[async_trait]
impl ResolveHost for tidings_dns::HickoryDns {
    async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, String> {
        self.host_addrs(host).await.map_err(|error| error.to_string())
    }
}
