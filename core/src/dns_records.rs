//! The DNS records a sending domain must publish (docs/api.md#domains) and their verification:
//! what to ask for ([`records_for`]) and whether DNS says it ([`verify`]).
//!
//! The checks mirror what receivers do with the records (RFC 7208 SPF, RFC 6376/8463 DKIM,
//! RFC 7489 DMARC) closely enough that `Verified` means "receivers will see it", without
//! being a full SPF or DMARC evaluator: the DNS answers are judged, not the whole policy.

use std::future::Future;

use chrono::{DateTime, Utc};

use crate::dkim_keys::{self, DkimKeyError};
use crate::domain_name::{DnsName, DomainName};
use crate::model::{DkimKeyState, DkimKeys, DnsRecord, Domain, DomainStatus, RecordKind, RecordStatus};
use crate::ports::{DnsCheck, DnsError};

#[cfg(test)]
mod return_path_tests;
#[cfg(test)]
mod tests;

/// The SPF term Tidings asks for unless the operator configures one: `ip4:127.0.0.1`.
///
/// Core cannot know the operator's outbound addresses, and every choice it could make alone
/// is wrong somewhere. Customers merge this term into the SPF record they already have, so
/// the default must never make that record worse:
/// - not `a` or `mx`: those authorise the *customer's* web and mail hosts (often shared
///   hosting), not the host Tidings sends from, so they are wrong for a third-party sender;
/// - not an `include:` of a placeholder domain: an include whose target has no SPF record
///   is a permanent error (RFC 7208 §5.2) that breaks SPF for all the customer's mail, and
///   every include spends one of the ten DNS lookups SPF allows.
///
/// `ip4:127.0.0.1` costs no lookup and cannot error; it authorises loopback only, which is
/// right for a development install delivering to a local sink and a no-op anywhere else.
/// A production server sets [`RecordPolicy::spf_mechanism`] to
/// `include:_spf.<operator domain>` (or its `ip4:`/`ip6:` ranges).
pub const DEFAULT_SPF_MECHANISM: &str = "ip4:127.0.0.1";

/// The DMARC record Tidings recommends by default: monitor only, rejects nothing.
pub const DEFAULT_DMARC_VALUE: &str = "v=DMARC1; p=none;";

/// Suggested TTL of the records, in seconds.
pub const DEFAULT_TTL: u32 = 3600;

/// The label of a domain's return-path subdomain: `bounces.<domain>` (contract §12, "Return
/// path per domain"). Fixed, so that a bounce to it names its domain without a lookup.
pub const RETURN_PATH_LABEL: &str = "bounces";

/// The preference of the return path's `MX` record. Its only exchange is the bounce
/// listener, so any value works; 10 is what DNS hosts suggest.
pub const RETURN_PATH_MX_PREFERENCE: u16 = 10;

/// What the generated records say where the operator has a choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPolicy {
    /// The SPF term(s) that authorise Tidings' outbound hosts, e.g. `include:_spf.example.net`;
    /// several terms are separated by spaces and all are required. See
    /// [`DEFAULT_SPF_MECHANISM`] for the default and why.
    pub spf_mechanism: String,
    /// The full value of the recommended DMARC record.
    pub dmarc_value: String,
    /// Suggested TTL of every record, in seconds.
    pub ttl: u32,
    /// A warning about `spf_mechanism` that the SPF record carries (its `warning`) for as long
    /// as it asks for that term: the embedder knows how mail leaves, core does not. The server
    /// sets it when it delivers by relay or MX and its operator left the term at
    /// [`DEFAULT_SPF_MECHANISM`], which authorises loopback only. It changes no check: a
    /// customer who published exactly what was asked is `Verified`, and the warning says what
    /// is wrong with what was asked.
    pub spf_warning: Option<String>,
    /// The public name of the host whose SMTP listener takes bounces
    /// (`TIDINGS_INBOUND_MX_HOST`). Set, every domain's records also ask for its return-path
    /// subdomain: an `MX` to this host and an SPF `TXT` with `spf_mechanism`. Unset, no
    /// return-path records are asked for and mail keeps the server-wide return path. Also
    /// the host an inbound domain's `MX` names ([`inbound_mx`]).
    pub return_path_host: Option<DnsName>,
}

impl Default for RecordPolicy {
    fn default() -> Self {
        Self {
            spf_mechanism: DEFAULT_SPF_MECHANISM.to_owned(),
            dmarc_value: DEFAULT_DMARC_VALUE.to_owned(),
            ttl: DEFAULT_TTL,
            spf_warning: None,
            return_path_host: None,
        }
    }
}

/// The records to publish for `domain`, in the order SPF, DKIM (RSA), DKIM2 (Ed25519),
/// DMARC, then, when the policy names a `return_path_host`, the return path's `MX` and SPF
/// `TXT` on `bounces.<domain>`; all `Pending`, names fully qualified without a trailing dot;
/// both SPF records carry the policy's `spf_warning`. Fails only if the stored private keys
/// do not parse.
///
/// The return path's SPF ends in `-all`, not `~all`: nothing but Tidings sends with that
/// subdomain as envelope sender, so anything else claiming it is forged.
pub fn records_for(
    domain: &DomainName,
    keys: &DkimKeys,
    policy: &RecordPolicy,
) -> Result<Vec<DnsRecord>, DkimKeyError> {
    let record = |kind, name: String, value: String| pending_txt(kind, name, value, policy);
    let spf = DnsRecord {
        warning: policy.spf_warning.clone(),
        ..record(RecordKind::Spf, domain.as_str().to_owned(), format!("v=spf1 {} ~all", policy.spf_mechanism))
    };
    let return_path = policy.return_path_host.as_ref().map(|host| {
        let name = domain.with_prefix(RETURN_PATH_LABEL);
        let mx = DnsRecord {
            record_type: "MX".to_owned(),
            priority: Some(RETURN_PATH_MX_PREFERENCE),
            ..record(RecordKind::ReturnPathMx, name.clone(), host.as_str().to_owned())
        };
        let spf = DnsRecord {
            warning: policy.spf_warning.clone(),
            ..record(RecordKind::ReturnPathSpf, name, format!("v=spf1 {} -all", policy.spf_mechanism))
        };
        [mx, spf]
    });
    let mut records = vec![spf];
    records.extend(dkim_records(domain, keys, policy)?);
    records.push(record(RecordKind::Dmarc, domain.with_prefix("_dmarc"), policy.dmarc_value.clone()));
    records.extend(return_path.into_iter().flatten());
    Ok(records)
}

/// The `DKIM` (RSA) and `DKIM2` (Ed25519) records of one key pair, `Pending`. Fails only if
/// the private keys do not parse.
pub fn dkim_records(
    domain: &DomainName,
    keys: &DkimKeys,
    policy: &RecordPolicy,
) -> Result<[DnsRecord; 2], DkimKeyError> {
    let rsa = dkim_keys::rsa_public_key_base64(keys)?;
    let ed25519 = dkim_keys::ed25519_public_key_base64(keys)?;
    Ok(public_dkim_records(domain, (&keys.rsa_selector, &rsa), (&keys.ed25519_selector, &ed25519), policy))
}

/// The two DKIM records of a pair from its selectors and base64 public keys (a retired pair
/// has nothing else).
fn public_dkim_records(
    domain: &DomainName,
    (rsa_selector, rsa): (&str, &str),
    (ed25519_selector, ed25519): (&str, &str),
    policy: &RecordPolicy,
) -> [DnsRecord; 2] {
    [
        pending_txt(RecordKind::Dkim, dkim_name(domain, rsa_selector), format!("v=DKIM1; k=rsa; p={rsa}"), policy),
        pending_txt(
            RecordKind::Dkim2,
            dkim_name(domain, ed25519_selector),
            format!("v=DKIM1; k=ed25519; p={ed25519}"),
            policy,
        ),
    ]
}

/// A `Pending` TXT record never checked.
fn pending_txt(kind: RecordKind, name: String, value: String, policy: &RecordPolicy) -> DnsRecord {
    DnsRecord {
        kind,
        record_type: "TXT".to_owned(),
        name,
        value,
        ttl: policy.ttl,
        status: RecordStatus::Pending,
        last_checked_at: None,
        error: None,
        warning: None,
        priority: None,
    }
}

/// Every record `domain` asks for now: [`records_for`] its active pair, then the DKIM
/// records of its other pairs (pending, retiring, retired), in the order of
/// [`arrange_records`]. All `Pending`, except that retired records keep the status they
/// last had in `domain.records` (they are no longer checked: they are safe to remove).
pub fn domain_records(domain: &Domain, policy: &RecordPolicy) -> Result<Vec<DnsRecord>, DkimKeyError> {
    let name = &domain.name;
    let rotation = &domain.dkim_rotation;
    let mut records = records_for(name, &domain.dkim, policy)?;
    if let Some(pending) = &rotation.pending {
        records.extend(dkim_records(name, pending, policy)?);
    }
    for retiring in &rotation.retiring {
        records.extend(dkim_records(name, &retiring.keys, policy)?);
    }
    for retired in &rotation.retired {
        let pair = public_dkim_records(
            name,
            (&retired.rsa_selector, &retired.rsa_public),
            (&retired.ed25519_selector, &retired.ed25519_public),
            policy,
        );
        records.extend(pair.into_iter().map(|record| {
            match domain.records.iter().find(|r| r.kind == record.kind && r.name == record.name) {
                Some(last) => DnsRecord { status: last.status, last_checked_at: last.last_checked_at, ..record },
                None => record,
            }
        }));
    }
    if let Some(mx) = inbound_mx(domain, policy) {
        records.push(mx);
    }
    arrange_records(domain, &mut records);
    Ok(records)
}

/// The preference of an inbound domain's `MX` record, as for the return path's.
pub const INBOUND_MX_PREFERENCE: u16 = 10;

/// The `MX` an inbound domain publishes (contract §13): at the domain itself, naming the
/// listener's host. `None` when the domain does not receive mail, or the server names no
/// host (`TIDINGS_INBOUND_MX_HOST`; enabling inbound mail is refused then).
pub fn inbound_mx(domain: &Domain, policy: &RecordPolicy) -> Option<DnsRecord> {
    let host = policy.return_path_host.as_ref().filter(|_| domain.inbound)?;
    Some(DnsRecord {
        record_type: "MX".to_owned(),
        priority: Some(INBOUND_MX_PREFERENCE),
        ..pending_txt(RecordKind::InboundMx, domain.name.as_str().to_owned(), host.as_str().to_owned(), policy)
    })
}

/// Puts `records` in the order the API lists them: SPF, the DKIM records by the state of
/// their pair (Active, Pending, Retiring, Retired; RSA before Ed25519 within a pair), DMARC,
/// the return path's; and drops DKIM records of pairs `domain` no longer has. The active
/// pair's records come first of their kinds, where lookups by kind find them.
pub fn arrange_records(domain: &Domain, records: &mut Vec<DnsRecord>) {
    records
        .retain(|r| !matches!(r.kind, RecordKind::Dkim | RecordKind::Dkim2) || domain.dkim_record_state(r).is_some());
    records.sort_by_key(|r| {
        let kind = match r.kind {
            RecordKind::Spf => 0,
            RecordKind::Dkim | RecordKind::Dkim2 => 1,
            RecordKind::Dmarc => 2,
            RecordKind::ReturnPathMx => 3,
            RecordKind::ReturnPathSpf => 4,
            RecordKind::InboundMx => 5,
        };
        let state = domain.dkim_record_state(r).map(|(_, state)| state);
        (kind, state, r.kind == RecordKind::Dkim2)
    });
}

/// Checks every record against DNS and returns the domain with per-record
/// status/error/lastCheckedAt, overall status, `verified_at` and `last_checked_at`.
///
/// - The records are regenerated from the domain's keys and `policy` first, so a changed
///   operator setting (SPF term, DMARC value, TTL) is both shown and checked, and the SPF
///   warning comes and goes with the term it is about (a warning never fails a record).
/// - Overall: `Verified` if SPF, DKIM and DKIM2 are all verified, `PartiallyVerified` if
///   some are, `Failed` if none. DMARC is checked and reported but never counts.
/// - `verified_at` is set the first time the domain is `Verified` and never cleared: it
///   records when the domain was first proven, while `status` says what DNS says now.
/// - Never fails: a DNS error (NXDOMAIN, timeout, SERVFAIL) fails that record only, with
///   the error's text. The lookups run concurrently.
/// - The DKIM records of a rotation are checked like the active pair's (a retired pair's
///   are not looked up); only the active pair's count toward the status. Whether a pending
///   pair may take over is for the rotation rules (`dkim_rotation.rs`) to decide.
/// - DMARC is looked up at `_dmarc.<domain>` only, not at the organisational domain a
///   receiver would fall back to (that needs the public suffix list).
pub async fn verify(domain: &Domain, policy: &RecordPolicy, dns: &dyn DnsCheck, now: DateTime<Utc>) -> Domain {
    verify_with(domain, policy, |name| txt_at(dns, name), |name| mx_at(dns, name), now).await
}

/// What one TXT lookup gave.
type Answer = Result<Vec<String>, DnsError>;

/// What one MX lookup gave.
type MxAnswer = Result<Vec<(u16, String)>, DnsError>;

/// [`verify`] with the lookups as functions of the record name, so tests can drive the
/// verification itself with any name.
async fn verify_with<F, Fut, M, MFut>(
    domain: &Domain,
    policy: &RecordPolicy,
    lookup: F,
    lookup_mx: M,
    now: DateTime<Utc>,
) -> Domain
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Answer>,
    M: Fn(String) -> MFut,
    MFut: Future<Output = MxAnswer>,
{
    let (records, key_error) = match domain_records(domain, policy) {
        Ok(records) => (records, None),
        Err(error) => (domain.records.clone(), Some(error)),
    };
    let checks = records.into_iter().map(|record| {
        let (lookup, lookup_mx, key_error) = (&lookup, &lookup_mx, &key_error);
        async move {
            if domain.dkim_record_state(&record).is_some_and(|(_, state)| state == DkimKeyState::Retired) {
                // Safe to remove: whether it is still there no longer matters.
                return record;
            }
            if matches!(record.kind, RecordKind::ReturnPathMx | RecordKind::InboundMx) {
                let outcome = match lookup_mx(record.name.clone()).await {
                    Ok(hosts) => check_mx(&record, &hosts),
                    Err(error) => Err(error.to_string()),
                };
                return checked(record, outcome, now);
            }
            let outcome = match (key_error, record.kind) {
                (Some(error), RecordKind::Dkim | RecordKind::Dkim2) => Err(format!(
                    "{error}; Tidings cannot sign for this domain, delete and add it again to get new keys"
                )),
                _ => match lookup(record.name.clone()).await {
                    Ok(txts) => check(&record, &txts, policy),
                    Err(error) => Err(error.to_string()),
                },
            };
            checked(record, outcome, now)
        }
    });
    let records = futures::future::join_all(checks).await;
    let mut verified = Domain { records, last_checked_at: Some(now), ..domain.clone() };
    verified.status = overall_status(&verified);
    if verified.status == DomainStatus::Verified && verified.verified_at.is_none() {
        verified.verified_at = Some(now);
    }
    verified
}

/// `<selector>._domainkey.<domain>`.
fn dkim_name(domain: &DomainName, selector: &str) -> String {
    domain.with_prefix(&format!("{selector}._domainkey"))
}

/// TXT records at a record name through the port.
async fn txt_at(dns: &dyn DnsCheck, name: String) -> Answer {
    dns.txt_records(&lookup_name(name)?).await
}

/// MX records at a record name through the port.
async fn mx_at(dns: &dyn DnsCheck, name: String) -> MxAnswer {
    dns.mx_records(&lookup_name(name)?).await
}

/// A record name as the port takes it. Record names are built from a valid domain and
/// generated selectors, so the parse cannot fail in practice; if it did, the record fails
/// with the reason instead of panicking.
fn lookup_name(name: String) -> Result<DnsName, DnsError> {
    DnsName::parse(&name).map_err(|error| DnsError::Failed {
        reason: format!("Tidings cannot look up this name: it {error}"),
        name: name.clone(),
    })
}

/// The return path's or an inbound domain's `MX`: the listener's host among the exchanges.
/// Other exchanges are allowed (a backup MX of the customer's), but mail may then land
/// elsewhere, so the host must have the best preference or share it.
fn check_mx(record: &DnsRecord, hosts: &[(u16, String)]) -> Result<(), String> {
    let name = &record.name;
    let expected = record.value.as_str();
    let Some(best) = hosts.iter().map(|(preference, _)| *preference).min() else {
        return Err(format!("no MX record at {name}; publish one pointing to {expected}"));
    };
    let found = || hosts.iter().map(|(p, host)| format!("{p} {host}")).collect::<Vec<_>>().join(", ");
    match hosts.iter().find(|(_, host)| host.eq_ignore_ascii_case(expected)) {
        Some((preference, _)) if *preference == best => Ok(()),
        Some(_) => Err(format!(
            "the MX records at {name} prefer another host to {expected}, so mail would go there: found {}",
            found()
        )),
        None => Err(format!("the MX record at {name} does not point to {expected}: found {}", found())),
    }
}

/// The record with the outcome of its check.
fn checked(record: DnsRecord, outcome: Result<(), String>, now: DateTime<Utc>) -> DnsRecord {
    let (status, error) = match outcome {
        Ok(()) => (RecordStatus::Verified, None),
        Err(error) => (RecordStatus::Failed, Some(error)),
    };
    DnsRecord { status, error, last_checked_at: Some(now), ..record }
}

/// Verified iff all required records are; none verified is Failed.
pub(crate) fn overall_status(domain: &Domain) -> DomainStatus {
    let required = RecordKind::ALL.into_iter().filter(|kind| kind.is_required());
    let (mut verified, mut wanted) = (0, 0);
    for kind in required {
        wanted += 1;
        verified += usize::from(domain.record_status(kind) == RecordStatus::Verified);
    }
    match verified {
        0 => DomainStatus::Failed,
        n if n == wanted => DomainStatus::Verified,
        _ => DomainStatus::PartiallyVerified,
    }
}

/// Judges the TXT strings found at `record.name` (already joined per record).
fn check(record: &DnsRecord, txts: &[String], policy: &RecordPolicy) -> Result<(), String> {
    if txts.is_empty() {
        return Err(format!("no TXT record at {}", record.name));
    }
    match record.kind {
        RecordKind::Spf | RecordKind::ReturnPathSpf => check_spf(&record.name, txts, &policy.spf_mechanism),
        RecordKind::Dkim | RecordKind::Dkim2 => check_dkim(&record.name, &record.value, txts),
        RecordKind::Dmarc => check_dmarc(&record.name, txts),
        // Checked by `check_mx`, never as TXT.
        RecordKind::ReturnPathMx | RecordKind::InboundMx => Err(format!("{} is an MX record, not TXT", record.name)),
    }
}

/// Exactly one `v=spf1` record, containing every required term before its `all`.
fn check_spf(name: &str, txts: &[String], mechanism: &str) -> Result<(), String> {
    let spf: Vec<&String> = txts.iter().filter(|txt| is_spf(txt)).collect();
    let record = match spf.as_slice() {
        [] => {
            return Err(format!(
                "no SPF record at {name}: found {} TXT record(s), none starting with v=spf1; expected one containing {mechanism}",
                txts.len()
            ));
        }
        [record] => *record,
        several => {
            return Err(format!(
                "found {} SPF records at {name}; there must be exactly one (RFC 7208: receivers treat several as a permanent error), so merge them into one that contains {mechanism}",
                several.len()
            ));
        }
    };
    // Receivers stop at `all`: a term after it never authorises anything.
    let terms: Vec<&str> = record.split_ascii_whitespace().skip(1).map(without_pass_qualifier).collect();
    let all_at = terms.iter().position(|term| term.eq_ignore_ascii_case("all") || is_qualified_all(term));
    for required in mechanism.split_ascii_whitespace().map(without_pass_qualifier) {
        match terms.iter().position(|term| term.eq_ignore_ascii_case(required)) {
            Some(at) if all_at.is_none_or(|all| at < all) => {}
            Some(_) => {
                return Err(format!(
                    "the SPF record at {name} has {required} after its \"all\", where receivers never reach it; move it before: found \"{}\"",
                    abbreviate(record)
                ));
            }
            None => {
                return Err(format!(
                    "the SPF record at {name} does not contain {required}; add it before the \"all\": found \"{}\"",
                    abbreviate(record)
                ));
            }
        }
    }
    Ok(())
}

/// A record whose first term is `v=spf1` (RFC 7208 §4.5: case-insensitive).
fn is_spf(txt: &str) -> bool {
    txt.split_ascii_whitespace().next().is_some_and(|version| version.eq_ignore_ascii_case("v=spf1"))
}

/// `+` is the default qualifier, so `+include:x` is `include:x`.
fn without_pass_qualifier(term: &str) -> &str {
    term.strip_prefix('+').unwrap_or(term)
}

fn is_qualified_all(term: &str) -> bool {
    term.len() == 4 && term.starts_with(['-', '~', '?']) && term[1..].eq_ignore_ascii_case("all")
}

/// A TXT record at the selector name with our `p=` and `k=` (and `v=DKIM1` if it has a `v=`).
fn check_dkim(name: &str, expected_value: &str, txts: &[String]) -> Result<(), String> {
    let expected = DkimKeyRecord::parse(expected_value);
    let found: Vec<DkimKeyRecord> =
        txts.iter().map(|txt| DkimKeyRecord::parse(txt)).filter(|r| r.p.is_some()).collect();
    if found.is_empty() {
        return Err(format!(
            "the TXT record at {name} is not a DKIM key (it has no p= tag): found \"{}\"",
            abbreviate(&txts[0])
        ));
    }
    if found.iter().any(|r| r.p == expected.p && r.key_type() == expected.key_type() && r.version_ok()) {
        return Ok(());
    }
    if let Some(same_key) = found.iter().find(|r| r.p == expected.p) {
        return Err(if same_key.key_type() == expected.key_type() {
            format!("the DKIM record at {name} has v={}; expected v=DKIM1", same_key.v.as_deref().unwrap_or(""))
        } else {
            format!(
                "the DKIM record at {name} has the right key but k={}; expected k={}",
                same_key.key_type(),
                expected.key_type()
            )
        });
    }
    if found.iter().any(|r| r.p.as_deref() == Some("")) {
        return Err(format!("the DKIM key at {name} is revoked (empty p=); publish the value shown instead"));
    }
    Err(format!(
        "found a different DKIM key at {name}: its p= is not the key Tidings signs with for this selector; replace the record with the value shown"
    ))
}

/// The tags of a DKIM key record that the check compares (RFC 6376 §3.6.1).
#[derive(Debug, PartialEq, Eq)]
struct DkimKeyRecord {
    v: Option<String>,
    k: Option<String>,
    /// Without whitespace: long keys come split into strings, and people paste them with
    /// line breaks.
    p: Option<String>,
}

impl DkimKeyRecord {
    fn parse(txt: &str) -> Self {
        let mut record = Self { v: None, k: None, p: None };
        for (name, value) in tags(txt) {
            // Duplicate tags make a record invalid (RFC 6376 §3.2); keeping the first is
            // enough to compare keys.
            let slot = match name {
                "v" => &mut record.v,
                "k" => &mut record.k,
                "p" => &mut record.p,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(if name == "p" { value.split_whitespace().collect() } else { value.to_owned() });
            }
        }
        record
    }

    /// `k=` with its RFC 6376 default.
    fn key_type(&self) -> &str {
        self.k.as_deref().unwrap_or("rsa")
    }

    fn version_ok(&self) -> bool {
        self.v.as_deref().is_none_or(|v| v == "DKIM1")
    }
}

/// A `tag=value; ...` list (DKIM, DMARC), names and values trimmed, specs without `=` skipped.
fn tags(txt: &str) -> impl Iterator<Item = (&str, &str)> {
    txt.split(';').filter_map(|spec| spec.split_once('=')).map(|(name, value)| (name.trim(), value.trim()))
}

/// Exactly one record starting with `v=DMARC1` (RFC 7489 §6.6.3 ignores DMARC when there
/// are several).
fn check_dmarc(name: &str, txts: &[String]) -> Result<(), String> {
    let dmarc = txts.iter().filter(|txt| tags(txt).next() == Some(("v", "DMARC1"))).count();
    match dmarc {
        1 => Ok(()),
        0 => Err(format!("no DMARC record at {name}: found {} TXT record(s), none starting with v=DMARC1", txts.len())),
        several => Err(format!(
            "found {several} DMARC records at {name}; receivers ignore DMARC when there is more than one (RFC 7489), so keep one"
        )),
    }
}

/// A found value short enough for an error message.
fn abbreviate(value: &str) -> String {
    const MAX: usize = 120;
    match value.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &value[..end]),
        None => value.to_owned(),
    }
}
