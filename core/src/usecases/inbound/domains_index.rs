//! Which domain names receive mail, as this node knows them: read whole from the store
//! ([`InboundStore::inbound_domains`](crate::ports::InboundStore::inbound_domains)) at most
//! every [`DOMAINS_TTL`], so that `RCPT TO` for names that receive nothing (most of what
//! a public MX sees) never reaches the store. A change made on this node (`PATCH` of
//! `inbound`, a verification) forgets what is known at once; other nodes see it within the
//! TTL.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Duration, Utc};

use crate::Result;
use crate::domain_name::DomainName;
use crate::model::Domain;
use crate::ports::Store;

/// How long this node trusts what it read of the receiving domains.
pub const DOMAINS_TTL: Duration = Duration::seconds(10);

/// The receiving domains by name, and when they were read.
#[derive(Debug, Default)]
pub struct InboundDomains {
    known: Mutex<Option<(DateTime<Utc>, HashMap<DomainName, Domain>)>>,
}

impl InboundDomains {
    /// Forgets what is known: the next question reads the store.
    pub fn forget(&self) {
        *self.known.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The domain that receives mail for `name`, if any: of the domains of that name that
    /// [`Domain::receives_mail`], the one verified first.
    pub(crate) async fn domain_for(
        &self,
        store: &dyn Store,
        name: &DomainName,
        now: DateTime<Utc>,
    ) -> Result<Option<Domain>> {
        {
            let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((read_at, domains)) = known.as_ref()
                && now - *read_at < DOMAINS_TTL
                && now >= *read_at
            {
                return Ok(domains.get(name).cloned());
            }
        }
        let mut domains: HashMap<DomainName, Domain> = HashMap::new();
        for domain in store.inbound_domains().await? {
            if !domain.receives_mail() {
                continue;
            }
            let first = |d: &Domain| (d.verified_at, d.id);
            match domains.get(&domain.name) {
                Some(kept) if first(kept) <= first(&domain) => {}
                _ => {
                    domains.insert(domain.name.clone(), domain);
                }
            }
        }
        let found = domains.get(name).cloned();
        *self.known.lock().unwrap_or_else(PoisonError::into_inner) = Some((now, domains));
        Ok(found)
    }
}
