use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::TimeZone;
use proptest::prelude::*;

use super::*;
use crate::dns_records::{RecordPolicy, dkim_records, records_for, verify};
use crate::domain_name::{DnsName, DomainName};
use crate::ids::{DomainId, WorkspaceId};
use crate::model::{DkimKeyState, DomainKind};
use crate::ports::{DnsCheck, DnsError, SystemRandom};

const WEEK: Duration = Duration::days(7);

fn at(hours: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap() + Duration::hours(hours)
}

/// The shared test keys under selectors of their own (`td<n>r`, `td<n>e`): generating RSA
/// keys per rotation would make the property test crawl, and the lifecycle tells pairs apart
/// by selector only.
fn keys(n: usize) -> DkimKeys {
    DkimKeys {
        rsa_selector: format!("td{n}r"),
        ed25519_selector: format!("td{n}e"),
        created_at: Some(at(0)),
        ..crate::dkim_keys::test_keys().clone()
    }
}

fn domain() -> Domain {
    let name = DomainName::parse("rotate.example.com").unwrap();
    let keys = keys(0);
    let mut records = records_for(&name, &keys, &RecordPolicy::default()).unwrap();
    for record in &mut records {
        record.status = RecordStatus::Verified;
    }
    Domain {
        id: DomainId::new_at(at(0), &SystemRandom),
        workspace_id: WorkspaceId::new_at(at(0), &SystemRandom),
        name,
        status: DomainStatus::Verified,
        records,
        dkim: keys,
        dkim_rotation: Default::default(),
        open_tracking: false,
        click_tracking: false,
        created_at: at(0),
        verified_at: Some(at(0)),
        last_checked_at: Some(at(0)),
        kind: DomainKind::Customer,
        inbound: false,
    }
}

fn rotated(domain: &Domain, n: usize) -> Domain {
    let keys = keys(n);
    let records = dkim_records(&domain.name, &keys, &RecordPolicy::default()).unwrap();
    start(domain, keys, records).unwrap()
}

/// DNS as a map from name to TXT values; unknown names are NXDOMAIN.
#[derive(Default)]
struct FakeDns(Mutex<HashMap<String, Vec<String>>>);

impl FakeDns {
    fn publish(&self, domain: &Domain, selector: &str) {
        let mut zone = self.0.lock().unwrap();
        for record in &domain.records {
            if domain.dkim_record_state(record).is_some_and(|(s, _)| s == selector) || record.kind == RecordKind::Spf {
                zone.insert(record.name.clone(), vec![record.value.clone()]);
            }
        }
    }

    fn unpublish(&self, domain: &Domain, selector: &str) {
        self.0.lock().unwrap().remove(&format!("{selector}._domainkey.{}", domain.name));
    }

    fn has(&self, domain: &Domain, selector: &str) -> bool {
        self.0.lock().unwrap().contains_key(&format!("{selector}._domainkey.{}", domain.name))
    }
}

#[async_trait]
impl DnsCheck for FakeDns {
    async fn txt_records(&self, name: &DnsName) -> Result<Vec<String>, DnsError> {
        let zone = self.0.lock().unwrap();
        zone.get(name.as_str()).cloned().ok_or_else(|| DnsError::NxDomain(name.to_string()))
    }

    async fn mx_records(&self, name: &DnsName) -> Result<Vec<(u16, String)>, DnsError> {
        Err(DnsError::NxDomain(name.to_string()))
    }
}

/// What the use case does on a check: verify, then advance.
fn check(domain: &Domain, dns: &FakeDns, now: DateTime<Utc>) -> (Domain, Advanced) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut checked = runtime.block_on(verify(domain, &RecordPolicy::default(), dns, now));
    let advanced = advance(&mut checked, now, WEEK);
    (checked, advanced)
}

fn states(domain: &Domain) -> Vec<(RecordKind, String, DkimKeyState)> {
    domain
        .records
        .iter()
        .filter_map(|r| domain.dkim_record_state(r).map(|(selector, state)| (r.kind, selector, state)))
        .collect()
}

#[test]
fn a_rotation_lists_the_new_pair_pending_beside_the_active_one() {
    let domain = rotated(&domain(), 1);
    assert_eq!(
        states(&domain),
        [
            (RecordKind::Dkim, "td0r".to_owned(), DkimKeyState::Active),
            (RecordKind::Dkim2, "td0e".to_owned(), DkimKeyState::Active),
            (RecordKind::Dkim, "td1r".to_owned(), DkimKeyState::Pending),
            (RecordKind::Dkim2, "td1e".to_owned(), DkimKeyState::Pending),
        ]
    );
    let pending: Vec<_> = domain.records.iter().filter(|r| r.name.starts_with("td1")).collect();
    assert!(pending.iter().all(|r| r.status == RecordStatus::Pending));
    assert_eq!(domain.dkim.rsa_selector, "td0r", "the active pair still signs");
    assert_eq!(domain.records.first().map(|r| r.kind), Some(RecordKind::Spf));
    assert_eq!(domain.records.last().map(|r| r.kind), Some(RecordKind::Dmarc));
    assert!(domain.needs_recheck(), "the pending records are re-checked");
    assert_eq!(domain.rotation_due_from(), None, "no automatic rotation while one is pending");
}

#[test]
fn one_rotation_at_a_time_and_never_the_sandbox() {
    let domain = rotated(&domain(), 1);
    let records = dkim_records(&domain.name, &keys(2), &RecordPolicy::default()).unwrap();
    assert_eq!(start(&domain, keys(2), records.clone()), Err(RotateError::AlreadyPending));
    let sandbox = Domain { kind: DomainKind::Sandbox, ..self::domain() };
    assert_eq!(start(&sandbox, keys(2), records), Err(RotateError::Sandbox));
    assert_eq!(sandbox.rotation_due_from(), None);
}

#[test]
fn the_new_pair_signs_only_once_both_of_its_records_verify() {
    let dns = FakeDns::default();
    let old = domain();
    dns.publish(&old, "td0r");
    dns.publish(&old, "td0e");
    let domain = rotated(&old, 1);

    dns.publish(&domain, "td1r");
    let (one, advanced) = check(&domain, &dns, at(1));
    assert!(!advanced.switched, "only the RSA record is published");
    assert_eq!(one.dkim.rsa_selector, "td0r");
    assert_eq!(one.status, DomainStatus::Verified, "the active records still verify");

    dns.publish(&domain, "td1e");
    let (switched, advanced) = check(&one, &dns, at(2));
    assert!(advanced.switched);
    assert_eq!((switched.dkim.rsa_selector.as_str(), switched.dkim.ed25519_selector.as_str()), ("td1r", "td1e"));
    assert_eq!(switched.status, DomainStatus::Verified);
    assert_eq!(
        states(&switched),
        [
            (RecordKind::Dkim, "td1r".to_owned(), DkimKeyState::Active),
            (RecordKind::Dkim2, "td1e".to_owned(), DkimKeyState::Active),
            (RecordKind::Dkim, "td0r".to_owned(), DkimKeyState::Retiring),
            (RecordKind::Dkim2, "td0e".to_owned(), DkimKeyState::Retiring),
        ]
    );
    assert_eq!(switched.dkim_retire_at("td0r"), Some(at(2) + WEEK));
    assert_eq!(switched.record_status(RecordKind::Dkim), RecordStatus::Verified, "lookups by kind find the active");
}

#[test]
fn a_replaced_pair_retires_after_the_delay_loses_its_private_keys_then_leaves_the_list() {
    let dns = FakeDns::default();
    let old = domain();
    let domain = rotated(&old, 1);
    for selector in ["td0r", "td0e", "td1r", "td1e"] {
        dns.publish(&domain, selector);
    }
    let (switched, _) = check(&domain, &dns, at(1));

    let (still, advanced) = check(&switched, &dns, at(1) + WEEK - Duration::seconds(1));
    assert!(!advanced.changed(), "a second before its time it is still retiring");
    assert_eq!(still.dkim_rotation.retiring.len(), 1);

    let (retired, advanced) = check(&still, &dns, at(1) + WEEK);
    assert_eq!(advanced.retired, 1);
    assert!(retired.dkim_rotation.retiring.is_empty());
    let gone = &retired.dkim_rotation.retired[0];
    assert_eq!((gone.rsa_selector.as_str(), gone.ed25519_selector.as_str()), ("td0r", "td0e"));
    assert_eq!(gone.rsa_public, crate::dkim_keys::rsa_public_key_base64(&old.dkim).unwrap());
    let json = serde_json::to_string(&retired).unwrap();
    let old_private = serde_json::to_value(&old.dkim).unwrap()["rsa_private_pkcs8"].as_str().unwrap().to_owned();
    assert_eq!(json.matches(&old_private).count(), 1, "only the active pair (the same test key) is left");
    assert!(states(&retired).contains(&(RecordKind::Dkim, "td0r".to_owned(), DkimKeyState::Retired)));
    assert!(retired.needs_recheck(), "it must still leave the list");

    // Removed from DNS: a retired record is no longer checked, so it does not fail.
    dns.unpublish(&retired, "td0r");
    let (listed, _) = check(&retired, &dns, at(2) + WEEK);
    let record = listed.records.iter().find(|r| r.name.starts_with("td0r.")).unwrap();
    assert_eq!(record.status, RecordStatus::Verified);

    let (dropped, advanced) = check(&listed, &dns, at(1) + WEEK + WEEK);
    assert_eq!(advanced.dropped, 1);
    assert!(dropped.dkim_rotation.is_empty());
    assert_eq!(states(&dropped).len(), 2, "only the active records are left");
    assert!(!dropped.needs_recheck());
}

#[test]
fn domains_stored_before_rotation_read_as_active_keys_of_unknown_age() {
    let domain = domain();
    let mut old = serde_json::to_value(&domain).unwrap();
    old.as_object_mut().unwrap().remove("dkim_rotation");
    old["dkim"].as_object_mut().unwrap().remove("created_at");
    assert!(old.get("dkim_rotation").is_none());
    let read: Domain = serde_json::from_value(old).unwrap();
    assert_eq!(read.dkim.created_at, None, "unknown age");
    assert_eq!(read.keys_made_at(), read.created_at, "made with the domain, as every key was before");
    assert!(read.dkim_rotation.is_empty());
    assert_eq!(states(&read)[0], (RecordKind::Dkim, "td0r".to_owned(), DkimKeyState::Active));
    assert_eq!(read.rotation_due_from(), Some(read.created_at));
    // A never-rotated domain is stored as before: no rotation field.
    assert!(serde_json::to_value(&read).unwrap().get("dkim_rotation").is_none());
}

fn cases() -> u32 {
    crate::outbound::test_support::proptest_cases(64)
}

#[derive(Debug, Clone)]
enum Step {
    Rotate,
    /// Publish the pair at this index of those the domain lists (0 the active one), RSA, Ed25519 or both.
    Publish(usize, u8),
    /// Remove a record of the pair at this index from DNS.
    Unpublish(usize, bool),
    Check,
    Pass(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::Rotate),
        3 => (0usize..4, 0u8..3).prop_map(|(i, w)| Step::Publish(i, w)),
        1 => (0usize..4, any::<bool>()).prop_map(|(i, rsa)| Step::Unpublish(i, rsa)),
        3 => Just(Step::Check),
        2 => (1i64..24 * 10).prop_map(Step::Pass),
    ]
}

/// The pairs the domain lists, as (RSA selector, Ed25519 selector), active first.
fn pairs(domain: &Domain) -> Vec<(String, String)> {
    let r = &domain.dkim_rotation;
    let mut pairs = vec![(domain.dkim.rsa_selector.clone(), domain.dkim.ed25519_selector.clone())];
    pairs.extend(r.pending.iter().map(|k| (k.rsa_selector.clone(), k.ed25519_selector.clone())));
    pairs.extend(r.retiring.iter().map(|k| (k.keys.rsa_selector.clone(), k.keys.ed25519_selector.clone())));
    pairs.extend(r.retired.iter().map(|k| (k.rsa_selector.clone(), k.ed25519_selector.clone())));
    pairs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// No sequence of rotations, publications, checks and time passing makes the signing pair
    /// one whose records were not both Verified in DNS at the switch, loses the active pair,
    /// or retires a replaced pair before `retire_after` (nor keeps its private keys after).
    #[test]
    fn the_signing_pair_is_always_one_whose_records_verified(steps in proptest::collection::vec(step(), 1..40)) {
        let dns = FakeDns::default();
        let mut domain = domain();
        dns.publish(&domain, "td0r");
        dns.publish(&domain, "td0e");
        let mut now = at(1);
        let mut next = 1;
        // Selectors that ever signed, and when each pair stopped signing.
        let mut signed: HashSet<String> = HashSet::from(["td0r".to_owned()]);
        let mut replaced_at: HashMap<String, DateTime<Utc>> = HashMap::new();
        for step in steps {
            let before = domain.clone();
            match step {
                Step::Rotate => {
                    let records = dkim_records(&domain.name, &keys(next), &RecordPolicy::default()).unwrap();
                    match start(&domain, keys(next), records) {
                        Ok(rotated) => { domain = rotated; next += 1; }
                        Err(e) => prop_assert_eq!(e, RotateError::AlreadyPending),
                    }
                }
                Step::Publish(i, which) => {
                    if let Some((rsa, ed)) = pairs(&domain).get(i).cloned() {
                        if which != 1 { dns.publish(&domain, &rsa); }
                        if which != 0 { dns.publish(&domain, &ed); }
                    }
                }
                Step::Unpublish(i, rsa) => {
                    if let Some((r, e)) = pairs(&domain).get(i).cloned() {
                        dns.unpublish(&domain, if rsa { &r } else { &e });
                    }
                }
                Step::Check => {
                    let (checked, advanced) = check(&domain, &dns, now);
                    if advanced.switched {
                        let new = &checked.dkim;
                        prop_assert!(dns.has(&checked, &new.rsa_selector) && dns.has(&checked, &new.ed25519_selector),
                            "switched to a pair not published");
                        prop_assert_eq!(Some(new), before.dkim_rotation.pending.as_ref(), "only the pending pair takes over");
                        signed.insert(new.rsa_selector.clone());
                        replaced_at.insert(before.dkim.rsa_selector.clone(), now);
                    } else {
                        prop_assert_eq!(&checked.dkim, &before.dkim, "no switch, same signing pair");
                    }
                    domain = checked;
                }
                Step::Pass(hours) => now += Duration::hours(hours),
            }
            // The signing pair is the active one, listed Active, whose records verified.
            prop_assert!(signed.contains(&domain.dkim.rsa_selector));
            let active: Vec<_> = states(&domain).into_iter().filter(|(_, _, s)| *s == DkimKeyState::Active).collect();
            prop_assert_eq!(active.len(), 2, "the active pair's two records are always listed");
            prop_assert_eq!(&active[0].1, &domain.dkim.rsa_selector);
            prop_assert!(domain.dkim_rotation.pending.as_ref() != Some(&domain.dkim));
            // A replaced pair keeps its private keys until retire_after, and only until then.
            for retiring in &domain.dkim_rotation.retiring {
                prop_assert_eq!(retiring.retire_at, retiring.replaced_at + WEEK);
                prop_assert!(domain.last_checked_at.is_none_or(|c| c < retiring.retire_at), "kept past its time");
            }
            for retired in &domain.dkim_rotation.retired {
                let replaced = replaced_at[&retired.rsa_selector];
                prop_assert!(retired.retired_at >= replaced + WEEK, "retired before its time");
            }
            // Every pair that ever signed is still held until its time is up.
            for selector in &signed {
                if let Some(&when) = replaced_at.get(selector) {
                    if domain.last_checked_at.is_none_or(|c| c < when + WEEK + WEEK) {
                        prop_assert!(domain.dkim_selector_state(selector).is_some(), "{} left the list early", selector);
                    }
                } else {
                    prop_assert_eq!(&domain.dkim.rsa_selector, selector);
                }
            }
        }
    }
}
