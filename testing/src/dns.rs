//! [`FakeDns`]: a DNS that serves what the test publishes.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use tidings_core::domain_name::DnsName;
use tidings_core::model::{Domain, RecordKind};
use tidings_core::ports::{DnsCheck, DnsError};

/// A DNS zone held in memory: TXT values by fully qualified name. A name with no values is
/// NXDOMAIN.
#[derive(Debug, Default)]
pub struct FakeDns(Mutex<HashMap<String, Vec<String>>>);

impl FakeDns {
    /// Adds a TXT value at `name`.
    pub fn add_txt(&self, name: &str, value: &str) {
        self.zone().entry(name.to_owned()).or_default().push(value.to_owned());
    }

    /// Publishes the domain's records of the given kinds exactly as Tidings asked for them.
    pub fn publish(&self, domain: &Domain, kinds: &[RecordKind]) {
        for record in domain.records.iter().filter(|r| kinds.contains(&r.kind)) {
            self.add_txt(&record.name, &record.value);
        }
    }

    /// Publishes all four records of the domain.
    pub fn publish_all(&self, domain: &Domain) {
        self.publish(domain, &[RecordKind::Spf, RecordKind::Dkim, RecordKind::Dkim2, RecordKind::Dmarc]);
    }

    /// Removes everything.
    pub fn clear(&self) {
        self.zone().clear();
    }

    fn zone(&self) -> MutexGuard<'_, HashMap<String, Vec<String>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl DnsCheck for FakeDns {
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError> {
        self.zone().get(name.as_str()).cloned().ok_or_else(|| DnsError::NxDomain(name.to_string()))
    }
}
