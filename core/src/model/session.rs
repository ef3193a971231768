//! Dashboard sessions: a person signs in with an API key and gets a random session token
//! in a cookie. Only the token's SHA-256 is stored, like a key's, so a copy of the store
//! cannot be replayed as a cookie; the session names the key it was opened with, so revoking
//! the key ends the session at its next request.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{ApiKeyId, SessionId, WorkspaceId};
use crate::random::Random;
use crate::secret::Secret;

const TOKEN_PREFIX: &str = "tds_";
/// 32 random bytes in unpadded base64url.
const TOKEN_RANDOM_CHARS: usize = 43;
const BASE64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// SHA-256 of a session token: what the store finds sessions by.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionTokenHash(pub [u8; 32]);

impl std::fmt::Debug for SessionTokenHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionTokenHash({:02x}{:02x}{:02x}{:02x}…)", self.0[0], self.0[1], self.0[2], self.0[3])
    }
}

/// The plaintext of a session token: the cookie's value. Exists only in the sign-in
/// response and while a request presenting it is handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionToken(Secret<String>);

impl SessionToken {
    /// A fresh token of 256 random bits.
    pub fn generate(random: &dyn Random) -> Self {
        Self(Secret::new(random_text(random, TOKEN_PREFIX, TOKEN_RANDOM_CHARS)))
    }

    /// Accepts a presented token if it has the shape of one; `None` otherwise (which the
    /// caller treats exactly like an unknown token).
    pub fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix(TOKEN_PREFIX)?;
        (rest.len() == TOKEN_RANDOM_CHARS && rest.bytes().all(|b| BASE64URL.contains(&b)))
            .then(|| Self(Secret::new(text.to_owned())))
    }

    /// The token, for the cookie.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// SHA-256 of the token.
    pub fn hash(&self) -> SessionTokenHash {
        SessionTokenHash(Sha256::digest(self.0.expose().as_bytes()).into())
    }
}

/// The per-session token that every state-changing form carries (CSRF). Random, not derived
/// from the session token, so a page that shows it reveals nothing about the cookie.
pub(crate) fn new_csrf_token(random: &dyn Random) -> Secret<String> {
    Secret::new(random_text(random, "", TOKEN_RANDOM_CHARS))
}

/// `prefix` and `chars` characters of base64url, each uniform (64 divides 256).
fn random_text(random: &dyn Random, prefix: &str, chars: usize) -> String {
    let mut bytes = vec![0u8; chars];
    random.fill(&mut bytes);
    let mut text = String::with_capacity(prefix.len() + chars);
    text.push_str(prefix);
    text.extend(bytes.iter().map(|b| char::from(BASE64URL[usize::from(b % 64)])));
    text
}

/// A signed-in dashboard session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardSession {
    /// Id (for logs; the token hash is what finds it).
    pub id: SessionId,
    /// SHA-256 of the cookie's token.
    pub token_hash: SessionTokenHash,
    /// The workspace of the key.
    pub workspace_id: WorkspaceId,
    /// The API key the person signed in with: the session acts with its scope and ends when
    /// it is revoked.
    pub api_key_id: ApiKeyId,
    /// The token every state-changing form must carry.
    pub csrf_token: Secret<String>,
    /// Sign-in time.
    pub created_at: DateTime<Utc>,
    /// Last request (kept to within a minute, not durably).
    pub last_seen_at: DateTime<Utc>,
    /// When it ends unless used again: the earlier of `last_seen_at` plus the idle timeout
    /// and `created_at` plus the longest lifetime. Moved by each touch.
    pub expires_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SystemRandom;

    #[test]
    fn tokens_round_trip_and_malformed_ones_are_refused() {
        let token = SessionToken::generate(&SystemRandom);
        assert_eq!(token.expose().len(), TOKEN_PREFIX.len() + TOKEN_RANDOM_CHARS);
        let parsed = SessionToken::parse(token.expose()).expect("a generated token parses");
        assert_eq!(parsed.hash(), token.hash());
        for bad in ["", "tds_", "tid_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &format!("{}=", token.expose())] {
            assert!(SessionToken::parse(bad).is_none(), "{bad:?}");
        }
        let mut wrong_char = token.expose().to_owned();
        wrong_char.replace_range(5..6, "+");
        assert!(SessionToken::parse(&wrong_char).is_none());
    }

    #[test]
    fn two_tokens_differ() {
        assert_ne!(SessionToken::generate(&SystemRandom).hash(), SessionToken::generate(&SystemRandom).hash());
        assert_ne!(new_csrf_token(&SystemRandom), new_csrf_token(&SystemRandom));
    }
}
