//! The suppression list (docs/api.md#suppressions): addresses every later send
//! skips. Clients add (`Manual`) and remove entries with a `full` key; bounce and
//! complaint handling adds them through [`Suppressions::add_automatically`].
//!
//! Addresses match case-insensitively (the store compares [`EmailAddress::normalized`]);
//! the entry keeps the address as first given.

use serde::{Deserialize, Serialize};

use crate::email::EmailAddress;
use crate::ids::{MessageId, SuppressionId, WorkspaceId};
use crate::model::{Suppression, SuppressionReason, SuppressionSource};
use crate::ports::EventObserver;
use crate::usecases::Named;
use crate::usecases::{ListParams, Listed, Principal, Tidings};
use crate::{Error, Result};

/// Body of `POST /v1/suppressions`, before validation.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddSuppressionRequest {
    /// The address to suppress (required).
    pub email: Option<String>,
}

impl Tidings {
    /// The suppression list's use cases.
    pub fn suppressions(&self) -> Suppressions<'_> {
        Suppressions { core: self }
    }
}

/// The suppression area of [`Tidings`] ([`Tidings::suppressions`]): the addresses every
/// later send skips, added by clients or by bounce and complaint handling.
#[derive(Clone, Copy)]
pub struct Suppressions<'a> {
    core: &'a Tidings,
}

impl Suppressions<'_> {
    /// `POST /v1/suppressions`: suppresses an address with reason `Manual`, source `api`.
    /// Returns the entry and whether this call created it; an address already on the list
    /// (whatever its reason) is returned unchanged with `false`, which the front end
    /// answers with 200 instead of 201.
    pub async fn add(&self, who: &Principal, req: AddSuppressionRequest) -> Result<(Suppression, bool)> {
        who.require_full()?;
        let email = match req.email.as_deref() {
            None => return Err(Error::field("email", "is required")),
            Some(text) => EmailAddress::parse(text).map_err(|e| Error::field("email", e.to_string()))?,
        };
        self.insert_suppression(who.workspace_id, email, SuppressionReason::Manual, SuppressionSource::Api, None).await
    }

    /// `GET /v1/suppressions`: entries, newest first, optionally only those of one
    /// `reason` (`Manual`, `HardBounce`, `Complaint`; anything else is a 422 naming it).
    pub async fn list(
        &self,
        who: &Principal,
        params: ListParams,
        reason: Option<String>,
    ) -> Result<Listed<Suppression>> {
        who.require_full()?;
        let reason = match reason.as_deref() {
            None => None,
            Some(text) => Some(
                SuppressionReason::parse(text)
                    .ok_or_else(|| Error::field("reason", "must be one of Manual, HardBounce, Complaint"))?,
            ),
        };
        let page = params.to_page(SuppressionId::parse)?;
        let limit = page.limit;
        let found = self.core.store.list_suppressions(who.workspace_id, reason, page).await?;
        Ok(Listed::from_page(found, limit, |s| s.id.to_string()))
    }

    /// The entry for an address (the path segment, already URL-decoded). An address that
    /// cannot be parsed ([`Named::Malformed`]) cannot be on the list: not found.
    pub async fn get(&self, who: &Principal, email: Named<EmailAddress>) -> Result<Suppression> {
        who.require_full()?;
        let email = email.or_not_found("suppression")?;
        self.core.store.get_suppression(who.workspace_id, &email).await?.ok_or(Error::NotFound("suppression"))
    }

    /// `DELETE /v1/suppressions/{email}`: the address can be sent to again. Not found if it
    /// is not on the list (or is not an address at all).
    pub async fn delete(&self, who: &Principal, email: Named<EmailAddress>) -> Result<()> {
        who.require_full()?;
        let email = email.or_not_found("suppression")?;
        self.core
            .store
            .delete_suppression(who.workspace_id, &email)
            .await
            .map_err(crate::ports::missing("suppression"))?;
        Ok(())
    }

    /// For bounce and complaint handling: suppresses `email` in `workspace` because of
    /// `message_id`. An address already suppressed keeps its existing entry (a `Manual`
    /// entry is not relabelled by a later bounce), so this is safe to repeat when a report
    /// is processed twice. Returns the entry and whether it was created now.
    pub async fn add_automatically(
        &self,
        workspace: WorkspaceId,
        email: &EmailAddress,
        reason: SuppressionReason,
        source: SuppressionSource,
        message_id: Option<MessageId>,
    ) -> Result<(Suppression, bool)> {
        self.insert_suppression(workspace, email.clone(), reason, source, message_id).await
    }

    async fn insert_suppression(
        &self,
        workspace: WorkspaceId,
        email: EmailAddress,
        reason: SuppressionReason,
        source: SuppressionSource,
        message_id: Option<MessageId>,
    ) -> Result<(Suppression, bool)> {
        let now = self.core.clock.now();
        let entry = Suppression {
            id: SuppressionId::new_at(now, &*self.core.random),
            workspace_id: workspace,
            email,
            reason,
            source,
            message_id,
            created_at: now,
        };
        let (stored, created) = self.core.store.insert_suppression(&entry).await?;
        if created {
            self.core.observer.suppression_added(&stored);
        }
        Ok((stored, created))
    }
}
