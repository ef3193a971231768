//! The domain and sender use cases over the in-memory store, a fixed clock and a fake DNS
//! that serves whatever records the test publishes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use chrono::Duration;
use tidings_core::Error;
use tidings_core::ids::{DomainId, WorkspaceId};
use tidings_core::model::{Domain, DomainStatus, KeyScope, RecordKind, RecordStatus, SenderUsername};
use tidings_core::ports::{DnsCheck, DnsError, DomainStore};
use tidings_core::usecases::{AddDomainRequest, AddSenderRequest, ListParams, Principal, UpdateDomainTrackingRequest};
use tidings_testing::MemoryStore;
use tidings_testing::service::{full_key, invalid_fields, key_in, send_key_beside};
use tidings_testing::{FakeDns, TestCore};

const ALL_KINDS: [RecordKind; 4] = [RecordKind::Spf, RecordKind::Dkim, RecordKind::Dkim2, RecordKind::Dmarc];

fn add(name: &str) -> AddDomainRequest {
    AddDomainRequest { domain: Some(name.to_owned()) }
}

fn sender(username: &str, display_name: Option<&str>) -> AddSenderRequest {
    AddSenderRequest { username: Some(username.to_owned()), display_name: display_name.map(str::to_owned) }
}

/// Marks a domain Verified directly in the store, so sender tests do not depend on DNS.
async fn mark_verified(t: &TestCore, domain: &Domain) -> Domain {
    let verified = Domain { status: DomainStatus::Verified, verified_at: Some(t.now()), ..domain.clone() };
    t.store.update_domain(&verified).await.unwrap();
    verified
}

async fn verified_domain(t: &TestCore, who: &Principal, name: &str) -> Domain {
    let domain = t.core.domains().add(who, add(name)).await.unwrap();
    mark_verified(t, &domain).await
}

// --- adding ---------------------------------------------------------------------------------

#[tokio::test]
async fn adding_a_domain_makes_it_pending_with_the_four_records_to_publish() {
    let t = TestCore::new();
    let who = full_key();

    let domain = t.core.domains().add(&who, add("Example.COM.")).await.unwrap();

    assert_eq!(domain.name.as_str(), "example.com");
    assert_eq!(domain.workspace_id, who.workspace_id);
    assert_eq!(domain.status, DomainStatus::Pending);
    assert_eq!(domain.verified_at, None);
    assert_eq!(domain.last_checked_at, None);
    assert_eq!(domain.created_at, t.now());
    assert!(!domain.open_tracking && !domain.click_tracking);
    let kinds: Vec<RecordKind> = domain.records.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, ALL_KINDS);
    let names: Vec<&str> = domain.records.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "example.com".to_owned(),
            format!("{}._domainkey.example.com", domain.dkim.rsa_selector),
            format!("{}._domainkey.example.com", domain.dkim.ed25519_selector),
            "_dmarc.example.com".to_owned(),
        ]
    );
    assert_ne!(domain.dkim.rsa_selector, domain.dkim.ed25519_selector);
    for record in &domain.records {
        assert_eq!(record.record_type, "TXT");
        assert_eq!(record.status, RecordStatus::Pending);
        assert_eq!(record.last_checked_at, None);
    }
    assert!(domain.records[0].value.starts_with("v=spf1 "));
    assert!(domain.records[1].value.starts_with("v=DKIM1; k=rsa; p="));
    assert!(domain.records[2].value.starts_with("v=DKIM1; k=ed25519; p="));
    assert!(domain.records[3].value.starts_with("v=DMARC1;"));

    assert_eq!(t.core.domains().get(&who, domain.id).await.unwrap(), domain);
}

#[tokio::test]
async fn a_missing_or_malformed_domain_name_is_a_validation_error_naming_domain() {
    let t = TestCore::new();
    let who = full_key();

    assert_eq!(invalid_fields(t.core.domains().add(&who, AddDomainRequest { domain: None }).await), ["domain"]);
    for bad in ["", "localhost", "exa mple.com", "1.2.3.4", "a..com", "example.com\r\nx"] {
        assert_eq!(invalid_fields(t.core.domains().add(&who, add(bad)).await), ["domain"], "{bad:?}");
    }
    let listed = t.core.domains().list(&who, ListParams::default()).await.unwrap();
    assert!(listed.items.is_empty());
}

#[tokio::test]
async fn adding_a_domain_twice_is_a_conflict_whatever_its_spelling() {
    let t = TestCore::new();
    let who = full_key();
    t.core.domains().add(&who, add("example.com")).await.unwrap();

    let again = t.core.domains().add(&who, add("EXAMPLE.com.")).await;

    assert_eq!(again, Err(Error::Conflict("domain example.com is already added".to_owned())));
    assert_eq!(t.core.domains().list(&who, ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn a_deleted_domain_can_be_added_again_with_new_selectors_and_keys() {
    let t = TestCore::new();
    let who = full_key();
    let first = t.core.domains().add(&who, add("example.com")).await.unwrap();

    t.core.domains().delete(&who, first.id).await.unwrap();
    let second = t.core.domains().add(&who, add("example.com")).await.unwrap();

    assert_eq!(t.core.domains().get(&who, first.id).await, Err(Error::NotFound("domain")));
    assert_ne!(second.id, first.id);
    assert_ne!(second.dkim.rsa_selector, first.dkim.rsa_selector);
    assert_ne!(second.dkim.ed25519_selector, first.dkim.ed25519_selector);
    assert_ne!(second.dkim.rsa_private_pkcs8, first.dkim.rsa_private_pkcs8);
    assert_ne!(second.dkim.ed25519_private_pkcs8, first.dkim.ed25519_private_pkcs8);
    for (old, new) in first.records.iter().zip(&second.records).skip(1).take(2) {
        assert_ne!(old.name, new.name);
        assert_ne!(old.value, new.value);
    }
}

#[tokio::test]
async fn deleting_an_unknown_domain_is_not_found() {
    let t = TestCore::new();
    let who = full_key();

    assert_eq!(
        t.core.domains().delete(&who, DomainId(tidings_testing::fixtures::ulid())).await,
        Err(Error::NotFound("domain"))
    );
    assert_eq!(
        t.core.domains().delete(&who, DomainId::parse_or_none("not-an-id")).await,
        Err(Error::NotFound("domain"))
    );
    assert_eq!(t.core.domains().get(&who, DomainId::parse_or_none("")).await, Err(Error::NotFound("domain")));
    assert_eq!(t.core.domains().verify(&who, DomainId::parse_or_none("../etc")).await, Err(Error::NotFound("domain")));
}

// --- listing --------------------------------------------------------------------------------

#[tokio::test]
async fn domains_are_listed_newest_first_in_pages() {
    let t = TestCore::new();
    let who = full_key();
    let mut added = Vec::new();
    for name in ["a.example.com", "b.example.com", "c.example.com"] {
        added.push(t.core.domains().add(&who, add(name)).await.unwrap());
        // Ids made in one millisecond have no order among themselves.
        t.clock.advance(Duration::milliseconds(1));
    }

    let first = t.core.domains().list(&who, ListParams { limit: Some(2), cursor: None }).await.unwrap();
    let second =
        t.core.domains().list(&who, ListParams { limit: Some(2), cursor: first.next_cursor.clone() }).await.unwrap();

    assert_eq!(first.items, [added[2].clone(), added[1].clone()]);
    assert!(first.has_more);
    assert_eq!(first.next_cursor, Some(added[1].id.to_string()));
    assert_eq!(second.items, [added[0].clone()]);
    assert!(!second.has_more);
    assert_eq!(second.next_cursor, None);
    assert_eq!(
        invalid_fields(t.core.domains().list(&who, ListParams { limit: Some(0), cursor: None }).await),
        ["limit"]
    );
    assert_eq!(
        invalid_fields(t.core.domains().list(&who, ListParams { limit: None, cursor: Some("nope".into()) }).await),
        ["cursor"]
    );
}

// --- verification ---------------------------------------------------------------------------

#[tokio::test]
async fn a_domain_whose_records_are_all_published_verifies() {
    let t = TestCore::new();
    let who = full_key();
    let domain = t.core.domains().add(&who, add("example.com")).await.unwrap();
    t.dns.publish_all(&domain);
    t.clock.advance(Duration::minutes(3));

    let verified = t.core.domains().verify(&who, domain.id).await.unwrap();

    let failures: Vec<_> = verified.records.iter().filter_map(|r| r.error.as_deref()).collect();
    assert_eq!(failures, Vec::<&str>::new());
    assert_eq!(verified.status, DomainStatus::Verified);
    assert_eq!(verified.verified_at, Some(t.now()));
    assert_eq!(verified.last_checked_at, Some(t.now()));
    for record in &verified.records {
        assert_eq!(record.status, RecordStatus::Verified, "{:?}", record.kind);
        assert_eq!(record.last_checked_at, Some(t.now()));
    }
    assert_eq!(t.core.domains().get(&who, domain.id).await.unwrap(), verified);
}

#[tokio::test]
async fn a_domain_with_some_records_published_is_partially_verified_and_not_sendable() {
    let t = TestCore::new();
    let who = full_key();
    let domain = t.core.domains().add(&who, add("example.com")).await.unwrap();
    t.dns.publish(&domain, &[RecordKind::Spf]);

    let checked = t.core.domains().verify(&who, domain.id).await.unwrap();

    assert_eq!(checked.status, DomainStatus::PartiallyVerified);
    assert_eq!(checked.verified_at, None);
    assert_eq!(checked.record_status(RecordKind::Spf), RecordStatus::Verified);
    assert_eq!(checked.record_status(RecordKind::Dkim), RecordStatus::Failed);
    assert!(checked.records[1].error.is_some());
    assert_eq!(t.core.domains().get(&who, domain.id).await.unwrap().status, DomainStatus::PartiallyVerified);
    let refused = t.core.senders().add(&who, domain.id, sender("billing", None)).await;
    assert_eq!(refused, Err(Error::DomainNotVerified("domain example.com is not verified".to_owned())));
}

#[tokio::test]
async fn a_domain_with_nothing_published_fails_verification() {
    let t = TestCore::new();
    let who = full_key();
    let domain = t.core.domains().add(&who, add("example.com")).await.unwrap();

    let checked = t.core.domains().verify(&who, domain.id).await.unwrap();

    assert_eq!(checked.status, DomainStatus::Failed);
    assert!(checked.records.iter().all(|r| r.status == RecordStatus::Failed && r.error.is_some()));
    assert_eq!(checked.verified_at, None);
}

#[tokio::test]
async fn verified_at_keeps_the_first_success_when_records_later_disappear() {
    let t = TestCore::new();
    let who = full_key();
    let domain = t.core.domains().add(&who, add("example.com")).await.unwrap();
    let id = domain.id.to_string();
    t.dns.publish_all(&domain);
    let first_success = t.now();
    assert_eq!(
        t.core.domains().verify(&who, DomainId::parse_or_none(&id)).await.unwrap().verified_at,
        Some(first_success)
    );

    t.dns.clear();
    t.clock.advance(Duration::hours(1));
    let later = t.core.domains().verify(&who, DomainId::parse_or_none(&id)).await.unwrap();

    assert_eq!(later.status, DomainStatus::Failed);
    assert_eq!(later.verified_at, Some(first_success));
    assert_eq!(later.last_checked_at, Some(t.now()));
}

/// A DNS whose first lookup runs `during` against the store, to act between the read and
/// the write of a verification.
struct MeddlingDns {
    inner: Arc<FakeDns>,
    store: Arc<MemoryStore>,
    target: std::sync::Mutex<Option<(WorkspaceId, DomainId)>>,
    delete: bool,
    done: AtomicBool,
}

#[async_trait]
impl DnsCheck for MeddlingDns {
    async fn txt_records(&self, name: &tidings_core::domain_name::DnsName) -> Result<Vec<String>, DnsError> {
        let target = *self.target.lock().unwrap();
        if let Some((ws, id)) = target
            && !self.done.swap(true, Ordering::SeqCst)
        {
            if self.delete {
                self.store.delete_domain(ws, id).await.unwrap();
            } else {
                let mut domain = self.store.get_domain(ws, id).await.unwrap().unwrap();
                domain.click_tracking = true;
                self.store.update_domain(&domain).await.unwrap();
            }
        }
        self.inner.txt_records(name).await
    }

    async fn mx_records(&self, name: &tidings_core::domain_name::DnsName) -> Result<Vec<(u16, String)>, DnsError> {
        self.inner.mx_records(name).await
    }
}

async fn meddled(delete: bool) -> (TestCore, Arc<MeddlingDns>, Principal, Domain) {
    let fake = Arc::new(FakeDns::default());
    let store = Arc::new(MemoryStore::new());
    let dns = Arc::new(MeddlingDns {
        inner: Arc::clone(&fake),
        store: Arc::clone(&store),
        target: std::sync::Mutex::new(None),
        delete,
        done: AtomicBool::new(false),
    });
    let t = TestCore::with_store_and_dns(store, Arc::clone(&dns) as _, fake);
    let who = full_key();
    let domain = t.core.domains().add(&who, add("example.com")).await.unwrap();
    *dns.target.lock().unwrap() = Some((who.workspace_id, domain.id));
    (t, dns, who, domain)
}

#[tokio::test]
async fn verifying_a_domain_deleted_during_the_dns_lookups_is_not_found() {
    let (t, dns, who, domain) = meddled(true).await;
    t.dns.publish_all(&domain);

    let result = t.core.domains().verify(&who, domain.id).await;

    assert!(dns.done.load(Ordering::SeqCst));
    assert_eq!(result, Err(Error::NotFound("domain")));
    assert_eq!(t.core.domains().list(&who, ListParams::default()).await.unwrap().items, []);
}

#[tokio::test]
async fn a_tracking_change_made_during_verification_is_kept() {
    let (t, dns, who, domain) = meddled(false).await;
    t.dns.publish(&domain, &[RecordKind::Spf]);

    let checked = t.core.domains().verify(&who, domain.id).await.unwrap();

    assert!(dns.done.load(Ordering::SeqCst));
    assert!(checked.click_tracking);
    assert_eq!(checked.record_status(RecordKind::Spf), RecordStatus::Verified);
    assert_eq!(t.core.domains().get(&who, domain.id).await.unwrap(), checked);
}

// --- tracking -------------------------------------------------------------------------------

#[tokio::test]
async fn tracking_is_switched_per_field() {
    let t = TestCore::new();
    let who = full_key();
    let domain = t.core.domains().add(&who, add("example.com")).await.unwrap();
    let id = domain.id.to_string();

    let opened = t
        .core
        .domains()
        .update_tracking(
            &who,
            DomainId::parse_or_none(&id),
            UpdateDomainTrackingRequest { open_tracking: Some(true), click_tracking: None, inbound: None },
        )
        .await
        .unwrap();
    let clicked = t
        .core
        .domains()
        .update_tracking(
            &who,
            DomainId::parse_or_none(&id),
            UpdateDomainTrackingRequest { open_tracking: None, click_tracking: Some(true), inbound: None },
        )
        .await
        .unwrap();
    let unchanged = t
        .core
        .domains()
        .update_tracking(&who, DomainId::parse_or_none(&id), UpdateDomainTrackingRequest::default())
        .await
        .unwrap();

    assert!(opened.open_tracking && !opened.click_tracking);
    assert!(clicked.open_tracking && clicked.click_tracking);
    assert_eq!(unchanged, clicked);
    assert_eq!(t.core.domains().get(&who, DomainId::parse_or_none(&id)).await.unwrap(), clicked);
    assert_eq!(
        t.core
            .domains()
            .update_tracking(
                &who,
                DomainId::parse_or_none("01ARZ3NDEKTSV4RRFFQ69G5FAV"),
                UpdateDomainTrackingRequest::default()
            )
            .await,
        Err(Error::NotFound("domain"))
    );
}

// --- isolation and scope --------------------------------------------------------------------

#[tokio::test]
async fn another_workspace_sees_nothing_and_may_add_the_same_name() {
    let t = TestCore::new();
    let alice = full_key();
    let bob = full_key();
    let domain = verified_domain(&t, &alice, "example.com").await;
    t.core.senders().add(&alice, domain.id, sender("billing", None)).await.unwrap();
    let id = domain.id.to_string();

    assert_eq!(t.core.domains().get(&bob, DomainId::parse_or_none(&id)).await, Err(Error::NotFound("domain")));
    assert_eq!(t.core.domains().verify(&bob, DomainId::parse_or_none(&id)).await, Err(Error::NotFound("domain")));
    assert_eq!(
        t.core
            .domains()
            .update_tracking(&bob, DomainId::parse_or_none(&id), UpdateDomainTrackingRequest::default())
            .await,
        Err(Error::NotFound("domain"))
    );
    assert_eq!(t.core.domains().delete(&bob, DomainId::parse_or_none(&id)).await, Err(Error::NotFound("domain")));
    assert_eq!(
        t.core.senders().add(&bob, DomainId::parse_or_none(&id), sender("x", None)).await,
        Err(Error::NotFound("domain"))
    );
    assert_eq!(
        t.core.senders().list(&bob, DomainId::parse_or_none(&id), ListParams::default()).await,
        Err(Error::NotFound("domain"))
    );
    assert_eq!(
        t.core.senders().delete(&bob, DomainId::parse_or_none(&id), SenderUsername::parse("billing").into()).await,
        Err(Error::NotFound("domain"))
    );
    assert_eq!(t.core.senders().find(bob.workspace_id, domain.id, "billing").await, Ok(None));
    assert!(t.core.domains().list(&bob, ListParams::default()).await.unwrap().items.is_empty());

    let bobs = t.core.domains().add(&bob, add("example.com")).await.unwrap();
    assert_ne!(bobs.id, domain.id);
    assert_eq!(t.core.domains().get(&alice, DomainId::parse_or_none(&id)).await.unwrap(), domain);
}

#[tokio::test]
async fn a_send_key_may_not_manage_domains_or_senders() {
    let t = TestCore::new();
    let who = full_key();
    let domain = verified_domain(&t, &who, "example.com").await;
    let id = domain.id.to_string();
    let sender_key = send_key_beside(&who);
    let denied = Err::<(), _>(Error::InsufficientScope);

    assert_eq!(t.core.domains().add(&sender_key, add("other.com")).await.map(drop), denied);
    assert_eq!(t.core.domains().list(&sender_key, ListParams::default()).await.map(drop), denied);
    assert_eq!(t.core.domains().get(&sender_key, DomainId::parse_or_none(&id)).await.map(drop), denied);
    assert_eq!(t.core.domains().verify(&sender_key, DomainId::parse_or_none(&id)).await.map(drop), denied);
    assert_eq!(
        t.core
            .domains()
            .update_tracking(&sender_key, DomainId::parse_or_none(&id), UpdateDomainTrackingRequest::default())
            .await
            .map(drop),
        denied
    );
    assert_eq!(t.core.domains().delete(&sender_key, DomainId::parse_or_none(&id)).await, denied);
    assert_eq!(
        t.core.senders().add(&sender_key, DomainId::parse_or_none(&id), sender("billing", None)).await.map(drop),
        denied
    );
    assert_eq!(
        t.core.senders().list(&sender_key, DomainId::parse_or_none(&id), ListParams::default()).await.map(drop),
        denied
    );
    assert_eq!(
        t.core
            .senders()
            .delete(&sender_key, DomainId::parse_or_none(&id), SenderUsername::parse("billing").into())
            .await,
        denied
    );
    // Nothing happened.
    assert_eq!(t.core.domains().get(&who, DomainId::parse_or_none(&id)).await.unwrap(), domain);
    assert!(
        t.core
            .senders()
            .list(&who, DomainId::parse_or_none(&id), ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

// --- senders --------------------------------------------------------------------------------

#[tokio::test]
async fn a_sender_is_registered_on_a_verified_domain() {
    let t = TestCore::new();
    let who = full_key();
    let domain = verified_domain(&t, &who, "example.com").await;

    let added = t.core.senders().add(&who, domain.id, sender("Billing", Some(" Acme Billing "))).await.unwrap();

    assert_eq!(added.username.as_str(), "Billing");
    assert_eq!(added.address.to_string(), "Billing@example.com");
    assert_eq!(added.display_name.as_ref().map(|n| n.as_str()), Some("Acme Billing"));
    assert_eq!(added.domain_id, domain.id);
    assert_eq!(added.workspace_id, who.workspace_id);
    assert_eq!(added.created_at, t.now());
    assert_eq!(t.core.senders().find(who.workspace_id, domain.id, "billing").await, Ok(Some(added.clone())));
    assert_eq!(t.core.senders().find(who.workspace_id, domain.id, "someone").await, Ok(None));
    assert_eq!(t.core.senders().find(who.workspace_id, domain.id, "not valid").await, Ok(None));
}

#[tokio::test]
async fn senders_are_refused_on_pending_and_unknown_domains() {
    let t = TestCore::new();
    let who = full_key();
    let pending = t.core.domains().add(&who, add("example.com")).await.unwrap();

    assert_eq!(
        t.core.senders().add(&who, pending.id, sender("billing", None)).await,
        Err(Error::DomainNotVerified("domain example.com is not verified".to_owned()))
    );
    assert_eq!(
        t.core
            .senders()
            .add(&who, DomainId::parse_or_none("01ARZ3NDEKTSV4RRFFQ69G5FAV"), sender("billing", None))
            .await,
        Err(Error::NotFound("domain"))
    );
    assert_eq!(
        t.core.senders().add(&who, DomainId::parse_or_none("nope"), sender("billing", None)).await,
        Err(Error::NotFound("domain"))
    );
}

#[tokio::test]
async fn a_username_registered_twice_is_a_conflict_ignoring_case() {
    let t = TestCore::new();
    let who = full_key();
    let domain = verified_domain(&t, &who, "example.com").await;
    let id = domain.id.to_string();
    t.core.senders().add(&who, DomainId::parse_or_none(&id), sender("billing", None)).await.unwrap();

    let again = t.core.senders().add(&who, DomainId::parse_or_none(&id), sender("BILLING", Some("Other"))).await;

    assert_eq!(again, Err(Error::Conflict("sender BILLING is already registered on example.com".to_owned())));
    assert_eq!(
        t.core.senders().list(&who, DomainId::parse_or_none(&id), ListParams::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn sender_fields_are_validated_together() {
    let t = TestCore::new();
    let who = full_key();
    let domain = verified_domain(&t, &who, "example.com").await;
    let id = domain.id.to_string();

    assert_eq!(
        invalid_fields(t.core.senders().add(&who, DomainId::parse_or_none(&id), AddSenderRequest::default()).await),
        ["username"]
    );
    for bad in ["", "bill ing", "bill@ing", ".billing", "a..b", "bïlling", &"a".repeat(65), "billing\r\n"] {
        assert_eq!(
            invalid_fields(t.core.senders().add(&who, DomainId::parse_or_none(&id), sender(bad, None)).await),
            ["username"],
            "{bad:?}"
        );
    }
    assert_eq!(
        invalid_fields(
            t.core
                .senders()
                .add(&who, DomainId::parse_or_none(&id), sender("billing", Some("Acme\r\nBcc: x@y.com")))
                .await
        ),
        ["displayName"]
    );
    assert_eq!(
        invalid_fields(
            t.core.senders().add(&who, DomainId::parse_or_none(&id), sender("bill ing", Some(&"n".repeat(257)))).await
        ),
        ["username", "displayName"]
    );
    // An empty display name means none.
    let plain = t.core.senders().add(&who, DomainId::parse_or_none(&id), sender("plain", Some(""))).await.unwrap();
    assert_eq!(plain.display_name, None);
}

#[tokio::test]
async fn senders_are_listed_newest_first_and_deleted_by_username() {
    let t = TestCore::new();
    let who = full_key();
    let domain = verified_domain(&t, &who, "example.com").await;
    let id = domain.id.to_string();
    let mut added = Vec::new();
    for name in ["a", "b", "c"] {
        added.push(t.core.senders().add(&who, DomainId::parse_or_none(&id), sender(name, None)).await.unwrap());
        // Ids made in one millisecond have no order among themselves.
        t.clock.advance(Duration::milliseconds(1));
    }

    let first = t
        .core
        .senders()
        .list(&who, DomainId::parse_or_none(&id), ListParams { limit: Some(2), cursor: None })
        .await
        .unwrap();
    let rest = t
        .core
        .senders()
        .list(&who, DomainId::parse_or_none(&id), ListParams { limit: Some(2), cursor: first.next_cursor.clone() })
        .await
        .unwrap();
    assert_eq!(first.items, [added[2].clone(), added[1].clone()]);
    assert_eq!(first.next_cursor, Some(added[1].id.to_string()));
    assert_eq!(rest.items, [added[0].clone()]);
    assert!(!rest.has_more);

    t.core.senders().delete(&who, DomainId::parse_or_none(&id), SenderUsername::parse("B").into()).await.unwrap();

    let left = t.core.senders().list(&who, DomainId::parse_or_none(&id), ListParams::default()).await.unwrap();
    assert_eq!(left.items, [added[2].clone(), added[0].clone()]);
    assert_eq!(
        t.core.senders().delete(&who, DomainId::parse_or_none(&id), SenderUsername::parse("b").into()).await,
        Err(Error::NotFound("sender"))
    );
    assert_eq!(
        t.core.senders().delete(&who, DomainId::parse_or_none(&id), SenderUsername::parse("not valid").into()).await,
        Err(Error::NotFound("sender"))
    );
}

#[tokio::test]
async fn deleting_a_domain_removes_its_senders() {
    let t = TestCore::new();
    let who = full_key();
    let domain = verified_domain(&t, &who, "example.com").await;
    t.core.senders().add(&who, domain.id, sender("billing", None)).await.unwrap();

    t.core.domains().delete(&who, domain.id).await.unwrap();

    assert_eq!(t.core.senders().find(who.workspace_id, domain.id, "billing").await, Ok(None));
    let again = verified_domain(&t, &who, "example.com").await;
    assert!(t.core.senders().list(&who, again.id, ListParams::default()).await.unwrap().items.is_empty());
    t.core.senders().add(&who, again.id, sender("billing", None)).await.unwrap();
}

#[tokio::test]
async fn a_send_key_in_another_workspace_is_still_refused_before_lookup() {
    let t = TestCore::new();
    let stranger = key_in(WorkspaceId(tidings_testing::fixtures::ulid()), KeyScope::Send);
    assert_eq!(t.core.domains().get(&stranger, DomainId::parse_or_none("nope")).await, Err(Error::InsufficientScope));
}
