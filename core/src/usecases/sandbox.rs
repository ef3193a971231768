//! The sandbox sending domain: a domain every workspace gets from Tidings itself,
//! so that a fresh install sends its first message without owning a domain or touching DNS.
//!
//! It is an ordinary [`Domain`] record of kind [`DomainKind::Sandbox`] named
//! [`SANDBOX_DOMAIN`], with DKIM keys of its own and status Verified from the start; DNS is
//! never asked about it. `.invalid` never resolves (RFC 2606), so mail signed for it cannot
//! pass as anyone's real mail. It is made the first time it is needed (a send with no usable
//! domain, an explicit `from` at it, a domain list) by whichever node needs it: two nodes
//! making it at once collide on the store's unique name per workspace, and the loser reads
//! the winner's.
//!
//! Its use hangs on [`CoreConfig::sandbox_sending`](crate::usecases::CoreConfig), which an
//! embedder turns on only when its mailer keeps mail on the machine (the server: with
//! `TIDINGS_DELIVERY=outbox`). Off, the domain is invisible (not listed, not found by id,
//! never a default `from`, no key restricted to it) and a send from it is refused with
//! [`sandbox_off`]. Independently of the setting, the delivery worker hands a message from
//! it only to a mailer that keeps mail local ([`Mailer::keeps_mail_local`]), so messages
//! queued under the outbox never leave by relay or MX after a restart with another transport.
//!
//! [`Mailer::keeps_mail_local`]: crate::ports::Mailer::keeps_mail_local

use std::sync::LazyLock;

use crate::dns_records::{self, RecordPolicy};
use crate::domain_name::DomainName;
use crate::ids::{DomainId, WorkspaceId};
use crate::model::{Domain, DomainKind, DomainStatus, RecordStatus};
use crate::ports::StoreError;
use crate::usecases::Tidings;
use crate::{Error, Result};

/// The name of every workspace's sandbox sending domain. Customers cannot add it, nor any
/// name under it ([`is_reserved_for_sandbox`]).
pub const SANDBOX_DOMAIN: &str = "sandbox.tidings.invalid";

/// What the API says on each record of the sandbox domain: shown, never to be published.
pub const SANDBOX_RECORD_NOTE: &str = "nothing to publish: this is the sandbox sending domain, made and \
    Verified by Tidings for the outbox and never looked up in DNS; its DKIM signatures verify against this value";

/// Why a delivery worker fails a message from the sandbox domain (its event's `response`).
pub(crate) const SANDBOX_NOT_DELIVERABLE: &str = "sent from the sandbox sending domain, which only the \
    outbox delivers (TIDINGS_DELIVERY=outbox); nothing left this machine. Send it again from your own \
    verified domain";

static SANDBOX_NAME: LazyLock<DomainName> = LazyLock::new(|| match DomainName::parse(SANDBOX_DOMAIN) {
    Ok(name) => name,
    Err(e) => unreachable!("{SANDBOX_DOMAIN} is a valid domain name: {e}"),
});

/// Whether `name` is the sandbox domain or a name under it: no customer may add those.
pub fn is_reserved_for_sandbox(name: &DomainName) -> bool {
    let name = name.as_str();
    name == SANDBOX_DOMAIN || name.strip_suffix(SANDBOX_DOMAIN).is_some_and(|head| head.ends_with('.'))
}

/// The 422 for sending from the sandbox where it is off: what it is, and what to do instead.
/// `domain_not_verified`, as for any domain that is not a Verified domain of the workspace.
pub(crate) fn sandbox_off() -> Error {
    Error::DomainNotVerified(format!(
        "{SANDBOX_DOMAIN} is the sandbox sending domain: it works only with TIDINGS_DELIVERY=outbox; add and \
         verify your own domain (POST /v1/domains) to send with relay or mx"
    ))
}

impl Tidings {
    /// Whether sandbox sending is on ([`CoreConfig::sandbox_sending`](crate::usecases::CoreConfig)).
    pub fn sandbox_sending(&self) -> bool {
        self.config.sandbox_sending
    }

    /// Whether clients may see and use `domain`: every customer domain, and the sandbox only
    /// while sandbox sending is on.
    pub(crate) fn shows(&self, domain: &Domain) -> bool {
        !domain.is_sandbox() || self.config.sandbox_sending
    }

    /// The workspace's sandbox domain, made now if it has none yet. `None` if the name is
    /// held by a customer domain added before it was reserved (it could never verify; deleting
    /// it frees the name). Callers check [`Self::sandbox_sending`] first.
    pub(crate) async fn sandbox_domain(&self, ws: WorkspaceId) -> Result<Option<Domain>> {
        if let Some(found) = self.store.find_domain_by_name(ws, &SANDBOX_NAME).await? {
            return Ok(found.is_sandbox().then_some(found));
        }
        let made = self.new_sandbox_domain(ws).await?;
        match self.store.insert_domain(&made).await {
            Ok(()) => {
                tracing::info!(workspace = %ws, domain = %made.id, "made the workspace's sandbox sending domain");
                Ok(Some(made))
            }
            // Another request or node made it first: theirs is the one.
            Err(StoreError::Conflict(_)) => {
                let found = self.store.find_domain_by_name(ws, &SANDBOX_NAME).await?;
                Ok(found.filter(Domain::is_sandbox))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A fresh sandbox domain record: new keys, the usual records (shown so that anyone can
    /// check the signatures, all Verified as nothing is published), tracking off.
    async fn new_sandbox_domain(&self, ws: WorkspaceId) -> Result<Domain> {
        let keys = self.generate_dkim_keys().await?;
        // No SPF warning: it is about publishing the SPF term, and nothing here is published.
        let policy = RecordPolicy { spf_warning: None, ..self.config.records.clone() };
        let mut records = dns_records::records_for(&SANDBOX_NAME, &keys, &policy)
            .map_err(|e| Error::Internal(crate::Cause::context("building the sandbox domain's records failed", e)))?;
        for record in &mut records {
            record.status = RecordStatus::Verified;
        }
        let now = self.clock.now();
        Ok(Domain {
            id: DomainId::new_at(now, &*self.random),
            workspace_id: ws,
            name: SANDBOX_NAME.clone(),
            status: DomainStatus::Verified,
            records,
            dkim: keys,
            dkim_rotation: Default::default(),
            open_tracking: false,
            click_tracking: false,
            created_at: now,
            verified_at: Some(now),
            last_checked_at: None,
            inbound: false,
            kind: DomainKind::Sandbox,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_name_and_every_name_under_it_are_reserved() {
        let reserved = |text: &str| is_reserved_for_sandbox(&DomainName::parse(text).unwrap());
        assert!(reserved(SANDBOX_DOMAIN));
        assert!(reserved("Sandbox.Tidings.Invalid."));
        assert!(reserved("mail.sandbox.tidings.invalid"));
        assert!(!reserved("xsandbox.tidings.invalid"), "a longer label is another name");
        assert!(!reserved("tidings.invalid"));
        assert!(!reserved("sandbox.tidings.example"));
    }
}
