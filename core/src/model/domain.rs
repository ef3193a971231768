//! Sending domains, their DKIM keys and the DNS records to publish (contract §4).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain_name::DomainName;
use crate::ids::{DomainId, WorkspaceId};
use crate::secret::Secret;

/// The verification state of a domain (contract §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DomainStatus {
    /// Never checked.
    Pending,
    /// SPF, DKIM and DKIM2 all verified: sendable.
    Verified,
    /// Some required records verified.
    PartiallyVerified,
    /// None verified.
    Failed,
}

/// The state of one DNS record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecordStatus {
    /// Never checked.
    Pending,
    /// Found as required.
    Verified,
    /// Missing or different; see the record's `error`.
    Failed,
}

/// Which record this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecordKind {
    /// SPF TXT on the domain.
    Spf,
    /// RSA-2048 DKIM key.
    Dkim,
    /// Ed25519 DKIM key (RFC 8463).
    Dkim2,
    /// DMARC policy (recommended, not required).
    Dmarc,
}

impl RecordKind {
    /// Whether the domain needs this record to be `Verified`.
    pub fn is_required(self) -> bool {
        !matches!(self, Self::Dmarc)
    }

    /// Upper-case label, e.g. `DKIM2`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Spf => "SPF",
            Self::Dkim => "DKIM",
            Self::Dkim2 => "DKIM2",
            Self::Dmarc => "DMARC",
        }
    }
}

/// One DNS record to publish, with its last check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsRecord {
    /// Kind.
    pub kind: RecordKind,
    /// DNS type, `TXT` for all records Tidings asks for.
    pub record_type: String,
    /// Fully qualified host name, no trailing dot.
    pub name: String,
    /// Value to publish (unsplit; DNS tools split long TXT values themselves).
    pub value: String,
    /// Suggested TTL in seconds.
    pub ttl: u32,
    /// Verification status.
    pub status: RecordStatus,
    /// Last check.
    pub last_checked_at: Option<DateTime<Utc>>,
    /// Why it failed, in words a person can act on.
    pub error: Option<String>,
}

impl DnsRecord {
    /// `purpose` as the API shows it, e.g. `"DKIM (TXT)"`.
    pub fn purpose(&self) -> String {
        format!("{} ({})", self.kind.label(), self.record_type)
    }
}

/// The two DKIM keys of a domain. Private keys are PKCS#8 DER.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DkimKeys {
    /// Selector of the RSA key.
    pub rsa_selector: String,
    /// RSA-2048 private key, PKCS#8 DER.
    pub rsa_private_pkcs8: Secret<Vec<u8>>,
    /// Selector of the Ed25519 key.
    pub ed25519_selector: String,
    /// Ed25519 private key, PKCS#8 DER.
    pub ed25519_private_pkcs8: Secret<Vec<u8>>,
}

/// A sending domain of a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Domain {
    /// Id (new for every add).
    pub id: DomainId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// The name.
    pub name: DomainName,
    /// Overall status.
    pub status: DomainStatus,
    /// Records in the order SPF, DKIM, DKIM2, DMARC.
    pub records: Vec<DnsRecord>,
    /// Signing keys.
    pub dkim: DkimKeys,
    /// Open tracking on by default for messages from this domain.
    pub open_tracking: bool,
    /// Click tracking on by default for messages from this domain.
    pub click_tracking: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// When it first became Verified.
    pub verified_at: Option<DateTime<Utc>>,
    /// Last verification.
    pub last_checked_at: Option<DateTime<Utc>>,
}

impl Domain {
    /// Status of the record of `kind`, `Pending` if there is none.
    pub fn record_status(&self, kind: RecordKind) -> RecordStatus {
        self.records.iter().find(|r| r.kind == kind).map_or(RecordStatus::Pending, |r| r.status)
    }

    /// Only a Verified domain is sendable.
    pub fn is_sendable(&self) -> bool {
        self.status == DomainStatus::Verified
    }
}
