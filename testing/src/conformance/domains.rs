//! Domains and their senders.

use std::sync::Arc;

use super::{Must, assert_conflict, assert_not_found, lister, walk_all_sizes};
use crate::fixtures::{domain, domain_name, now, plus_secs, sender, ulid, username};
use chrono::{DateTime, Utc};
use tidings_core::ids::{DomainId, SenderId, WorkspaceId};
use tidings_core::model::{
    DkimKeys, DnsRecord, Domain, DomainKind, DomainStatus, RecordKind, RecordStatus, RetiredDkimKeys, RetiringDkimKeys,
    Sender,
};
use tidings_core::ports::{PageRequest, Store};
use tidings_core::secret::Secret;

pub(super) async fn domains_round_trip_and_names_are_unique_per_workspace<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let d = domain(a, "mail.example.com");
    s.insert_domain(&d).await.must("insert_domain");
    let name = domain_name("mail.example.com");
    assert_eq!(s.get_domain(a, d.id).await.must("get_domain"), Some(d.clone()), "get_domain round trip");
    assert_eq!(s.find_domain_by_name(a, &name).await.must("find"), Some(d.clone()), "find_domain_by_name");
    assert_eq!(s.get_domain(b, d.id).await.must("get from b"), None, "another workspace does not see it by id");
    assert_eq!(s.find_domain_by_name(b, &name).await.must("find in b"), None, "nor by name");
    assert_eq!(s.get_domain(a, DomainId(ulid())).await.must("get unknown"), None, "unknown id");
    let other_name = domain_name("other.example.com");
    assert_eq!(s.find_domain_by_name(a, &other_name).await.must("find unknown"), None, "unknown name");

    assert_conflict(s.insert_domain(&domain(a, "mail.example.com")).await, "the same name twice in a workspace");
    let in_b = domain(b, "mail.example.com");
    s.insert_domain(&in_b).await.must("the same name in another workspace");
    assert_eq!(s.find_domain_by_name(a, &name).await.must("find"), Some(d), "each workspace finds its own");
    assert_eq!(s.find_domain_by_name(b, &name).await.must("find"), Some(in_b), "each workspace finds its own");

    // The sandbox sending domain is an ordinary record whose kind must survive the store.
    let sandbox = Domain { kind: DomainKind::Sandbox, status: DomainStatus::Verified, ..domain(a, "sandbox.example") };
    s.insert_domain(&sandbox).await.must("insert a sandbox domain");
    let read = s.get_domain(a, sandbox.id).await.must("get the sandbox domain");
    assert_eq!(read.map(|d| d.kind), Some(DomainKind::Sandbox), "the kind round-trips");
}

pub(super) async fn domain_lists_page_newest_first<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let mut expected = Vec::new();
    for i in 0..5 {
        let d = domain(a, &format!("d{i}.example.com"));
        s.insert_domain(&d).await.must("insert_domain");
        expected.insert(0, d.id);
        if i % 2 == 0 {
            s.insert_domain(&domain(b, &format!("d{i}.example.com"))).await.must("insert_domain in b");
        }
    }
    let list = lister!(s, |page| list_domains(a, page));
    walk_all_sizes("list_domains", &list, |d: &Domain| d.id, &expected).await;
    let empty = s.list_domains(WorkspaceId(ulid()), PageRequest::first(3)).await.must("list_domains empty");
    assert!(empty.items.is_empty() && !empty.has_more, "a workspace without domains lists nothing");
}

pub(super) async fn domain_updates_stay_in_their_workspace<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let d = domain(a, "mail.example.com");
    s.insert_domain(&d).await.must("insert_domain");
    let checked = now();
    let mut verified = d.clone();
    verified.status = DomainStatus::Verified;
    verified.verified_at = Some(checked);
    verified.last_checked_at = Some(checked);
    verified.open_tracking = true;
    for record in &mut verified.records {
        record.status = RecordStatus::Verified;
        record.last_checked_at = Some(checked);
    }
    s.update_domain(&verified).await.must("update_domain");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), Some(verified.clone()), "update_domain replaces the state");
    let by_name = s.find_domain_by_name(a, &d.name).await.must("find");
    assert_eq!(by_name, Some(verified.clone()), "find_domain_by_name sees the update");

    let foreign = Domain { workspace_id: b, status: DomainStatus::Failed, ..verified.clone() };
    assert_not_found(s.update_domain(&foreign).await, "update_domain naming another workspace");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), Some(verified.clone()), "a foreign update changes nothing");
    assert_eq!(s.get_domain(b, d.id).await.must("get in b"), None, "and creates nothing");
    assert_not_found(s.update_domain(&domain(a, "new.example.com")).await, "update_domain of an unknown domain");
    assert_eq!(s.find_domain_by_name(a, &domain_name("new.example.com")).await.must("find"), None, "no upsert");

    s.delete_domain(a, d.id).await.must("delete_domain");
    assert_not_found(s.update_domain(&verified).await, "update_domain after delete");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), None, "an update does not resurrect a deleted domain");
}

pub(super) async fn deleting_a_domain_frees_its_name_and_removes_senders<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let d = domain(a, "mail.example.com");
    let kept = domain(a, "kept.example.com");
    s.insert_domain(&d).await.must("insert_domain");
    s.insert_domain(&kept).await.must("insert_domain kept");
    let (s1, s2, s3) = (sender(&d, "billing"), sender(&d, "support"), sender(&kept, "billing"));
    for x in [&s1, &s2, &s3] {
        s.insert_sender(x).await.must("insert_sender");
    }

    assert_not_found(s.delete_domain(b, d.id).await, "delete_domain from another workspace");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), Some(d.clone()), "a foreign delete changes nothing");
    assert_not_found(s.delete_domain(a, DomainId(ulid())).await, "delete_domain of an unknown domain");

    s.delete_domain(a, d.id).await.must("delete_domain");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), None, "deleted");
    assert_eq!(s.find_domain_by_name(a, &d.name).await.must("find"), None, "its name is gone");
    let senders = s.list_senders(a, d.id, PageRequest::first(10)).await.must("list_senders");
    assert!(senders.items.is_empty() && !senders.has_more, "its senders are deleted");
    assert_eq!(s.get_sender(a, d.id, &username("billing")).await.must("get_sender"), None, "sender gone");
    assert_eq!(
        s.get_sender(a, kept.id, &username("billing")).await.must("get_sender"),
        Some(s3.clone()),
        "senders of other domains stay"
    );
    assert_not_found(s.delete_domain(a, d.id).await, "a second delete_domain");
    assert_not_found(s.insert_sender(&sender(&d, "late")).await, "insert_sender on a deleted domain");

    let again = domain(a, "mail.example.com");
    s.insert_domain(&again).await.must("the name can be added again");
    assert_eq!(s.find_domain_by_name(a, &d.name).await.must("find"), Some(again.clone()), "found as the new one");
    let senders = s.list_senders(a, again.id, PageRequest::first(10)).await.must("list_senders");
    assert!(senders.items.is_empty(), "a re-added domain starts without senders");
    assert_eq!(s.get_sender(a, again.id, &username("billing")).await.must("get"), None, "no old sender");
    s.insert_sender(&sender(&again, "billing")).await.must("a username of the deleted domain is free");
}

pub(super) async fn senders_match_usernames_case_insensitively<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let (d, d2) = (domain(a, "mail.example.com"), domain(a, "news.example.com"));
    s.insert_domain(&d).await.must("insert_domain");
    s.insert_domain(&d2).await.must("insert_domain 2");
    let support = sender(&d, "Support");
    s.insert_sender(&support).await.must("insert_sender");
    for spelled in ["Support", "support", "SUPPORT"] {
        let found = s.get_sender(a, d.id, &username(spelled)).await.must("get_sender");
        assert_eq!(found, Some(support.clone()), "get_sender {spelled:?} finds Support");
    }
    assert_eq!(s.get_sender(b, d.id, &username("support")).await.must("get from b"), None, "isolated");
    assert_eq!(s.get_sender(a, d2.id, &username("support")).await.must("get on d2"), None, "per domain");
    assert_conflict(s.insert_sender(&sender(&d, "sUpPoRt")).await, "a username taken in another case");
    s.insert_sender(&sender(&d2, "support")).await.must("the same username on another domain");

    let foreign = Sender { workspace_id: b, ..sender(&d, "other") };
    assert_not_found(s.insert_sender(&foreign).await, "insert_sender on a domain of another workspace");
    let stray = Sender { domain_id: DomainId(ulid()), ..sender(&d, "other") };
    assert_not_found(s.insert_sender(&stray).await, "insert_sender on an unknown domain");

    assert_not_found(s.delete_sender(b, d.id, &username("support")).await, "delete_sender from another workspace");
    s.delete_sender(a, d.id, &username("SUPPORT")).await.must("delete_sender in another case");
    assert_eq!(s.get_sender(a, d.id, &username("Support")).await.must("get"), None, "deleted");
    assert_not_found(s.delete_sender(a, d.id, &username("support")).await, "a second delete_sender");
    assert!(s.get_sender(a, d2.id, &username("support")).await.must("get").is_some(), "d2's sender stays");
    s.insert_sender(&sender(&d, "support")).await.must("a deleted username is free again");
}

pub(super) async fn sender_lists_page_newest_first<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let (d, d2) = (domain(a, "mail.example.com"), domain(a, "news.example.com"));
    s.insert_domain(&d).await.must("insert_domain");
    s.insert_domain(&d2).await.must("insert_domain 2");
    let mut expected = Vec::new();
    for i in 0..5 {
        let x = sender(&d, &format!("user{i}"));
        s.insert_sender(&x).await.must("insert_sender");
        expected.insert(0, x.id);
        if i % 2 == 1 {
            s.insert_sender(&sender(&d2, &format!("user{i}"))).await.must("insert_sender on d2");
        }
    }
    let list = lister!(s, |page| list_senders(a, d.id, page));
    walk_all_sizes("list_senders", &list, |x: &Sender| x.id, &expected).await;
    let from_b = s.list_senders(b, d.id, PageRequest::first(10)).await.must("list from b");
    assert!(from_b.items.is_empty() && !from_b.has_more, "another workspace lists no senders of the domain");
    let unknown: PageRequest<SenderId> = PageRequest::first(10);
    let none = s.list_senders(a, DomainId(ulid()), unknown).await.must("list unknown domain");
    assert!(none.items.is_empty() && !none.has_more, "an unknown domain has no senders");
}

pub(super) async fn domains_to_recheck_are_the_unverified_least_recently_checked<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t0 = now();
    let at = |secs| plus_secs(t0, secs);
    let with = |ws, name: &str, status, created: i64, checked: Option<i64>| Domain {
        status,
        created_at: at(created),
        last_checked_at: checked.map(at),
        ..domain(ws, name)
    };
    let never_checked = with(a, "new.example.com", DomainStatus::Pending, 10, None);
    let partial = with(b, "partial.example.com", DomainStatus::PartiallyVerified, 0, Some(5));
    let failed = with(a, "failed.example.com", DomainStatus::Failed, 0, Some(20));
    let recent = with(a, "recent.example.com", DomainStatus::Failed, 0, Some(100));
    let verified = with(b, "verified.example.com", DomainStatus::Verified, 0, Some(1));
    for d in [&never_checked, &partial, &failed, &recent, &verified] {
        s.insert_domain(d).await.must("insert_domain");
    }
    let ids = |found: Vec<Domain>| found.into_iter().map(|d| d.id).collect::<Vec<_>>();

    let due = s.list_domains_to_recheck(at(50), 10).await.must("list_domains_to_recheck");
    assert_eq!(ids(due), [partial.id, never_checked.id, failed.id], "unverified, checked before t+50, oldest first");
    let due = s.list_domains_to_recheck(at(50), 2).await.must("list_domains_to_recheck limit 2");
    assert_eq!(ids(due), [partial.id, never_checked.id], "at most `limit`, the oldest");
    let due = s.list_domains_to_recheck(at(5), 10).await.must("list_domains_to_recheck at t+5");
    assert!(due.is_empty(), "a check exactly at the cutoff is not before it: {due:?}");
    assert!(s.list_domains_to_recheck(at(50), 0).await.must("limit 0").is_empty(), "limit 0");

    let checked = Domain { status: DomainStatus::Verified, last_checked_at: Some(at(30)), ..partial.clone() };
    s.update_domain(&checked).await.must("update_domain");
    s.delete_domain(a, failed.id).await.must("delete_domain");
    let due = s.list_domains_to_recheck(at(1000), 10).await.must("list_domains_to_recheck after changes");
    assert_eq!(ids(due), [never_checked.id, recent.id], "verified and deleted domains drop out");

    // Verified, but the return path's records it asks for are not (yet): still due, until
    // they verify too.
    let return_path = |status| DnsRecord {
        kind: RecordKind::ReturnPathMx,
        record_type: "MX".to_owned(),
        name: "bounces.partial.example.com".to_owned(),
        value: "mx.tidings.test".to_owned(),
        ttl: 3600,
        status,
        last_checked_at: Some(at(30)),
        error: None,
        warning: None,
        priority: Some(10),
    };
    let mut pending = checked.clone();
    pending.records.push(return_path(RecordStatus::Failed));
    s.update_domain(&pending).await.must("update_domain with a return path");
    let due = s.list_domains_to_recheck(at(1000), 10).await.must("list_domains_to_recheck, return path pending");
    assert_eq!(ids(due), [never_checked.id, partial.id, recent.id], "its return path is left to verify");
    let mut settled = pending.clone();
    settled.records.last_mut().expect("the return path's record").status = RecordStatus::Verified;
    s.update_domain(&settled).await.must("update_domain, return path verified");
    let due = s.list_domains_to_recheck(at(1000), 10).await.must("list_domains_to_recheck, return path verified");
    assert_eq!(ids(due), [never_checked.id, recent.id], "nothing left to verify");
}

/// A pair of dummy keys (not usable for signing) under selectors of their own.
fn other_keys(tag: &str, made: Option<DateTime<Utc>>) -> DkimKeys {
    DkimKeys {
        rsa_selector: format!("td{tag}r"),
        rsa_private_pkcs8: Secret::new(format!("rsa {tag}").into_bytes()),
        ed25519_selector: format!("td{tag}e"),
        ed25519_private_pkcs8: Secret::new(format!("ed25519 {tag}").into_bytes()),
        created_at: made,
    }
}

/// `d` with a rotation to `keys` pending.
fn rotating(d: &Domain, keys: DkimKeys) -> Domain {
    let mut rotated = d.clone();
    rotated.dkim_rotation.pending = Some(keys);
    rotated
}

pub(super) async fn domain_keys_change_only_by_compare_and_swap<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let d = domain(a, "rotate.example.com");
    s.insert_domain(&d).await.must("insert_domain");
    let rotated = rotating(&d, other_keys("one", Some(now())));

    assert_conflict(s.update_domain(&rotated).await, "update_domain never changes keys");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), Some(d.clone()), "nothing changed");
    s.update_domain_keys(&rotated, &d).await.must("update_domain_keys from the stored keys");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), Some(rotated.clone()), "the rotation is stored");

    let stale = rotating(&d, other_keys("two", Some(now())));
    assert_conflict(s.update_domain_keys(&stale, &d).await, "a rotation from keys read before another");
    let tracking = Domain { open_tracking: true, ..d.clone() };
    assert_conflict(s.update_domain(&tracking).await, "a tracking change read before the rotation");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), Some(rotated.clone()), "no pair was lost");
    let renamed = Domain { name: domain_name("renamed.example.com"), ..rotated.clone() };
    assert_conflict(s.update_domain_keys(&renamed, &rotated).await, "the name never changes");
    assert_not_found(s.update_domain_keys(&Domain { workspace_id: b, ..rotated.clone() }, &rotated).await, "b");
    let unknown = domain(a, "unknown.example.com");
    assert_not_found(s.update_domain_keys(&unknown, &unknown).await, "an unknown domain");

    // The switch: pending becomes active, the old pair retiring, an older one retired.
    let mut switched = rotated.clone();
    let old = std::mem::replace(&mut switched.dkim, switched.dkim_rotation.pending.take().expect("pending"));
    switched.dkim_rotation.retiring.push(RetiringDkimKeys {
        keys: old,
        replaced_at: now(),
        retire_at: plus_secs(now(), 60),
    });
    switched.dkim_rotation.retired.push(RetiredDkimKeys {
        rsa_selector: "tdzeror".into(),
        rsa_public: "AAAA".into(),
        ed25519_selector: "tdzeroe".into(),
        ed25519_public: "BBBB".into(),
        retired_at: now(),
        drop_at: plus_secs(now(), 120),
    });
    switched.status = DomainStatus::Verified;
    s.update_domain_keys(&switched, &rotated).await.must("the switch");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), Some(switched.clone()), "every pair round-trips");
    let name = domain_name("rotate.example.com");
    assert_eq!(s.find_domain_by_name(a, &name).await.must("find"), Some(switched.clone()), "found by name too");

    // Racing writers from the same read: exactly one wins, and what is stored is its.
    let mut racers = Vec::new();
    for i in 0..8 {
        let (s, from) = (Arc::clone(&s), switched.clone());
        racers.push(tokio::spawn(async move {
            let next = rotating(&from, other_keys(&format!("race{i}"), Some(now())));
            (s.update_domain_keys(&next, &from).await, next)
        }));
    }
    let mut winners = Vec::new();
    for racer in racers {
        let (result, next) = racer.await.expect("racer");
        match result {
            Ok(()) => winners.push(next),
            Err(e) => assert!(matches!(e, tidings_core::ports::StoreError::Conflict(_)), "a loser: {e:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one rotation from one read is stored");
    assert_eq!(s.get_domain(a, d.id).await.must("get"), winners.pop(), "the winner's keys are stored");
}

pub(super) async fn domains_to_rotate_are_verified_customer_domains_by_key_age<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let t0 = now();
    let at = |secs| plus_secs(t0, secs);
    let verified = |ws, name: &str, created: i64, made: Option<i64>| {
        let mut d = Domain { status: DomainStatus::Verified, created_at: at(created), ..domain(ws, name) };
        d.dkim.created_at = made.map(at);
        d
    };
    let old_keys = verified(a, "old.example.com", 0, Some(10));
    let unknown_age = verified(b, "legacy.example.com", 5, None);
    let newer = verified(a, "newer.example.com", 0, Some(30));
    let fresh = verified(a, "fresh.example.com", 0, Some(500));
    let sandbox = Domain { kind: DomainKind::Sandbox, ..verified(a, "sandbox.example", 0, Some(0)) };
    let unverified = Domain { status: DomainStatus::Pending, ..verified(a, "pending.example.com", 0, Some(0)) };
    for d in [&old_keys, &unknown_age, &newer, &fresh, &sandbox, &unverified] {
        s.insert_domain(d).await.must("insert_domain");
    }
    let ids = |found: Vec<Domain>| found.into_iter().map(|d| d.id).collect::<Vec<_>>();

    let due = s.list_domains_to_rotate(at(100), 10).await.must("list_domains_to_rotate");
    assert_eq!(ids(due), [unknown_age.id, old_keys.id, newer.id], "Verified customer domains by key age");
    let due = s.list_domains_to_rotate(at(100), 1).await.must("limit 1");
    assert_eq!(ids(due), [unknown_age.id], "at most `limit`, the oldest keys");
    assert!(s.list_domains_to_rotate(at(5), 10).await.must("at t+5").is_empty(), "the cutoff is exclusive");

    let rotated = rotating(&old_keys, other_keys("next", Some(at(200))));
    s.update_domain_keys(&rotated, &old_keys).await.must("rotate");
    let due = s.list_domains_to_rotate(at(100), 10).await.must("after a rotation started");
    assert_eq!(ids(due), [unknown_age.id, newer.id], "a domain with a pending rotation is not due");

    let mut switched = rotated.clone();
    switched.dkim = switched.dkim_rotation.pending.take().expect("pending");
    s.update_domain_keys(&switched, &rotated).await.must("switch");
    let due = s.list_domains_to_rotate(at(1000), 10).await.must("after the switch");
    assert_eq!(ids(due), [unknown_age.id, newer.id, switched.id, fresh.id], "due again by its new keys' age");
    s.delete_domain(b, unknown_age.id).await.must("delete");
    let due = s.list_domains_to_rotate(at(1000), 10).await.must("after a delete");
    assert_eq!(ids(due), [newer.id, switched.id, fresh.id]);
}
