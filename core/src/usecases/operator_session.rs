//! The operator's dashboard session (the dashboard's `/operator` pages): someone who typed
//! the operator token (`TIDINGS_OPERATOR_TOKEN`) gets a cookie that lets them see and act on
//! the delivery sites for [`OPERATOR_SESSION_LIFETIME`], without typing it again.
//!
//! Unlike a workspace session (`sessions.rs`), nothing is stored per session: the cookie
//! is `v1.<expiry, Unix seconds>.<tag>`, the tag an HMAC-SHA256 over the expiry under a key
//! that is (1) the store's shared `operator_session_key` ([`shared_key`]: random, made on the
//! store's first use, kept sealed, the same on every node) and (2) bound to the token, so a
//! new token ends every session signed under the old one. A session is therefore ended by
//! its expiry or by changing the token, not one by one (a sign-out only clears the cookie):
//! there is one operator, the lifetime is short, and a per-session record would need a
//! store table for a handful of rows. The CSRF token of a session is an HMAC of its cookie
//! under the same key ("signed double submit"): a page can show it, only the server can
//! make it, and it holds for that cookie alone.
//!
//! Signing in checks the token as the metrics and operator API do
//! ([`Tidings::authenticate_metrics_scraper`]): constant time, failures counted in the
//! client's failed-authentication allowance with the keys' failures.

use std::fmt;
use std::net::IpAddr;

use aws_lc_rs::hmac;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, TimeDelta, Utc};

use crate::Result;
use crate::ports::{Limits, StoreResult};
use crate::secret::SecretName;
use crate::shared_key::{SHARED_KEY_BYTES, shared_key};
use crate::usecases::{AuthOutcome, MetricsToken, Tidings};

/// The name under which the store keeps the key that signs operator sessions.
pub const OPERATOR_SESSION_KEY_SECRET: SecretName = SecretName::new("operator_session_key");

/// How long an operator session lasts from its sign-in (a working day).
pub const OPERATOR_SESSION_LIFETIME: TimeDelta = TimeDelta::hours(8);

/// What the tag of a cookie signs, apart from the cookie's own text.
const SESSION_CONTEXT: &[u8] = b"tidings operator session\0";
/// What the CSRF token signs, apart from the cookie: another context, so the one is never
/// the other.
const CSRF_CONTEXT: &[u8] = b"tidings operator csrf\0";

/// Signs and checks operator sessions for one operator token; see the module docs.
#[derive(Clone)]
pub struct OperatorSessions {
    key: hmac::Key,
    token: MetricsToken,
}

impl OperatorSessions {
    /// Sessions for `token`, signed with the key every node sharing `core`'s store holds
    /// (made and stored on first use).
    pub async fn shared(core: &Tidings, token: MetricsToken) -> StoreResult<Self> {
        let stored = shared_key(core.store.as_ref(), OPERATOR_SESSION_KEY_SECRET, core.random.as_ref(), None).await?;
        Ok(Self::from_key(stored, token))
    }

    /// Sessions for `token` signed under `stored` (bound to the token's digest).
    pub fn from_key(stored: [u8; SHARED_KEY_BYTES], token: MetricsToken) -> Self {
        let outer = hmac::Key::new(hmac::HMAC_SHA256, &stored);
        let mut context = hmac::Context::with_key(&outer);
        context.update(b"tidings operator session key\0");
        context.update(token.digest());
        let derived = context.sign();
        Self { key: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()), token }
    }

    /// A session for a client at `client` presenting `presented`, if it is the token. A wrong
    /// token counts as a failed authentication in `limits`, and a client blocked there is
    /// refused whatever it presents. `Err` only when the limits cannot be reached.
    pub async fn sign_in(
        &self,
        core: &Tidings,
        limits: &dyn Limits,
        client: IpAddr,
        presented: &str,
    ) -> Result<AuthOutcome<OperatorSession>> {
        Ok(match core.authenticate_metrics_scraper(limits, client, &self.token, Some(presented)).await? {
            AuthOutcome::Admitted(()) => AuthOutcome::Admitted(self.mint(core.clock.now())),
            AuthOutcome::Refused(refusal) => AuthOutcome::Refused(refusal),
        })
    }

    /// A new session from `now`.
    pub fn mint(&self, now: DateTime<Utc>) -> OperatorSession {
        let expires_at = now + OPERATOR_SESSION_LIFETIME;
        let payload = format!("v1.{}", expires_at.timestamp());
        let tag = self.sign(SESSION_CONTEXT, &payload);
        self.session(format!("{payload}.{tag}"), expires_at)
    }

    /// The session `cookie` names, if its tag is this key's and it has not expired at `now`.
    pub fn resume(&self, cookie: &str, now: DateTime<Utc>) -> Option<OperatorSession> {
        let (payload, tag) = cookie.rsplit_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let mut signed = SESSION_CONTEXT.to_vec();
        signed.extend_from_slice(payload.as_bytes());
        hmac::verify(&self.key, &signed, &tag).ok()?;
        let seconds: i64 = payload.strip_prefix("v1.")?.parse().ok()?;
        let expires_at = DateTime::from_timestamp(seconds, 0)?;
        (now < expires_at).then(|| self.session(cookie.to_owned(), expires_at))
    }

    fn session(&self, cookie: String, expires_at: DateTime<Utc>) -> OperatorSession {
        let csrf = self.sign(CSRF_CONTEXT, &cookie);
        OperatorSession { cookie, csrf, expires_at }
    }

    fn sign(&self, context: &[u8], text: &str) -> String {
        let mut signed = context.to_vec();
        signed.extend_from_slice(text.as_bytes());
        URL_SAFE_NO_PAD.encode(hmac::sign(&self.key, &signed))
    }
}

impl fmt::Debug for OperatorSessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OperatorSessions(***)")
    }
}

/// A live operator session.
#[derive(Clone, PartialEq, Eq)]
pub struct OperatorSession {
    cookie: String,
    csrf: String,
    expires_at: DateTime<Utc>,
}

impl OperatorSession {
    /// The cookie's value, which alone proves the session: keep it out of logs.
    pub fn cookie_value(&self) -> &str {
        &self.cookie
    }

    /// The token a form of this session carries.
    pub fn csrf_token(&self) -> &str {
        &self.csrf
    }

    /// Whether `presented` is this session's CSRF token (constant time).
    pub fn csrf_matches(&self, presented: &str) -> bool {
        aws_lc_rs::constant_time::verify_slices_are_equal(presented.as_bytes(), self.csrf.as_bytes()).is_ok()
    }

    /// When the session ends.
    pub fn expires_at(&self) -> DateTime<Utc> {
        self.expires_at
    }
}

impl fmt::Debug for OperatorSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperatorSession").field("expires_at", &self.expires_at).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> MetricsToken {
        MetricsToken::parse(text).unwrap()
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, 0).unwrap()
    }

    #[test]
    fn a_minted_session_resumes_until_it_expires() {
        let sessions = OperatorSessions::from_key([7; 32], token("operator-token-0123456789"));
        let session = sessions.mint(at(1_000_000));
        assert_eq!(session.expires_at(), at(1_000_000) + OPERATOR_SESSION_LIFETIME);
        let resumed = sessions.resume(session.cookie_value(), at(1_000_000 + 8 * 3600 - 1)).unwrap();
        assert_eq!(resumed, session);
        assert!(resumed.csrf_matches(session.csrf_token()));
        assert!(sessions.resume(session.cookie_value(), at(1_000_000 + 8 * 3600)).is_none(), "expired");
        assert!(!format!("{session:?}").contains(session.cookie_value()));
    }

    #[test]
    fn a_changed_expiry_tag_key_or_token_does_not_resume() {
        let sessions = OperatorSessions::from_key([7; 32], token("operator-token-0123456789"));
        let now = at(1_000_000);
        let cookie = sessions.mint(now).cookie_value().to_owned();
        let (payload, tag) = cookie.rsplit_once('.').unwrap();
        let later = payload.replace("v1.", "v1.9");
        for forged in [format!("{later}.{tag}"), format!("{payload}.{}", &tag[1..]), payload.to_owned(), String::new()]
        {
            assert!(sessions.resume(&forged, now).is_none(), "{forged:?}");
        }
        let other_key = OperatorSessions::from_key([8; 32], token("operator-token-0123456789"));
        assert!(other_key.resume(&cookie, now).is_none());
        let other_token = OperatorSessions::from_key([7; 32], token("operator-token-9876543210"));
        assert!(other_token.resume(&cookie, now).is_none(), "a new token ends the old sessions");
    }

    #[test]
    fn the_csrf_token_is_the_sessions_own() {
        let sessions = OperatorSessions::from_key([7; 32], token("operator-token-0123456789"));
        let one = sessions.mint(at(1_000_000));
        let two = sessions.mint(at(1_000_001));
        assert_ne!(one.csrf_token(), two.csrf_token());
        assert!(!one.csrf_matches(two.csrf_token()));
        assert!(!one.csrf_matches(""));
        assert_ne!(one.csrf_token(), one.cookie_value().rsplit_once('.').unwrap().1, "not the cookie's tag");
    }
}
