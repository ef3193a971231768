//! MTA-STS (RFC 8461): whether a recipient domain asks senders to deliver only over TLS,
//! with a valid certificate, to the MX hosts it lists.
//!
//! - [`record`]: the `_mta-sts.<domain>` TXT record, which announces a policy and its id.
//! - [`policy`]: the policy file, and which MX hosts it allows.
//! - [`fetch`]: getting the file from `https://mta-sts.<domain>/.well-known/mta-sts.txt`.
//! - [`MtaSts`]: the policy that applies now, cached per domain by id for its `max_age`.
//!
//! The parsers are pure and never panic; the DNS lookups go through [`StsLookup`],
//! implemented for [`HickoryDns`].

mod cache;
pub mod fetch;
pub mod policy;
pub mod record;
mod resolve;

use std::net::IpAddr;

use async_trait::async_trait;
use tidings_core::domain_name::DnsName;
use tidings_core::ports::{DnsCheck, DnsError};
use tidings_dns::HickoryDns;

pub use cache::ActivePolicy;
pub use fetch::{FetchError, FetchSettings, FetcherBuildError, HttpsPolicyFetcher, PolicySource, TrustRoots};
pub use policy::{Mode, MxPattern, Policy, PolicyError};
pub use record::{RecordError, StsRecord};
pub use resolve::{CacheSettings, MtaSts};

/// The DNS lookups MTA-STS needs; implemented for [`HickoryDns`], and by fakes in tests.
#[async_trait]
pub trait StsLookup: Send + Sync {
    /// The TXT records at `name`, each with its character-strings joined; empty when the
    /// name has none.
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError>;
    /// The host's IPv4 and IPv6 addresses (the policy host's); empty when it has none.
    async fn host_addrs(&self, host: &str) -> Result<Vec<IpAddr>, DnsError>;
}

#[async_trait]
impl StsLookup for HickoryDns {
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError> {
        DnsCheck::txt_records(self, name).await
    }

    async fn host_addrs(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        HickoryDns::host_addrs(self, host).await
    }
}
