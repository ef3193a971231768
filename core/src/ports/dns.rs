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
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait DnsCheck: Send + Sync {
    /// All TXT records at `name`, each with its character-strings already joined (a long
    /// DKIM key split into 255-byte strings comes back as one value). An existing name with
    /// no TXT records is `Ok(vec![])`.
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError>;

    /// The MX records at `name` as (preference, exchange), exchanges lower-case without the
    /// trailing dot, sorted by preference. An existing name with no MX is `Ok(vec![])`.
    async fn mx_records(&self, name: &DnsName) -> Result<Vec<(u16, String)>, DnsError>;
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

    async fn mx_records(&self, name: &DnsName) -> Result<Vec<(u16, String)>, DnsError> {
        Err(DnsError::Failed { name: name.as_str().to_owned(), reason: "DNS is not used here".to_owned() })
    }
}

/// A [`DnsCheck`] that answers from records held in memory instead of asking the network:
/// for development (a laptop whose domain is published nowhere) and tests. Names are looked
/// up exactly (lower case, no trailing dot, as [`DnsName`] spells them); a name holding no
/// value is NXDOMAIN.
///
/// Publishing a domain's records here ([`StaticDns::publish_all`]) makes it verify without
/// any DNS host; never use it in production, where that would vouch for records nobody
/// published.
///
/// ```
/// use tidings_core::domain_name::DnsName;
/// use tidings_core::ports::{DnsCheck, StaticDns};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let dns = StaticDns::default();
/// dns.add_txt("example.com", "v=spf1 -all");
/// let name = DnsName::parse("example.com").unwrap();
/// assert_eq!(dns.txt_records(&name).await.unwrap(), ["v=spf1 -all"]);
/// # }
/// ```
#[derive(Debug, Default)]
pub struct StaticDns(std::sync::Mutex<Zone>);

/// The names [`StaticDns`] answers for, by record type.
#[derive(Debug, Default)]
struct Zone {
    txt: std::collections::HashMap<String, Vec<String>>,
    mx: std::collections::HashMap<String, Vec<(u16, String)>>,
}

impl Zone {
    /// Whether the name holds any record (else it does not exist: NXDOMAIN).
    fn has(&self, name: &str) -> bool {
        self.txt.contains_key(name) || self.mx.contains_key(name)
    }
}

impl StaticDns {
    /// Adds a TXT value at `name`.
    pub fn add_txt(&self, name: &str, value: &str) {
        self.zone().txt.entry(name.to_owned()).or_default().push(value.to_owned());
    }

    /// Adds an MX record at `name` (the exchange lower-cased, without a trailing dot).
    pub fn add_mx(&self, name: &str, preference: u16, exchange: &str) {
        let exchange = exchange.strip_suffix('.').unwrap_or(exchange).to_ascii_lowercase();
        self.zone().mx.entry(name.to_owned()).or_default().push((preference, exchange));
    }

    /// Publishes one record as Tidings asked for it, by its type.
    fn publish_record(&self, record: &crate::model::DnsRecord) {
        if record.record_type == "MX" {
            self.add_mx(&record.name, record.priority.unwrap_or(10), &record.value);
        } else {
            self.add_txt(&record.name, &record.value);
        }
    }

    /// Publishes the domain's records of the given kinds exactly as Tidings asked for them.
    pub fn publish(&self, domain: &crate::model::Domain, kinds: &[crate::model::RecordKind]) {
        for record in domain.records.iter().filter(|r| kinds.contains(&r.kind)) {
            self.publish_record(record);
        }
    }

    /// Publishes every record of the domain.
    pub fn publish_all(&self, domain: &crate::model::Domain) {
        for record in &domain.records {
            self.publish_record(record);
        }
    }

    /// Removes everything.
    pub fn clear(&self) {
        *self.zone() = Zone::default();
    }

    fn zone(&self) -> std::sync::MutexGuard<'_, Zone> {
        // A panic while holding the lock leaves the map whole (every change is one call).
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl DnsCheck for StaticDns {
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError> {
        let zone = self.zone();
        match zone.txt.get(name.as_str()) {
            Some(values) => Ok(values.clone()),
            None if zone.has(name.as_str()) => Ok(Vec::new()),
            None => Err(DnsError::NxDomain(name.to_string())),
        }
    }

    async fn mx_records(&self, name: &DnsName) -> Result<Vec<(u16, String)>, DnsError> {
        let zone = self.zone();
        match zone.mx.get(name.as_str()) {
            Some(hosts) => {
                let mut hosts = hosts.clone();
                hosts.sort();
                Ok(hosts)
            }
            None if zone.has(name.as_str()) => Ok(Vec::new()),
            None => Err(DnsError::NxDomain(name.to_string())),
        }
    }
}
