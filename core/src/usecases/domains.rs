//! Sending domains (docs/api.md#domains and #tracking): adding a domain with fresh
//! DKIM keys and the records to publish, verifying them through DNS, tracking settings,
//! listing and deletion, and the periodic re-verification of domains not yet Verified.
//!
//! Deleting a domain removes it and its senders at once; messages from it that are still
//! queued are not touched here: the delivery worker fails them (`Failed`) when it finds
//! their domain gone, so this use case never has to scan the queue.
//!
//! The workspace's sandbox sending domain (`usecases::sandbox`) is a domain too: listed
//! (made on the first list) and found only while sandbox sending is on, never checked in
//! DNS (verifying it returns it as it is), never deleted (422), and its name cannot be added.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::dkim_rotation::{self, RotateError};
use crate::dns_records;
use crate::domain_name::DomainName;
use crate::ids::{DomainId, WorkspaceId};
use crate::model::{DkimKeys, Domain, DomainKind, DomainStatus, RecordKind};
use crate::ports::{Page, PageRequest, StoreError};
use crate::usecases::{ListParams, Listed, Principal, SANDBOX_DOMAIN, Tidings, is_reserved_for_sandbox};
use crate::{Error, Result, dkim_keys};

/// Domains re-verified at once by [`Domains::recheck`]: each costs up to one DNS
/// timeout, so a slow resolver does not stretch a pass to `limit` timeouts.
const RECHECK_CONCURRENCY: usize = 8;

/// What one [`Domains::recheck`] pass did.
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

/// Body of `PATCH /v1/domains/{id}` (docs/api.md#tracking); an absent field is left as it is.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateDomainTrackingRequest {
    /// Open tracking by default for messages from this domain.
    pub open_tracking: Option<bool>,
    /// Click tracking by default for messages from this domain.
    pub click_tracking: Option<bool>,
    /// Whether the domain receives mail (contract §13): on, its records ask for an `MX`.
    pub inbound: Option<bool>,
}

impl Tidings {
    /// The sending-domain use cases.
    pub fn domains(&self) -> Domains<'_> {
        Domains { core: self }
    }

    /// Fresh DKIM keys (RSA-2048 and Ed25519) with new selectors, made now.
    pub(crate) async fn generate_dkim_keys(&self) -> Result<DkimKeys> {
        // RSA-2048 generation takes tens of milliseconds of CPU: keep it off the async threads.
        let random = Arc::clone(&self.random);
        let mut keys = tokio::task::spawn_blocking(move || dkim_keys::generate(&*random))
            .await
            .map_err(|e| Error::Internal(crate::Cause::context("DKIM key generation did not finish", e)))?
            .map_err(|e| Error::Internal(crate::Cause::context("DKIM key generation failed", e)))?;
        keys.created_at = Some(self.clock.now());
        Ok(keys)
    }

    /// The caller's domain `id`, or NotFound (also for the sandbox while sandbox sending is
    /// off).
    pub(crate) async fn domain_of(&self, who: &Principal, id: DomainId) -> Result<Domain> {
        let found = self.store.get_domain(who.workspace_id, id).await?;
        found.filter(|d| self.shows(d)).ok_or(Error::NotFound("domain"))
    }
}

/// The domain area of [`Tidings`] ([`Tidings::domains`]): sending domains with their DKIM
/// keys and records, their verification through DNS, tracking settings, and the periodic
/// re-check.
#[derive(Clone, Copy)]
pub struct Domains<'a> {
    core: &'a Tidings,
}

impl Domains<'_> {
    /// `POST /v1/domains`: adds a domain in status `Pending` with freshly generated DKIM
    /// keys (new selectors every time, so a re-added domain never reuses old records) and
    /// the four records to publish. Tracking starts off. The sandbox domain's name and names
    /// under it are refused (422 naming `domain`), whether sandbox sending is on or off.
    pub async fn add(&self, who: &Principal, req: AddDomainRequest) -> Result<Domain> {
        who.require_full()?;
        let text = req.domain.as_deref().ok_or_else(|| Error::field("domain", "is required"))?;
        let name = DomainName::parse(text).map_err(|e| Error::field("domain", e.to_string()))?;
        if is_reserved_for_sandbox(&name) {
            return Err(Error::field(
                "domain",
                format!(
                    "{name} is reserved: {SANDBOX_DOMAIN} and the names under it are Tidings' sandbox sending domain"
                ),
            ));
        }
        if self.core.store.find_domain_by_name(who.workspace_id, &name).await?.is_some() {
            return Err(already_added(&name));
        }

        let keys = self.core.generate_dkim_keys().await?;
        let records = dns_records::records_for(&name, &keys, &self.core.config.records)
            .map_err(|e| Error::Internal(crate::Cause::context("building DNS records failed", e)))?;

        let now = self.core.clock.now();
        let domain = Domain {
            id: DomainId::new_at(now, &*self.core.random),
            workspace_id: who.workspace_id,
            name,
            status: DomainStatus::Pending,
            records,
            dkim: keys,
            dkim_rotation: Default::default(),
            open_tracking: false,
            click_tracking: false,
            created_at: now,
            verified_at: None,
            last_checked_at: None,
            inbound: false,
            kind: DomainKind::Customer,
        };
        match self.core.store.insert_domain(&domain).await {
            Ok(()) => Ok(domain),
            // Two concurrent adds of one name: the store's uniqueness rule decides.
            Err(StoreError::Conflict(_)) => Err(already_added(&domain.name)),
            Err(e) => Err(e.into()),
        }
    }

    /// `GET /v1/domains`: the workspace's domains, newest first. With sandbox sending on, the
    /// sandbox domain is among them (made now if the workspace has none yet, so that the
    /// first list already shows what a send without `from` uses); off, it is left out.
    pub async fn list(&self, who: &Principal, params: ListParams) -> Result<Listed<Domain>> {
        who.require_full()?;
        let page = params.to_page(DomainId::parse)?;
        let found = if self.core.config.sandbox_sending {
            self.core.sandbox_domain(who.workspace_id).await?;
            self.core.store.list_domains(who.workspace_id, page).await?
        } else {
            self.list_customer_domains(who.workspace_id, page).await?
        };
        Ok(Listed::from_page(found, page.limit, |d| d.id.to_string()))
    }

    /// A page of the workspace's domains without the sandbox (made under the outbox earlier,
    /// perhaps). One more is read than asked for, so that a page the sandbox was on still
    /// holds `limit` domains and `has_more` stays exact.
    async fn list_customer_domains(&self, ws: WorkspaceId, page: PageRequest<DomainId>) -> Result<Page<Domain>> {
        let wider = PageRequest { limit: page.limit.saturating_add(1), cursor: page.cursor };
        let found = self.core.store.list_domains(ws, wider).await?;
        let mut items: Vec<Domain> = found.items.into_iter().filter(|d| !d.is_sandbox()).collect();
        let has_more = found.has_more || items.len() > page.limit;
        items.truncate(page.limit);
        Ok(Page { items, has_more })
    }

    /// `GET /v1/domains/{id}`: one domain with its records and their last check.
    pub async fn get(&self, who: &Principal, id: DomainId) -> Result<Domain> {
        who.require_full()?;
        self.core.domain_of(who, id).await
    }

    /// `POST /v1/domains/{id}/verify`: looks up every record in DNS now and stores the
    /// outcome (per-record status, overall status, `verifiedAt` on the first success).
    /// NotFound if the domain is unknown, or was deleted while DNS was being asked. The
    /// sandbox domain is returned as it is: it is Verified by construction, and DNS knows
    /// nothing of `.invalid` names.
    pub async fn verify(&self, who: &Principal, id: DomainId) -> Result<Domain> {
        who.require_full()?;
        let before = self.core.domain_of(who, id).await?;
        self.check_and_store(&before).await?.ok_or(Error::NotFound("domain"))
    }

    /// The periodic re-verification (run by the server every few minutes): checks up to
    /// `limit` domains that are not Verified and whose last check (or creation, if never
    /// checked) is more than `domain_recheck_interval` before `now`, least recently checked
    /// first, a few at a time. `Failed` domains are included, not only `Pending` and
    /// `PartiallyVerified`: a domain whose first automatic check came before its owner
    /// published the records is `Failed`, and must still verify once they do.
    pub async fn recheck(&self, now: DateTime<Utc>, limit: usize) -> Result<RecheckReport> {
        let cutoff = now - self.core.config.domain_recheck_interval;
        let due = self.core.store.list_domains_to_recheck(cutoff, limit).await?;
        let mut report = RecheckReport::default();
        // The sandbox is Verified, so stores never list it; were one to, it is still not checked.
        let due = due.into_iter().filter(|d| !d.is_sandbox());
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

    /// Looks up every record of `before` in DNS now and stores the outcome, moving its DKIM
    /// pairs on ([`dkim_rotation::advance`]: a pending pair whose records verified takes
    /// over, retiring pairs past their time retire); `None` if the domain was deleted
    /// meanwhile. The sandbox domain is never looked up: it is returned as it is.
    ///
    /// The outcome is stored on a fresh read (a tracking change made while DNS answered is
    /// kept) with a compare-and-swap on the keys: if another node rotated or switched the
    /// domain meanwhile, the check is done again on what it stored, a few times at most.
    async fn check_and_store(&self, before: &Domain) -> Result<Option<Domain>> {
        if before.is_sandbox() {
            return Ok(Some(before.clone()));
        }
        let mut before = before.clone();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let policy = &self.core.config.records;
            let checked = dns_records::verify(&before, policy, &*self.core.dns, self.core.clock.now()).await;
            let Some(fresh) = self.core.store.get_domain(before.workspace_id, before.id).await? else {
                return Ok(None);
            };
            if !fresh.same_keys(&before) && attempts < KEY_CHANGE_ATTEMPTS {
                // Another node rotated or switched meanwhile: check the pairs it stored.
                before = fresh;
                continue;
            }
            let mut domain = fresh.clone();
            if fresh.same_keys(&before) {
                domain.status = checked.status;
                domain.records = checked.records;
                domain.last_checked_at = checked.last_checked_at;
                domain.verified_at = earliest(domain.verified_at, checked.verified_at);
            }
            let now = self.core.clock.now();
            let advanced = dkim_rotation::advance(&mut domain, now, self.core.config.dkim_retire_after);
            let stored = if advanced.changed() {
                self.core.store.update_domain_keys(&domain, &fresh).await
            } else {
                self.core.store.update_domain(&domain).await
            };
            match stored {
                Ok(()) => {
                    if advanced.switched {
                        tracing::info!(domain = %domain.id, "the new DKIM keys verified and now sign");
                    }
                    if domain.inbound || fresh.inbound {
                        // Whether it receives mail may have changed with its records.
                        self.core.inbound_domains.forget();
                    }
                    return Ok(Some(domain));
                }
                Err(StoreError::NotFound) => return Ok(None),
                Err(StoreError::Conflict(_)) if attempts < KEY_CHANGE_ATTEMPTS => {
                    before = match self.core.store.get_domain(before.workspace_id, before.id).await? {
                        Some(domain) => domain,
                        None => return Ok(None),
                    };
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// `POST /v1/domains/{id}/rotate-dkim` (docs/api.md#dkim-key-rotation): makes new RSA
    /// and Ed25519 keys under new selectors and lists their records, `Pending`, beside the
    /// active ones. Mail is signed with the active keys until both new records verify (on a
    /// re-check or `verify`), then with the new ones. 409 `conflict` while a rotation is
    /// already pending; 422 naming `id` for the sandbox domain.
    pub async fn rotate_dkim(&self, who: &Principal, id: DomainId) -> Result<Domain> {
        who.require_full()?;
        let domain = self.core.domain_of(who, id).await?;
        self.rotate(domain).await
    }

    /// Starts a rotation of `domain` and stores it (compare-and-swap on its keys: a
    /// rotation or switch stored by another node meanwhile fails this one with 409).
    async fn rotate(&self, domain: Domain) -> Result<Domain> {
        // Refused before the costly key generation where the answer is already known.
        dkim_rotation::can_start(&domain).map_err(rotate_error)?;
        let keys = self.core.generate_dkim_keys().await?;
        let records = dns_records::dkim_records(&domain.name, &keys, &self.core.config.records)
            .map_err(|e| Error::Internal(crate::Cause::context("building DNS records failed", e)))?;
        let rotated = dkim_rotation::start(&domain, keys, records).map_err(rotate_error)?;
        match self.core.store.update_domain_keys(&rotated, &domain).await {
            Ok(()) => {
                tracing::info!(domain = %domain.id, "DKIM key rotation started");
                Ok(rotated)
            }
            Err(StoreError::Conflict(_)) => {
                Err(Error::Conflict("the domain's DKIM keys changed meanwhile; read it again and retry".to_owned()))
            }
            Err(e) => Err(domain_gone(e)),
        }
    }

    /// The automatic rotation (`TIDINGS_DKIM_ROTATE_EVERY`, run with the re-checks): starts
    /// a rotation of up to `limit` Verified customer domains whose active keys were made more
    /// than `dkim_rotate_every` before `now`; nothing when that is off. Returns the domains
    /// rotated; one that another node rotated first is skipped.
    pub async fn rotate_due(&self, now: DateTime<Utc>, limit: usize) -> Result<Vec<DomainId>> {
        let Some(every) = self.core.config.dkim_rotate_every else {
            return Ok(Vec::new());
        };
        let due = self.core.store.list_domains_to_rotate(now - every, limit).await?;
        let mut rotated = Vec::new();
        for domain in due {
            let id = domain.id;
            match self.rotate(domain).await {
                Ok(_) => rotated.push(id),
                Err(Error::Conflict(_) | Error::NotFound(_) | Error::Validation { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(rotated)
    }

    /// `PATCH /v1/domains/{id}`: switches default open and click tracking.
    pub async fn update_tracking(
        &self,
        who: &Principal,
        id: DomainId,
        req: UpdateDomainTrackingRequest,
    ) -> Result<Domain> {
        who.require_full()?;
        let mut domain = self.core.domain_of(who, id).await?;
        if let Some(on) = req.open_tracking {
            domain.open_tracking = on;
        }
        if let Some(on) = req.click_tracking {
            domain.click_tracking = on;
        }
        if let Some(on) = req.inbound {
            self.switch_inbound(&mut domain, on)?;
        }
        self.core.store.update_domain(&domain).await.map_err(domain_gone)?;
        self.core.inbound_domains.forget();
        Ok(domain)
    }

    /// Turns receiving on or off: the `MX` record comes (Pending) or goes. The sandbox
    /// receives nothing, and a server without `TIDINGS_INBOUND_MX_HOST` has no host to name.
    fn switch_inbound(&self, domain: &mut Domain, on: bool) -> Result<()> {
        let policy = &self.core.config.records;
        if on && domain.is_sandbox() {
            return Err(Error::field(
                "inbound",
                format!("{SANDBOX_DOMAIN} is the sandbox sending domain, which receives nothing"),
            ));
        }
        if on && policy.return_path_host.is_none() {
            return Err(Error::field(
                "inbound",
                "this server receives no mail: its operator has not set TIDINGS_INBOUND_MX_HOST",
            ));
        }
        if domain.inbound == on {
            return Ok(());
        }
        domain.inbound = on;
        domain.records.retain(|r| r.kind != RecordKind::InboundMx);
        domain.records.extend(crate::dns_records::inbound_mx(domain, policy));
        let arranged = domain.clone();
        crate::dns_records::arrange_records(&arranged, &mut domain.records);
        Ok(())
    }

    /// `DELETE /v1/domains/{id}`: removes the domain and its senders; its records stop
    /// meaning anything (the keys are gone) and the name can be added again with fresh ones.
    /// Messages from it still waiting in the queue are failed by the delivery worker. The
    /// sandbox domain cannot be deleted (422 naming `id`): it would only be made again, with
    /// new keys, by the next send, and its queued messages would fail.
    pub async fn delete(&self, who: &Principal, id: DomainId) -> Result<()> {
        who.require_full()?;
        if self.core.domain_of(who, id).await?.is_sandbox() {
            return Err(Error::field(
                "id",
                format!("{SANDBOX_DOMAIN} is the sandbox sending domain, which cannot be deleted"),
            ));
        }
        self.core.store.delete_domain(who.workspace_id, id).await.map_err(domain_gone)
    }
}

/// How many times a check is redone when another node changed the domain's keys meanwhile.
const KEY_CHANGE_ATTEMPTS: usize = 3;

fn rotate_error(e: RotateError) -> Error {
    match e {
        RotateError::AlreadyPending => Error::Conflict(e.to_string()),
        RotateError::Sandbox => Error::field("id", format!("{SANDBOX_DOMAIN}: {e}")),
    }
}

fn already_added(name: &DomainName) -> Error {
    Error::Conflict(format!("domain {name} is already added"))
}

fn domain_gone(e: StoreError) -> Error {
    crate::ports::missing("domain")(e)
}

/// `verifiedAt` records the first time the domain became Verified; two verifications racing
/// must not move it later.
fn earliest<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
