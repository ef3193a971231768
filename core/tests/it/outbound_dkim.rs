//! DKIM signing of what leaves Tidings: both signatures of every message shape verify
//! against the records the domain publishes (with `tidings-testing`'s independent verifier),
//! and break when the message changes.

use mail_auth::common::crypto::{Ed25519Key, RsaKey, Sha256};
use mail_auth::common::headers::HeaderWriter;
use mail_auth::dkim::{Canonicalization, DkimSigner};
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tidings_core::dkim_keys::DkimKeyError;
use tidings_core::domain_name::DomainName;
use tidings_core::email::DisplayName;
use tidings_core::model::Domain;
use tidings_core::outbound::{
    DomainSigner, PrepareError, ReturnPath, ReturnPathKey, SIGNED_HEADERS, build_message, prepare,
};
use tidings_core::secret::Secret;
use tidings_testing::dkim::{DkimCheck, verify_dkim};
use tidings_testing::signing::{message_from, signing_domain};

/// The `DKIM-Signature` header fields of `raw`, unfolded, in order.
fn signature_headers(raw: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(raw).unwrap();
    let head = text.split("\r\n\r\n").next().unwrap();
    let mut fields: Vec<String> = Vec::new();
    for line in head.split("\r\n") {
        if line.starts_with([' ', '\t']) {
            if let Some(last) = fields.last_mut() {
                last.push_str(line.trim());
            }
        } else {
            fields.push(line.to_owned());
        }
    }
    fields.into_iter().filter(|f| f.to_ascii_lowercase().starts_with("dkim-signature:")).collect()
}

fn tag<'a>(field: &'a str, name: &str) -> Option<&'a str> {
    let value = field.split_once(':')?.1;
    value.split(';').map(str::trim).find_map(|t| t.strip_prefix(name)?.strip_prefix('='))
}

fn both_pass(checks: &[DkimCheck], domain: &Domain) {
    let selectors: Vec<&str> = checks.iter().map(|c| c.selector.as_str()).collect();
    assert_eq!(selectors, [domain.dkim.rsa_selector.as_str(), domain.dkim.ed25519_selector.as_str()]);
    let algorithms: Vec<&str> = checks.iter().map(|c| c.algorithm.as_str()).collect();
    assert_eq!(algorithms, ["rsa-sha256", "ed25519-sha256"]);
    assert!(checks.iter().all(DkimCheck::passed), "{checks:?}");
}

#[tokio::test]
async fn both_signatures_of_a_multipart_message_verify_against_the_published_records() {
    let domain = signing_domain("acme.example.com");
    let built = build_message(&message_from(&domain), &domain, None).unwrap();
    let signer = DomainSigner::new(&domain).unwrap();

    let signed = signer.sign(&built.raw).unwrap();

    assert!(signed.ends_with(&built.raw), "the signatures are prepended to the message as built");
    let fields = signature_headers(&signed);
    assert_eq!(fields.len(), 2);
    for (field, algorithm, selector) in [
        (&fields[0], "rsa-sha256", &domain.dkim.rsa_selector),
        (&fields[1], "ed25519-sha256", &domain.dkim.ed25519_selector),
    ] {
        assert_eq!(tag(field, "a"), Some(algorithm));
        assert_eq!(tag(field, "s"), Some(selector.as_str()));
        assert_eq!(tag(field, "d"), Some("acme.example.com"));
        assert_eq!(tag(field, "c"), Some("relaxed/relaxed"));
        let signed_headers: Vec<String> =
            tag(field, "h").unwrap().split(':').map(|h| h.trim().to_ascii_lowercase()).collect();
        for required in ["from", "to", "subject", "date", "message-id", "mime-version", "content-type"] {
            assert!(signed_headers.iter().any(|h| h == required), "{algorithm} covers {required}: {signed_headers:?}");
        }
    }
    both_pass(&verify_dkim(&signed, &domain.records).await, &domain);
}

#[tokio::test]
async fn a_non_ascii_single_part_message_verifies() {
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.subject = "Ihre Bestellung ist unterwegs – Größe M ✓".to_owned();
    message.from.display_name = Some(DisplayName::parse("Ünal Çelik").unwrap());
    message.html = None;
    message.text = Some("Grüße,\n\nIhr Paket (№ 4711) kommt morgen.\n\n\n".to_owned());
    let signer = DomainSigner::new(&domain).unwrap();

    let signed = signer.sign(&build_message(&message, &domain, None).unwrap().raw).unwrap();

    both_pass(&verify_dkim(&signed, &domain.records).await, &domain);
}

#[tokio::test]
async fn a_message_with_reply_to_custom_headers_and_attachments_verifies_and_signs_list_unsubscribe() {
    use tidings_core::model::extras::{Attachment, CustomHeader};
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.extras.reply_to = vec![tidings_core::email::EmailAddress::parse("help@acme.example.com").unwrap()];
    message.extras.headers = vec![
        CustomHeader::parse("List-Unsubscribe", "<https://acme.example.com/u/1>").unwrap(),
        CustomHeader::parse("List-Unsubscribe-Post", "List-Unsubscribe=One-Click").unwrap(),
        CustomHeader::parse("X-Campaign", "Grüße 2026").unwrap(),
    ];
    message.extras.attachments = vec![
        Attachment::parse("a.pdf", "application/pdf", "JVBERi0xLjcK", None).unwrap(),
        Attachment::parse("logo.png", "image/png", "iVBORw0KGgo=", Some("logo")).unwrap(),
    ];
    let signer = DomainSigner::new(&domain).unwrap();

    let signed = signer.sign(&build_message(&message, &domain, None).unwrap().raw).unwrap();

    both_pass(&verify_dkim(&signed, &domain.records).await, &domain);
    for field in signature_headers(&signed) {
        let signed_headers: Vec<String> =
            tag(&field, "h").unwrap().split(':').map(|h| h.trim().to_ascii_lowercase()).collect();
        for required in ["reply-to", "list-unsubscribe", "list-unsubscribe-post"] {
            assert!(signed_headers.iter().any(|h| h == required), "covers {required}: {signed_headers:?}");
        }
    }
    let text = String::from_utf8(signed).unwrap();
    let tampered = text.replace("<https://acme.example.com/u/1>", "<https://evil.example/u/1>");
    assert_ne!(tampered, text);
    assert!(verify_dkim(tampered.as_bytes(), &domain.records).await.iter().all(|c| !c.passed()));
}

#[tokio::test]
async fn a_feedback_id_is_signed_and_cannot_be_changed_or_added_in_transit() {
    use tidings_core::model::extras::CustomHeader;
    let domain = signing_domain("acme.example.com");
    let mut message = message_from(&domain);
    message.extras.headers = vec![CustomHeader::parse("Feedback-ID", "receipts:acme:tidings").unwrap()];
    let signer = DomainSigner::new(&domain).unwrap();

    let signed = signer.sign(&build_message(&message, &domain, None).unwrap().raw).unwrap();

    both_pass(&verify_dkim(&signed, &domain.records).await, &domain);
    for field in signature_headers(&signed) {
        let signed_headers: Vec<String> =
            tag(&field, "h").unwrap().split(':').map(|h| h.trim().to_ascii_lowercase()).collect();
        assert_eq!(signed_headers.iter().filter(|h| *h == "feedback-id").count(), 1, "{signed_headers:?}");
    }
    let text = String::from_utf8(signed).unwrap();
    let changed = text.replace("receipts:acme:tidings", "spam:acme:tidings");
    assert_ne!(changed, text);
    assert!(verify_dkim(changed.as_bytes(), &domain.records).await.iter().all(|c| !c.passed()));
    // Without one, the name is still in h=, so a relay cannot add one either.
    let plain = signer.sign(&build_message(&message_from(&domain), &domain, None).unwrap().raw).unwrap();
    let plain = String::from_utf8(plain).unwrap();
    let added = plain.replacen("\r\nSubject: ", "\r\nFeedback-ID: spam:acme:tidings\r\nSubject: ", 1);
    assert_ne!(added, plain);
    assert!(verify_dkim(added.as_bytes(), &domain.records).await.iter().all(|c| !c.passed()));
}

#[tokio::test]
async fn a_changed_subject_or_body_breaks_both_signatures() {
    let domain = signing_domain("acme.example.com");
    let signer = DomainSigner::new(&domain).unwrap();
    let signed = signer.sign(&build_message(&message_from(&domain), &domain, None).unwrap().raw).unwrap();
    let text = String::from_utf8(signed).unwrap();

    for tampered in [text.replace("Subject: Your invoice", "Subject: Your invoice!"), text.replace("Thanks", "Thank")] {
        assert_ne!(tampered, text);
        let checks = verify_dkim(tampered.as_bytes(), &domain.records).await;
        assert_eq!(checks.len(), 2);
        assert!(checks.iter().all(|c| !c.passed()), "{checks:?}");
    }
}

#[tokio::test]
async fn prepare_signs_and_addresses_the_message() {
    let domain = signing_domain("acme.example.com");
    let message = message_from(&domain);
    let signer = DomainSigner::new(&domain).unwrap();
    let bounces = ReturnPath {
        domain: DomainName::parse("bounces.tidings.example").unwrap(),
        key: ReturnPathKey::from_bytes([1; 32]),
    };

    let email = prepare(&message, &domain, &signer, Some(&bounces), None).unwrap();

    assert_eq!(email.message_id, message.id);
    assert_eq!(email.provider_message_id, format!("{}@acme.example.com", message.id));
    assert_eq!(email.envelope_to, message.to);
    assert_eq!(email.envelope_from.domain().as_str(), "bounces.tidings.example");
    both_pass(&verify_dkim(&email.raw, &domain.records).await, &domain);

    let other = DomainSigner::new(&signing_domain("other.example.com")).unwrap();
    assert_eq!(prepare(&message, &domain, &other, None, None), Err(PrepareError::WrongSigner));
}

#[test]
fn unusable_keys_are_an_error_not_a_panic() {
    let mut domain = signing_domain("acme.example.com");
    domain.dkim.rsa_private_pkcs8 = Secret::new(vec![0x30, 0x03, 1, 2, 3]);
    let error = DomainSigner::new(&domain).unwrap_err();
    assert!(matches!(error, DkimKeyError::InvalidPrivateKey { algorithm: "RSA-2048", .. }), "{error:?}");

    let mut domain = signing_domain("acme.example.com");
    domain.dkim.ed25519_private_pkcs8 = Secret::new(Vec::new());
    let error = DomainSigner::new(&domain).unwrap_err();
    assert!(matches!(error, DkimKeyError::InvalidPrivateKey { algorithm: "Ed25519", .. }), "{error:?}");
}

/// Whether a `DKIM-Signature` field has white space between its `b=` value and what follows
/// (the `;` or the end of the field), which dkimpy counts as part of the signed field.
fn space_after_signature(field: &str) -> bool {
    let Some((_, b)) = field.rsplit_once("b=") else { return false };
    let value_end = b.trim_end_matches(['\r', '\n']).trim_end_matches(';');
    value_end.ends_with([' ', '\t', '\r', '\n'])
}

/// The `DKIM-Signature` fields of `raw` as written, folds included.
fn raw_signature_fields(raw: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(raw).unwrap();
    let head = text.split("\r\n\r\n").next().unwrap();
    let mut fields: Vec<String> = Vec::new();
    for line in head.split("\r\n") {
        match fields.last_mut() {
            Some(last) if line.starts_with([' ', '\t']) => {
                last.push_str("\r\n");
                last.push_str(line);
            }
            _ => fields.push(line.to_owned()),
        }
    }
    fields.retain(|f| f.to_ascii_lowercase().starts_with("dkim-signature:"));
    fields
}

/// mail-auth's two signers of `domain`, set up as [`DomainSigner::new`] sets them up, to see
/// what mail-auth alone writes.
fn mail_auth_signers(domain: &Domain) -> (impl Fn(&[u8]) -> String, impl Fn(&[u8]) -> String) {
    let keys = &domain.dkim;
    let rsa_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(keys.rsa_private_pkcs8.expose().as_slice()));
    let rsa = DkimSigner::from_key(RsaKey::<Sha256>::from_key_der(rsa_der).unwrap())
        .domain(domain.name.as_str())
        .selector(&keys.rsa_selector)
        .headers(SIGNED_HEADERS)
        .header_canonicalization(Canonicalization::Relaxed)
        .body_canonicalization(Canonicalization::Relaxed);
    let ed25519 = DkimSigner::from_key(Ed25519Key::from_pkcs8_der(keys.ed25519_private_pkcs8.expose()).unwrap())
        .domain(domain.name.as_str())
        .selector(&keys.ed25519_selector)
        .headers(SIGNED_HEADERS)
        .header_canonicalization(Canonicalization::Relaxed)
        .body_canonicalization(Canonicalization::Relaxed);
    (move |raw: &[u8]| rsa.sign(raw).unwrap().to_header(), move |raw: &[u8]| ed25519.sign(raw).unwrap().to_header())
}

/// Messages of every shape the signed header list can take: with and without Reply-To,
/// threading headers, one-click unsubscribe, a Feedback-ID, as text only, HTML only, both,
/// and with files.
fn shapes(domain: &Domain) -> Vec<tidings_core::model::Message> {
    use tidings_core::model::extras::{Attachment, CustomHeader};
    let optional = [
        ("In-Reply-To", "<a1@example.net>"),
        ("References", "<a0@example.net> <a1@example.net>"),
        ("List-Unsubscribe", "<https://acme.example.com/u/1>"),
        ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ("Feedback-ID", "receipts:acme:tidings"),
    ];
    let mut messages = Vec::new();
    for mask in 0..(1 << (optional.len() + 1)) {
        for body in 0..4 {
            let mut message = message_from(domain);
            message.extras.headers = optional
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, (name, value))| CustomHeader::parse(name, value).unwrap())
                .collect();
            if mask & (1 << optional.len()) != 0 {
                message.extras.reply_to =
                    vec![tidings_core::email::EmailAddress::parse("help@acme.example.com").unwrap()];
            }
            match body {
                0 => message.html = None,
                1 => message.text = None,
                2 => {}
                _ => {
                    message.extras.attachments =
                        vec![Attachment::parse("a.csv", "text/csv", "YSxiCjEsMgo=", None).unwrap()]
                }
            }
            messages.push(message);
        }
    }
    messages
}

#[tokio::test]
async fn no_signature_of_any_message_shape_has_white_space_after_its_value() {
    let domain = signing_domain("acme.example.com");
    let signer = DomainSigner::new(&domain).unwrap();
    let (rsa, ed25519) = mail_auth_signers(&domain);
    let mut plain_mail_auth_folded = [0; 2];

    for message in shapes(&domain) {
        let built = build_message(&message, &domain, None).unwrap();
        // What mail-auth alone writes (what was sent before the refolding).
        let plain = [rsa(&built.raw), ed25519(&built.raw)];
        for (count, field) in plain_mail_auth_folded.iter_mut().zip(&plain) {
            *count += usize::from(space_after_signature(field.trim_end()));
        }

        let signed = signer.sign(&built.raw).unwrap();

        let fields = raw_signature_fields(&signed);
        assert_eq!(fields.len(), 2);
        for field in &fields {
            assert!(!space_after_signature(field), "{field}");
            for line in field.split("\r\n") {
                assert!(line.len() <= 78, "a line of {} octets: {field}", line.len());
            }
        }
        both_pass(&verify_dkim(&signed, &domain.records).await, &domain);
    }
    // The shapes include ones where mail-auth folds after the RSA value: this test covers
    // the case it is about. (The Ed25519 value is shorter, and with a ten-digit `t=` no
    // header list puts its end at the margin; `fold`'s tests move it there.)
    assert!(plain_mail_auth_folded[0] > 0, "{plain_mail_auth_folded:?}");
}
