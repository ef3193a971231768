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

/// The receiving domains by name, as read at one time.
#[derive(Debug)]
struct Snapshot {
    read_at: DateTime<Utc>,
    domains: HashMap<DomainName, Domain>,
}

/// The receiving domains, as this node last read them.
#[derive(Debug, Default)]
pub struct InboundDomains {
    known: Mutex<Option<Snapshot>>,
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
            if let Some(snapshot) = known.as_ref()
                && now - snapshot.read_at < DOMAINS_TTL
                && now >= snapshot.read_at
            {
                return Ok(snapshot.domains.get(name).cloned());
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
        *self.known.lock().unwrap_or_else(PoisonError::into_inner) = Some(Snapshot { read_at: now, domains });
        Ok(found)
    }
}
