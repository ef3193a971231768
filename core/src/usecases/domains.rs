//! Sending domains (api-spec §4 "Domains", contract §4 and §8): adding a domain with fresh
//! DKIM keys and the records to publish, verifying them through DNS, tracking settings,
//! listing and deletion, and the periodic re-verification of domains not yet Verified.
//!
//! Deleting a domain removes it and its senders at once; messages from it that are still
//! queued are not touched here: the delivery worker fails them (`Failed`) when it finds
//! their domain gone, so this use case never has to scan the queue.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::dns_records;
use crate::domain_name::DomainName;
use crate::ids::DomainId;
use crate::model::{Domain, DomainStatus};
use crate::ports::StoreError;
use crate::usecases::{ListParams, Listed, Principal, Tidings};
use crate::{Error, Result, dkim_keys};

/// Domains re-verified at once by [`Tidings::recheck_domains`]: each costs up to one DNS
/// timeout, so a slow resolver does not stretch a pass to `limit` timeouts.
const RECHECK_CONCURRENCY: usize = 8;

/// What one [`Tidings::recheck_domains`] pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecheckReport {
    /// Domains checked (deleted meanwhile ones are not counted).
    pub checked: usize,
    /// Of those, how many are Verified now.
    pub verified: usize,
    /// Domains whose outcome could not be stored, with the error; tried again next pass.
    pub errors: Vec<(DomainId, String)>,
}

/// Body of `POST /v1/domains`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddDomainRequest {
    /// The domain name, e.g. `example.com` (required).
    pub domain: Option<String>,
}

/// Body of `PATCH /v1/domains/{id}` (contract §8); an absent field is left as it is.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateDomainTrackingRequest {
    /// Open tracking by default for messages from this domain.
    pub open_tracking: Option<bool>,
    /// Click tracking by default for messages from this domain.
    pub click_tracking: Option<bool>,
}

/// A path id that is not a ULID names no domain: 404, like an unknown one.
pub(crate) fn parse_domain_id(id: &str) -> Result<DomainId> {
    DomainId::parse(id).ok_or(Error::NotFound("domain"))
}

impl Tidings {
    /// `POST /v1/domains`: adds a domain in status `Pending` with freshly generated DKIM
    /// keys (new selectors every time, so a re-added domain never reuses old records) and
    /// the four records to publish. Tracking starts off.
    pub async fn add_domain(&self, who: &Principal, req: AddDomainRequest) -> Result<Domain> {
        who.require_full()?;
        let text = req.domain.as_deref().ok_or_else(|| Error::field("domain", "is required"))?;
        let name = DomainName::parse(text).map_err(|e| Error::field("domain", e.to_string()))?;
        if self.store.find_domain_by_name(who.workspace_id, &name).await?.is_some() {
            return Err(already_added(&name));
        }

        // RSA-2048 generation takes tens of milliseconds of CPU: keep it off the async threads.
        let random = Arc::clone(&self.random);
        let keys = tokio::task::spawn_blocking(move || dkim_keys::generate(&*random))
            .await
            .map_err(|e| Error::Internal(format!("DKIM key generation did not finish: {e}")))?
            .map_err(|e| Error::Internal(format!("DKIM key generation failed: {e}")))?;
        let records = dns_records::records_for(&name, &keys, &self.config.records)
            .map_err(|e| Error::Internal(format!("building DNS records failed: {e}")))?;

        let now = self.clock.now();
        let domain = Domain {
            id: DomainId::new_at(now, &*self.random),
            workspace_id: who.workspace_id,
            name,
            status: DomainStatus::Pending,
            records,
            dkim: keys,
            open_tracking: false,
            click_tracking: false,
            created_at: now,
            verified_at: None,
            last_checked_at: None,
        };
        match self.store.insert_domain(&domain).await {
            Ok(()) => Ok(domain),
            // Two concurrent adds of one name: the store's uniqueness rule decides.
            Err(StoreError::Conflict(_)) => Err(already_added(&domain.name)),
            Err(e) => Err(e.into()),
        }
    }

    /// `GET /v1/domains`: the workspace's domains, newest first.
    pub async fn list_domains(&self, who: &Principal, params: ListParams) -> Result<Listed<Domain>> {
        who.require_full()?;
        let page = params.to_page(DomainId::parse)?;
        let found = self.store.list_domains(who.workspace_id, page).await?;
        Ok(Listed::from_page(found, page.limit, |d| d.id.to_string()))
    }

    /// `GET /v1/domains/{id}`: one domain with its records and their last check.
    pub async fn get_domain(&self, who: &Principal, id: &str) -> Result<Domain> {
        who.require_full()?;
        self.domain_of(who, parse_domain_id(id)?).await
    }

    /// `POST /v1/domains/{id}/verify`: looks up every record in DNS now and stores the
    /// outcome (per-record status, overall status, `verifiedAt` on the first success).
    /// NotFound if the domain is unknown, or was deleted while DNS was being asked.
    pub async fn verify_domain(&self, who: &Principal, id: &str) -> Result<Domain> {
        who.require_full()?;
        let before = self.domain_of(who, parse_domain_id(id)?).await?;
        self.check_and_store(&before).await?.ok_or(Error::NotFound("domain"))
    }

    /// The periodic re-verification (run by the server every few minutes): checks up to
    /// `limit` domains that are not Verified and whose last check (or creation, if never
    /// checked) is more than `domain_recheck_interval` before `now`, least recently checked
    /// first, a few at a time. `Failed` domains are included, not only `Pending` and
    /// `PartiallyVerified`: a domain whose first automatic check came before its owner
    /// published the records is `Failed`, and must still verify once they do.
    pub async fn recheck_domains(&self, now: DateTime<Utc>, limit: usize) -> Result<RecheckReport> {
        let cutoff = now - self.config.domain_recheck_interval;
        let due = self.store.list_domains_to_recheck(cutoff, limit).await?;
        let mut report = RecheckReport::default();
        let mut checks = futures::stream::iter(due)
            .map(|domain| async move { (domain.id, self.check_and_store(&domain).await) })
            .buffer_unordered(RECHECK_CONCURRENCY);
        while let Some((id, outcome)) = checks.next().await {
            match outcome {
                Ok(Some(domain)) => {
                    report.checked += 1;
                    report.verified += usize::from(domain.status == DomainStatus::Verified);
                }
                Ok(None) => {}
                Err(e) => report.errors.push((id, e.to_string())),
            }
        }
        Ok(report)
    }

    /// Looks up every record of `before` in DNS now and stores the outcome; `None` if the
    /// domain was deleted meanwhile.
    async fn check_and_store(&self, before: &Domain) -> Result<Option<Domain>> {
        let checked = dns_records::verify(before, &self.config.records, &*self.dns, self.clock.now()).await;
        // DNS may take seconds; take the verification outcome onto a fresh read so that a
        // tracking change made meanwhile is not overwritten with the old settings.
        let Some(mut domain) = self.store.get_domain(before.workspace_id, before.id).await? else {
            return Ok(None);
        };
        domain.status = checked.status;
        domain.records = checked.records;
        domain.last_checked_at = checked.last_checked_at;
        domain.verified_at = earliest(domain.verified_at, checked.verified_at);
        match self.store.update_domain(&domain).await {
            Ok(()) => Ok(Some(domain)),
            Err(StoreError::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// `PATCH /v1/domains/{id}`: switches default open and click tracking.
    pub async fn update_domain_tracking(
        &self,
        who: &Principal,
        id: &str,
        req: UpdateDomainTrackingRequest,
    ) -> Result<Domain> {
        who.require_full()?;
        let mut domain = self.domain_of(who, parse_domain_id(id)?).await?;
        if let Some(on) = req.open_tracking {
            domain.open_tracking = on;
        }
        if let Some(on) = req.click_tracking {
            domain.click_tracking = on;
        }
        self.store.update_domain(&domain).await.map_err(domain_gone)?;
        Ok(domain)
    }

    /// `DELETE /v1/domains/{id}`: removes the domain and its senders; its records stop
    /// meaning anything (the keys are gone) and the name can be added again with fresh ones.
    /// Messages from it still waiting in the queue are failed by the delivery worker.
    pub async fn delete_domain(&self, who: &Principal, id: &str) -> Result<()> {
        who.require_full()?;
        let id = parse_domain_id(id)?;
        self.domain_of(who, id).await?;
        self.store.delete_domain(who.workspace_id, id).await.map_err(domain_gone)
    }

    /// The caller's domain `id`, or NotFound.
    pub(crate) async fn domain_of(&self, who: &Principal, id: DomainId) -> Result<Domain> {
        self.store.get_domain(who.workspace_id, id).await?.ok_or(Error::NotFound("domain"))
    }
}

fn already_added(name: &DomainName) -> Error {
    Error::Conflict(format!("domain {name} is already added"))
}

fn domain_gone(e: StoreError) -> Error {
    crate::error::missing("domain")(e)
}

/// `verifiedAt` records the first time the domain became Verified; two verifications racing
/// must not move it later.
fn earliest<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
