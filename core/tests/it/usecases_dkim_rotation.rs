//! DKIM key rotation through the use cases (docs/api.md#dkim-key-rotation): rotate, verify,
//! the re-check that switches and retires, and the automatic rotation.

use chrono::Duration;
use tidings_core::Error;
use tidings_core::model::{DkimKeyState, Domain, DomainStatus, RecordStatus};
use tidings_core::ports::DomainStore;
use tidings_core::usecases::{AddDomainRequest, CoreConfig, Principal};
use tidings_testing::TestCore;
use tidings_testing::service::{full_key, send_key_beside};

async fn verified(t: &TestCore, who: &Principal, name: &str) -> Domain {
    let domain = t.core.domains().add(who, AddDomainRequest { domain: Some(name.into()) }).await.unwrap();
    t.dns.publish_all(&domain);
    let domain = t.core.domains().verify(who, domain.id).await.unwrap();
    assert_eq!(domain.status, DomainStatus::Verified);
    domain
}

/// The DKIM records as (selector, state, status).
fn dkim(domain: &Domain) -> Vec<(String, DkimKeyState, RecordStatus)> {
    domain
        .records
        .iter()
        .filter_map(|r| domain.dkim_record_state(r).map(|(selector, state)| (selector, state, r.status)))
        .collect()
}

fn publish_pair(t: &TestCore, domain: &Domain, state: DkimKeyState) {
    for record in &domain.records {
        if domain.dkim_record_state(record).is_some_and(|(_, s)| s == state) {
            t.dns.add_txt(&record.name, &record.value);
        }
    }
}

#[tokio::test]
async fn a_rotation_signs_with_the_new_keys_only_once_verify_finds_both_records() {
    let t = TestCore::new();
    let who = full_key();
    let domain = verified(&t, &who, "rotate.example.com").await;
    let old = domain.dkim.clone();

    let rotated = t.core.domains().rotate_dkim(&who, domain.id).await.unwrap();
    let pending = rotated.dkim_rotation.pending.clone().expect("a pending pair");
    assert_ne!(pending.rsa_selector, old.rsa_selector);
    assert_eq!(pending.created_at, Some(t.now()), "the new keys' age is recorded");
    assert_eq!(rotated.dkim, old, "the active keys still sign");
    let states: Vec<_> = dkim(&rotated).into_iter().map(|(_, state, status)| (state, status)).collect();
    assert_eq!(
        states,
        [
            (DkimKeyState::Active, RecordStatus::Verified),
            (DkimKeyState::Active, RecordStatus::Verified),
            (DkimKeyState::Pending, RecordStatus::Pending),
            (DkimKeyState::Pending, RecordStatus::Pending),
        ]
    );
    assert_eq!(t.store.get_domain(who.workspace_id, domain.id).await.unwrap(), Some(rotated.clone()), "stored");

    let unpublished = t.core.domains().verify(&who, domain.id).await.unwrap();
    assert_eq!(unpublished.dkim, old, "new records missing: the old keys still sign");
    assert_eq!(unpublished.status, DomainStatus::Verified, "the pending records do not count toward the status");

    publish_pair(&t, &rotated, DkimKeyState::Pending);
    t.clock.advance(Duration::seconds(5));
    let switched = t.core.domains().verify(&who, domain.id).await.unwrap();
    assert_eq!(switched.dkim, pending, "the new keys sign");
    assert_eq!(switched.dkim_rotation.retiring[0].keys, old, "the old pair is kept");
    assert_eq!(switched.dkim_retire_at(&old.rsa_selector), Some(t.now() + Duration::days(7)), "default 7 days");
    assert_eq!(switched.status, DomainStatus::Verified);
}

#[tokio::test]
async fn a_second_rotation_while_one_is_pending_is_a_conflict_and_other_callers_are_refused() {
    let t = TestCore::new();
    let who = full_key();
    let domain = verified(&t, &who, "twice.example.com").await;
    t.core.domains().rotate_dkim(&who, domain.id).await.unwrap();
    let second = t.core.domains().rotate_dkim(&who, domain.id).await;
    assert!(matches!(second, Err(Error::Conflict(_))), "{second:?}");

    let send_key = send_key_beside(&who);
    assert_eq!(t.core.domains().rotate_dkim(&send_key, domain.id).await.unwrap_err(), Error::InsufficientScope);
    let stranger = full_key();
    assert_eq!(t.core.domains().rotate_dkim(&stranger, domain.id).await.unwrap_err(), Error::NotFound("domain"));
}

#[tokio::test]
async fn the_recheck_switches_retires_and_finally_drops_the_old_pair() {
    let retire_after = Duration::hours(2);
    let t = TestCore::with_config(CoreConfig { dkim_retire_after: retire_after, ..CoreConfig::default() });
    let who = full_key();
    let domain = verified(&t, &who, "recheck.example.com").await;
    let old = domain.dkim.clone();
    let rotated = t.core.domains().rotate_dkim(&who, domain.id).await.unwrap();
    publish_pair(&t, &rotated, DkimKeyState::Pending);

    t.clock.advance(Duration::minutes(11));
    let report = t.core.domains().recheck(t.now(), 10).await.unwrap();
    assert_eq!(report.checked, 1, "a Verified domain with a pending rotation is re-checked");
    let stored = |t: &TestCore| {
        let store = t.store.clone();
        let (ws, id) = (who.workspace_id, domain.id);
        async move { store.get_domain(ws, id).await.unwrap().unwrap() }
    };
    let switched = stored(&t).await;
    assert_eq!(Some(&switched.dkim), rotated.dkim_rotation.pending.as_ref());
    let switch_time = t.now();

    t.clock.advance(Duration::minutes(11));
    t.core.domains().recheck(t.now(), 10).await.unwrap();
    assert_eq!(stored(&t).await.dkim_rotation.retiring.len(), 1, "still retiring");

    t.clock.advance(retire_after);
    t.core.domains().recheck(t.now(), 10).await.unwrap();
    let retired = stored(&t).await;
    assert!(retired.dkim_rotation.retiring.is_empty());
    let gone = &retired.dkim_rotation.retired[0];
    assert_eq!(gone.rsa_selector, old.rsa_selector);
    assert!(gone.retired_at >= switch_time + retire_after);
    assert_eq!(retired.dkim_selector_state(&old.ed25519_selector), Some(DkimKeyState::Retired));

    t.clock.advance(retire_after + Duration::minutes(11));
    t.core.domains().recheck(t.now(), 10).await.unwrap();
    let done = stored(&t).await;
    assert!(done.dkim_rotation.is_empty(), "{:?}", done.dkim_rotation);
    assert_eq!(dkim(&done).len(), 2);
    t.clock.advance(Duration::minutes(11));
    assert_eq!(t.core.domains().recheck(t.now(), 10).await.unwrap().checked, 0, "nothing left to re-check");
}

#[tokio::test]
async fn automatic_rotation_rotates_verified_domains_with_old_keys_and_never_the_sandbox() {
    let every = Duration::days(90);
    let t = TestCore::with_config(CoreConfig {
        dkim_rotate_every: Some(every),
        sandbox_sending: true,
        ..CoreConfig::default()
    });
    let who = full_key();
    let old = verified(&t, &who, "old.example.com").await;
    let unverified = t.core.domains().add(&who, AddDomainRequest { domain: Some("new.example.com".into()) }).await;
    unverified.unwrap();
    let sandbox = t.core.domains().list(&who, Default::default()).await.unwrap();
    assert!(sandbox.items.iter().any(Domain::is_sandbox), "the sandbox exists and has keys of the same age");

    assert!(t.core.domains().rotate_due(t.now(), 10).await.unwrap().is_empty(), "keys made just now");
    t.clock.advance(every + Duration::seconds(1));
    let rotated = t.core.domains().rotate_due(t.now(), 10).await.unwrap();
    assert_eq!(rotated, [old.id], "only the Verified customer domain");
    let stored = t.store.get_domain(who.workspace_id, old.id).await.unwrap().unwrap();
    assert!(stored.dkim_rotation.pending.is_some());
    assert!(t.core.domains().rotate_due(t.now(), 10).await.unwrap().is_empty(), "not again while pending");

    let off = TestCore::new();
    let who = full_key();
    verified(&off, &who, "off.example.com").await;
    off.clock.advance(Duration::days(3650));
    assert!(off.core.domains().rotate_due(off.now(), 10).await.unwrap().is_empty(), "off by default");
}

#[tokio::test]
async fn the_sandbox_domain_never_rotates() {
    let t = TestCore::with_config(CoreConfig { sandbox_sending: true, ..CoreConfig::default() });
    let who = full_key();
    let listed = t.core.domains().list(&who, Default::default()).await.unwrap();
    let sandbox = listed.items.iter().find(|d| d.is_sandbox()).unwrap();
    let result = t.core.domains().rotate_dkim(&who, sandbox.id).await;
    assert!(matches!(result, Err(Error::Validation { .. })), "{result:?}");
}
