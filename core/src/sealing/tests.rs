use chrono::Utc;

use super::*;
use crate::dkim_keys::test_keys;
use crate::dns_records::{RecordPolicy, records_for};
use crate::domain_name::DomainName;
use crate::ids::{DomainId, WebhookId, WorkspaceId};
use crate::model::{DomainKind, DomainStatus, WebhookSecret, WebhookUrl};
use crate::ports::SystemRandom;
use crate::secret::SecretName;

fn sealer() -> Sealer {
    Sealer::new(&SealingKey::generate(&SystemRandom))
}

fn domain() -> Domain {
    let name = DomainName::parse("example.com").unwrap();
    let keys = test_keys().clone();
    Domain {
        id: DomainId::new_at(Utc::now(), &SystemRandom),
        workspace_id: WorkspaceId::new_at(Utc::now(), &SystemRandom),
        records: records_for(&name, &keys, &RecordPolicy::default()).unwrap(),
        name,
        status: DomainStatus::Pending,
        dkim: keys,
        dkim_rotation: Default::default(),
        open_tracking: false,
        click_tracking: false,
        created_at: Utc::now(),
        verified_at: None,
        last_checked_at: None,
        kind: DomainKind::Customer,
        inbound: false,
    }
}

fn webhook() -> WebhookEndpoint {
    WebhookEndpoint {
        id: WebhookId::new_at(Utc::now(), &SystemRandom),
        workspace_id: WorkspaceId::new_at(Utc::now(), &SystemRandom),
        url: WebhookUrl::parse("https://hooks.example.com/x", false).unwrap(),
        event_types: Vec::new(),
        enabled: true,
        format: crate::model::WebhookFormat::Tidings,
        secret: WebhookSecret::generate(&SystemRandom),
        previous_secret: Some((WebhookSecret::generate(&SystemRandom), Utc::now())),
        disabled_reason: None,
        failing_since: None,
        created_at: Utc::now(),
        updated_at: Utc::now(),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_sealed_value_opens_with_its_key_and_label_only() {
    let (a, b) = (sealer(), sealer());
    let sealed = a.seal("secret x", b"tracking key bytes").unwrap();
    assert!(is_sealed(&sealed) && !contains(&sealed, b"tracking key bytes"));
    assert_eq!(a.open("secret x", &sealed).unwrap(), b"tracking key bytes");
    assert_ne!(a.seal("secret x", b"tracking key bytes").unwrap(), sealed, "a fresh nonce each time");
    assert!(matches!(b.open("secret x", &sealed), Err(SealError::DoesNotOpen { .. })));
    assert!(matches!(a.open("secret y", &sealed), Err(SealError::DoesNotOpen { .. })));
    let mut altered = sealed.clone();
    *altered.last_mut().unwrap() ^= 1;
    assert!(matches!(a.open("secret x", &altered), Err(SealError::DoesNotOpen { .. })));
    assert!(matches!(a.open("secret x", &sealed[..20]), Err(SealError::Malformed { .. })));
    // Written before sealing existed: read as it is.
    assert_eq!(a.open("secret x", b"\x30\x82plain").unwrap(), b"\x30\x82plain");
}

#[test]
fn the_key_check_tells_the_right_key_from_another() {
    let (a, b) = (sealer(), sealer());
    let check = a.key_check().unwrap();
    a.verify_key_check(&check).unwrap();
    assert!(matches!(b.verify_key_check(&check), Err(SealError::DoesNotOpen { .. })));
    let other = a.seal("key check", b"something else").unwrap();
    assert!(a.verify_key_check(&other).is_err());
    assert!(a.verify_key_check(b"plain").is_err());
}

#[test]
fn sealed_records_hold_no_secret_and_open_to_the_record() {
    let s = sealer();
    let domain = domain();
    let sealed = s.seal_record(&domain).unwrap();
    assert!(sealed.is_sealed());
    let json = serde_json::to_vec(&sealed).unwrap();
    for key in [&domain.dkim.rsa_private_pkcs8, &domain.dkim.ed25519_private_pkcs8] {
        assert!(!contains(&json, BASE64.encode(key.expose()).as_bytes()));
        assert!(!contains(&json, &key.expose()[..40]));
    }
    assert!(contains(&json, br#""rsa_private_pkcs8":"tdsealv1"#), "{}", String::from_utf8_lossy(&json));
    let decoded: Sealed<Domain> = serde_json::from_slice(&json).unwrap();
    assert_eq!(decoded.unopened().name, domain.name);
    assert_eq!(s.open_record(decoded).unwrap(), domain);

    let hook = webhook();
    let sealed = s.seal_record(&hook).unwrap();
    assert!(sealed.is_sealed());
    let json = serde_json::to_string(&sealed).unwrap();
    assert!(!json.contains(hook.secret.expose()) && !json.contains(hook.previous_secret.as_ref().unwrap().0.expose()));
    let decoded: Sealed<WebhookEndpoint> = serde_json::from_str(&json).unwrap();
    assert_eq!(s.open_record(decoded).unwrap(), hook);
}

#[test]
fn plaintext_records_of_older_stores_read_and_are_told_apart() {
    let s = sealer();
    let domain = domain();
    let old: Sealed<Domain> = serde_json::from_value(serde_json::to_value(&domain).unwrap()).unwrap();
    assert!(!old.is_sealed());
    assert_eq!(s.open_record(old).unwrap(), domain);
    let hook = webhook();
    let old: Sealed<WebhookEndpoint> = serde_json::from_value(serde_json::to_value(&hook).unwrap()).unwrap();
    assert!(!old.is_sealed());
    assert_eq!(s.open_record(old).unwrap(), hook);
}

#[test]
fn a_sealed_secret_moved_to_another_record_does_not_open() {
    let s = sealer();
    let (a, b) = (domain(), domain());
    let sealed_a = serde_json::to_value(s.seal_record(&a).unwrap()).unwrap();
    let mut sealed_b = serde_json::to_value(s.seal_record(&b).unwrap()).unwrap();
    sealed_b["dkim"]["rsa_private_pkcs8"] = sealed_a["dkim"]["rsa_private_pkcs8"].clone();
    let moved: Sealed<Domain> = serde_json::from_value(sealed_b).unwrap();
    assert!(matches!(s.open_record(moved), Err(SealError::DoesNotOpen { .. })));
    assert!(matches!(sealer().open_record(s.seal_record(&a).unwrap()), Err(SealError::DoesNotOpen { .. })));
}

#[test]
fn keys_read_from_base64_and_never_show() {
    let key = SealingKey::generate(&SystemRandom);
    let text = key.to_base64();
    assert_eq!(SealingKey::from_base64(&format!(" {}\n", text.expose())).unwrap(), key);
    assert_eq!(format!("{key:?}"), "SealingKey(***)");
    assert_eq!(format!("{:?}", Sealer::new(&key)), "Sealer(***)");
    assert_eq!(SealingKey::from_base64("not base64!"), Err(SealingKeyError::NotBase64));
    assert_eq!(SealingKey::from_base64("AAAA"), Err(SealingKeyError::WrongLength(3)));
    assert_eq!(secret_label(SecretName::new("tracking_key").as_str()), "secret tracking_key");
    assert_eq!(BASE64.encode(MAGIC), SEALED_TEXT_PREFIX);
}

fn key() -> SealingKey {
    SealingKey::generate(&SystemRandom)
}

#[test]
fn a_rotating_sealer_opens_the_previous_key_and_seals_with_the_new_one() {
    let (old, new) = (key(), key());
    let before = Sealer::new(&old);
    let during = Sealer::with_previous(&new, &old);
    let after = Sealer::new(&new);

    let sealed_before = before.seal("secret x", b"value").unwrap();
    assert_eq!(during.open("secret x", &sealed_before).unwrap(), b"value");
    assert!(!during.is_under_key("secret x", &sealed_before));
    let sealed_during = during.seal("secret x", b"value").unwrap();
    assert!(during.is_under_key("secret x", &sealed_during));
    assert_eq!(after.open("secret x", &sealed_during).unwrap(), b"value", "sealed with the new key");
    assert!(matches!(before.open("secret x", &sealed_during), Err(SealError::DoesNotOpen { .. })));
    assert!(matches!(during.open("secret y", &sealed_before), Err(SealError::DoesNotOpen { .. })), "label bound");

    // The key check of either key passes during the change; only the new one is current.
    assert!(during.verify_key_check(&before.key_check().unwrap()).is_ok());
    assert!(during.verify_key_check(&after.key_check().unwrap()).is_ok());
    assert!(!during.key_check_is_current(&before.key_check().unwrap()));
    assert!(during.key_check_is_current(&during.key_check().unwrap()));
    assert!(after.verify_key_check(&before.key_check().unwrap()).is_err());
}

#[test]
fn a_value_neither_key_opens_is_refused() {
    let (old, new, other) = (key(), key(), key());
    let during = Sealer::with_previous(&new, &old);
    let foreign = Sealer::new(&other).seal("secret x", b"value").unwrap();
    assert!(matches!(during.open("secret x", &foreign), Err(SealError::DoesNotOpen { .. })));
    assert!(matches!(during.reseal("secret x", &foreign), Err(SealError::DoesNotOpen { .. })));
    assert!(during.verify_key_check(&Sealer::new(&other).key_check().unwrap()).is_err());
    let sealed = Sealer::new(&other).seal_record(&domain()).unwrap();
    assert!(during.reseal_record(&sealed).is_err());
    assert!(during.open_record(sealed).is_err());
}

#[test]
fn resealing_rewrites_only_what_is_not_under_the_new_key_and_keeps_every_other_field() {
    let (old, new) = (key(), key());
    let during = Sealer::with_previous(&new, &old);
    let after = Sealer::new(&new);

    let plain = during.reseal("secret t", b"tracking").unwrap().expect("plaintext is sealed");
    assert_eq!(after.open("secret t", &plain).unwrap(), b"tracking");
    let under_old = Sealer::new(&old).seal("secret t", b"tracking").unwrap();
    let moved = during.reseal("secret t", &under_old).unwrap().expect("the previous key's value is resealed");
    assert_eq!(after.open("secret t", &moved).unwrap(), b"tracking");
    assert_eq!(during.reseal("secret t", &moved).unwrap(), None, "already under the new key");

    let (domain, webhook) = (domain(), webhook());
    let stored_domain = Sealer::new(&old).seal_record(&domain).unwrap();
    let stored_webhook = Sealer::new(&old).seal_record(&webhook).unwrap();
    let resealed_domain = during.reseal_record(&stored_domain).unwrap().expect("under the old key");
    let resealed_webhook = during.reseal_record(&stored_webhook).unwrap().expect("under the old key");
    assert_eq!(after.open_record(resealed_domain.clone()).unwrap(), domain, "same keys, same fields");
    assert_eq!(after.open_record(resealed_webhook.clone()).unwrap(), webhook, "both secrets, same fields");
    assert_eq!(during.reseal_record(&resealed_domain).unwrap(), None);
    assert_eq!(during.reseal_record(&resealed_webhook).unwrap(), None);

    // One field left under the old key (a record half-written by nothing, or by hand) is enough.
    let mut mixed = resealed_webhook.unopened().clone();
    let old_text = Sealer::new(&old).seal_record(&webhook).unwrap().unopened().secret.expose().to_owned();
    *mixed.secret.secret_mut() = Secret::new(old_text);
    let mixed = Sealed(mixed);
    let fixed = during.reseal_record(&mixed).unwrap().expect("one secret under the old key");
    assert_eq!(after.open_record(fixed).unwrap(), webhook);
}

#[test]
fn every_private_key_of_a_rotation_is_sealed_and_a_retired_pair_has_none() {
    let s = sealer();
    let mut domain = domain();
    let distinct = |byte: u8| crate::model::DkimKeys {
        rsa_selector: format!("td{byte}r"),
        rsa_private_pkcs8: crate::secret::Secret::new(vec![0x30, byte, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
        ed25519_selector: format!("td{byte}e"),
        ed25519_private_pkcs8: crate::secret::Secret::new(vec![0x30, byte, 11, 12, 13, 14, 15, 16, 17, 18]),
        created_at: None,
    };
    domain.dkim_rotation.pending = Some(distinct(1));
    domain.dkim_rotation.retiring.push(crate::model::RetiringDkimKeys {
        keys: distinct(2),
        replaced_at: Utc::now(),
        retire_at: Utc::now(),
    });
    let sealed = s.seal_record(&domain).unwrap();
    assert!(sealed.is_sealed());
    let json = serde_json::to_vec(&sealed).unwrap();
    for keys in [domain.dkim_rotation.pending.as_ref().unwrap(), &domain.dkim_rotation.retiring[0].keys] {
        for key in [&keys.rsa_private_pkcs8, &keys.ed25519_private_pkcs8] {
            assert!(!contains(&json, BASE64.encode(key.expose()).as_bytes()), "{}", String::from_utf8_lossy(&json));
        }
    }
    assert_eq!(s.open_record(serde_json::from_slice::<Sealed<Domain>>(&json).unwrap()).unwrap(), domain);
    // A pending key sealed under one pair does not open as another's.
    let mut moved = serde_json::to_value(s.seal_record(&domain).unwrap()).unwrap();
    moved["dkim_rotation"]["pending"]["rsa_private_pkcs8"] =
        moved["dkim_rotation"]["retiring"][0]["keys"]["rsa_private_pkcs8"].clone();
    let moved: Sealed<Domain> = serde_json::from_value(moved).unwrap();
    assert!(matches!(s.open_record(moved), Err(SealError::DoesNotOpen { .. })));
}
