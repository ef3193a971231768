//! Dashboard sessions: found by token hash across workspaces, touched forward only,
//! deleted at once, purged when expired.

use std::sync::Arc;

use super::Must;
use crate::fixtures::{api_key, now, plus_secs, session, workspace};
use tidings_core::ports::{Store, StoreError};

async fn a_key<S: Store>(s: &S) -> tidings_core::model::ApiKey {
    let ws = workspace();
    let key = api_key(ws.id);
    s.create_workspace(&ws, &key).await.must("create_workspace");
    key
}

pub(super) async fn sessions_round_trip_by_token_hash<S: Store + 'static>(s: Arc<S>) {
    let key = a_key(s.as_ref()).await;
    let other_key = a_key(s.as_ref()).await;
    let first = session(&key, 1800);
    let second = session(&other_key, 60);
    s.insert_session(&first).await.must("insert_session");
    s.insert_session(&second).await.must("insert_session of another workspace");
    assert_eq!(s.find_session(&first.token_hash).await.must("find_session"), Some(first.clone()));
    assert_eq!(s.find_session(&second.token_hash).await.must("find_session"), Some(second.clone()));
    let unknown = session(&key, 60);
    assert_eq!(s.find_session(&unknown.token_hash).await.must("find_session of an unknown token"), None);

    let mut same_hash = session(&key, 60);
    same_hash.token_hash = first.token_hash;
    assert!(
        matches!(s.insert_session(&same_hash).await, Err(StoreError::Conflict(_))),
        "a second session with the same token hash is a Conflict"
    );
    let mut same_id = session(&key, 60);
    same_id.id = first.id;
    assert!(
        matches!(s.insert_session(&same_id).await, Err(StoreError::Conflict(_))),
        "a second session with the same id is a Conflict"
    );
    assert_eq!(s.find_session(&first.token_hash).await.must("find_session"), Some(first), "conflicts change nothing");
}

pub(super) async fn touches_only_move_sessions_forward<S: Store + 'static>(s: Arc<S>) {
    let key = a_key(s.as_ref()).await;
    let stored = session(&key, 1800);
    s.insert_session(&stored).await.must("insert_session");
    let (later, expiry) = (plus_secs(now(), 120), plus_secs(now(), 1920));
    s.touch_session(&stored.token_hash, later, expiry).await.must("touch_session");
    let touched = s.find_session(&stored.token_hash).await.must("find_session").expect("still there");
    assert_eq!((touched.last_seen_at, touched.expires_at), (later, expiry), "a touch moves both times");
    assert_eq!(
        (touched.id, touched.created_at, &touched.csrf_token),
        (stored.id, stored.created_at, &stored.csrf_token)
    );

    s.touch_session(&stored.token_hash, plus_secs(now(), 60), plus_secs(now(), 1860)).await.must("an older touch");
    let kept = s.find_session(&stored.token_hash).await.must("find_session").expect("still there");
    assert_eq!((kept.last_seen_at, kept.expires_at), (later, expiry), "an older touch changes nothing");

    let unknown = session(&key, 60);
    s.touch_session(&unknown.token_hash, later, expiry).await.must("touching an unknown session is no error");
    assert_eq!(s.find_session(&unknown.token_hash).await.must("find_session"), None, "and creates nothing");
}

pub(super) async fn deleted_sessions_are_gone<S: Store + 'static>(s: Arc<S>) {
    let key = a_key(s.as_ref()).await;
    let (gone, kept) = (session(&key, 1800), session(&key, 1800));
    s.insert_session(&gone).await.must("insert_session");
    s.insert_session(&kept).await.must("insert_session");
    assert!(s.delete_session(&gone.token_hash).await.must("delete_session"), "deleting a session says so");
    assert_eq!(s.find_session(&gone.token_hash).await.must("find_session"), None);
    assert!(!s.delete_session(&gone.token_hash).await.must("delete_session again"), "a second delete finds none");
    assert_eq!(s.find_session(&kept.token_hash).await.must("find_session"), Some(kept), "others stay");
}

pub(super) async fn expired_sessions_are_deleted_earliest_first_up_to_the_limit<S: Store + 'static>(s: Arc<S>) {
    let key = a_key(s.as_ref()).await;
    // Expired 30, 20 and 10 seconds ago, expiring exactly now, and live for a minute.
    let expired: Vec<_> = [-30, -20, -10, 0].iter().map(|ttl| session(&key, *ttl)).collect();
    let live = session(&key, 60);
    for stored in expired.iter().chain([&live]) {
        s.insert_session(stored).await.must("insert_session");
    }
    assert_eq!(s.delete_expired_sessions(now(), 2).await.must("delete_expired_sessions"), 2, "up to the limit");
    for (i, stored) in expired.iter().enumerate() {
        let found = s.find_session(&stored.token_hash).await.must("find_session");
        assert_eq!(found.is_some(), i >= 2, "the earliest expired go first (session {i})");
    }
    assert_eq!(
        s.delete_expired_sessions(now(), 10).await.must("delete_expired_sessions"),
        2,
        "the rest, `now` included"
    );
    assert_eq!(s.delete_expired_sessions(now(), 10).await.must("delete_expired_sessions"), 0, "nothing left");
    assert_eq!(s.find_session(&live.token_hash).await.must("find_session"), Some(live), "a live session stays");
}
