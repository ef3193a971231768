//! `Messages::list` with `q`, creation bounds and `endingBefore`: what is refused (every bad
//! parameter named at once), and `prevCursor`, which only a page with newer matches has.

use chrono::{DateTime, Duration, Utc};
use tidings_core::ids::MessageId;
use tidings_core::model::{Domain, DomainStatus, KeyScope};
use tidings_core::ports::DomainStore;
use tidings_core::usecases::{ListParams, Listed, MessageFilters, Principal, SendRequest};
use tidings_testing::TestCore;
use tidings_testing::fixtures;
use tidings_testing::service::{full_key, invalid_fields, key_in, send_key_beside};

async fn verified_domain(t: &TestCore, who: &Principal, name: &str) -> Domain {
    let mut domain = fixtures::domain(who.workspace_id, name);
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(t.now());
    t.store.insert_domain(&domain).await.unwrap();
    domain
}

/// Sends one message a millisecond after the last, with this subject.
async fn send(t: &TestCore, who: &Principal, subject: &str) -> MessageId {
    t.clock.advance(Duration::milliseconds(1));
    let req = SendRequest {
        to: Some("Ann.Reader@example.com".into()),
        subject: Some(subject.into()),
        text: Some("t".into()),
        ..SendRequest::default()
    };
    t.core.messages().send(who, req, None).await.unwrap().message.id
}

fn ids(listed: &Listed<tidings_core::model::Message>) -> Vec<MessageId> {
    listed.items.iter().map(|m| m.id).collect()
}

fn filters(q: &str) -> MessageFilters {
    MessageFilters { q: Some(q.into()), ..MessageFilters::default() }
}

fn page(limit: i64, cursor: Option<&String>) -> ListParams {
    ListParams { limit: Some(limit), cursor: cursor.cloned() }
}

#[tokio::test]
async fn bad_search_parameters_are_named_all_at_once() {
    let t = TestCore::new();
    let who = full_key();
    let list = |filters: MessageFilters, params: ListParams| {
        let (t, who) = (&t, &who);
        async move { invalid_fields(t.core.messages().list(who, params, &filters).await) }
    };
    assert_eq!(list(filters(" ab "), ListParams::default()).await, ["q"], "two characters after trimming");
    assert_eq!(list(filters(&"x".repeat(201)), ListParams::default()).await, ["q"]);
    assert_eq!(list(filters("ab\ncd"), ListParams::default()).await, ["q"]);
    let bad_times = MessageFilters {
        created_after: Some("yesterday".into()),
        created_before: Some("2026-02-30".into()),
        ..MessageFilters::default()
    };
    assert_eq!(list(bad_times, ListParams::default()).await, ["createdAfter", "createdBefore"]);
    let backwards = MessageFilters {
        created_after: Some("2026-05-02".into()),
        created_before: Some("2026-05-01T23:59:59Z".into()),
        ..MessageFilters::default()
    };
    assert_eq!(list(backwards, ListParams::default()).await, ["createdBefore"], "after ≥ before");
    let both = MessageFilters { ending_before: Some(MessageId::NONE.to_string()), ..MessageFilters::default() };
    assert_eq!(list(both, page(5, Some(&MessageId::NONE.to_string()))).await, ["endingBefore"]);
    let garbage = MessageFilters { ending_before: Some("zzz".into()), ..filters("éé") };
    assert_eq!(list(garbage, ListParams::default()).await, ["q", "endingBefore"], "characters, not bytes, count");
    assert!(t.core.messages().list(&who, ListParams::default(), &filters("éèê")).await.is_ok());
}

#[tokio::test]
async fn a_search_pages_older_and_back_newer_with_prev_cursors() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;
    let mut receipts = Vec::new();
    for n in 0..5 {
        receipts.push(send(&t, &who, &format!("Your RECEIPT {n}")).await);
        send(&t, &who, "Welcome").await;
    }
    receipts.reverse();
    let q = filters("receipt");

    let first = t.core.messages().list(&who, page(2, None), &q).await.unwrap();
    assert_eq!(ids(&first), receipts[0..2]);
    assert_eq!(first.prev_cursor, None, "nothing is newer than the first page");
    let second = t.core.messages().list(&who, page(2, first.next_cursor.as_ref()), &q).await.unwrap();
    assert_eq!(ids(&second), receipts[2..4]);
    assert_eq!(second.prev_cursor, Some(receipts[2].to_string()));
    let third = t.core.messages().list(&who, page(2, second.next_cursor.as_ref()), &q).await.unwrap();
    assert_eq!(ids(&third), receipts[4..5]);
    assert!(!third.has_more && third.next_cursor.is_none());

    let back = MessageFilters { ending_before: third.prev_cursor.clone(), ..q.clone() };
    let back = t.core.messages().list(&who, page(2, None), &back).await.unwrap();
    assert_eq!(ids(&back), receipts[2..4], "the page before the third is the second again");
    assert_eq!((back.has_more, back.next_cursor.as_deref()), (true, Some(receipts[3].to_string().as_str())));
    assert_eq!(back.prev_cursor, Some(receipts[2].to_string()));
    let top = MessageFilters { ending_before: back.prev_cursor.clone(), ..q.clone() };
    let top = t.core.messages().list(&who, page(2, None), &top).await.unwrap();
    assert_eq!(ids(&top), receipts[0..2]);
    assert_eq!(top.prev_cursor, None, "back on the newest page");
    let nothing_newer = MessageFilters { ending_before: Some(receipts[0].to_string()), ..q.clone() };
    let empty = t.core.messages().list(&who, page(2, None), &nothing_newer).await.unwrap();
    assert!(empty.items.is_empty() && !empty.has_more && empty.prev_cursor.is_none() && empty.next_cursor.is_none());

    let by_address = t.core.messages().list(&who, page(50, None), &filters("ann.READER@")).await.unwrap();
    assert_eq!(by_address.items.len(), 10, "part of the address, any case");
}

#[tokio::test]
async fn creation_bounds_take_dates_and_times_and_a_send_key_finds_only_its_own() {
    let t = TestCore::new();
    let who = full_key();
    verified_domain(&t, &who, "acme.com").await;
    let early = send(&t, &who, "Receipt early").await;
    t.clock.advance(Duration::days(2));
    let late = send(&t, &who, "Receipt late").await;
    let day = |at: DateTime<Utc>| at.format("%Y-%m-%d").to_string();
    let since_yesterday =
        MessageFilters { created_after: Some(day(t.now() - Duration::days(1))), ..filters("receipt") };
    let listed = t.core.messages().list(&who, ListParams::default(), &since_yesterday).await.unwrap();
    assert_eq!(ids(&listed), [late]);
    let before_now =
        MessageFilters { created_before: Some((t.now() - Duration::hours(1)).to_rfc3339()), ..filters("receipt") };
    let listed = t.core.messages().list(&who, ListParams::default(), &before_now).await.unwrap();
    assert_eq!(ids(&listed), [early]);

    let sender = send_key_beside(&who);
    let mine = send(&t, &sender, "Receipt of the send key").await;
    let listed = t.core.messages().list(&sender, ListParams::default(), &filters("receipt")).await.unwrap();
    assert_eq!(ids(&listed), [mine]);
    let other = key_in(tidings_core::ids::WorkspaceId(fixtures::ulid()), KeyScope::Full);
    let listed = t.core.messages().list(&other, ListParams::default(), &filters("receipt")).await.unwrap();
    assert!(listed.items.is_empty(), "another workspace");
}
