//! The return path's records (contract §12, "Return path per domain"): asked for only when
//! the policy names the listener's host, checked by MX and SPF, never counted toward the
//! domain's status, and the envelope's domain only once both verify.

use chrono::TimeZone;

use super::*;
use crate::dkim_keys::test_keys;
use crate::ids::{DomainId, WorkspaceId};
use crate::model::DomainKind;
use crate::ports::{StaticDns, SystemRandom};

const HOST: &str = "mx.tidings.example.net";

fn at(hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 5, hour, 0, 0).unwrap()
}

fn policy() -> RecordPolicy {
    RecordPolicy {
        spf_mechanism: "include:_spf.tidings.example.net".into(),
        return_path_host: Some(DnsName::parse(HOST).unwrap()),
        ..RecordPolicy::default()
    }
}

fn domain(policy: &RecordPolicy) -> Domain {
    let name = DomainName::parse("example.com").unwrap();
    let keys = test_keys().clone();
    Domain {
        id: DomainId::new_at(at(0), &SystemRandom),
        workspace_id: WorkspaceId::new_at(at(0), &SystemRandom),
        records: records_for(&name, &keys, policy).unwrap(),
        name,
        status: DomainStatus::Pending,
        dkim: keys,
        dkim_rotation: Default::default(),
        open_tracking: false,
        click_tracking: false,
        created_at: at(0),
        verified_at: None,
        last_checked_at: None,
        kind: DomainKind::Customer,
        inbound: false,
    }
}

fn record(domain: &Domain, kind: RecordKind) -> &DnsRecord {
    domain.records.iter().find(|r| r.kind == kind).unwrap()
}

#[test]
fn the_records_ask_for_an_mx_and_an_spf_on_the_bounces_subdomain_only_with_a_host() {
    assert!(domain(&RecordPolicy::default()).records.iter().all(|r| !r.kind.is_return_path()));
    assert_eq!(domain(&RecordPolicy::default()).return_path_status(), None);

    let d = domain(&policy());
    let kinds: Vec<RecordKind> = d.records.iter().map(|r| r.kind).collect();
    // Every kind but the inbound MX, which a domain asks for only while it receives mail.
    assert_eq!(kinds, RecordKind::ALL[..6]);
    let mx = record(&d, RecordKind::ReturnPathMx);
    assert_eq!((mx.record_type.as_str(), mx.name.as_str(), mx.value.as_str()), ("MX", "bounces.example.com", HOST));
    assert_eq!((mx.priority, mx.purpose()), (Some(10), "Return-Path (MX)".to_owned()));
    let spf = record(&d, RecordKind::ReturnPathSpf);
    assert_eq!(
        (spf.record_type.as_str(), spf.name.as_str(), spf.value.as_str()),
        ("TXT", "bounces.example.com", "v=spf1 include:_spf.tidings.example.net -all")
    );
    assert_eq!((spf.priority, spf.purpose()), (None, "Return-Path SPF (TXT)".to_owned()));
    assert!(d.records.iter().filter(|r| !r.kind.is_return_path()).all(|r| r.priority.is_none()));
    assert_eq!(d.return_path_status(), Some(RecordStatus::Pending));
}

#[tokio::test]
async fn published_as_asked_both_verify_and_name_the_envelope_domain() {
    let d = domain(&policy());
    let dns = StaticDns::default();
    dns.publish_all(&d);
    let checked = verify(&d, &policy(), &dns, at(1)).await;
    assert_eq!(checked.status, DomainStatus::Verified);
    assert_eq!(checked.record_status(RecordKind::ReturnPathMx), RecordStatus::Verified);
    assert_eq!(checked.record_status(RecordKind::ReturnPathSpf), RecordStatus::Verified);
    assert_eq!(checked.return_path_status(), Some(RecordStatus::Verified));
    assert_eq!(checked.return_path_domain(), Some(DomainName::parse("bounces.example.com").unwrap()));
}

#[tokio::test]
async fn without_them_the_domain_is_still_verified_but_keeps_no_return_path_of_its_own() {
    let d = domain(&policy());
    let dns = StaticDns::default();
    dns.publish(&d, &[RecordKind::Spf, RecordKind::Dkim, RecordKind::Dkim2]);
    let checked = verify(&d, &policy(), &dns, at(1)).await;
    assert_eq!(checked.status, DomainStatus::Verified, "the return path is optional");
    assert_eq!(checked.return_path_status(), Some(RecordStatus::Failed));
    assert_eq!(checked.return_path_domain(), None);
    let mx = record(&checked, RecordKind::ReturnPathMx);
    assert_eq!(mx.error.as_deref(), Some("the name bounces.example.com does not exist (NXDOMAIN)"));

    // The MX alone is not enough: without the SPF, receivers would fail SPF for the envelope.
    dns.publish(&d, &[RecordKind::ReturnPathMx]);
    let checked = verify(&d, &policy(), &dns, at(2)).await;
    assert_eq!(checked.record_status(RecordKind::ReturnPathMx), RecordStatus::Verified);
    assert_eq!(checked.record_status(RecordKind::ReturnPathSpf), RecordStatus::Failed);
    assert_eq!(checked.return_path_domain(), None);
}

#[tokio::test]
async fn an_mx_to_another_host_or_preferring_another_fails_saying_what_it_found() {
    let d = domain(&policy());
    let dns = StaticDns::default();
    dns.publish(&d, &[RecordKind::Spf, RecordKind::Dkim, RecordKind::Dkim2, RecordKind::ReturnPathSpf]);
    dns.add_mx("bounces.example.com", 10, "mx.elsewhere.example.");
    let checked = verify(&d, &policy(), &dns, at(1)).await;
    assert_eq!(
        record(&checked, RecordKind::ReturnPathMx).error.as_deref(),
        Some(
            "the MX record at bounces.example.com does not point to mx.tidings.example.net: found 10 mx.elsewhere.example"
        )
    );

    // Listed, but behind a preferred host: bounces would go there.
    dns.add_mx("bounces.example.com", 20, "MX.Tidings.Example.Net.");
    dns.add_mx("bounces.example.com", 5, "mx.backup.example");
    let checked = verify(&d, &policy(), &dns, at(2)).await;
    let error = record(&checked, RecordKind::ReturnPathMx).error.clone().unwrap();
    assert!(error.starts_with("the MX records at bounces.example.com prefer another host"), "{error}");
    assert_eq!(checked.return_path_domain(), None);

    // The listener's host among the best is enough (the others may be its peers).
    let equal = StaticDns::default();
    equal.publish_all(&d);
    equal.add_mx("bounces.example.com", 10, "mx2.tidings.example.net");
    let checked = verify(&d, &policy(), &equal, at(3)).await;
    assert_eq!(checked.record_status(RecordKind::ReturnPathMx), RecordStatus::Verified);
}

#[tokio::test]
async fn a_name_with_txt_only_has_no_mx_and_says_so() {
    let d = domain(&policy());
    let dns = StaticDns::default();
    dns.publish(&d, &[RecordKind::ReturnPathSpf]);
    let checked = verify(&d, &policy(), &dns, at(1)).await;
    assert_eq!(
        record(&checked, RecordKind::ReturnPathMx).error.as_deref(),
        Some("no MX record at bounces.example.com; publish one pointing to mx.tidings.example.net")
    );
}

#[tokio::test]
async fn turning_the_host_off_drops_the_records_and_the_return_path_at_the_next_check() {
    let d = domain(&policy());
    let dns = StaticDns::default();
    dns.publish_all(&d);
    let checked = verify(&d, &policy(), &dns, at(1)).await;
    assert!(checked.return_path_domain().is_some());
    let without = RecordPolicy { return_path_host: None, ..policy() };
    let rechecked = verify(&checked, &without, &dns, at(2)).await;
    assert_eq!(rechecked.return_path_status(), None);
    assert_eq!(rechecked.return_path_domain(), None);
    assert_eq!(rechecked.status, DomainStatus::Verified);
}

#[test]
fn a_record_stored_before_priorities_existed_reads_without_one() {
    let stored = serde_json::json!({
        "kind": "Dkim", "record_type": "TXT", "name": "s._domainkey.example.com", "value": "v=DKIM1; p=x",
        "ttl": 3600, "status": "Pending", "last_checked_at": null, "error": null,
    });
    let record: DnsRecord = serde_json::from_value(stored.clone()).unwrap();
    assert_eq!(record.priority, None);
    assert_eq!(serde_json::to_value(&record).unwrap(), stored, "written back unchanged");
}

#[tokio::test]
async fn an_inbound_domain_asks_for_its_mx_and_receives_only_once_it_and_the_domain_verify() {
    let d = domain(&policy());
    assert!(inbound_mx(&d, &policy()).is_none(), "no MX while inbound is off");
    let on = Domain { inbound: true, ..d.clone() };
    assert!(inbound_mx(&on, &RecordPolicy::default()).is_none(), "no host to name, no MX");
    let mx = inbound_mx(&on, &policy()).unwrap();
    assert_eq!((mx.record_type.as_str(), mx.name.as_str(), mx.value.as_str()), ("MX", "example.com", HOST));
    assert_eq!((mx.priority, mx.purpose()), (Some(10), "Inbound (MX)".to_owned()));
    assert_eq!(domain_records(&on, &policy()).unwrap().last(), Some(&mx), "listed last");
    let on = Domain { records: domain_records(&on, &policy()).unwrap(), ..on };

    let dns = StaticDns::default();
    dns.publish(&on, &[RecordKind::Spf, RecordKind::Dkim, RecordKind::Dkim2]);
    let checked = verify(&on, &policy(), &dns, at(1)).await;
    assert_eq!(checked.status, DomainStatus::Verified, "the MX never counts toward the status");
    assert_eq!(checked.record_status(RecordKind::InboundMx), RecordStatus::Failed);
    assert!(!checked.receives_mail() && checked.needs_recheck(), "verified, but its MX is missing");

    dns.add_mx("example.com", 10, "mx.tidings.example.net.");
    let checked = verify(&on, &policy(), &dns, at(2)).await;
    assert_eq!(checked.record_status(RecordKind::InboundMx), RecordStatus::Verified);
    assert!(checked.receives_mail());
    let all = StaticDns::default();
    all.publish_all(&on);
    assert!(!verify(&on, &policy(), &all, at(3)).await.needs_recheck(), "every record verified: nothing to recheck");
    let unverified = Domain { status: DomainStatus::PartiallyVerified, ..checked.clone() };
    assert!(!unverified.receives_mail(), "an MX alone proves nothing about the workspace");
    let off = Domain { inbound: false, ..checked };
    assert!(!off.receives_mail());
}
