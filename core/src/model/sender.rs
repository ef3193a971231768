//! Registered senders: a local part and display name on a Verified domain.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::email::{DisplayName, EmailAddress};
use crate::ids::{DomainId, SenderId, WorkspaceId};

/// A sender's local part, validated as the local part of an address.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SenderUsername(String);

impl SenderUsername {
    /// Validates `username` as a dot-atom local part (checked by building a test address).
    pub fn parse(username: &str) -> Result<Self, crate::email::AddressError> {
        EmailAddress::parse(&format!("{username}@example.com"))?;
        if username != username.trim() {
            return Err(crate::email::AddressError::LocalPartSyntax);
        }
        Ok(Self(username.to_owned()))
    }

    /// The text. Matching is case-insensitive: stores compare lower-cased.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SenderUsername {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SenderUsername {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SenderUsername({})", self.0)
    }
}

/// A registered sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// Internal id (the list cursor).
    pub id: SenderId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// The domain it is on.
    pub domain_id: DomainId,
    /// Local part.
    pub username: SenderUsername,
    /// Friendly name used when a send's `from` has none.
    pub display_name: Option<DisplayName>,
    /// `username@domain`.
    pub address: EmailAddress,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}
