//! Each sending domain's own return path (contract §12, "Return path per domain"): once the
//! domain's `bounces.<domain>` records verify, the worker sends its mail with the envelope
//! sender there, and a report sent there is matched like one to the server-wide return path;
//! until then, and for a return path on another domain's subdomain, nothing changes.

use tidings_core::dns_records::RecordPolicy;
use tidings_core::domain_name::{DnsName, DomainName};
use tidings_core::email::EmailAddress;
use tidings_core::model::{Message, MessageStatus, RecordKind, RecordStatus};
use tidings_core::outbound::{ReturnPath, ReturnPathKey};
use tidings_core::usecases::{CoreConfig, ReportOutcome, Unmatched};
use tidings_testing::delivery::Delivery;
use tidings_testing::mailer::FakeMailer;

const SERVER_DOMAIN: &str = "bounces.tidings.example";
const OWN: &str = "bounces.acme.example.com";

fn key() -> ReturnPathKey {
    ReturnPathKey::from_bytes([9; 32])
}

fn at(domain: &str) -> ReturnPath {
    ReturnPath { domain: DomainName::parse(domain).unwrap(), key: key() }
}

/// A service with the server-wide return path and per-domain ones on, whose records ask for
/// the return path's MX to `mx.tidings.example`.
async fn service() -> Delivery {
    let config = CoreConfig {
        return_path: Some(at(SERVER_DOMAIN)),
        domain_return_paths: Some(key()),
        records: RecordPolicy {
            return_path_host: Some(DnsName::parse("mx.tidings.example").unwrap()),
            ..RecordPolicy::default()
        },
        ..CoreConfig::default()
    };
    Delivery::with(config, FakeMailer::default(), |_| {}).await
}

/// What the report listener makes of `raw` sent to `envelope`.
async fn report(d: &Delivery, envelope: &EmailAddress, raw: Vec<u8>) -> ReportOutcome {
    d.t.core.feedback().process_report(std::slice::from_ref(envelope), &raw).await.unwrap()
}

/// Publishes the records of the domain of `d` (all, or all but the return path's) and
/// verifies it.
async fn verify(d: &Delivery, with_return_path: bool) {
    let domain = d.t.core.domains().get(&d.who, d.domain.id).await.unwrap();
    let kinds: Vec<RecordKind> =
        RecordKind::ALL.into_iter().filter(|kind| with_return_path || !kind.is_return_path()).collect();
    d.t.dns.publish(&domain, &kinds);
    let checked = d.t.core.domains().verify(&d.who, d.domain.id).await.unwrap();
    let expected = if with_return_path { RecordStatus::Verified } else { RecordStatus::Failed };
    assert_eq!(checked.return_path_status(), Some(expected));
}

async fn delivered(d: &Delivery, to: &str) -> Message {
    let queued = d.send(to).await;
    assert_eq!(d.step().await.delivered, 1);
    d.message(queued.id).await
}

fn bounce_to(message: &Message, envelope: &EmailAddress) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/reports/gmail_5_1_1.eml", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap()
        .replace("{{MESSAGE_ID}}", message.provider_message_id.as_deref().unwrap())
        .replace("{{RETURN_PATH}}", &envelope.to_string())
        .replace("{{RECIPIENT}}", &message.to.to_string())
        .into_bytes()
}

#[tokio::test]
async fn a_verified_domain_sends_from_its_own_return_path_and_its_bounces_count_there() {
    let d = service().await;
    verify(&d, true).await;
    let m = delivered(&d, "gone@example.org").await;
    let envelope = d.mailer.sent().last().unwrap().envelope_from.clone();
    assert_eq!(envelope, at(OWN).address(m.id, &m.to), "signed for the recipient, on the domain's subdomain");
    assert_eq!(envelope.domain().as_str(), OWN);

    assert!(d.t.core.feedback().accepts_report_to(&envelope).await.unwrap(), "the listener takes it");
    let outcome = report(&d, &envelope, bounce_to(&m, &envelope)).await;
    assert!(matches!(outcome, ReportOutcome::Bounced { hard: true, .. }), "{outcome:?}");
    assert_eq!(d.message(m.id).await.status, MessageStatus::Bounced);
}

#[tokio::test]
async fn until_its_records_verify_the_domain_keeps_the_server_wide_return_path() {
    let d = service().await;
    verify(&d, false).await;
    let m = delivered(&d, "someone@example.org").await;
    let envelope = d.mailer.sent().last().unwrap().envelope_from.clone();
    assert_eq!(envelope, at(SERVER_DOMAIN).address(m.id, &m.to));

    // Without a server-wide return path either, the From address, as before.
    let config = CoreConfig {
        domain_return_paths: Some(key()),
        records: RecordPolicy {
            return_path_host: Some(DnsName::parse("mx.tidings.example").unwrap()),
            ..RecordPolicy::default()
        },
        ..CoreConfig::default()
    };
    let bare = Delivery::with(config, FakeMailer::default(), |_| {}).await;
    verify(&bare, false).await;
    let m = delivered(&bare, "someone@example.org").await;
    assert_eq!(bare.mailer.sent().last().unwrap().envelope_from.to_string(), "billing@acme.example.com");
    assert_eq!(m.status, MessageStatus::Delivered);
}

#[tokio::test]
async fn a_signed_return_path_on_another_domains_subdomain_or_forged_matches_nothing() {
    let d = service().await;
    verify(&d, true).await;
    let m = delivered(&d, "target@example.org").await;
    // The right signature, moved onto another customer's return-path subdomain.
    let moved = at("bounces.other.example").address(m.id, &m.to);
    assert!(!d.t.core.feedback().accepts_report_to(&moved).await.unwrap());
    let outcome = report(&d, &moved, bounce_to(&m, &moved)).await;
    assert_eq!(outcome, ReportOutcome::Unmatched { reason: Unmatched::BadSignature(m.id) });
    // Signed with another key, or for another recipient.
    let forged = ReturnPath { domain: DomainName::parse(OWN).unwrap(), key: ReturnPathKey::from_bytes([1; 32]) }
        .address(m.id, &m.to);
    assert!(!d.t.core.feedback().accepts_report_to(&forged).await.unwrap());
    let other_recipient = at(OWN).address(m.id, &EmailAddress::parse("ann@example.org").unwrap());
    assert!(!d.t.core.feedback().accepts_report_to(&other_recipient).await.unwrap());
    // Not a return path at all.
    for address in
        ["postmaster@bounces.acme.example.com", "someone@acme.example.com", "bounces+x@bounces.acme.example.com"]
    {
        assert!(!d.t.core.feedback().accepts_report_to(&EmailAddress::parse(address).unwrap()).await.unwrap());
    }
    assert_eq!(d.event_types(m.id).await, ["Queued", "Sent", "Delivered"]);
}

#[tokio::test]
async fn mail_sent_with_the_server_wide_return_path_still_matches_after_the_domain_verifies() {
    // Bounces arrive days later: mail that left before the switch keeps its return path.
    let d = service().await;
    verify(&d, false).await;
    let before = delivered(&d, "late@example.org").await;
    verify(&d, true).await;
    let envelope = at(SERVER_DOMAIN).address(before.id, &before.to);
    let outcome = report(&d, &envelope, bounce_to(&before, &envelope)).await;
    assert!(matches!(outcome, ReportOutcome::Bounced { .. }), "{outcome:?}");
}

#[tokio::test]
async fn the_background_recheck_verifies_a_return_path_published_after_the_domain() {
    let d = service().await;
    verify(&d, false).await;
    let domain = d.t.core.domains().get(&d.who, d.domain.id).await.unwrap();
    d.t.dns.publish(&domain, &[RecordKind::ReturnPathMx, RecordKind::ReturnPathSpf]);
    let later = d.t.now() + chrono::Duration::hours(1);
    let report = d.t.core.domains().recheck(later, 10).await.unwrap();
    assert_eq!((report.checked, report.verified), (1, 1), "Verified, yet its return path was left to check");
    let checked = d.t.core.domains().get(&d.who, d.domain.id).await.unwrap();
    assert_eq!(checked.return_path_status(), Some(RecordStatus::Verified));
    let report = d.t.core.domains().recheck(later + chrono::Duration::hours(1), 10).await.unwrap();
    assert_eq!(report.checked, 0, "nothing left to verify");
}
