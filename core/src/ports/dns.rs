//! `DnsCheck`: the DNS lookups domain verification needs.

use async_trait::async_trait;

use crate::domain_name::DnsName;

/// Why a lookup gave no answer. Each becomes a `Failed` record with a readable reason,
/// never an error of the whole verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    /// The name does not exist.
    #[error("the name {0} does not exist (NXDOMAIN)")]
    NxDomain(String),
    /// The resolver did not answer in time.
    #[error("DNS lookup of {0} timed out")]
    Timeout(String),
    /// SERVFAIL, REFUSED, or the resolver could not be reached.
    #[error("DNS lookup of {name} failed: {reason}")]
    Failed {
        /// The name looked up.
        name: String,
        /// What went wrong.
        reason: String,
    },
}

/// Reads DNS records.
#[async_trait]
pub trait DnsCheck: Send + Sync {
    /// All TXT records at `name`, each with its character-strings already joined (a long
    /// DKIM key split into 255-byte strings comes back as one value). An existing name with
    /// no TXT records is `Ok(vec![])`.
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError>;
}

/// A [`DnsCheck`] for front ends that never look anything up (the server's operator
/// commands, a test of the API): every lookup fails with [`DnsError::Failed`], so a domain
/// checked through it gets `Failed` records saying DNS is not used, and no resolver
/// configuration is needed.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDns;

#[async_trait]
impl DnsCheck for NoDns {
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError> {
        Err(DnsError::Failed { name: name.as_str().to_owned(), reason: "DNS is not used here".to_owned() })
    }
}
