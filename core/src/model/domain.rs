//! Sending domains, their DKIM keys and the DNS records to publish (docs/api.md#domains).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain_name::DomainName;
use crate::ids::{DomainId, WorkspaceId};
use crate::secret::Secret;

/// The verification state of a domain (docs/api.md#domains).
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
    /// `MX` of the return-path subdomain (`bounces.<domain>`) naming the host of the bounce
    /// listener (contract §12, "Return path per domain"). Optional: it never counts toward
    /// the domain's status, but with [`Self::ReturnPathSpf`] it moves the envelope sender
    /// onto the domain's own subdomain.
    ReturnPathMx,
    /// SPF `TXT` of the return-path subdomain, authorising the sending hosts.
    ReturnPathSpf,
    /// `MX` of an inbound domain (contract §13) naming the host of the SMTP listener
    /// (`TIDINGS_INBOUND_MX_HOST`); asked for only while the domain receives mail. Optional
    /// for sending: the listener takes the domain's mail once it and the domain are Verified.
    InboundMx,
}

impl RecordKind {
    /// Every kind of record a domain has, in the order they are listed.
    pub const ALL: [Self; 7] =
        [Self::Spf, Self::Dkim, Self::Dkim2, Self::Dmarc, Self::ReturnPathMx, Self::ReturnPathSpf, Self::InboundMx];

    /// Whether the domain needs this record to be `Verified`.
    pub fn is_required(self) -> bool {
        matches!(self, Self::Spf | Self::Dkim | Self::Dkim2)
    }

    /// Whether this is one of the return-path subdomain's records.
    pub fn is_return_path(self) -> bool {
        matches!(self, Self::ReturnPathMx | Self::ReturnPathSpf)
    }

    /// Upper-case label, e.g. `DKIM2`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Spf => "SPF",
            Self::Dkim => "DKIM",
            Self::Dkim2 => "DKIM2",
            Self::Dmarc => "DMARC",
            Self::ReturnPathMx => "Return-Path",
            Self::ReturnPathSpf => "Return-Path SPF",
            Self::InboundMx => "Inbound",
        }
    }
}

/// One DNS record to publish, with its last check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsRecord {
    /// Kind.
    pub kind: RecordKind,
    /// DNS type: `TXT`, or `MX` for the return path's.
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
    /// Something wrong with what Tidings asks to publish, whatever the check says (e.g. an SPF
    /// term the server's operator left at its loopback default while delivering to the
    /// internet): [`RecordPolicy::spf_warning`](crate::dns_records::RecordPolicy). Records
    /// stored before it existed read as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// The preference of an `MX` record; `None` for every other type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u16>,
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
    #[serde(with = "key_bytes")]
    pub rsa_private_pkcs8: Secret<Vec<u8>>,
    /// Selector of the Ed25519 key.
    pub ed25519_selector: String,
    /// Ed25519 private key, PKCS#8 DER.
    #[serde(with = "key_bytes")]
    pub ed25519_private_pkcs8: Secret<Vec<u8>>,
    /// When the pair was made. Keys stored before rotation existed read as `None`: they were
    /// made when their domain was added ([`Domain::keys_made_at`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

/// Where a DKIM key pair is in its life (docs/api.md#dkim-key-rotation). Only the `Active`
/// pair signs; a domain has exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DkimKeyState {
    /// Signs every message: its records were Verified when it became active.
    Active,
    /// Made by a rotation, waiting for both of its records to verify; never signs.
    Pending,
    /// Replaced by a rotation; no longer signs, but its records must stay published until
    /// `retire_at` so that mail signed with it still verifies.
    Retiring,
    /// Its private keys are deleted; the records are safe to remove.
    Retired,
}

/// A pair that an active one replaced: it signs nothing and retires at `retire_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiringDkimKeys {
    /// The pair, private keys included until it retires.
    pub keys: DkimKeys,
    /// When the rotation replaced it.
    pub replaced_at: DateTime<Utc>,
    /// When its private keys go and its records become safe to remove.
    pub retire_at: DateTime<Utc>,
}

/// A retired pair: its private keys are deleted, only what its records say is left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredDkimKeys {
    /// Selector of the RSA key.
    pub rsa_selector: String,
    /// The base64 RSA public key its record publishes.
    pub rsa_public: String,
    /// Selector of the Ed25519 key.
    pub ed25519_selector: String,
    /// The base64 Ed25519 public key its record publishes.
    pub ed25519_public: String,
    /// When its private keys were deleted.
    pub retired_at: DateTime<Utc>,
    /// When it leaves the list of records.
    pub drop_at: DateTime<Utc>,
}

/// The key pairs of a domain besides the active one ([`Domain::dkim`]): the rotation under
/// way, if any, and the replaced pairs still listed. Empty for a domain never rotated, and for
/// domains stored before rotation existed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DkimRotation {
    /// The pair a rotation made, waiting for its records to verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<DkimKeys>,
    /// Replaced pairs whose records must stay published, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retiring: Vec<RetiringDkimKeys>,
    /// Retired pairs still listed, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<RetiredDkimKeys>,
}

impl DkimRotation {
    /// Whether nothing but the active pair exists.
    pub fn is_empty(&self) -> bool {
        self.pending.is_none() && self.retiring.is_empty() && self.retired.is_empty()
    }
}

/// Key bytes stored as one base64 string. Every send reads its domain, and a JSON array of
/// 1,200 numbers cost a visible share of the API's CPU (bench/README.md). Stores written
/// before this change hold arrays; those still read.
mod key_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as BASE64;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::secret::Secret;

    pub fn serialize<S: Serializer>(key: &Secret<Vec<u8>>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&BASE64.encode(key.expose()))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Base64(String),
        Array(Vec<u8>),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Secret<Vec<u8>>, D::Error> {
        match Stored::deserialize(deserializer)? {
            Stored::Base64(text) => BASE64.decode(text).map(Secret::new).map_err(serde::de::Error::custom),
            Stored::Array(bytes) => Ok(Secret::new(bytes)),
        }
    }
}

/// Who made a domain, and so how it becomes sendable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DomainKind {
    /// Added by the customer (`POST /v1/domains`), sendable once DNS proves its records.
    #[default]
    Customer,
    /// The workspace's sandbox sending domain, made by Tidings itself
    /// ([`crate::usecases::SANDBOX_DOMAIN`]): Verified from the start, never looked up in
    /// DNS, and usable only while mail stays on the machine (`CoreConfig::sandbox_sending`).
    Sandbox,
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
    /// The active DKIM pair: the only keys that sign (docs/api.md#dkim-key-rotation).
    pub dkim: DkimKeys,
    /// The other DKIM pairs: a pending rotation and replaced pairs still listed. Domains
    /// stored before rotation existed read as having none.
    #[serde(default, skip_serializing_if = "DkimRotation::is_empty")]
    pub dkim_rotation: DkimRotation,
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
    /// Customer or sandbox; domains stored before the sandbox existed read as `Customer`.
    #[serde(default)]
    pub kind: DomainKind,
    /// Whether the domain receives mail (contract §13, `PATCH /v1/domains/{id}`
    /// `{"inbound": true}`): its records then ask for an `MX` to the listener's host.
    /// Domains stored before inbound mail existed read as `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inbound: bool,
}

impl Domain {
    /// Status of the record of `kind`, `Pending` if there is none.
    pub fn record_status(&self, kind: RecordKind) -> RecordStatus {
        self.records.iter().find(|r| r.kind == kind).map_or(RecordStatus::Pending, |r| r.status)
    }

    /// The return-path subdomain the envelope sender may use (`bounces.<domain>`): only once
    /// both of its records are `Verified` (its `MX` brings bounces to Tidings, its SPF lets
    /// receivers pass SPF aligned with `From`); `None` until then, and for a domain whose
    /// records do not ask for one (the server has no `TIDINGS_INBOUND_MX_HOST`).
    pub fn return_path_domain(&self) -> Option<DomainName> {
        let verified = |kind| self.records.iter().any(|r| r.kind == kind && r.status == RecordStatus::Verified);
        if !(verified(RecordKind::ReturnPathMx) && verified(RecordKind::ReturnPathSpf)) {
            return None;
        }
        let name = &self.records.iter().find(|r| r.kind == RecordKind::ReturnPathMx)?.name;
        DomainName::parse(name).ok()
    }

    /// The state of the return path's records together: `None` when none is asked for,
    /// `Verified` when both are, `Pending` when neither was checked, `Failed` otherwise.
    pub fn return_path_status(&self) -> Option<RecordStatus> {
        let statuses: Vec<RecordStatus> =
            self.records.iter().filter(|r| r.kind.is_return_path()).map(|r| r.status).collect();
        if statuses.is_empty() {
            return None;
        }
        Some(if statuses.iter().all(|s| *s == RecordStatus::Verified) {
            RecordStatus::Verified
        } else if statuses.iter().all(|s| *s == RecordStatus::Pending) {
            RecordStatus::Pending
        } else {
            RecordStatus::Failed
        })
    }

    /// Whether the background re-verification should look at it again: it is not Verified,
    /// or its return path's records are asked for and not Verified (the customer may publish
    /// them after the domain verified). The sandbox is Verified and has no return path.
    /// A DKIM rotation under way counts too: its pending records must verify, and its
    /// replaced pairs retire and leave the list on later checks.
    pub fn needs_recheck(&self) -> bool {
        self.status != DomainStatus::Verified
            || self.return_path_status().is_some_and(|status| status != RecordStatus::Verified)
            || !self.dkim_rotation.is_empty()
            || (self.inbound && self.record_status(RecordKind::InboundMx) != RecordStatus::Verified)
    }

    /// Whether the listener takes mail for this domain now: inbound is on, its `MX` is
    /// Verified, and so is the domain itself. The last matters: anyone can add a domain
    /// whose owner points its `MX` at Tidings, but only the owner can publish the DKIM
    /// records of this workspace's keys, so a Verified domain proves which workspace the
    /// mail is for.
    pub fn receives_mail(&self) -> bool {
        self.inbound && self.is_sendable() && self.record_status(RecordKind::InboundMx) == RecordStatus::Verified
    }

    /// When the active DKIM pair was made: keys stored before rotation existed were made
    /// with the domain.
    pub fn keys_made_at(&self) -> DateTime<Utc> {
        self.dkim.created_at.unwrap_or(self.created_at)
    }

    /// From when automatic rotation may replace the active pair ([`Self::keys_made_at`]);
    /// `None` for a domain that never rotates automatically now: the sandbox, a domain that
    /// is not Verified (its owner has not published even the first pair), and one with a
    /// rotation already pending. Stores index it for
    /// [`DomainStore::list_domains_to_rotate`](crate::ports::DomainStore::list_domains_to_rotate).
    pub fn rotation_due_from(&self) -> Option<DateTime<Utc>> {
        let rotates =
            !self.is_sandbox() && self.status == DomainStatus::Verified && self.dkim_rotation.pending.is_none();
        rotates.then(|| self.keys_made_at())
    }

    /// Whether `other` holds the same DKIM keys in the same states: what the stores compare
    /// before a key change ([`DomainStore::update_domain_keys`](crate::ports::DomainStore::update_domain_keys)).
    pub fn same_keys(&self, other: &Domain) -> bool {
        self.dkim == other.dkim && self.dkim_rotation == other.dkim_rotation
    }

    /// The selector and state of a DKIM record (`DKIM` or `DKIM2`) of this domain, `None`
    /// for other records. A DKIM record names its key by `<selector>._domainkey.<domain>`.
    pub fn dkim_record_state(&self, record: &DnsRecord) -> Option<(String, DkimKeyState)> {
        if !matches!(record.kind, RecordKind::Dkim | RecordKind::Dkim2) {
            return None;
        }
        let selector = record.name.split_once("._domainkey.").map(|(s, _)| s.to_owned())?;
        let state = self.dkim_selector_state(&selector)?;
        Some((selector, state))
    }

    /// When the retiring pair with `selector` retires; `None` if no retiring pair has it.
    pub fn dkim_retire_at(&self, selector: &str) -> Option<DateTime<Utc>> {
        let retiring = self.dkim_rotation.retiring.iter();
        retiring
            .filter(|r| r.keys.rsa_selector == selector || r.keys.ed25519_selector == selector)
            .map(|r| r.retire_at)
            .next()
    }

    /// The state of the pair a selector belongs to, `None` if no pair has it.
    pub fn dkim_selector_state(&self, selector: &str) -> Option<DkimKeyState> {
        let of = |keys: &DkimKeys| keys.rsa_selector == selector || keys.ed25519_selector == selector;
        let rotation = &self.dkim_rotation;
        if of(&self.dkim) {
            Some(DkimKeyState::Active)
        } else if rotation.pending.as_ref().is_some_and(of) {
            Some(DkimKeyState::Pending)
        } else if rotation.retiring.iter().any(|r| of(&r.keys)) {
            Some(DkimKeyState::Retiring)
        } else if rotation.retired.iter().any(|r| r.rsa_selector == selector || r.ed25519_selector == selector) {
            Some(DkimKeyState::Retired)
        } else {
            None
        }
    }

    /// Only a Verified domain is sendable. (The sandbox is Verified, but sendable only
    /// where the service allows it: `Tidings` decides that, not the record.)
    pub fn is_sendable(&self) -> bool {
        self.status == DomainStatus::Verified
    }

    /// Whether this is the workspace's sandbox sending domain.
    pub fn is_sandbox(&self) -> bool {
        self.kind == DomainKind::Sandbox
    }

    /// When DNS was last asked about it, or when it was added if never: what the periodic
    /// re-verification orders by.
    pub fn checked_or_created_at(&self) -> DateTime<Utc> {
        self.last_checked_at.unwrap_or(self.created_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dkim_keys_are_stored_as_base64_and_old_arrays_still_read() {
        let keys = DkimKeys {
            rsa_selector: "tdr".into(),
            rsa_private_pkcs8: Secret::new(vec![0, 1, 2, 255]),
            ed25519_selector: "tde".into(),
            ed25519_private_pkcs8: Secret::new(vec![7; 48]),
            created_at: None,
        };
        let json = serde_json::to_value(&keys).unwrap();
        assert_eq!(json["rsa_private_pkcs8"], "AAEC/w==");
        assert_eq!(serde_json::from_value::<DkimKeys>(json).unwrap(), keys);
        let old = serde_json::json!({"rsa_selector": "tdr", "rsa_private_pkcs8": [0, 1, 2, 255],
                                     "ed25519_selector": "tde", "ed25519_private_pkcs8": vec![7; 48]});
        assert_eq!(serde_json::from_value::<DkimKeys>(old).unwrap(), keys);
        let bad = serde_json::json!({"rsa_selector": "tdr", "rsa_private_pkcs8": "not base64!",
                                     "ed25519_selector": "tde", "ed25519_private_pkcs8": []});
        assert!(serde_json::from_value::<DkimKeys>(bad).is_err());
    }

    #[test]
    fn domains_stored_before_the_sandbox_existed_read_as_customer_domains() {
        let domain = crate::outbound::test_support::signing_domain("old.example.com");
        let mut old = serde_json::to_value(&domain).unwrap();
        old.as_object_mut().unwrap().remove("kind");
        assert_eq!(serde_json::from_value::<Domain>(old).unwrap().kind, DomainKind::Customer);
        let sandbox = Domain { kind: DomainKind::Sandbox, ..domain };
        let json = serde_json::to_value(&sandbox).unwrap();
        assert_eq!(json["kind"], "Sandbox");
        assert_eq!(serde_json::from_value::<Domain>(json).unwrap(), sandbox);
    }
}
