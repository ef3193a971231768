//! Dashboard sessions in memory.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{MemoryStore, conflict};
use tidings_core::model::{DashboardSession, SessionTokenHash};
use tidings_core::ports::{SessionStore, StoreResult};

#[async_trait]
impl SessionStore for MemoryStore {
    async fn insert_session(&self, session: &DashboardSession) -> StoreResult<()> {
        let mut state = self.state();
        if state.sessions.contains_key(&session.token_hash) || state.sessions.values().any(|s| s.id == session.id) {
            return Err(conflict("session id or token exists"));
        }
        state.sessions.insert(session.token_hash, session.clone());
        Ok(())
    }

    async fn find_session(&self, token: &SessionTokenHash) -> StoreResult<Option<DashboardSession>> {
        Ok(self.state().sessions.get(token).cloned())
    }

    async fn touch_session(
        &self,
        token: &SessionTokenHash,
        last_seen_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        if let Some(session) = self.state().sessions.get_mut(token)
            && last_seen_at > session.last_seen_at
        {
            session.last_seen_at = last_seen_at;
            session.expires_at = expires_at;
        }
        Ok(())
    }

    async fn delete_session(&self, token: &SessionTokenHash) -> StoreResult<bool> {
        Ok(self.state().sessions.remove(token).is_some())
    }

    async fn delete_expired_sessions(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut state = self.state();
        let mut expired: Vec<_> =
            state.sessions.values().filter(|s| s.expires_at <= now).map(|s| (s.expires_at, s.token_hash)).collect();
        expired.sort();
        expired.truncate(limit);
        for (_, hash) in &expired {
            state.sessions.remove(hash);
        }
        Ok(expired.len())
    }
}
