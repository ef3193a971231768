//! The suppression list.

use std::sync::Arc;

use super::{Must, assert_not_found, lister, walk_all_sizes};
use crate::fixtures::{email, suppression, ulid};
use tidings_core::ids::{SuppressionId, WorkspaceId};
use tidings_core::model::{Suppression, SuppressionReason, SuppressionSource};
use tidings_core::ports::{PageRequest, Store};

pub(super) async fn suppressions_match_case_insensitively<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let first = suppression(a, "Jane.Doe@Example.com");
    assert_eq!(s.insert_suppression(&first).await.must("insert"), (first.clone(), true), "a new entry is created");
    let again = Suppression {
        reason: SuppressionReason::HardBounce,
        source: SuppressionSource::Bounce,
        ..suppression(a, "jane.doe@EXAMPLE.com")
    };
    let answer = s.insert_suppression(&again).await.must("insert again");
    assert_eq!(answer, (first.clone(), false), "adding a present address (other case) returns the existing entry");
    for spelled in ["jane.doe@example.com", "JANE.DOE@EXAMPLE.COM", "Jane.Doe@Example.com"] {
        let found = s.get_suppression(a, &email(spelled)).await.must("get_suppression");
        assert_eq!(found, Some(first.clone()), "get_suppression {spelled:?}");
    }
    assert_eq!(s.get_suppression(b, &email("jane.doe@example.com")).await.must("get in b"), None, "isolated");
    let in_b = suppression(b, "JANE.DOE@example.com");
    assert_eq!(s.insert_suppression(&in_b).await.must("insert in b"), (in_b.clone(), true), "per workspace");

    assert_not_found(s.delete_suppression(WorkspaceId(ulid()), &first.email).await, "delete in another workspace");
    s.delete_suppression(a, &email("JANE.doe@example.com")).await.must("delete in another case");
    assert_eq!(s.get_suppression(a, &first.email).await.must("get"), None, "deleted");
    assert_not_found(s.delete_suppression(a, &first.email).await, "a second delete");
    assert_eq!(
        s.get_suppression(b, &in_b.email).await.must("get in b"),
        Some(in_b),
        "the other workspace keeps its own"
    );
    let listed = s.list_suppressions(a, None, PageRequest::first(10)).await.must("list");
    assert!(listed.items.is_empty(), "a deleted entry is not listed");

    let back = suppression(a, "jane.doe@example.com");
    assert_eq!(s.insert_suppression(&back).await.must("re-insert"), (back.clone(), true), "re-adding creates anew");
}

pub(super) async fn suppression_lists_filter_by_reason_and_page<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let reasons = [SuppressionReason::Manual, SuppressionReason::HardBounce, SuppressionReason::Complaint];
    let mut made = Vec::new();
    for i in 0..8 {
        let x = Suppression { reason: reasons[i % 3], ..suppression(a, &format!("user{i}@example.com")) };
        s.insert_suppression(&x).await.must("insert");
        made.insert(0, x);
        if i % 3 == 0 {
            let noise = Suppression { reason: reasons[i % 3], ..suppression(b, &format!("user{i}@example.com")) };
            s.insert_suppression(&noise).await.must("insert in b");
        }
    }
    for reason in [None, Some(reasons[0]), Some(reasons[1]), Some(reasons[2])] {
        let expected: Vec<SuppressionId> =
            made.iter().filter(|x| reason.is_none_or(|r| x.reason == r)).map(|x| x.id).collect();
        let list = lister!(s, |page| list_suppressions(a, reason, page));
        walk_all_sizes(&format!("list_suppressions reason={reason:?}"), &list, |x: &Suppression| x.id, &expected).await;
    }

    // Paging goes on past an entry deleted after its page was read.
    let first = s.list_suppressions(a, None, PageRequest::first(3)).await.must("first page");
    let cursor = first.items[2].clone();
    s.delete_suppression(a, &cursor.email).await.must("delete the cursor entry");
    let next = s.list_suppressions(a, None, PageRequest { limit: 10, cursor: Some(cursor.id) }).await;
    let ids: Vec<SuppressionId> = next.must("next page").items.iter().map(|x| x.id).collect();
    let expected: Vec<SuppressionId> = made[3..].iter().map(|x| x.id).collect();
    assert_eq!(ids, expected, "the page after a deleted cursor entry starts strictly after it");
}
