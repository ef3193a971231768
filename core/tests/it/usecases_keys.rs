//! Authentication, API keys and workspaces over the in-memory store with a fixed clock;
//! storage failures injected through `TestCore::faults`.

use std::sync::Arc;

use chrono::Duration;
use tidings_core::Error;
use tidings_core::ids::ApiKeyId;
use tidings_core::model::{ApiKeyPlaintext, KeyScope, RateLimit};
use tidings_core::ports::{DomainStore, KeyStore, StoreError, SystemRandom, WorkspaceStore};
use tidings_core::usecases::{CreateApiKeyRequest, CreatedKey, ListParams, Principal, UpdateApiKeyRequest};
use tidings_testing::TestCore;
use tidings_testing::faulty::{Op, When};
use tidings_testing::fixtures;
use tidings_testing::service::invalid_fields;

/// A workspace with its first key, and that key authenticated.
async fn workspace(t: &TestCore, name: &str) -> (CreatedKey, Principal) {
    let (_, first) = t.core.workspaces().create(name, None).await.unwrap();
    let who = t.core.authenticate(first.plaintext.expose()).await.unwrap();
    (first, who)
}

/// A key of `scope` beside `who`, authenticated.
async fn key_beside(t: &TestCore, who: &Principal, scope: &str) -> (CreatedKey, Principal) {
    let req = CreateApiKeyRequest { scope: Some(scope.to_owned()), ..Default::default() };
    let created = t.core.keys().create(who, req).await.unwrap();
    let principal = t.core.authenticate(created.plaintext.expose()).await.unwrap();
    (created, principal)
}

#[tokio::test]
async fn a_new_workspace_gets_a_full_key_that_authenticates() {
    let t = TestCore::new();
    let (workspace, first) = t.core.workspaces().create("Acme", None).await.unwrap();
    assert_eq!(workspace.name, "Acme");
    assert_eq!(first.key.workspace_id, workspace.id);
    assert_eq!((first.key.name.as_str(), first.key.scope), ("default", KeyScope::Full));

    let who = t.core.authenticate(first.plaintext.expose()).await.unwrap();
    assert_eq!(
        who,
        Principal {
            workspace_id: workspace.id,
            key_id: first.key.id,
            scope: KeyScope::Full,
            sending_domain_id: None,
            rate_limit: RateLimit::DEFAULT,
        }
    );
    assert_eq!(t.store.get_workspace(workspace.id).await.unwrap(), Some(workspace));
}

#[tokio::test]
async fn a_key_is_created_with_the_defaults_of_the_spec() {
    let t = TestCore::new();
    let (_, who) = workspace(&t, "acme").await;
    let created = t.core.keys().create(&who, CreateApiKeyRequest::default()).await.unwrap();
    let key = &created.key;
    assert_eq!(key.name, "default");
    assert_eq!(key.scope, KeyScope::Full);
    assert_eq!(key.rate_limit.per_sec(), 10);
    assert_eq!(key.sending_domain_id, None);
    assert_eq!(key.created_at, t.now());
    assert_eq!(key.last_used_at, None);
    assert!(created.plaintext.expose().starts_with("tid_"));
    assert_eq!(key.prefix, created.plaintext.expose()[..12]);
    // Only the hash is stored.
    let stored = t.store.get_api_key(who.workspace_id, key.id).await.unwrap().unwrap();
    assert_eq!(stored.key_hash, created.plaintext.hash());
    assert!(!format!("{stored:?}").contains(&created.plaintext.expose()[12..]));
}

#[tokio::test]
async fn a_key_takes_every_option() {
    let t = TestCore::new();
    let (_, who) = workspace(&t, "acme").await;
    let domain = fixtures::domain(who.workspace_id, "acme.example.com");
    t.store.insert_domain(&domain).await.unwrap();
    let req = CreateApiKeyRequest {
        name: Some("checkout service".into()),
        scope: Some("send".into()),
        sending_domain_id: Some(domain.id.to_string()),
        rate_limit_per_sec: Some(10_000),
    };
    let created = t.core.keys().create(&who, req).await.unwrap();
    let principal = t.core.authenticate(created.plaintext.expose()).await.unwrap();
    assert_eq!(created.key.name, "checkout service");
    assert_eq!(principal.scope, KeyScope::Send);
    assert_eq!(principal.sending_domain_id, Some(domain.id));
    assert_eq!(principal.rate_limit.per_sec(), 10_000);
}

#[tokio::test]
async fn every_invalid_field_is_reported_at_once() {
    let t = TestCore::new();
    let (_, who) = workspace(&t, "acme").await;
    let req = CreateApiKeyRequest {
        name: Some("x".repeat(101)),
        scope: Some("admin".into()),
        sending_domain_id: Some("not-an-id".into()),
        rate_limit_per_sec: Some(0),
    };
    let fields = invalid_fields(t.core.keys().create(&who, req).await);
    assert_eq!(fields, ["name", "scope", "rateLimitPerSec", "sendingDomainId"]);
    // Nothing was stored.
    assert_eq!(t.core.keys().list(&who, ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn out_of_range_and_malformed_values_name_their_field() {
    let t = TestCore::new();
    let (_, who) = workspace(&t, "acme").await;
    let cases: Vec<(CreateApiKeyRequest, &str)> = vec![
        (CreateApiKeyRequest { rate_limit_per_sec: Some(10_001), ..Default::default() }, "rateLimitPerSec"),
        (CreateApiKeyRequest { rate_limit_per_sec: Some(-1), ..Default::default() }, "rateLimitPerSec"),
        (CreateApiKeyRequest { rate_limit_per_sec: Some(i64::MAX), ..Default::default() }, "rateLimitPerSec"),
        (CreateApiKeyRequest { name: Some(String::new()), ..Default::default() }, "name"),
        (CreateApiKeyRequest { name: Some("line\nbreak".into()), ..Default::default() }, "name"),
        (CreateApiKeyRequest { scope: Some("Full".into()), ..Default::default() }, "scope"),
    ];
    for (req, field) in cases {
        assert_eq!(invalid_fields(t.core.keys().create(&who, req.clone()).await), [field], "{req:?}");
    }
    for limit in [1, 10_000] {
        let req = CreateApiKeyRequest { rate_limit_per_sec: Some(limit), ..Default::default() };
        assert!(t.core.keys().create(&who, req).await.is_ok(), "{limit}");
    }
}

#[tokio::test]
async fn the_sending_domain_must_belong_to_the_workspace() {
    let t = TestCore::new();
    let (_, alice) = workspace(&t, "alice").await;
    let (_, bob) = workspace(&t, "bob").await;
    let bobs = fixtures::domain(bob.workspace_id, "bob.example.com");
    t.store.insert_domain(&bobs).await.unwrap();
    let unknown = fixtures::domain(alice.workspace_id, "never-added.example.com");
    for id in [bobs.id.to_string(), unknown.id.to_string()] {
        let req = CreateApiKeyRequest { sending_domain_id: Some(id), ..Default::default() };
        assert_eq!(invalid_fields(t.core.keys().create(&alice, req).await), ["sendingDomainId"]);
    }
}

/// A full key restricted to a domain creates and revokes only keys restricted to that same
/// domain; whatever it is refused changes nothing.
#[tokio::test]
async fn a_domain_restricted_full_key_manages_only_keys_of_its_domain() {
    let t = TestCore::new();
    let (first, admin) = workspace(&t, "acme").await;
    let (mine, other) =
        (fixtures::domain(admin.workspace_id, "a.example.com"), fixtures::domain(admin.workspace_id, "b.example.com"));
    t.store.insert_domain(&mine).await.unwrap();
    t.store.insert_domain(&other).await.unwrap();
    let make = |scope: &str, domain: Option<&tidings_core::model::Domain>| CreateApiKeyRequest {
        scope: Some(scope.to_owned()),
        sending_domain_id: domain.map(|d| d.id.to_string()),
        ..Default::default()
    };
    let restricted = t.core.keys().create(&admin, make("full", Some(&mine))).await.unwrap();
    let restricted = t.core.authenticate(restricted.plaintext.expose()).await.unwrap();
    let unrestricted_send = t.core.keys().create(&admin, make("send", None)).await.unwrap();
    let other_domains = t.core.keys().create(&admin, make("send", Some(&other))).await.unwrap();
    let before = t.core.keys().list(&admin, ListParams::default()).await.unwrap().items.len();

    for (scope, domain) in [("full", None), ("send", None), ("full", Some(&other)), ("send", Some(&other))] {
        let refused = t.core.keys().create(&restricted, make(scope, domain)).await;
        assert!(matches!(refused, Err(Error::InsufficientScope)), "{scope} {domain:?}: {refused:?}");
    }
    for target in [admin.key_id, unrestricted_send.key.id, other_domains.key.id] {
        let refused = t.core.keys().revoke(&restricted, target).await;
        assert!(matches!(refused, Err(Error::InsufficientScope)), "{target}: {refused:?}");
    }
    assert_eq!(t.core.keys().list(&admin, ListParams::default()).await.unwrap().items.len(), before, "nothing changed");
    assert!(t.core.authenticate(first.plaintext.expose()).await.is_ok(), "the workspace's key still works");

    // Its own domain: both scopes, and it revokes them (and itself) again.
    let same = t.core.keys().create(&restricted, make("send", Some(&mine))).await.unwrap();
    let same_full = t.core.keys().create(&restricted, make("full", Some(&mine))).await.unwrap();
    assert_eq!((same.key.sending_domain_id, same_full.key.sending_domain_id), (Some(mine.id), Some(mine.id)));
    t.core.keys().revoke(&restricted, same.key.id).await.unwrap();
    t.core.keys().revoke(&restricted, same_full.key.id).await.unwrap();
    let absent = t.core.keys().revoke(&restricted, same.key.id).await;
    assert!(matches!(absent, Err(Error::NotFound(_))), "an absent key is 404 as for anyone: {absent:?}");
    t.core.keys().revoke(&restricted, restricted.key_id).await.unwrap();
    // An unrestricted full key still manages every key.
    t.core.keys().revoke(&admin, other_domains.key.id).await.unwrap();
}

#[tokio::test]
async fn keys_are_listed_newest_first_with_paging_and_read_one_by_one() {
    let t = TestCore::new();
    let (first, who) = workspace(&t, "acme").await;
    let mut ids = vec![first.key.id];
    for n in 0..3 {
        t.clock.advance(Duration::milliseconds(5));
        let req = CreateApiKeyRequest { name: Some(format!("key {n}")), ..Default::default() };
        ids.push(t.core.keys().create(&who, req).await.unwrap().key.id);
    }
    ids.reverse();
    let page = t.core.keys().list(&who, ListParams { limit: Some(3), cursor: None }).await.unwrap();
    assert_eq!(page.items.iter().map(|k| k.id).collect::<Vec<_>>(), ids[..3]);
    assert!(page.has_more);
    let next = ListParams { limit: Some(3), cursor: page.next_cursor };
    let page = t.core.keys().list(&who, next).await.unwrap();
    assert_eq!(page.items.iter().map(|k| k.id).collect::<Vec<_>>(), ids[3..]);
    assert!(!page.has_more);
    assert_eq!(page.next_cursor, None);

    let got = t.core.keys().get(&who, ids[1]).await.unwrap();
    assert_eq!(got.id, ids[1]);
    assert_eq!(invalid_fields(t.core.keys().list(&who, ListParams { limit: Some(0), cursor: None }).await), ["limit"]);
    let bad_cursor = ListParams { limit: None, cursor: Some("nope".into()) };
    assert_eq!(invalid_fields(t.core.keys().list(&who, bad_cursor).await), ["cursor"]);
}

#[tokio::test]
async fn a_revoked_key_stops_working_immediately_and_disappears() {
    let t = TestCore::new();
    let (_, who) = workspace(&t, "acme").await;
    let (victim, _) = key_beside(&t, &who, "send").await;
    let id = victim.key.id.to_string();

    t.core.keys().revoke(&who, ApiKeyId::parse_or_none(&id)).await.unwrap();

    assert_eq!(t.core.authenticate(victim.plaintext.expose()).await, Err(Error::InvalidApiKey));
    assert_eq!(t.core.keys().get(&who, ApiKeyId::parse_or_none(&id)).await, Err(Error::NotFound("API key")));
    assert_eq!(t.core.keys().revoke(&who, ApiKeyId::parse_or_none(&id)).await, Err(Error::NotFound("API key")));
    let listed = t.core.keys().list(&who, ListParams::default()).await.unwrap();
    assert!(listed.items.iter().all(|k| k.id != victim.key.id));
    let stored = t.store.get_api_key(who.workspace_id, victim.key.id).await.unwrap().unwrap();
    assert_eq!(stored.revoked_at, Some(t.now()));
}

#[tokio::test]
async fn a_key_may_revoke_itself() {
    let t = TestCore::new();
    let (first, who) = workspace(&t, "acme").await;
    t.core.keys().revoke(&who, first.key.id).await.unwrap();
    assert_eq!(t.core.authenticate(first.plaintext.expose()).await, Err(Error::InvalidApiKey));
}

#[tokio::test]
async fn unknown_malformed_and_revoked_keys_get_the_same_answer() {
    let t = TestCore::new();
    let (_, who) = workspace(&t, "acme").await;
    let (revoked, _) = key_beside(&t, &who, "full").await;
    t.core.keys().revoke(&who, revoked.key.id).await.unwrap();
    let unknown = ApiKeyPlaintext::generate(&SystemRandom);
    for presented in [unknown.expose(), revoked.plaintext.expose(), "", "tid_short", "Bearer tid_x", "tid_/"] {
        assert_eq!(t.core.authenticate(presented).await, Err(Error::InvalidApiKey), "{presented:?}");
    }
}

#[tokio::test]
async fn authenticating_records_when_the_key_was_last_used() {
    let t = TestCore::new();
    let (first, who) = workspace(&t, "acme").await;
    t.clock.advance(Duration::minutes(3));
    t.core.authenticate(first.plaintext.expose()).await.unwrap();
    let key = t.core.keys().get(&who, first.key.id).await.unwrap();
    let touched = t.now();
    assert_eq!(key.last_used_at, Some(touched));

    // Within the resolution a use is not written again (it would cost a store write per
    // request); after it, it is.
    t.clock.advance(Duration::milliseconds(999));
    t.core.authenticate(first.plaintext.expose()).await.unwrap();
    let key = t.core.keys().get(&who, first.key.id).await.unwrap();
    assert_eq!(key.last_used_at, Some(touched));
    t.clock.advance(Duration::milliseconds(1));
    t.core.authenticate(first.plaintext.expose()).await.unwrap();
    let key = t.core.keys().get(&who, first.key.id).await.unwrap();
    assert_eq!(key.last_used_at, Some(t.now()));
}

#[tokio::test]
async fn a_keys_rate_changes_from_its_next_request_within_the_range_only() {
    let t = TestCore::new();
    let (_, who) = workspace(&t, "acme").await;
    let (sender, _) = key_beside(&t, &who, "send").await;
    let rate = |n: Option<i64>| UpdateApiKeyRequest { rate_limit_per_sec: n };

    let changed = t.core.keys().update(&who, sender.key.id, rate(Some(500))).await.unwrap();
    assert_eq!(changed.rate_limit.per_sec(), 500);
    let principal = t.core.authenticate(sender.plaintext.expose()).await.unwrap();
    assert_eq!(principal.rate_limit.per_sec(), 500, "the next request is limited by the new rate");
    // A full key may change its own rate too: it could make a key with any rate anyway.
    assert_eq!(t.core.keys().update(&who, who.key_id, rate(Some(10_000))).await.unwrap().rate_limit.per_sec(), 10_000);

    for (bad, why) in [(None, "is required"), (Some(0), "between"), (Some(10_001), "between"), (Some(-5), "between")] {
        let refused = t.core.keys().update(&who, sender.key.id, rate(bad)).await;
        let Err(Error::Validation { fields }) = refused else { panic!("{bad:?}: {refused:?}") };
        assert_eq!(fields.len(), 1, "{bad:?}: {fields:?}");
        assert!(fields[0].field == "rateLimitPerSec" && fields[0].message.contains(why), "{bad:?}: {fields:?}");
    }
    let unknown =
        t.core.keys().update(&who, ApiKeyId::parse_or_none("01ARZ3NDEKTSV4RRFFQ69G5FAV"), rate(Some(5))).await;
    assert!(matches!(unknown, Err(Error::NotFound(_))), "{unknown:?}");
    let (_, other) = workspace(&t, "elsewhere").await;
    let theirs = t.core.keys().update(&other, sender.key.id, rate(Some(5))).await;
    assert!(matches!(theirs, Err(Error::NotFound(_))), "another workspace's key is not found: {theirs:?}");
    let (_, send_only) = key_beside(&t, &who, "send").await;
    let scope = t.core.keys().update(&send_only, send_only.key_id, rate(Some(10_000))).await;
    assert!(matches!(scope, Err(Error::InsufficientScope)), "a send key cannot raise its own rate: {scope:?}");
    t.core.keys().revoke(&who, sender.key.id).await.unwrap();
    let revoked = t.core.keys().update(&who, sender.key.id, rate(Some(5))).await;
    assert!(matches!(revoked, Err(Error::NotFound(_))), "{revoked:?}");
}

#[tokio::test]
async fn a_send_key_cannot_manage_keys() {
    let t = TestCore::new();
    let (first, who) = workspace(&t, "acme").await;
    let (_, sender) = key_beside(&t, &who, "send").await;
    let id = first.key.id.to_string();
    let scope = Err::<(), _>(Error::InsufficientScope);
    assert_eq!(t.core.keys().create(&sender, CreateApiKeyRequest::default()).await.map(drop), scope);
    assert_eq!(t.core.keys().list(&sender, ListParams::default()).await.map(drop), scope);
    assert_eq!(t.core.keys().get(&sender, ApiKeyId::parse_or_none(&id)).await.map(drop), scope);
    assert_eq!(t.core.keys().revoke(&sender, ApiKeyId::parse_or_none(&id)).await, scope);
    // The full key it tried to revoke still works.
    assert!(t.core.authenticate(first.plaintext.expose()).await.is_ok());
}

#[tokio::test]
async fn workspaces_do_not_see_each_others_keys() {
    let t = TestCore::new();
    let (alice_key, alice) = workspace(&t, "alice").await;
    let (_, bob) = workspace(&t, "bob").await;
    let id = alice_key.key.id.to_string();
    assert_eq!(t.core.keys().get(&bob, ApiKeyId::parse_or_none(&id)).await, Err(Error::NotFound("API key")));
    assert_eq!(t.core.keys().revoke(&bob, ApiKeyId::parse_or_none(&id)).await, Err(Error::NotFound("API key")));
    let bobs = t.core.keys().list(&bob, ListParams::default()).await.unwrap();
    assert!(bobs.items.iter().all(|k| k.workspace_id == bob.workspace_id));
    assert_eq!(bobs.items.len(), 1);
    // Alice's key survived Bob's attempt.
    assert_eq!(t.core.authenticate(alice_key.plaintext.expose()).await.unwrap(), alice);
}

#[tokio::test]
async fn malformed_key_ids_are_not_found() {
    let t = TestCore::new();
    let (_, who) = workspace(&t, "acme").await;
    for id in ["", "nope", "01ARZ3NDEKTSV4RRFFQ69G5FAVX"] {
        assert_eq!(t.core.keys().get(&who, ApiKeyId::parse_or_none(id)).await, Err(Error::NotFound("API key")));
        assert_eq!(t.core.keys().revoke(&who, ApiKeyId::parse_or_none(id)).await, Err(Error::NotFound("API key")));
    }
}

#[tokio::test]
async fn a_fresh_store_gets_one_default_workspace_and_restarts_change_nothing() {
    let t = TestCore::new();
    let (workspace, first) = t.core.workspaces().ensure_default(None).await.unwrap().expect("created on a fresh store");
    assert_eq!(workspace.name, "default");
    assert_eq!(first.key.scope, KeyScope::Full);
    assert!(t.core.authenticate(first.plaintext.expose()).await.is_ok());

    assert_eq!(t.core.workspaces().ensure_default(None).await.unwrap(), None);
    assert_eq!(t.store.list_workspaces().await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_bootstrap_key_from_configuration_is_the_first_key() {
    let t = TestCore::new();
    let bootstrap = ApiKeyPlaintext::parse("tid_0123456789abcdefghijABCDEFGHIJ0123456789").unwrap();
    let (_, first) = t.core.workspaces().ensure_default(Some(bootstrap.clone())).await.unwrap().unwrap();
    assert_eq!(first.plaintext, bootstrap);
    assert_eq!(first.key.prefix, "tid_01234567");
    let who = t.core.authenticate(bootstrap.expose()).await.unwrap();
    assert_eq!(who.key_id, first.key.id);

    // The same plaintext cannot become another workspace's key.
    let reused = t.core.workspaces().create("other", Some(bootstrap)).await;
    assert!(matches!(reused, Err(Error::Conflict(_))), "{reused:?}");
    assert_eq!(t.store.list_workspaces().await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_starting_together_on_a_fresh_store_make_one_default_workspace() {
    let t = TestCore::new();
    let starts: Vec<_> = (0..8)
        .map(|_| {
            let core = t.core.clone();
            tokio::spawn(async move { core.workspaces().ensure_default(None).await })
        })
        .collect();
    let mut created = Vec::new();
    for start in starts {
        created.extend(start.await.unwrap().unwrap());
    }
    assert_eq!(created.len(), 1, "exactly one start makes the workspace");
    assert_eq!(t.store.list_workspaces().await.unwrap(), vec![created[0].0.clone()]);
    assert!(t.core.authenticate(created[0].1.plaintext.expose()).await.is_ok(), "its key works");
}

#[tokio::test]
async fn a_bootstrap_key_is_ignored_once_the_store_has_a_workspace() {
    let t = TestCore::new();
    let (_, first) = t.core.workspaces().create("acme", None).await.unwrap();
    // Even the key of the existing workspace: the store is not empty, so nothing is tried.
    assert_eq!(t.core.workspaces().ensure_default(Some(first.plaintext)).await.unwrap(), None);
    let fresh = ApiKeyPlaintext::generate(&SystemRandom);
    assert_eq!(t.core.workspaces().ensure_default(Some(fresh.clone())).await.unwrap(), None);
    assert!(t.core.authenticate(fresh.expose()).await.is_err(), "the unused bootstrap key is not stored");
    assert_eq!(t.store.list_workspaces().await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_unreachable_store_fails_the_first_start() {
    let t = TestCore::new();
    t.faults.fail(Op::CreateFirstWorkspace, When::Always, StoreError::Unavailable("disk on fire".into()));
    assert_eq!(t.core.workspaces().ensure_default(None).await, Err(Error::Unavailable("disk on fire".into())));
}

#[tokio::test]
async fn workspace_names_are_validated() {
    let t = TestCore::new();
    for bad in ["", "a\tb", &"w".repeat(101)] {
        assert_eq!(invalid_fields(t.core.workspaces().create(bad, None).await), ["name"], "{bad:?}");
    }
}

#[tokio::test]
async fn an_unreachable_store_is_unavailable_not_an_invalid_key() {
    let t = TestCore::new();
    let (_, first) = t.core.workspaces().create("acme", None).await.unwrap();
    t.faults.fail(Op::FindApiKeyByHash, When::Always, StoreError::Unavailable("disk on fire".into()));
    assert_eq!(t.core.authenticate(first.plaintext.expose()).await, Err(Error::Unavailable("disk on fire".into())));
}

#[tokio::test]
async fn failing_to_record_last_use_does_not_fail_authentication() {
    let t = TestCore::new();
    let (ws, first) = t.core.workspaces().create("acme", None).await.unwrap();
    t.faults.fail(Op::TouchApiKey, When::Always, StoreError::Unavailable("busy".into()));
    let who = t.core.authenticate(first.plaintext.expose()).await.unwrap();
    assert_eq!((who.workspace_id, who.key_id), (ws.id, first.key.id));
    assert_eq!(t.faults.calls(Op::TouchApiKey), 1, "the use was recorded, and that failed");
}

#[tokio::test]
async fn a_revocation_lost_to_a_concurrent_one_is_not_found() {
    let t = TestCore::new();
    let (_, who) = workspace(&t, "acme").await;
    let (other, _) = key_beside(&t, &who, "full").await;
    // The other revocation lands between the request and the store's write.
    let (store, ws, id, at) = (Arc::clone(&t.store), other.key.workspace_id, other.key.id, t.now());
    t.faults.before(Op::RevokeApiKey, When::Once, move || {
        let store = Arc::clone(&store);
        async move { store.revoke_api_key(ws, id, at).await.map(drop).unwrap() }
    });
    let id = other.key.id.to_string();
    assert_eq!(t.core.keys().revoke(&who, ApiKeyId::parse_or_none(&id)).await, Err(Error::NotFound("API key")));
    assert_eq!(t.faults.calls(Op::RevokeApiKey), 1);
}
