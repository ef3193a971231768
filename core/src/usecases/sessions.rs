//! Dashboard sessions: signing in with an API key, finding the session a cookie names, and
//! signing out. The session is stored (through [`SessionStore`](crate::ports::SessionStore)),
//! not held by the node that opened it, so every node sharing the store honours it and
//! sign-out ends it everywhere at once. It acts as the key it was opened with, re-read on
//! every request: revoking the key ends the session at its next request, and a change of
//! the key's scope or domain applies at once.

use std::net::IpAddr;

use chrono::{DateTime, Duration, Utc};

use crate::Result;
use crate::ids::SessionId;
use crate::model::{DashboardSession, SessionToken, new_csrf_token};
use crate::ports::Limits;
use crate::usecases::{AuthOutcome, Principal, Tidings};

/// How long sessions last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionPolicy {
    /// A session unused for this long ends (default 30 minutes).
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in however much it is used (default 12 hours),
    /// so a stolen cookie cannot be kept alive for ever.
    pub max_lifetime: Duration,
}

impl Default for SessionPolicy {
    fn default() -> Self {
        Self { idle_timeout: Duration::minutes(30), max_lifetime: Duration::hours(12) }
    }
}

/// How stale `last_seen_at` may be: a session used again within this time is not written
/// again (a touch is a store write; pages load several resources).
pub const SESSION_TOUCH_RESOLUTION: Duration = Duration::seconds(60);

/// A successful sign-in: the token for the cookie (shown once) and the stored session.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// The cookie's value.
    pub token: SessionToken,
    /// The session as stored.
    pub session: DashboardSession,
}

/// A live session and the caller it acts as.
#[derive(Debug, Clone)]
pub struct ActiveSession {
    /// The key the session was opened with, as it is now.
    pub principal: Principal,
    /// The session.
    pub session: DashboardSession,
}

impl ActiveSession {
    /// The token every state-changing form of this session must carry.
    pub fn csrf_token(&self) -> &str {
        self.session.csrf_token.expose()
    }

    /// Whether `presented` is this session's CSRF token, compared in constant time.
    pub fn csrf_matches(&self, presented: &str) -> bool {
        aws_lc_rs::constant_time::verify_slices_are_equal(presented.as_bytes(), self.csrf_token().as_bytes()).is_ok()
    }
}

impl Tidings {
    /// The dashboard session use cases.
    pub fn sessions(&self) -> Sessions<'_> {
        Sessions { core: self }
    }
}

/// The dashboard session area of [`Tidings`] ([`Tidings::sessions`]): signing in with an API
/// key, resuming the session a cookie names, signing out, and purging expired sessions.
#[derive(Clone, Copy)]
pub struct Sessions<'a> {
    core: &'a Tidings,
}

impl Sessions<'_> {
    /// Signs in with an API key presented by `client`: the same failed-authentication
    /// throttle as the API ([`Tidings::authenticate_client`]), so guessing keys through the
    /// sign-in form costs what guessing them through the API costs. `Err` only when the store
    /// or the limits cannot be reached.
    pub async fn sign_in(
        &self,
        limits: &dyn Limits,
        client: IpAddr,
        presented_key: &str,
    ) -> Result<AuthOutcome<SignedIn>> {
        // An empty form field is "no key", not a malformed one: both count as a failure.
        let presented = Some(presented_key.trim()).filter(|k| !k.is_empty());
        let principal = match self.core.authenticate_client(limits, client, presented).await? {
            AuthOutcome::Admitted(principal) => principal,
            AuthOutcome::Refused(refusal) => return Ok(AuthOutcome::Refused(refusal)),
        };
        let now = self.core.clock.now();
        let token = SessionToken::generate(self.core.random.as_ref());
        let session = DashboardSession {
            id: SessionId::new_at(now, self.core.random.as_ref()),
            token_hash: token.hash(),
            workspace_id: principal.workspace_id,
            api_key_id: principal.key_id,
            csrf_token: new_csrf_token(self.core.random.as_ref()),
            created_at: now,
            last_seen_at: now,
            expires_at: self.session_expiry(now, now),
        };
        self.core.store.insert_session(&session).await?;
        Ok(AuthOutcome::Admitted(SignedIn { token, session }))
    }

    /// The live session named by a cookie's `token`, with the caller it acts as; `None` if
    /// the token is malformed or unknown, the session expired, or its key was revoked (then
    /// the session is deleted too). Touches the session (to within
    /// [`SESSION_TOUCH_RESOLUTION`]), which moves its idle expiry.
    pub async fn resume(&self, token: &str) -> Result<Option<ActiveSession>> {
        let Some(token) = SessionToken::parse(token) else { return Ok(None) };
        let hash = token.hash();
        let Some(mut session) = self.core.store.find_session(&hash).await? else { return Ok(None) };
        let now = self.core.clock.now();
        if session.expires_at <= now {
            // Ignored on purpose: the purge deletes it later if this fails.
            let _ = self.core.store.delete_session(&hash).await;
            return Ok(None);
        }
        let key = self.core.store.get_api_key(session.workspace_id, session.api_key_id).await?;
        let Some(key) = key.filter(|k| k.revoked_at.is_none()) else {
            self.core.store.delete_session(&hash).await?;
            return Ok(None);
        };
        if now - session.last_seen_at >= SESSION_TOUCH_RESOLUTION {
            session.last_seen_at = now;
            session.expires_at = self.session_expiry(session.created_at, now);
            // Ignored on purpose: a lost touch only ends the session a little early.
            let _ = self.core.store.touch_session(&hash, session.last_seen_at, session.expires_at).await;
        }
        Ok(Some(ActiveSession { principal: Principal::of_key(&key), session }))
    }

    /// Ends the session named by `token`, if there is one (durable: every node refuses it
    /// from return on).
    pub async fn sign_out(&self, token: &str) -> Result<()> {
        if let Some(token) = SessionToken::parse(token) {
            self.core.store.delete_session(&token.hash()).await?;
        }
        Ok(())
    }

    /// Deletes up to `limit` sessions that have expired; returns how many (the caller
    /// repeats while that is `limit`). The server runs it periodically, so that sessions
    /// nobody signs out of do not pile up.
    pub async fn purge_expired(&self, limit: usize) -> Result<usize> {
        Ok(self.core.store.delete_expired_sessions(self.core.clock.now(), limit).await?)
    }

    fn session_expiry(&self, created_at: DateTime<Utc>, last_seen_at: DateTime<Utc>) -> DateTime<Utc> {
        let policy = self.core.config.sessions;
        (last_seen_at + policy.idle_timeout).min(created_at + policy.max_lifetime)
    }
}

impl Principal {
    /// The caller a stored key acts as.
    pub(crate) fn of_key(key: &crate::model::ApiKey) -> Self {
        Self {
            workspace_id: key.workspace_id,
            key_id: key.id,
            scope: key.scope,
            sending_domain_id: key.sending_domain_id,
            rate_limit: key.rate_limit,
        }
    }
}
