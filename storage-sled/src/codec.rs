//! Record encoding and the mapping of sled and decoding errors to `StoreError`.
//!
//! Records are JSON (serde_json). A compact binary format was considered: the model uses
//! `#[serde(untagged)]` (`WebhookEventType`) and `try_from` newtypes, which need a
//! self-describing format, and the benchmark (bench/README.md) shows encoding is a small
//! share of a durable create next to the log write and the flush.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tidings_core::Cause;
use tidings_core::ports::StoreError;

/// Encodes a record. Model types always serialise; a failure would be a bug, reported as
/// corrupt data rather than a panic.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::corrupt("cannot encode record", e))
}

/// Decodes a record; `what` names it in the error.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::corrupt(format!("cannot decode {what}"), e))
}

/// Decodes a 16-byte id stored as an index value.
pub fn decode_id(bytes: &[u8], what: &str) -> Result<[u8; 16], StoreError> {
    bytes
        .try_into()
        .map_err(|_| StoreError::Corrupt(format!("{what}: expected 16 id bytes, found {}", bytes.len()).into()))
}

/// Maps a sled error: corruption is `Corrupt`, everything else (I/O, a closed store)
/// `Unavailable`.
pub fn sled_error(e: sled::Error) -> StoreError {
    match e {
        sled::Error::Corruption { .. } => StoreError::Corrupt(Cause::new(e)),
        other => StoreError::Unavailable(Cause::new(other)),
    }
}

/// A malformed index key (too short): only corruption can produce one.
pub fn bad_key(what: &str) -> StoreError {
    StoreError::Corrupt(format!("malformed {what} key").into())
}
