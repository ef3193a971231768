//! Idempotency records (docs/api.md#messages): a workspace-scoped key, the hash of the request
//! it came with, and the message it created, or for a batch the result of every item.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{ApiKeyId, MessageId, WorkspaceId};

/// Why an `Idempotency-Key` header value is refused (400 `invalid_idempotency_key`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdempotencyKeyError {
    /// Empty.
    #[error("Idempotency-Key must not be empty")]
    Empty,
    /// Over 256 characters.
    #[error("Idempotency-Key must be at most 256 characters")]
    TooLong,
    /// Control characters.
    #[error("Idempotency-Key must not contain control characters")]
    ControlCharacter,
}

/// A client-chosen idempotency key, 1–256 printable characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Validates a header value.
    pub fn parse(value: &str) -> Result<Self, IdempotencyKeyError> {
        if value.is_empty() {
            return Err(IdempotencyKeyError::Empty);
        }
        if value.chars().count() > 256 {
            return Err(IdempotencyKeyError::TooLong);
        }
        if value.chars().any(char::is_control) {
            return Err(IdempotencyKeyError::ControlCharacter);
        }
        Ok(Self(value.to_owned()))
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The form this key is remembered under for one `send` API key (`usecases::idempotency`):
    /// the API key's id, U+001F, then this key. A client's key cannot hold a control character
    /// ([`IdempotencyKey::parse`]), so no key a client sends reads as another API key's
    /// scoped form, and two API keys' scoped forms never meet.
    pub fn scoped_to(&self, api_key: ApiKeyId) -> Self {
        Self(format!("{api_key}\u{1f}{}", self.0))
    }
}

/// SHA-256 of a canonical form of the request, to tell "same body" from "other body".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RequestHash(pub [u8; 32]);

impl RequestHash {
    /// Hashes canonical request bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The hash of `value`'s JSON followed by `suffix`, as [`RequestHash::of`] their
    /// concatenation, without holding the JSON text: a send's JSON is as large as its
    /// attachments.
    pub fn of_json(value: &impl Serialize, suffix: &[u8]) -> Result<Self, serde_json::Error> {
        struct Hashing(Sha256);
        impl std::io::Write for Hashing {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.update(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut hashing = Hashing(Sha256::new());
        serde_json::to_writer(&mut hashing, value)?;
        hashing.0.update(suffix);
        Ok(Self(hashing.0.finalize().into()))
    }
}

/// What the store remembers about a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// Workspace (keys are scoped to it).
    pub workspace_id: WorkspaceId,
    /// The key.
    pub key: IdempotencyKey,
    /// Hash of the request that first used it.
    pub request_hash: RequestHash,
    /// The message it created. For a batch, an id of its own that names no message (the
    /// items are in `batch`).
    pub message_id: MessageId,
    /// First use.
    pub created_at: DateTime<Utc>,
    /// After this the key is forgotten and may be purged.
    pub expires_at: DateTime<Utc>,
    /// For `POST /v1/messages/batch`: the result of each item, at its index, so that a replay
    /// answers exactly as the first request did (errors of a permissive batch included).
    /// `None` for a single send; records stored before batches existed read as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Vec<BatchItemRecord>>,
}

impl IdempotencyRecord {
    /// A message the request made: a single send's message, or a batch's first queued item.
    /// Its `api_key_id` is the key that made the record. `None` only for a batch that queued
    /// nothing, which is never stored.
    pub fn original_message_id(&self) -> Option<MessageId> {
        match &self.batch {
            None => Some(self.message_id),
            Some(items) => items.iter().find_map(|item| match item {
                BatchItemRecord::Created(id) => Some(*id),
                BatchItemRecord::Refused(_) => None,
            }),
        }
    }
}

/// The stored result of one batch item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchItemRecord {
    /// The item was queued as this message.
    Created(MessageId),
    /// The item was refused (permissive batches only).
    Refused(StoredError),
}

/// A client error as the envelope shows it, kept for replays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredError {
    /// `error.code`.
    pub code: String,
    /// `error.message`.
    pub message: String,
    /// `error.details` of a validation error: `(field, message)` pairs.
    #[serde(default)]
    pub fields: Vec<(String, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_json_as_it_is_written_equals_hashing_the_text() {
        let value = serde_json::json!({"to": "a@b.example", "attachments": [{"content": "QUJD"}]});
        let mut text = serde_json::to_vec(&value).unwrap();
        text.extend_from_slice(b"key");
        assert_eq!(RequestHash::of_json(&value, b"key").unwrap(), RequestHash::of(&text));
    }
}
