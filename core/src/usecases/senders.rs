//! Registered senders of a domain (docs/api.md#domains): a local part with a display
//! name, registered only on a Verified domain. The API addresses a sender by its username
//! under its domain; the internal `SenderId` only orders the list and is its cursor.

use crate::email::{AddressError, DisplayName, EmailAddress};
use crate::ids::{DomainId, SenderId, WorkspaceId};
use crate::model::{Domain, Sender, SenderUsername};
use crate::ports::StoreError;
use crate::usecases::{ListParams, Listed, Named, Principal, Tidings};
use crate::{Error, FieldError, Result};

/// Body of `POST /v1/domains/{id}/senders`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddSenderRequest {
    /// Local part, e.g. `billing` (required).
    pub username: Option<String>,
    /// Friendly name used when a send's `from` has none (optional; empty means none).
    pub display_name: Option<String>,
}

impl Tidings {
    /// The use cases of a domain's registered senders.
    pub fn senders(&self) -> Senders<'_> {
        Senders { core: self }
    }
}

/// The sender area of [`Tidings`] ([`Tidings::senders`]): the usernames registered on a
/// Verified domain, and the lookup the send use case makes for a `from` address.
#[derive(Clone, Copy)]
pub struct Senders<'a> {
    core: &'a Tidings,
}

impl Senders<'_> {
    /// `POST /v1/domains/{id}/senders`: registers `username@domain`. The domain must exist
    /// (404) and be Verified (422 `domain_not_verified`); a username already registered on
    /// it, compared case-insensitively, is a 409.
    pub async fn add(&self, who: &Principal, domain_id: DomainId, req: AddSenderRequest) -> Result<Sender> {
        who.require_full()?;
        let domain = self.core.domain_of(who, domain_id).await?;
        let (username, display_name, address) = validate(&req, &domain)?;
        if !domain.is_sendable() {
            return Err(Error::DomainNotVerified(format!("domain {} is not verified", domain.name)));
        }

        let now = self.core.clock.now();
        let sender = Sender {
            id: SenderId::new_at(now, &*self.core.random),
            workspace_id: who.workspace_id,
            domain_id: domain.id,
            username,
            display_name,
            address,
            created_at: now,
        };
        match self.core.store.insert_sender(&sender).await {
            Ok(()) => Ok(sender),
            Err(StoreError::Conflict(_)) => {
                Err(Error::Conflict(format!("sender {} is already registered on {}", sender.username, domain.name)))
            }
            Err(StoreError::NotFound) => Err(Error::NotFound("domain")),
            Err(e) => Err(e.into()),
        }
    }

    /// `GET /v1/domains/{id}/senders`: the domain's senders, newest first.
    pub async fn list(&self, who: &Principal, domain_id: DomainId, params: ListParams) -> Result<Listed<Sender>> {
        who.require_full()?;
        let domain = self.core.domain_of(who, domain_id).await?;
        let page = params.to_page(SenderId::parse)?;
        let found = self.core.store.list_senders(who.workspace_id, domain.id, page).await?;
        Ok(Listed::from_page(found, page.limit, |s| s.id.to_string()))
    }

    /// `DELETE /v1/domains/{id}/senders/{username}`: removes a sender (username matched
    /// case-insensitively). 404 if the domain or the sender does not exist.
    pub async fn delete(&self, who: &Principal, domain_id: DomainId, username: Named<SenderUsername>) -> Result<()> {
        who.require_full()?;
        let domain = self.core.domain_of(who, domain_id).await?;
        let username = username.or_not_found("sender")?;
        self.core
            .store
            .delete_sender(who.workspace_id, domain.id, &username)
            .await
            .map_err(crate::ports::missing("sender"))?;
        Ok(())
    }

    /// For the send use case: the sender registered as `local_part` on the domain, if any
    /// (case-insensitive). A local part that cannot be a username has no sender: `None`.
    pub async fn find(&self, workspace: WorkspaceId, domain_id: DomainId, local_part: &str) -> Result<Option<Sender>> {
        let Ok(username) = SenderUsername::parse(local_part) else { return Ok(None) };
        Ok(self.core.store.get_sender(workspace, domain_id, &username).await?)
    }
}

/// Checks both fields, reporting every one at fault.
fn validate(req: &AddSenderRequest, domain: &Domain) -> Result<(SenderUsername, Option<DisplayName>, EmailAddress)> {
    let mut faults = Vec::new();
    let username = match req.username.as_deref() {
        None => {
            faults.push(FieldError::new("username", "is required"));
            None
        }
        Some(text) => match SenderUsername::parse(text)
            .and_then(|u| EmailAddress::from_parts(u.as_str(), &domain.name).map(|address| (u, address)))
        {
            Ok(pair) => Some(pair),
            Err(e) => {
                faults.push(FieldError::new("username", username_problem(&e)));
                None
            }
        },
    };
    // An empty or blank display name is the same as none: clients often send "" for "unset".
    let display_name = match req.display_name.as_deref().filter(|n| !n.trim().is_empty()) {
        None => None,
        // The sender's own address may be its name; another address may not.
        Some(text) => match username
            .as_ref()
            .map_or_else(|| DisplayName::parse(text), |(_, address)| DisplayName::parse_for(text, address))
        {
            Ok(name) => Some(name),
            Err(e) => {
                faults.push(FieldError::new("displayName", e.to_string()));
                None
            }
        },
    };
    match username {
        Some((username, address)) if faults.is_empty() => Ok((username, display_name, address)),
        _ => Err(Error::Validation { fields: faults }),
    }
}

/// The address errors say "local part"; the client sent a username.
fn username_problem(e: &AddressError) -> String {
    match e {
        AddressError::LocalPartLength | AddressError::Empty => "must be 1 to 64 characters".to_owned(),
        AddressError::ControlCharacter => e.to_string(),
        _ => "must be a local part: letters, digits and !#$%&'*+-/=?^_`{|}~, with single dots between them".to_owned(),
    }
}
