//! The suppression list use cases over the in-memory store with a fixed clock.

use chrono::Duration;
use tidings_core::Error;
use tidings_core::email::EmailAddress;
use tidings_core::ids::MessageId;
use tidings_core::model::{SuppressionReason, SuppressionSource};
use tidings_core::usecases::{AddSuppressionRequest, ListParams};
use tidings_testing::TestCore;
use tidings_testing::fixtures;
use tidings_testing::service::{full_key, invalid_fields, send_key_beside};

fn add(email: &str) -> AddSuppressionRequest {
    AddSuppressionRequest { email: Some(email.to_owned()) }
}

#[tokio::test]
async fn an_added_address_is_manual_from_the_api() {
    let t = TestCore::new();
    let who = full_key();
    let (entry, created) = t.core.suppressions().add(&who, add("Jane.Doe@Example.COM")).await.unwrap();
    assert!(created);
    assert_eq!(entry.email.to_string(), "Jane.Doe@example.com");
    assert_eq!((entry.reason, entry.source), (SuppressionReason::Manual, SuppressionSource::Api));
    assert_eq!(entry.workspace_id, who.workspace_id);
    assert_eq!(entry.message_id, None);
    assert_eq!(entry.created_at, t.now());
    assert_eq!(
        t.core.suppressions().get(&who, EmailAddress::parse("jane.doe@example.com").into()).await.unwrap(),
        entry
    );
}

#[tokio::test]
async fn adding_an_address_again_returns_the_existing_entry() {
    let t = TestCore::new();
    let who = full_key();
    let (first, _) = t.core.suppressions().add(&who, add("jane@example.com")).await.unwrap();
    t.clock.advance(Duration::minutes(1));
    let (again, created) = t.core.suppressions().add(&who, add("JANE@example.com")).await.unwrap();
    assert!(!created);
    assert_eq!(again, first);
    assert_eq!(t.core.suppressions().list(&who, ListParams::default(), None).await.unwrap().items, [first]);
}

#[tokio::test]
async fn the_email_is_required_and_must_be_an_address() {
    let t = TestCore::new();
    let who = full_key();
    assert_eq!(invalid_fields(t.core.suppressions().add(&who, AddSuppressionRequest::default()).await), ["email"]);
    for bad in ["", "no-at-sign", "a@b@", "jane@example.com\r\nBcc: x@y.z"] {
        assert_eq!(invalid_fields(t.core.suppressions().add(&who, add(bad)).await), ["email"], "{bad:?}");
    }
}

#[tokio::test]
async fn a_deleted_address_can_be_sent_to_again() {
    let t = TestCore::new();
    let who = full_key();
    t.core.suppressions().add(&who, add("jane@example.com")).await.unwrap();
    t.core.suppressions().delete(&who, EmailAddress::parse("Jane@Example.com").into()).await.unwrap();
    assert_eq!(
        t.core.suppressions().get(&who, EmailAddress::parse("jane@example.com").into()).await,
        Err(Error::NotFound("suppression"))
    );
    assert_eq!(
        t.core.suppressions().delete(&who, EmailAddress::parse("jane@example.com").into()).await,
        Err(Error::NotFound("suppression"))
    );
    let (_, created) = t.core.suppressions().add(&who, add("jane@example.com")).await.unwrap();
    assert!(created);
}

#[tokio::test]
async fn absent_and_malformed_addresses_are_not_found() {
    let t = TestCore::new();
    let who = full_key();
    for email in ["nobody@example.com", "not an address", ""] {
        assert_eq!(
            t.core.suppressions().delete(&who, EmailAddress::parse(email).into()).await,
            Err(Error::NotFound("suppression")),
            "{email:?}"
        );
        assert_eq!(
            t.core.suppressions().get(&who, EmailAddress::parse(email).into()).await,
            Err(Error::NotFound("suppression")),
            "{email:?}"
        );
    }
}

#[tokio::test]
async fn automatic_entries_carry_reason_source_and_message() {
    let t = TestCore::new();
    let who = full_key();
    let message = MessageId(fixtures::ulid());
    let email = fixtures::email("bounced@example.com");
    let (entry, created) = t
        .core
        .suppressions()
        .add_automatically(
            who.workspace_id,
            &email,
            SuppressionReason::HardBounce,
            SuppressionSource::Bounce,
            Some(message),
        )
        .await
        .unwrap();
    assert!(created);
    assert_eq!(
        (entry.reason, entry.source, entry.message_id),
        (SuppressionReason::HardBounce, SuppressionSource::Bounce, Some(message))
    );
    assert_eq!(
        t.core.suppressions().get(&who, EmailAddress::parse("bounced@example.com").into()).await.unwrap(),
        entry
    );
}

#[tokio::test]
async fn a_later_bounce_does_not_relabel_a_manual_entry() {
    let t = TestCore::new();
    let who = full_key();
    let (manual, _) = t.core.suppressions().add(&who, add("jane@example.com")).await.unwrap();
    let (entry, created) = t
        .core
        .suppressions()
        .add_automatically(
            who.workspace_id,
            &fixtures::email("jane@example.com"),
            SuppressionReason::Complaint,
            SuppressionSource::Complaint,
            Some(MessageId(fixtures::ulid())),
        )
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(entry, manual);
}

#[tokio::test]
async fn the_list_filters_by_reason_and_pages_newest_first() {
    let t = TestCore::new();
    let who = full_key();
    let (a, _) = t.core.suppressions().add(&who, add("a@example.com")).await.unwrap();
    t.clock.advance(Duration::milliseconds(5));
    let (b, _) = t
        .core
        .suppressions()
        .add_automatically(
            who.workspace_id,
            &fixtures::email("b@example.com"),
            SuppressionReason::HardBounce,
            SuppressionSource::Bounce,
            None,
        )
        .await
        .unwrap();
    t.clock.advance(Duration::milliseconds(5));
    let (c, _) = t.core.suppressions().add(&who, add("c@example.com")).await.unwrap();

    let manual = t.core.suppressions().list(&who, ListParams::default(), Some("Manual".into())).await.unwrap();
    assert_eq!(manual.items, [c.clone(), a.clone()]);
    let bounces = t.core.suppressions().list(&who, ListParams::default(), Some("HardBounce".into())).await.unwrap();
    assert_eq!(bounces.items, std::slice::from_ref(&b));
    let complaints = t.core.suppressions().list(&who, ListParams::default(), Some("Complaint".into())).await.unwrap();
    assert!(complaints.items.is_empty());

    let first = t.core.suppressions().list(&who, ListParams { limit: Some(2), cursor: None }, None).await.unwrap();
    assert_eq!(first.items, [c, b]);
    assert!(first.has_more);
    let rest = ListParams { limit: Some(2), cursor: first.next_cursor };
    let second = t.core.suppressions().list(&who, rest, None).await.unwrap();
    assert_eq!(second.items, [a]);
    assert_eq!((second.has_more, second.next_cursor), (false, None));
}

#[tokio::test]
async fn an_unknown_reason_or_bad_paging_is_a_validation_error() {
    let t = TestCore::new();
    let who = full_key();
    for reason in ["hardbounce", "Bounce", ""] {
        let listed = t.core.suppressions().list(&who, ListParams::default(), Some(reason.into())).await;
        assert_eq!(invalid_fields(listed), ["reason"], "{reason:?}");
    }
    let too_many = ListParams { limit: Some(201), cursor: None };
    assert_eq!(invalid_fields(t.core.suppressions().list(&who, too_many, None).await), ["limit"]);
}

#[tokio::test]
async fn a_send_key_cannot_touch_the_list() {
    let t = TestCore::new();
    let who = full_key();
    t.core.suppressions().add(&who, add("jane@example.com")).await.unwrap();
    let sender = send_key_beside(&who);
    let scope = Err::<(), _>(Error::InsufficientScope);
    assert_eq!(t.core.suppressions().add(&sender, add("x@example.com")).await.map(drop), scope);
    assert_eq!(t.core.suppressions().list(&sender, ListParams::default(), None).await.map(drop), scope);
    assert_eq!(
        t.core.suppressions().get(&sender, EmailAddress::parse("jane@example.com").into()).await.map(drop),
        scope
    );
    assert_eq!(t.core.suppressions().delete(&sender, EmailAddress::parse("jane@example.com").into()).await, scope);
    assert!(t.core.suppressions().get(&who, EmailAddress::parse("jane@example.com").into()).await.is_ok());
}

#[tokio::test]
async fn workspaces_have_separate_lists() {
    let t = TestCore::new();
    let alice = full_key();
    let bob = full_key();
    let (alices, _) = t.core.suppressions().add(&alice, add("jane@example.com")).await.unwrap();
    assert_eq!(
        t.core.suppressions().get(&bob, EmailAddress::parse("jane@example.com").into()).await,
        Err(Error::NotFound("suppression"))
    );
    assert_eq!(
        t.core.suppressions().delete(&bob, EmailAddress::parse("jane@example.com").into()).await,
        Err(Error::NotFound("suppression"))
    );
    assert!(t.core.suppressions().list(&bob, ListParams::default(), None).await.unwrap().items.is_empty());
    let (bobs, created) = t.core.suppressions().add(&bob, add("jane@example.com")).await.unwrap();
    assert!(created);
    assert_ne!(bobs.id, alices.id);
    assert_eq!(
        t.core.suppressions().get(&alice, EmailAddress::parse("jane@example.com").into()).await.unwrap(),
        alices
    );
}
