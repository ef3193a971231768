//! Dashboard sessions: `SESSION ‖ token sha256` → the session, an index of ids in use
//! (`SESSION_ID ‖ id`), and a global expiry index (`SESSION_EXP ‖ time ‖ token sha256`) that
//! the purge walks earliest first and each touch moves.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sled::Tree;
use tidings_core::model::{DashboardSession, SessionTokenHash};
use tidings_core::ports::{SessionStore, StoreError, StoreResult};

use crate::SledStore;
use crate::codec::{bad_key, encode, sled_error};
use crate::db::{Batch, get};
use crate::layout;

/// Adds to `batch` the removal of `session` and its index entries.
fn remove(batch: &mut Batch, session: &DashboardSession) {
    batch.remove(layout::session(&session.token_hash).0);
    batch.remove(layout::session_id(session.id).0);
    batch.remove(layout::session_expiry(session.expires_at, &session.token_hash).0);
}

fn stored(tree: &Tree, token: &SessionTokenHash) -> StoreResult<Option<DashboardSession>> {
    get(tree, &layout::session(token).0, "session")
}

#[async_trait]
impl SessionStore for SledStore {
    async fn insert_session(&self, session: &DashboardSession) -> StoreResult<()> {
        let value = encode(session)?;
        self.inner
            .write_durable(|tree, batch| {
                let record = layout::session(&session.token_hash).0;
                let id = layout::session_id(session.id).0;
                if tree.contains_key(&record).map_err(sled_error)? || tree.contains_key(&id).map_err(sled_error)? {
                    return Err(StoreError::Conflict("a session with this id or token exists".into()));
                }
                batch.insert(record, value);
                batch.insert(id, &[]);
                batch.insert(layout::session_expiry(session.expires_at, &session.token_hash).0, &[]);
                Ok(())
            })
            .await
    }

    async fn find_session(&self, token: &SessionTokenHash) -> StoreResult<Option<DashboardSession>> {
        stored(self.inner.tree()?, token)
    }

    async fn touch_session(
        &self,
        token: &SessionTokenHash,
        last_seen_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        // Not waited for: a touch lost in a crash only ends the session a little early.
        self.inner.write(|tree, batch| {
            if let Some(mut session) = stored(tree, token)?
                && last_seen_at > session.last_seen_at
            {
                batch.remove(layout::session_expiry(session.expires_at, token).0);
                session.last_seen_at = last_seen_at;
                session.expires_at = expires_at;
                batch.insert(layout::session_expiry(expires_at, token).0, &[]);
                batch.insert(layout::session(token).0, encode(&session)?);
            }
            Ok(())
        })
    }

    async fn delete_session(&self, token: &SessionTokenHash) -> StoreResult<bool> {
        self.inner
            .write_durable(|tree, batch| {
                let Some(session) = stored(tree, token)? else { return Ok(false) };
                remove(batch, &session);
                Ok(true)
            })
            .await
    }

    async fn delete_expired_sessions(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let prefix = [layout::SESSION_EXPIRY];
        // Keys hold microseconds: everything before the next microsecond is at or before `now`.
        let end = layout::Key::new(layout::SESSION_EXPIRY).time(now + chrono::Duration::microseconds(1)).0;
        self.inner
            .write_durable(|tree, batch| {
                let mut deleted = 0;
                for entry in tree.range(&prefix[..]..end.as_slice()).take(limit) {
                    let (key, _) = entry.map_err(sled_error)?;
                    let hash = key
                        .get(1 + 8..)
                        .and_then(|h| <[u8; 32]>::try_from(h).ok())
                        .ok_or_else(|| bad_key("session expiry"))?;
                    match stored(tree, &SessionTokenHash(hash))? {
                        Some(session) => remove(batch, &session),
                        // An index entry without its session (cannot happen; harmless): drop it.
                        None => batch.remove(key),
                    }
                    deleted += 1;
                }
                Ok(deleted)
            })
            .await
    }
}
