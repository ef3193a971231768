//! Dashboard sessions (`sessions`, keyed by the token's SHA-256; `expires_at` indexed for
//! the purge).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tidings_core::model::{DashboardSession, SessionTokenHash};
use tidings_core::ports::{SessionStore, StoreResult};

use crate::PgStore;
use crate::db::{count, decode, doc, execute, json_time, limit, query_opt, uuid};

#[async_trait]
impl SessionStore for PgStore {
    async fn insert_session(&self, session: &DashboardSession) -> StoreResult<()> {
        let client = self.client().await?;
        execute(
            &client,
            "INSERT INTO sessions (token_hash, id, last_seen_at, expires_at, doc) VALUES ($1, $2, $3, $4, $5)",
            &[
                &session.token_hash.0.as_slice(),
                &uuid(session.id.0),
                &session.last_seen_at,
                &session.expires_at,
                &doc(session)?,
            ],
        )
        .await
        .map(drop)
    }

    async fn find_session(&self, token: &SessionTokenHash) -> StoreResult<Option<DashboardSession>> {
        let client = self.client().await?;
        let row = query_opt(&client, "SELECT doc FROM sessions WHERE token_hash = $1", &[&token.0.as_slice()]).await?;
        row.map(|row| decode(&row, "session")).transpose()
    }

    async fn touch_session(
        &self,
        token: &SessionTokenHash,
        last_seen_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        // One statement, no read; only a later time is written, so racing touches keep the
        // latest.
        let client = self.client().await?;
        execute(
            &client,
            "UPDATE sessions SET last_seen_at = $2, expires_at = $3,
                 doc = jsonb_set(jsonb_set(doc, '{last_seen_at}', $4), '{expires_at}', $5)
             WHERE token_hash = $1 AND last_seen_at < $2",
            &[&token.0.as_slice(), &last_seen_at, &expires_at, &json_time(last_seen_at)?, &json_time(expires_at)?],
        )
        .await
        .map(drop)
    }

    async fn delete_session(&self, token: &SessionTokenHash) -> StoreResult<bool> {
        let client = self.client().await?;
        let deleted = execute(&client, "DELETE FROM sessions WHERE token_hash = $1", &[&token.0.as_slice()]).await?;
        Ok(deleted > 0)
    }

    async fn delete_expired_sessions(&self, now: DateTime<Utc>, most: usize) -> StoreResult<usize> {
        let client = self.client().await?;
        let deleted = execute(
            &client,
            "DELETE FROM sessions WHERE token_hash IN (
                 SELECT token_hash FROM sessions WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2
                 FOR UPDATE SKIP LOCKED)",
            &[&now, &limit(most)],
        )
        .await?;
        Ok(count(deleted))
    }
}
