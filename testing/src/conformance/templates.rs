//! Templates and their numbered versions.

use std::sync::Arc;

use super::{Must, assert_conflict, assert_not_found, lister, walk_all_sizes};
use crate::fixtures::{template, template_version, ulid};
use tidings_core::ids::{TemplateId, TemplateVersionId, WorkspaceId};
use tidings_core::model::{Template, TemplateVersion};
use tidings_core::ports::{NewTemplateVersion, Store, TemplateChange};

fn numbered(template: TemplateId, version_no: u32, new: &NewTemplateVersion) -> TemplateVersion {
    TemplateVersion {
        id: new.id,
        template_id: template,
        version_no,
        subject: new.subject.clone(),
        html: new.html.clone(),
        text: new.text.clone(),
        created_at: new.created_at,
    }
}

pub(super) async fn templates_round_trip_with_versions<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t = template(a);
    s.insert_template(&t).await.must("insert_template");
    let v1 = t.versions[0].clone();
    assert_eq!(s.get_template(a, t.id).await.must("get_template"), Some(t.clone()), "get_template round trip");
    assert_eq!(s.get_template(b, t.id).await.must("get from b"), None, "another workspace does not see it");
    assert_eq!(s.get_template(a, TemplateId(ulid())).await.must("get unknown"), None, "unknown template");
    assert_eq!(s.get_template_version(a, v1.id).await.must("get_template_version"), Some(v1.clone()), "version 1");
    assert_eq!(s.get_template_version(b, v1.id).await.must("version from b"), None, "isolated version");
    let unknown = TemplateVersionId(ulid());
    assert_eq!(s.get_template_version(a, unknown).await.must("unknown version"), None, "unknown version");

    let mut expected = vec![t.id];
    for i in 0..4 {
        let x = template(a);
        s.insert_template(&x).await.must("insert_template");
        expected.insert(0, x.id);
        if i % 2 == 0 {
            s.insert_template(&template(b)).await.must("insert_template in b");
        }
    }
    let list = lister!(s, |page| list_templates(a, page));
    walk_all_sizes("list_templates", &list, |x: &Template| x.id, &expected).await;
    let listed = list(tidings_core::ports::PageRequest::first(10)).await.must("list_templates");
    assert_eq!(listed.items.last(), Some(&t), "listed templates carry their versions");
}

pub(super) async fn template_versions_are_numbered_one_past_the_highest<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t = template(a);
    s.insert_template(&t).await.must("insert_template");
    let new2 = template_version();
    let v2 = s.add_template_version(a, t.id, new2.clone(), false).await.must("add version 2");
    assert_eq!(v2, numbered(t.id, 2, &new2), "the second version is number 2");
    let stored = s.get_template(a, t.id).await.must("get").expect("template");
    assert_eq!(stored.versions, [t.versions[0].clone(), v2.clone()], "versions by number");
    assert_eq!(stored.current_version_id, t.current_version_id, "make_current false keeps the current version");

    let new3 = template_version();
    let v3 = s.add_template_version(a, t.id, new3.clone(), true).await.must("add version 3");
    assert_eq!(v3, numbered(t.id, 3, &new3), "the third version is number 3");
    let stored = s.get_template(a, t.id).await.must("get").expect("template");
    assert_eq!(stored.current_version_id, v3.id, "make_current true makes it current");
    assert_eq!(stored.versions.len(), 3, "three versions");
    assert_eq!(s.get_template_version(a, v2.id).await.must("get v2"), Some(v2), "get_template_version of v2");

    assert_not_found(s.add_template_version(b, t.id, template_version(), true).await, "add from another workspace");
    assert_not_found(s.add_template_version(a, TemplateId(ulid()), template_version(), true).await, "unknown");
    let stored = s.get_template(a, t.id).await.must("get").expect("template");
    assert_eq!(stored.versions.len(), 3, "refused adds change nothing");
}

pub(super) async fn concurrent_versions_get_distinct_numbers<S: Store + 'static>(s: Arc<S>) {
    const WRITERS: u32 = 10;
    let a = WorkspaceId(ulid());
    let t = template(a);
    s.insert_template(&t).await.must("insert_template");
    let barrier = Arc::new(tokio::sync::Barrier::new(WRITERS as usize));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..WRITERS {
        let (s, barrier, id) = (Arc::clone(&s), Arc::clone(&barrier), t.id);
        tasks.spawn(async move {
            let new = template_version();
            barrier.wait().await;
            s.add_template_version(a, id, new, false).await
        });
    }
    let mut numbers = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let added = joined.unwrap_or_else(|e| panic!("add_template_version task failed: {e}"));
        numbers.push(added.must("concurrent add_template_version").version_no);
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (2..=WRITERS + 1).collect::<Vec<_>>(), "concurrent adds get distinct consecutive numbers");
    let stored = s.get_template(a, t.id).await.must("get").expect("template");
    let stored_numbers: Vec<u32> = stored.versions.iter().map(|v| v.version_no).collect();
    assert_eq!(stored_numbers, (1..=WRITERS + 1).collect::<Vec<_>>(), "every version is kept, in number order");
}

pub(super) async fn template_updates_and_deletes<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let (t, other) = (template(a), template(a));
    s.insert_template(&t).await.must("insert_template");
    s.insert_template(&other).await.must("insert_template other");
    let v2 = s.add_template_version(a, t.id, template_version(), false).await.must("add version");

    let unchanged = s.update_template(a, t.id, TemplateChange::default()).await.must("empty change");
    let mut expected = t.clone();
    expected.versions.push(v2.clone());
    assert_eq!(unchanged, expected, "an empty change returns the template as it is");
    let renamed = s
        .update_template(a, t.id, TemplateChange { name: Some("receipts".to_owned()), current_version_id: Some(v2.id) })
        .await
        .must("update_template");
    expected.name = "receipts".to_owned();
    expected.current_version_id = v2.id;
    assert_eq!(renamed, expected, "update_template returns the changed template");
    assert_eq!(s.get_template(a, t.id).await.must("get"), Some(expected.clone()), "and stores it");

    let foreign_version = TemplateChange { name: Some("x".to_owned()), current_version_id: Some(other.versions[0].id) };
    assert_conflict(s.update_template(a, t.id, foreign_version).await, "another template's version as current");
    assert_eq!(s.get_template(a, t.id).await.must("get"), Some(expected.clone()), "a refused change changes nothing");
    let rename = || TemplateChange { name: Some("y".to_owned()), current_version_id: None };
    assert_not_found(s.update_template(b, t.id, rename()).await, "update_template from another workspace");
    assert_not_found(s.update_template(a, TemplateId(ulid()), rename()).await, "update_template unknown");

    assert_not_found(s.delete_template(b, t.id).await, "delete_template from another workspace");
    s.delete_template(a, t.id).await.must("delete_template");
    assert_eq!(s.get_template(a, t.id).await.must("get"), None, "deleted");
    assert_eq!(s.get_template_version(a, v2.id).await.must("get version"), None, "its versions are gone");
    assert_not_found(s.delete_template(a, t.id).await, "a second delete_template");
    assert_not_found(s.add_template_version(a, t.id, template_version(), true).await, "add to a deleted template");
    assert_not_found(s.update_template(a, t.id, rename()).await, "update a deleted template");
    assert_eq!(s.get_template(a, other.id).await.must("get other"), Some(other), "other templates stay");
}

pub(super) async fn a_template_is_found_by_its_exact_name_newest_first<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let named = |ws, name: &str| Template { name: name.to_owned(), ..template(ws) };
    let older = named(a, "Welcome");
    s.insert_template(&older).await.must("insert older");
    let other = named(a, "Receipt");
    s.insert_template(&other).await.must("insert other");
    let newer = named(a, "Welcome");
    s.insert_template(&newer).await.must("insert newer");
    s.insert_template(&named(b, "Welcome")).await.must("insert in b");
    let named_in = |ws, name: &'static str, limit| {
        let s = s.clone();
        async move { s.template_ids_named(ws, name, limit).await.must("template_ids_named") }
    };
    assert_eq!(named_in(a, "Welcome", 10).await, vec![newer.id, older.id], "newest first");
    assert_eq!(named_in(a, "Welcome", 1).await, vec![newer.id], "at most the limit");
    assert_eq!(named_in(a, "Receipt", 10).await, vec![other.id]);
    assert_eq!(named_in(a, "welcome", 10).await, vec![], "the exact name only");
    assert_eq!(named_in(a, "Welcom", 10).await, vec![], "the whole name only");
    let solo = WorkspaceId(ulid());
    assert_eq!(named_in(solo, "Welcome", 10).await, vec![], "isolated");
}
