//! Workspaces and API keys.

use std::sync::Arc;

use super::{Must, assert_conflict, assert_not_found, lister, walk_all_sizes};
use crate::fixtures::{api_key, now, plus_secs, ulid, workspace};
use tidings_core::ids::{ApiKeyId, WorkspaceId};
use tidings_core::model::{ApiKey, KeyHash, RateLimit};
use tidings_core::ports::{PageRequest, Store};

pub(super) async fn workspaces_are_created_with_their_first_key<S: Store + 'static>(s: Arc<S>) {
    assert!(s.list_workspaces().await.must("list_workspaces").is_empty(), "a fresh store has no workspaces");
    let (a, b) = (workspace(), workspace());
    let (key_a, key_b) = (api_key(a.id), api_key(b.id));
    s.create_workspace(&b, &key_b).await.must("create_workspace b");
    s.create_workspace(&a, &key_a).await.must("create_workspace a");

    assert_eq!(s.get_workspace(a.id).await.must("get_workspace"), Some(a.clone()), "get_workspace round trip");
    assert_eq!(s.get_workspace(WorkspaceId(ulid())).await.must("get_workspace unknown"), None, "unknown workspace");
    assert_eq!(s.list_workspaces().await.must("list_workspaces"), vec![a.clone(), b.clone()], "oldest first by id");
    assert_eq!(
        s.find_api_key_by_hash(&key_a.key_hash).await.must("find first key"),
        Some(key_a.clone()),
        "the first key is stored with its workspace"
    );
    assert_eq!(s.get_api_key(a.id, key_a.id).await.must("get first key"), Some(key_a.clone()), "first key by id");

    assert_conflict(s.create_workspace(&a, &api_key(a.id)).await, "create_workspace with an existing id");
    let c = workspace();
    let mut reused = api_key(c.id);
    reused.key_hash = key_b.key_hash;
    assert_conflict(s.create_workspace(&c, &reused).await, "create_workspace whose first key's hash exists");
    assert_eq!(
        s.get_workspace(c.id).await.must("get_workspace c"),
        None,
        "a refused create_workspace writes nothing (atomicity)"
    );
    assert_eq!(s.get_api_key(c.id, reused.id).await.must("get refused key"), None, "nor its key");
    assert_eq!(s.list_workspaces().await.must("list_workspaces").len(), 2, "still two workspaces");
}

pub(super) async fn only_an_empty_store_gets_a_first_workspace<S: Store + 'static>(s: Arc<S>) {
    // A key without a workspace (the suite makes many) does not make the store non-empty.
    let stray = api_key(WorkspaceId(ulid()));
    s.insert_api_key(&stray).await.must("insert_api_key");
    let mut reused = api_key(WorkspaceId(ulid()));
    reused.key_hash = stray.key_hash;
    let refused = workspace();
    assert_conflict(
        s.create_first_workspace(&refused, &reused).await,
        "create_first_workspace whose first key's hash exists",
    );
    assert!(s.list_workspaces().await.must("list_workspaces").is_empty(), "a refused first workspace writes nothing");

    let (a, b) = (workspace(), workspace());
    let (key_a, key_b) = (api_key(a.id), api_key(b.id));
    assert!(s.create_first_workspace(&a, &key_a).await.must("create_first_workspace"), "an empty store takes it");
    assert_eq!(s.get_workspace(a.id).await.must("get_workspace"), Some(a.clone()), "the first workspace is stored");
    assert_eq!(
        s.find_api_key_by_hash(&key_a.key_hash).await.must("find first key"),
        Some(key_a.clone()),
        "with its first key"
    );

    assert!(!s.create_first_workspace(&b, &key_b).await.must("second create_first_workspace"), "then it refuses");
    assert_eq!(s.get_workspace(b.id).await.must("get_workspace b"), None, "a refused workspace is not stored");
    assert_eq!(s.find_api_key_by_hash(&key_b.key_hash).await.must("find"), None, "nor its first key");
    assert!(
        !s.create_first_workspace(&b, &key_a).await.must("create_first_workspace with a used key"),
        "a store with a workspace answers false before any conflict"
    );
    assert_eq!(s.list_workspaces().await.must("list_workspaces"), vec![a], "one workspace, unchanged");

    s.create_workspace(&b, &key_b).await.must("create_workspace after the first");
    let c = workspace();
    assert!(!s.create_first_workspace(&c, &api_key(c.id)).await.must("create_first_workspace"), "still refuses");
    assert_eq!(s.list_workspaces().await.must("list_workspaces").len(), 2, "two workspaces");
}

pub(super) async fn racing_first_workspaces_make_exactly_one<S: Store + 'static>(s: Arc<S>) {
    const RACERS: usize = 16;
    let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..RACERS {
        let (s, barrier) = (Arc::clone(&s), Arc::clone(&barrier));
        tasks.spawn(async move {
            let ws = workspace();
            let key = api_key(ws.id);
            barrier.wait().await;
            let created = s.create_first_workspace(&ws, &key).await;
            (ws, created)
        });
    }
    let mut winners = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (ws, created) = joined.unwrap_or_else(|e| panic!("racing create_first_workspace task failed: {e}"));
        if created.must("racing create_first_workspace") {
            winners.push(ws);
        }
    }
    assert_eq!(winners.len(), 1, "exactly one of {RACERS} racing calls on an empty store creates");
    assert_eq!(s.list_workspaces().await.must("list_workspaces"), winners, "the store holds exactly the winner");
}

pub(super) async fn keys_round_trip_and_refuse_duplicates<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let key = api_key(a);
    s.insert_api_key(&key).await.must("insert_api_key");
    assert_eq!(s.get_api_key(a, key.id).await.must("get_api_key"), Some(key.clone()), "get_api_key round trip");
    assert_eq!(s.find_api_key_by_hash(&key.key_hash).await.must("find"), Some(key.clone()), "find by hash");
    assert_eq!(s.get_api_key(b, key.id).await.must("get from b"), None, "another workspace does not see the key");
    assert_eq!(s.get_api_key(a, ApiKeyId(ulid())).await.must("get unknown"), None, "unknown key id");
    assert_eq!(s.find_api_key_by_hash(&KeyHash([7; 32])).await.must("find unknown"), None, "unknown hash");

    let mut same_id = api_key(a);
    same_id.id = key.id;
    assert_conflict(s.insert_api_key(&same_id).await, "insert_api_key with an existing id");
    let mut same_hash = api_key(b);
    same_hash.key_hash = key.key_hash;
    assert_conflict(s.insert_api_key(&same_hash).await, "insert_api_key with an existing hash (other workspace)");
    assert_eq!(s.get_api_key(b, same_hash.id).await.must("get refused"), None, "a refused key is not stored");
    assert_eq!(s.find_api_key_by_hash(&key.key_hash).await.must("find"), Some(key), "the original key is unchanged");
}

pub(super) async fn key_lists_page_newest_first_without_revoked_keys<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let mut keys = Vec::new();
    for i in 0..6 {
        let key = api_key(a);
        s.insert_api_key(&key).await.must("insert_api_key");
        keys.push(key);
        if i % 2 == 0 {
            s.insert_api_key(&api_key(b)).await.must("insert_api_key in b");
        }
    }
    s.revoke_api_key(a, keys[2].id, now()).await.must("revoke");
    let expected: Vec<ApiKeyId> = keys.iter().rev().filter(|k| k.id != keys[2].id).map(|k| k.id).collect();
    let list = lister!(s, |page| list_api_keys(a, page));
    walk_all_sizes("list_api_keys", &list, |k: &ApiKey| k.id, &expected).await;

    // The cursor is an id: paging goes on past a key revoked after its page was read.
    let first = s.list_api_keys(a, PageRequest::first(2)).await.must("first page");
    let cursor = first.items[1].id;
    s.revoke_api_key(a, cursor, now()).await.must("revoke the cursor key");
    let next = s.list_api_keys(a, PageRequest { limit: 10, cursor: Some(cursor) }).await.must("next page");
    let ids: Vec<ApiKeyId> = next.items.iter().map(|k| k.id).collect();
    assert_eq!(ids, expected[2..], "the page after a revoked cursor key starts strictly after it");

    let empty = s.list_api_keys(WorkspaceId(ulid()), PageRequest::first(5)).await.must("list empty");
    assert!(empty.items.is_empty() && !empty.has_more, "a workspace without keys lists nothing");
}

pub(super) async fn revoking_a_key_shows_everywhere_once<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let key = api_key(a);
    s.insert_api_key(&key).await.must("insert_api_key");
    let at = plus_secs(now(), 5);

    assert_not_found(s.revoke_api_key(b, key.id, at).await, "revoke from another workspace");
    assert_eq!(s.get_api_key(a, key.id).await.must("get"), Some(key.clone()), "a refused revoke changes nothing");
    assert_not_found(s.revoke_api_key(a, ApiKeyId(ulid()), at).await, "revoke an unknown key");

    let revoked = s.revoke_api_key(a, key.id, at).await.must("revoke");
    assert_eq!(revoked, ApiKey { revoked_at: Some(at), ..key.clone() }, "revoke returns the key, revoked at `at`");
    assert_eq!(
        s.find_api_key_by_hash(&key.key_hash).await.must("find"),
        Some(revoked.clone()),
        "find_api_key_by_hash shows the key revoked"
    );
    assert_eq!(s.get_api_key(a, key.id).await.must("get"), Some(revoked.clone()), "get_api_key shows it revoked");
    let listed = s.list_api_keys(a, PageRequest::first(10)).await.must("list");
    assert!(listed.items.is_empty() && !listed.has_more, "list_api_keys leaves revoked keys out");
    assert_not_found(s.revoke_api_key(a, key.id, plus_secs(at, 1)).await, "a second revoke");
    assert_eq!(s.get_api_key(a, key.id).await.must("get"), Some(revoked), "a second revoke keeps the first time");
}

pub(super) async fn a_live_keys_rate_changes_everywhere_and_a_revoked_ones_never<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let (live, gone) = (api_key(a), api_key(a));
    s.insert_api_key(&live).await.must("insert live");
    s.insert_api_key(&gone).await.must("insert gone");
    let revoked = s.revoke_api_key(a, gone.id, now()).await.must("revoke");
    let fast = RateLimit::new(500).expect("a rate");

    assert_not_found(s.set_api_key_rate_limit(b, live.id, fast).await, "from another workspace");
    assert_not_found(s.set_api_key_rate_limit(a, ApiKeyId(ulid()), fast).await, "an unknown key");
    assert_not_found(s.set_api_key_rate_limit(a, gone.id, fast).await, "a revoked key");
    assert_eq!(s.get_api_key(a, gone.id).await.must("get"), Some(revoked), "a revoked key keeps its rate");

    let changed = s.set_api_key_rate_limit(a, live.id, fast).await.must("set the rate");
    assert_eq!(changed, ApiKey { rate_limit: fast, ..live.clone() }, "only the rate changes");
    assert_eq!(s.find_api_key_by_hash(&live.key_hash).await.must("find"), Some(changed.clone()), "found by hash");
    assert_eq!(s.get_api_key(a, live.id).await.must("get"), Some(changed), "read by id");
}

pub(super) async fn touching_ignores_unknown_and_revoked_keys<S: Store + 'static>(s: Arc<S>) {
    let (a, b) = (WorkspaceId(ulid()), WorkspaceId(ulid()));
    let (live, gone) = (api_key(a), api_key(a));
    s.insert_api_key(&live).await.must("insert live");
    s.insert_api_key(&gone).await.must("insert gone");
    let revoked = s.revoke_api_key(a, gone.id, now()).await.must("revoke");
    let at = plus_secs(now(), 10);

    s.touch_api_key(a, ApiKeyId(ulid()), at).await.must("touch an unknown key");
    s.touch_api_key(a, gone.id, at).await.must("touch a revoked key");
    s.touch_api_key(b, live.id, at).await.must("touch from another workspace");
    s.touch_api_key(a, live.id, at).await.must("touch");

    let after = s.get_api_key(a, gone.id).await.must("get revoked");
    assert_eq!(after, Some(revoked), "touching a revoked key changes nothing");
    let after = s.get_api_key(a, live.id).await.must("get live").expect("the touched key exists");
    // Touches may be coalesced, so a store may not show this one yet; it must not show
    // anything else.
    assert!(
        after.last_used_at.is_none() || after.last_used_at == Some(at),
        "last_used_at is the touch time or not yet recorded, got {:?}",
        after.last_used_at
    );
    assert_eq!(ApiKey { last_used_at: None, ..after }, live, "touching changes only last_used_at");
}
