//! Who may have what an Idempotency-Key remembers (docs/api.md#idempotency). The key is scoped
//! to the workspace: a repeat with the same body from any key that may read the original message
//! gets it back (201, `Idempotent-Replayed: true`). A `full` key reads everything; a `send`
//! key only the messages it sent, so a `send` key repeating another key's Idempotency-Key is
//! refused (409, [`IdempotencyConflict::OtherKey`]) without its body being compared: the
//! answer is the same whatever the original request was.
//!
//! The stored request hash is SHA-256 of the canonical body followed by the id of the key
//! that made the record, as it has been since the first release; a repeat is hashed with
//! that key's id (named by the original message), so records stored before keys of one
//! workspace shared them compare the same way and no store needed migrating.

use crate::error::IdempotencyConflict;
use crate::ids::ApiKeyId;
use crate::model::{IdempotencyRecord, KeyScope, Message, RequestHash};
use crate::usecases::{Principal, Tidings};
use crate::{Error, Result};

/// What kind of request made or repeats a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    /// `POST /v1/messages` (and each recipient of an SMTP submission).
    Single,
    /// `POST /v1/messages/batch`.
    Batch,
}

impl Tidings {
    /// Checks that `who` repeats the request that made `record` and may have its outcome;
    /// returns the original message (a batch's first queued item), which names the key that
    /// made it. `hash_as(maker)` hashes the repeated request as if `maker` sent it.
    pub(crate) async fn check_repeat(
        &self,
        who: &Principal,
        record: &IdempotencyRecord,
        kind: RequestKind,
        hash_as: impl FnOnce(ApiKeyId) -> Result<RequestHash>,
    ) -> Result<Message> {
        let id = record.original_message_id().ok_or_else(|| {
            Error::Internal(format!("idempotency record {:?} names no message", record.key.as_str()).into())
        })?;
        let original = self
            .store
            .get_message(who.workspace_id, id)
            .await?
            .ok_or_else(|| Error::Internal(format!("idempotency record points to missing message {id}").into()))?;
        if who.scope == KeyScope::Send && original.api_key_id != who.key_id {
            return Err(Error::IdempotencyKeyReused(IdempotencyConflict::OtherKey));
        }
        let same_kind = record.batch.is_some() == (kind == RequestKind::Batch);
        if !same_kind || record.request_hash != hash_as(original.api_key_id)? {
            return Err(Error::IdempotencyKeyReused(IdempotencyConflict::OtherRequest));
        }
        Ok(original)
    }
}

/// Hashes a request's canonical bytes (serde_json of the request types, whose object keys
/// come in a fixed order, so neither key order nor white space in the client's JSON matter)
/// with the id of the key that made the record, the stored form (see the module docs).
pub(crate) fn hash_with_key(canonical: &impl serde::Serialize, maker: ApiKeyId) -> Result<RequestHash> {
    RequestHash::of_json(canonical, &maker.to_bytes())
        .map_err(|e| Error::Internal(crate::Cause::context("hashing request", e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usecases::SendRequest;

    /// Records already stored hold this form; a change to it would turn every stored record's
    /// repeat into a 409 for as long as the window lasts. The expected value was computed
    /// apart from this code (Python's hashlib over the JSON text and the id's 16 bytes).
    #[test]
    fn the_stored_hash_is_the_canonical_json_followed_by_the_makers_id() {
        let req = SendRequest {
            to: Some("a@example.com".into()),
            subject: Some("s".into()),
            text: Some("t".into()),
            ..SendRequest::default()
        };
        let maker = ApiKeyId(ulid::Ulid::from_parts(1, 1));
        let hash = hash_with_key(&req, maker).unwrap();
        let hex: String = hash.0.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "cb1b4fcaf45163266e570e47d82699dc5d1fc0efd1becd37117aa6675b3e5677");
        assert_ne!(hash, hash_with_key(&req, ApiKeyId(ulid::Ulid::from_parts(1, 2))).unwrap());
    }
}
