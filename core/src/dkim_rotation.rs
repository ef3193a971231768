//! The life of a domain's DKIM key pairs (docs/api.md#dkim-key-rotation), as pure functions
//! of the domain: [`start`] a rotation, then [`advance`] after each check.
//!
//! A pair is `Pending` (made by a rotation), `Active` (signs), `Retiring` (replaced, still
//! published so that mail signed with it verifies) or `Retired` (private keys deleted,
//! safe to remove). The rules that keep mail verifiable:
//! - only the active pair ([`Domain::dkim`]) signs, and it is replaced only by a pending pair
//!   both of whose records (`DKIM` and `DKIM2`) were found Verified in DNS, so no message is
//!   ever signed with a key receivers cannot find;
//! - the replaced pair is kept, published, for `retire_after` after the switch, so mail
//!   signed with it just before (in flight, or re-verified by a forwarder) still verifies;
//! - a retired pair stays listed for `retire_after` again, so its owner sees the records
//!   are safe to remove, then leaves the list.
//!
//! The use cases (`usecases::domains`) store the outcome with a compare-and-swap on the keys
//! ([`DomainStore::update_domain_keys`](crate::ports::DomainStore::update_domain_keys)), so
//! two nodes rotating or verifying one domain at once cannot lose a pair.

use chrono::{DateTime, Duration, Utc};

use crate::dkim_keys;
use crate::dns_records::{self, arrange_records};
use crate::model::{
    DkimKeys, DnsRecord, Domain, DomainStatus, RecordKind, RecordStatus, RetiredDkimKeys, RetiringDkimKeys,
};

/// `TIDINGS_DKIM_RETIRE_AFTER`'s default: how long a replaced pair stays published.
pub const DEFAULT_RETIRE_AFTER: Duration = Duration::days(7);

/// Why a rotation cannot start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RotateError {
    /// A rotation is already waiting for its records: a second one would ask the owner to
    /// publish records that the first one's may already be in DNS for.
    #[error("a DKIM key rotation is already pending; publish its records and verify the domain first")]
    AlreadyPending,
    /// The sandbox domain is never in DNS, so its keys never rotate.
    #[error("the sandbox sending domain's keys do not rotate")]
    Sandbox,
}

/// Starts a rotation: `keys` (fresh, with selectors the domain has never used) become the
/// pending pair, and `records` (their `DKIM` and `DKIM2` records) are listed beside the
/// active ones, `Pending`. Nothing signs with them yet.
pub fn start(domain: &Domain, keys: DkimKeys, records: [DnsRecord; 2]) -> Result<Domain, RotateError> {
    can_start(domain)?;
    let mut rotated = domain.clone();
    rotated.dkim_rotation.pending = Some(keys);
    let mut listed = std::mem::take(&mut rotated.records);
    listed.extend(records);
    arrange_records(&rotated, &mut listed);
    rotated.records = listed;
    Ok(rotated)
}

/// Whether [`start`] would accept a rotation of `domain` (before making keys for it).
pub fn can_start(domain: &Domain) -> Result<(), RotateError> {
    if domain.is_sandbox() {
        Err(RotateError::Sandbox)
    } else if domain.dkim_rotation.pending.is_some() {
        Err(RotateError::AlreadyPending)
    } else {
        Ok(())
    }
}

/// What [`advance`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Advanced {
    /// The pending pair became active.
    pub switched: bool,
    /// Retiring pairs retired.
    pub retired: usize,
    /// Retired pairs left the list.
    pub dropped: usize,
}

impl Advanced {
    /// Whether any pair changed state.
    pub fn changed(&self) -> bool {
        self.switched || self.retired > 0 || self.dropped > 0
    }
}

/// Moves the domain's pairs on at `now`, given the statuses its records have now (a check
/// just stored them):
/// 1. a pending pair whose two records are both `Verified` becomes active, and the active
///    pair becomes retiring until `now + retire_after`; the domain's status is then that of
///    the new active records;
/// 2. a retiring pair past its `retire_at` retires: its private keys are dropped (only the
///    public values its records show are kept), listed until `now + retire_after`;
/// 3. a retired pair past its `drop_at` leaves the list, with its records.
pub fn advance(domain: &mut Domain, now: DateTime<Utc>, retire_after: Duration) -> Advanced {
    let mut done = Advanced::default();
    if let Some(pending) = domain.dkim_rotation.pending.take() {
        if records_verified(domain, &pending) {
            let replaced = std::mem::replace(&mut domain.dkim, pending);
            domain.dkim_rotation.retiring.push(RetiringDkimKeys {
                keys: replaced,
                replaced_at: now,
                retire_at: now + retire_after,
            });
            done.switched = true;
        } else {
            domain.dkim_rotation.pending = Some(pending);
        }
    }
    let (due, kept): (Vec<_>, Vec<_>) =
        std::mem::take(&mut domain.dkim_rotation.retiring).into_iter().partition(|r| r.retire_at <= now);
    domain.dkim_rotation.retiring = kept;
    for retiring in due {
        let retired = retire(domain, &retiring.keys, now, retire_after);
        domain.dkim_rotation.retired.push(retired);
        done.retired += 1;
    }
    let before = domain.dkim_rotation.retired.len();
    domain.dkim_rotation.retired.retain(|r| r.drop_at > now);
    done.dropped = before - domain.dkim_rotation.retired.len();
    if done.changed() {
        let mut records = std::mem::take(&mut domain.records);
        arrange_records(domain, &mut records);
        domain.records = records;
    }
    if done.switched {
        domain.status = dns_records::overall_status(domain);
        if domain.status == DomainStatus::Verified && domain.verified_at.is_none() {
            domain.verified_at = Some(now);
        }
    }
    done
}

/// Whether both records of `keys` are listed and `Verified`.
fn records_verified(domain: &Domain, keys: &DkimKeys) -> bool {
    let verified = |kind: RecordKind, selector: &str| {
        domain.records.iter().any(|r| {
            r.kind == kind
                && r.status == RecordStatus::Verified
                && r.name.split_once("._domainkey.").is_some_and(|(s, _)| s == selector)
        })
    };
    verified(RecordKind::Dkim, &keys.rsa_selector) && verified(RecordKind::Dkim2, &keys.ed25519_selector)
}

/// The retired form of a pair: its selectors and public values, no private key. The public
/// values come from the listed records (what the owner published), or from the keys if the
/// records are missing.
fn retire(domain: &Domain, keys: &DkimKeys, now: DateTime<Utc>, retire_after: Duration) -> RetiredDkimKeys {
    let listed = |selector: &str| {
        domain
            .records
            .iter()
            .find(|r| r.name.split_once("._domainkey.").is_some_and(|(s, _)| s == selector))
            .and_then(|r| r.value.split("p=").nth(1).map(|p| p.trim().trim_end_matches(';').to_owned()))
    };
    let rsa_public =
        listed(&keys.rsa_selector).or_else(|| dkim_keys::rsa_public_key_base64(keys).ok()).unwrap_or_default();
    let ed25519_public =
        listed(&keys.ed25519_selector).or_else(|| dkim_keys::ed25519_public_key_base64(keys).ok()).unwrap_or_default();
    RetiredDkimKeys {
        rsa_selector: keys.rsa_selector.clone(),
        rsa_public,
        ed25519_selector: keys.ed25519_selector.clone(),
        ed25519_public,
        retired_at: now,
        drop_at: now + retire_after,
    }
}

#[cfg(test)]
mod tests;
