//! API keys: `tid_` + 40 base62 characters, shown once; only the SHA-256 is kept.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{ApiKeyId, DomainId, WorkspaceId};
use crate::random::Random;
use crate::secret::Secret;

const KEY_PREFIX: &str = "tid_";
const KEY_RANDOM_CHARS: usize = 40;
/// Length of the displayable prefix (docs/api.md#authentication).
pub const DISPLAY_PREFIX_LEN: usize = 12;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// What a key may do (docs/api.md#authentication).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyScope {
    /// Everything.
    Full,
    /// Send, and read the messages this key sent.
    Send,
}

/// A per-key send rate, 1–10,000 per second (docs/api.md#authentication).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct RateLimit(u32);

impl RateLimit {
    /// The default: 10 sends per second.
    pub const DEFAULT: Self = Self(10);
    /// Allowed range.
    pub const RANGE: std::ops::RangeInclusive<u32> = 1..=10_000;

    /// Validates the range.
    pub fn new(per_sec: u32) -> Option<Self> {
        Self::RANGE.contains(&per_sec).then_some(Self(per_sec))
    }

    /// Sends per second.
    pub fn per_sec(self) -> u32 {
        self.0
    }
}

impl TryFrom<u32> for RateLimit {
    type Error = String;
    fn try_from(value: u32) -> Result<Self, Self::Error> {
        Self::new(value).ok_or_else(|| format!("rate limit {value} outside 1..=10000"))
    }
}

impl From<RateLimit> for u32 {
    fn from(value: RateLimit) -> Self {
        value.0
    }
}

/// SHA-256 of a plaintext key: what the store indexes keys by.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KeyHash(pub [u8; 32]);

impl std::fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyHash({:02x}{:02x}{:02x}{:02x}…)", self.0[0], self.0[1], self.0[2], self.0[3])
    }
}

/// The plaintext of a key. Exists only while creating a key (to show it once) and while
/// authenticating a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyPlaintext(Secret<String>);

impl ApiKeyPlaintext {
    /// A fresh random key.
    pub fn generate(random: &dyn Random) -> Self {
        let mut text = String::with_capacity(KEY_PREFIX.len() + KEY_RANDOM_CHARS);
        text.push_str(KEY_PREFIX);
        // Rejection sampling keeps the characters uniform: 248 = 4 * 62.
        let mut buf = [0u8; 64];
        while text.len() < KEY_PREFIX.len() + KEY_RANDOM_CHARS {
            random.fill(&mut buf);
            for &b in &buf {
                if b < 248 && text.len() < KEY_PREFIX.len() + KEY_RANDOM_CHARS {
                    text.push(char::from(BASE62[usize::from(b % 62)]));
                }
            }
        }
        Self(Secret::new(text))
    }

    /// Accepts a presented key if it has the shape of one; `None` otherwise (the caller
    /// answers `invalid_api_key` either way, so the reason is not reported).
    pub fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix(KEY_PREFIX)?;
        (rest.len() == KEY_RANDOM_CHARS && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then(|| Self(Secret::new(text.to_owned())))
    }

    /// The full key; only for the one response that shows it.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// The displayable prefix (`tid_` and 8 characters).
    pub fn prefix(&self) -> String {
        self.0.expose()[..DISPLAY_PREFIX_LEN].to_owned()
    }

    /// SHA-256 of the key.
    pub fn hash(&self) -> KeyHash {
        KeyHash(Sha256::digest(self.0.expose().as_bytes()).into())
    }
}

/// A stored API key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    /// Id.
    pub id: ApiKeyId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// Label (default `default`).
    pub name: String,
    /// Leading characters of the plaintext, safe to display.
    pub prefix: String,
    /// SHA-256 of the plaintext.
    pub key_hash: KeyHash,
    /// Scope.
    pub scope: KeyScope,
    /// When set, the key may send only from this domain.
    pub sending_domain_id: Option<DomainId>,
    /// Send rate limit.
    pub rate_limit: RateLimit,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last successful authentication (updated lazily, not durably).
    pub last_used_at: Option<DateTime<Utc>>,
    /// Set when revoked; a revoked key never authenticates again.
    pub revoked_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SystemRandom;

    #[test]
    fn generated_keys_have_the_documented_shape_and_parse_back() {
        let key = ApiKeyPlaintext::generate(&SystemRandom);
        assert_eq!(key.expose().len(), 44);
        assert!(key.expose().starts_with("tid_"));
        assert_eq!(key.prefix().len(), 12);
        let parsed = ApiKeyPlaintext::parse(key.expose()).unwrap();
        assert_eq!(parsed.hash(), key.hash());
        assert_ne!(ApiKeyPlaintext::generate(&SystemRandom).hash(), key.hash());
    }

    #[test]
    fn malformed_keys_are_refused() {
        for bad in [
            "",
            "tid_",
            "tid_abc",
            "xyz_0123456789012345678901234567890123456789",
            "tid_012345678901234567890123456789012345678!",
        ] {
            assert!(ApiKeyPlaintext::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn debug_does_not_leak_the_key() {
        let key = ApiKeyPlaintext::generate(&SystemRandom);
        assert!(!format!("{key:?}").contains(&key.expose()[4..]));
    }
}
