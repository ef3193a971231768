//! Suppression list entries (docs/api.md#suppressions).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::email::EmailAddress;
use crate::ids::{MessageId, SuppressionId, WorkspaceId};

/// Why an address is suppressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SuppressionReason {
    /// Added through the API.
    Manual,
    /// A hard bounce.
    HardBounce,
    /// A spam complaint.
    Complaint,
}

impl SuppressionReason {
    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "Manual",
            Self::HardBounce => "HardBounce",
            Self::Complaint => "Complaint",
        }
    }

    /// Parses the API name.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Manual, Self::HardBounce, Self::Complaint].into_iter().find(|r| r.as_str() == text)
    }
}

/// Where the entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SuppressionSource {
    /// The API.
    Api,
    /// A bounce (synchronous or reported).
    Bounce,
    /// A complaint report.
    Complaint,
}

/// A suppressed address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suppression {
    /// Id.
    pub id: SuppressionId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// The address (matched case-insensitively through [`EmailAddress::normalized`]).
    pub email: EmailAddress,
    /// Reason.
    pub reason: SuppressionReason,
    /// Source.
    pub source: SuppressionSource,
    /// The message that caused it, if any.
    pub message_id: Option<MessageId>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}
