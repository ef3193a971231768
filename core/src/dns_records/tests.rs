use std::collections::HashMap;

use async_trait::async_trait;
use chrono::TimeZone;

use super::*;
use crate::dkim_keys::test_keys;
use crate::ids::{DomainId, WorkspaceId};
use crate::ports::SystemRandom;

/// DNS as a map from record name to answer; names not in the map do not exist.
#[derive(Default)]
struct FakeDns(HashMap<String, Answer>);

impl FakeDns {
    fn with(mut self, name: &str, answer: Answer) -> Self {
        self.0.insert(name.to_owned(), answer);
        self
    }

    fn txt(self, name: &str, values: &[&str]) -> Self {
        self.with(name, Ok(values.iter().map(|v| (*v).to_owned()).collect()))
    }

    fn answer(&self, name: &str) -> Answer {
        self.0.get(name).cloned().unwrap_or_else(|| Err(DnsError::NxDomain(name.to_owned())))
    }

    /// Everything published as asked.
    fn publishing(domain: &Domain) -> Self {
        domain.records.iter().fold(Self::default(), |dns, r| dns.txt(&r.name, &[&r.value]))
    }
}

#[async_trait]
impl DnsCheck for FakeDns {
    async fn txt_records(&self, name: &crate::domain_name::DnsName) -> Result<Vec<String>, DnsError> {
        self.answer(name.as_str())
    }

    async fn mx_records(&self, name: &crate::domain_name::DnsName) -> Result<Vec<(u16, String)>, DnsError> {
        no_mx(name.to_string()).await
    }
}

/// The MX lookup of tests whose domains ask for no return path: every name is NXDOMAIN.
async fn no_mx(name: String) -> MxAnswer {
    Err(DnsError::NxDomain(name))
}

fn at(hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, hour, 0, 0).unwrap()
}

fn new_domain() -> Domain {
    let name = DomainName::parse("example.com").unwrap();
    let keys = test_keys().clone();
    Domain {
        id: DomainId::new_at(at(0), &SystemRandom),
        workspace_id: WorkspaceId::new_at(at(0), &SystemRandom),
        records: records_for(&name, &keys, &RecordPolicy::default()).unwrap(),
        name,
        status: DomainStatus::Pending,
        dkim: keys,
        dkim_rotation: Default::default(),
        open_tracking: false,
        click_tracking: false,
        created_at: at(0),
        verified_at: None,
        last_checked_at: None,
        kind: crate::model::DomainKind::Customer,
        inbound: false,
    }
}

fn record(domain: &Domain, kind: RecordKind) -> &DnsRecord {
    domain.records.iter().find(|r| r.kind == kind).unwrap()
}

fn name(domain: &Domain, kind: RecordKind) -> String {
    record(domain, kind).name.clone()
}

fn error(domain: &Domain, kind: RecordKind) -> String {
    record(domain, kind).error.clone().unwrap_or_default()
}

async fn check_against(dns: &FakeDns, domain: &Domain, hour: u32) -> Domain {
    verify_with(domain, &RecordPolicy::default(), |name| async move { dns.answer(&name) }, no_mx, at(hour)).await
}

#[test]
fn records_are_spf_dkim_dkim2_dmarc_with_fully_qualified_names() {
    let domain = new_domain();
    let keys = &domain.dkim;
    let kinds: Vec<RecordKind> = domain.records.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [RecordKind::Spf, RecordKind::Dkim, RecordKind::Dkim2, RecordKind::Dmarc]);
    let names: Vec<&str> = domain.records.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "example.com".to_owned(),
            format!("{}._domainkey.example.com", keys.rsa_selector),
            format!("{}._domainkey.example.com", keys.ed25519_selector),
            "_dmarc.example.com".to_owned(),
        ]
    );
    let values: Vec<&str> = domain.records.iter().map(|r| r.value.as_str()).collect();
    assert_eq!(values[0], "v=spf1 ip4:127.0.0.1 ~all");
    assert_eq!(values[1], format!("v=DKIM1; k=rsa; p={}", dkim_keys::rsa_public_key_base64(keys).unwrap()));
    assert_eq!(values[2], format!("v=DKIM1; k=ed25519; p={}", dkim_keys::ed25519_public_key_base64(keys).unwrap()));
    assert_eq!(values[3], "v=DMARC1; p=none;");
    for r in &domain.records {
        assert_eq!((r.record_type.as_str(), r.ttl, r.status), ("TXT", 3600, RecordStatus::Pending));
        assert_eq!((r.last_checked_at, r.error.as_deref(), r.warning.as_deref()), (None, None, None));
    }
    assert_eq!(record(&domain, RecordKind::Dkim2).purpose(), "DKIM2 (TXT)");
}

const LOOPBACK_WARNING: &str = "the SPF term authorises loopback only";

fn warning(domain: &Domain, kind: RecordKind) -> Option<&str> {
    record(domain, kind).warning.as_deref()
}

#[test]
fn the_spf_warning_of_the_policy_is_on_the_spf_record_only() {
    let policy = RecordPolicy { spf_warning: Some(LOOPBACK_WARNING.into()), ..RecordPolicy::default() };
    let records = records_for(&DomainName::parse("example.com").unwrap(), test_keys(), &policy).unwrap();
    let warnings: Vec<Option<&str>> = records.iter().map(|r| r.warning.as_deref()).collect();
    assert_eq!(warnings, [Some(LOOPBACK_WARNING), None, None, None]);
    assert_eq!(records[0].value, "v=spf1 ip4:127.0.0.1 ~all", "the warning changes nothing asked for");
}

#[tokio::test]
async fn a_record_published_as_asked_verifies_and_keeps_the_warning_until_the_policy_drops_it() {
    let domain = new_domain();
    let dns = FakeDns::publishing(&domain);
    let lookup = |name: String| {
        let dns = &dns;
        async move { dns.answer(&name) }
    };
    let warned = RecordPolicy { spf_warning: Some(LOOPBACK_WARNING.into()), ..RecordPolicy::default() };

    let checked = verify_with(&domain, &warned, lookup, no_mx, at(1)).await;
    assert_eq!(checked.status, DomainStatus::Verified, "the customer published exactly what was asked");
    assert_eq!(record(&checked, RecordKind::Spf).status, RecordStatus::Verified);
    assert_eq!(record(&checked, RecordKind::Spf).error, None);
    assert_eq!(warning(&checked, RecordKind::Spf), Some(LOOPBACK_WARNING), "verified, and still warned");
    assert_eq!(warning(&checked, RecordKind::Dkim), None);

    // A failed SPF check keeps it too: the warning is about the value, not the check.
    let unpublished = FakeDns::publishing(&domain).with("example.com", Ok(vec![]));
    let failed = verify_with(
        &domain,
        &warned,
        |name| {
            let dns = &unpublished;
            async move { dns.answer(&name) }
        },
        no_mx,
        at(2),
    )
    .await;
    assert_eq!(record(&failed, RecordKind::Spf).status, RecordStatus::Failed);
    assert_eq!(warning(&failed, RecordKind::Spf), Some(LOOPBACK_WARNING));

    // Once the operator sets the term, the next verification shows it without the warning.
    let configured = RecordPolicy { spf_mechanism: "include:_spf.example.net".into(), ..RecordPolicy::default() };
    let rechecked = verify_with(&checked, &configured, lookup, no_mx, at(3)).await;
    assert_eq!(record(&rechecked, RecordKind::Spf).value, "v=spf1 include:_spf.example.net ~all");
    assert_eq!(warning(&rechecked, RecordKind::Spf), None);
}

#[test]
fn records_follow_the_policy() {
    let policy = RecordPolicy {
        spf_mechanism: "include:_spf.mail.example.net".into(),
        dmarc_value: "v=DMARC1; p=quarantine; rua=mailto:d@example.com".into(),
        ttl: 300,
        spf_warning: None,
        return_path_host: None,
    };
    let records = records_for(&DomainName::parse("news.example.org").unwrap(), test_keys(), &policy).unwrap();
    assert_eq!(records[0].value, "v=spf1 include:_spf.mail.example.net ~all");
    assert_eq!(records[3].value, policy.dmarc_value);
    assert!(records.iter().all(|r| r.ttl == 300));
}

#[tokio::test]
async fn all_records_published_verifies_and_sets_verified_at() {
    let domain = new_domain();
    let checked = check_against(&FakeDns::publishing(&domain), &domain, 1).await;
    assert_eq!(checked.status, DomainStatus::Verified);
    assert_eq!((checked.verified_at, checked.last_checked_at), (Some(at(1)), Some(at(1))));
    for r in &checked.records {
        assert_eq!((r.status, r.last_checked_at, r.error.as_deref()), (RecordStatus::Verified, Some(at(1)), None));
    }
    assert!(checked.is_sendable());
}

#[tokio::test]
async fn spf_passes_among_other_mechanisms() {
    let domain = new_domain();
    let dns = FakeDns::publishing(&domain)
        .txt("example.com", &["google-site-verification=abc", "V=SPF1 include:_spf.google.com +IP4:127.0.0.1 mx -all"]);
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(checked.record_status(RecordKind::Spf), RecordStatus::Verified);
}

#[tokio::test]
async fn spf_without_the_mechanism_says_what_it_found() {
    let domain = new_domain();
    let dns = FakeDns::publishing(&domain).txt("example.com", &["v=spf1 include:_spf.google.com ~all"]);
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(checked.record_status(RecordKind::Spf), RecordStatus::Failed);
    assert_eq!(
        error(&checked, RecordKind::Spf),
        "the SPF record at example.com does not contain ip4:127.0.0.1; add it before the \"all\": found \"v=spf1 include:_spf.google.com ~all\""
    );
    assert_eq!(checked.status, DomainStatus::PartiallyVerified);
}

#[tokio::test]
async fn spf_mechanism_after_all_fails() {
    let domain = new_domain();
    let dns = FakeDns::publishing(&domain).txt("example.com", &["v=spf1 -all ip4:127.0.0.1"]);
    let checked = check_against(&dns, &domain, 1).await;
    assert!(error(&checked, RecordKind::Spf).contains("after its \"all\""), "{}", error(&checked, RecordKind::Spf));
}

#[tokio::test]
async fn two_spf_records_fail_as_a_permanent_error() {
    let domain = new_domain();
    let dns = FakeDns::publishing(&domain)
        .txt("example.com", &["v=spf1 ip4:127.0.0.1 ~all", "v=spf1 include:x.example ~all"]);
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(checked.record_status(RecordKind::Spf), RecordStatus::Failed);
    assert!(
        error(&checked, RecordKind::Spf).starts_with("found 2 SPF records at example.com; there must be exactly one")
    );
}

#[tokio::test]
async fn txt_without_spf_is_not_an_spf_record() {
    let domain = new_domain();
    let dns = FakeDns::publishing(&domain).txt("example.com", &["v=spf10 ip4:127.0.0.1", "site-verification=1"]);
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(
        error(&checked, RecordKind::Spf),
        "no SPF record at example.com: found 2 TXT record(s), none starting with v=spf1; expected one containing ip4:127.0.0.1"
    );
}

#[tokio::test]
async fn long_dkim_value_joined_with_whitespace_inside_p_verifies() {
    let domain = new_domain();
    let dkim = record(&domain, RecordKind::Dkim);
    let p = dkim.value.split_once("p=").unwrap().1;
    // As a DNS UI might store it: split into 255-byte strings joined back with spaces, tags
    // reordered and spaced, `k` left to its default.
    let spaced: Vec<&str> = p.as_bytes().chunks(100).map(|c| std::str::from_utf8(c).unwrap()).collect();
    let published = format!("v=DKIM1 ;p = {} ; t=s", spaced.join(" \t"));
    let dns = FakeDns::publishing(&domain).txt(&dkim.name, &[&published]);
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(
        checked.record_status(RecordKind::Dkim),
        RecordStatus::Verified,
        "{:?}",
        error(&checked, RecordKind::Dkim)
    );
}

#[tokio::test]
async fn a_different_dkim_key_fails() {
    let domain = new_domain();
    let other = dkim_keys::ed25519_public_key_base64(&DkimKeys {
        ed25519_private_pkcs8: crate::secret::Secret::new(
            aws_lc_rs::signature::Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new())
                .unwrap()
                .as_ref()
                .to_vec(),
        ),
        ..domain.dkim.clone()
    })
    .unwrap();
    let dns = FakeDns::publishing(&domain)
        .txt(&name(&domain, RecordKind::Dkim2), &[&format!("v=DKIM1; k=ed25519; p={other}")]);
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(checked.record_status(RecordKind::Dkim2), RecordStatus::Failed);
    assert!(error(&checked, RecordKind::Dkim2).starts_with("found a different DKIM key at "));
    assert_eq!(checked.status, DomainStatus::PartiallyVerified);
}

#[tokio::test]
async fn dkim_key_with_the_wrong_type_or_version_fails() {
    let domain = new_domain();
    let ed = record(&domain, RecordKind::Dkim2);
    let p = ed.value.split_once("p=").unwrap().1;
    // No k= means rsa, which is wrong for the Ed25519 key.
    let dns = FakeDns::publishing(&domain).txt(&ed.name, &[&format!("v=DKIM1; p={p}")]);
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(
        error(&checked, RecordKind::Dkim2),
        format!("the DKIM record at {} has the right key but k=rsa; expected k=ed25519", ed.name)
    );

    let dns = FakeDns::publishing(&domain).txt(&ed.name, &[&format!("v=DKIM2; k=ed25519; p={p}")]);
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(
        error(&checked, RecordKind::Dkim2),
        format!("the DKIM record at {} has v=DKIM2; expected v=DKIM1", ed.name)
    );
}

#[tokio::test]
async fn revoked_or_non_dkim_txt_records_fail_with_reasons() {
    let domain = new_domain();
    let rsa = name(&domain, RecordKind::Dkim);
    let dns = FakeDns::publishing(&domain).txt(&rsa, &["v=DKIM1; k=rsa; p="]);
    assert!(error(&check_against(&dns, &domain, 1).await, RecordKind::Dkim).contains("is revoked (empty p=)"));
    let dns = FakeDns::publishing(&domain).txt(&rsa, &["hello"]);
    assert_eq!(
        error(&check_against(&dns, &domain, 1).await, RecordKind::Dkim),
        format!("the TXT record at {rsa} is not a DKIM key (it has no p= tag): found \"hello\"")
    );
}

#[tokio::test]
async fn missing_records_fail_with_no_txt_record_at_name() {
    let domain = new_domain();
    let dns = domain.records.iter().fold(FakeDns::default(), |dns, r| dns.txt(&r.name, &[]));
    let checked = check_against(&dns, &domain, 1).await;
    for r in &checked.records {
        assert_eq!(r.status, RecordStatus::Failed);
        assert_eq!(r.error.clone().unwrap(), format!("no TXT record at {}", r.name));
    }
    assert_eq!(
        (checked.status, checked.verified_at, checked.last_checked_at),
        (DomainStatus::Failed, None, Some(at(1)))
    );
}

#[tokio::test]
async fn dns_errors_fail_only_their_record_with_the_errors_text() {
    let domain = new_domain();
    let rsa = name(&domain, RecordKind::Dkim);
    let dns = FakeDns::publishing(&domain)
        .with("example.com", Err(DnsError::Timeout("example.com".into())))
        .with(&rsa, Err(DnsError::NxDomain(rsa.clone())))
        .with(
            "_dmarc.example.com",
            Err(DnsError::Failed { name: "_dmarc.example.com".into(), reason: "SERVFAIL".into() }),
        );
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(error(&checked, RecordKind::Spf), "DNS lookup of example.com timed out");
    assert_eq!(error(&checked, RecordKind::Dkim), format!("the name {rsa} does not exist (NXDOMAIN)"));
    assert_eq!(error(&checked, RecordKind::Dmarc), "DNS lookup of _dmarc.example.com failed: SERVFAIL");
    assert_eq!(checked.record_status(RecordKind::Dkim2), RecordStatus::Verified);
    assert_eq!(checked.status, DomainStatus::PartiallyVerified);
}

#[tokio::test]
async fn missing_dmarc_does_not_block_verified() {
    let domain = new_domain();
    let mut dns = FakeDns::publishing(&domain);
    dns.0.remove("_dmarc.example.com");
    let checked = check_against(&dns, &domain, 1).await;
    assert_eq!(checked.record_status(RecordKind::Dmarc), RecordStatus::Failed);
    assert_eq!((checked.status, checked.verified_at), (DomainStatus::Verified, Some(at(1))));
}

#[tokio::test]
async fn dmarc_accepts_any_policy_but_only_one_record() {
    let domain = new_domain();
    let dns = FakeDns::publishing(&domain).txt("_dmarc.example.com", &["v=DMARC1; p=reject; rua=mailto:x@example.com"]);
    assert_eq!(check_against(&dns, &domain, 1).await.record_status(RecordKind::Dmarc), RecordStatus::Verified);
    let dns = FakeDns::publishing(&domain).txt("_dmarc.example.com", &["v=DMARC1; p=none", "v=DMARC1; p=reject"]);
    assert!(error(&check_against(&dns, &domain, 1).await, RecordKind::Dmarc).starts_with("found 2 DMARC records"));
    let dns = FakeDns::publishing(&domain).txt("_dmarc.example.com", &["p=none"]);
    assert_eq!(
        error(&check_against(&dns, &domain, 1).await, RecordKind::Dmarc),
        "no DMARC record at _dmarc.example.com: found 1 TXT record(s), none starting with v=DMARC1"
    );
}

#[tokio::test]
async fn verified_at_is_kept_on_later_checks_and_failures() {
    let domain = new_domain();
    let first = check_against(&FakeDns::publishing(&domain), &domain, 1).await;
    let again = check_against(&FakeDns::publishing(&domain), &first, 2).await;
    assert_eq!((again.verified_at, again.last_checked_at), (Some(at(1)), Some(at(2))));

    let gone = check_against(&FakeDns::default(), &again, 3).await;
    assert_eq!(gone.status, DomainStatus::Failed);
    assert_eq!((gone.verified_at, gone.last_checked_at), (Some(at(1)), Some(at(3))));
    assert!(!gone.is_sendable());
}

#[tokio::test]
async fn unreadable_stored_keys_fail_dkim_and_still_check_the_rest() {
    let mut domain = new_domain();
    domain.dkim.rsa_private_pkcs8 = crate::secret::Secret::new(vec![0; 8]);
    let checked = check_against(&FakeDns::publishing(&domain), &domain, 1).await;
    assert_eq!(checked.records.len(), 4);
    assert_eq!(checked.record_status(RecordKind::Spf), RecordStatus::Verified);
    assert!(
        error(&checked, RecordKind::Dkim).contains("delete and add it again"),
        "{}",
        error(&checked, RecordKind::Dkim)
    );
    assert!(error(&checked, RecordKind::Dkim2).contains("RSA-2048"));
    assert_eq!(checked.status, DomainStatus::PartiallyVerified);
}

#[tokio::test]
async fn verify_asks_the_dns_port_once_per_record_name_and_never_fails() {
    let domain = new_domain();
    // A mock of the port (mockall, from the trait itself): the lookups verify makes, not
    // only what it concludes. Each record's name is asked exactly once, nothing else is.
    let mut dns = crate::ports::MockDnsCheck::new();
    let mut names: Vec<String> = domain.records.iter().map(|r| r.name.clone()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let answer = if name == "example.com" {
            Err(DnsError::Timeout("example.com".into()))
        } else {
            Err(DnsError::NxDomain(name.clone()))
        };
        let asked = name.clone();
        dns.expect_txt_records().withf(move |n| n.as_str() == asked).times(1).returning(move |_| answer.clone());
    }
    let checked = verify(&domain, &RecordPolicy::default(), &dns, at(1)).await;
    assert_eq!(error(&checked, RecordKind::Spf), "DNS lookup of example.com timed out");
    assert!(checked.records.iter().all(|r| r.status == RecordStatus::Failed && r.last_checked_at == Some(at(1))));
    assert_eq!(checked.status, DomainStatus::Failed);
}

#[tokio::test]
async fn verify_through_the_dns_port_verifies_published_records() {
    let domain = new_domain();
    let checked = verify(&domain, &RecordPolicy::default(), &FakeDns::publishing(&domain), at(1)).await;
    assert_eq!(checked.status, DomainStatus::Verified);
    assert_eq!(checked.record_status(RecordKind::Dmarc), RecordStatus::Verified);
}

#[test]
fn verify_is_send_so_handlers_can_await_it() {
    fn assert_send<T: Send>(_: &T) {}
    let domain = new_domain();
    let dns = FakeDns::default();
    assert_send(&verify(&domain, &RecordPolicy::default(), &dns, at(1)));
}

#[test]
fn a_record_stored_before_warnings_existed_reads_without_one_and_none_is_not_written() {
    let stored = serde_json::json!({
        "kind": "Spf", "record_type": "TXT", "name": "example.com", "value": "v=spf1 ip4:127.0.0.1 ~all",
        "ttl": 3600, "status": "Verified", "last_checked_at": null, "error": null,
    });
    let record: DnsRecord = serde_json::from_value(stored.clone()).unwrap();
    assert_eq!(record.warning, None);
    assert_eq!(serde_json::to_value(&record).unwrap(), stored, "written back unchanged");
}
