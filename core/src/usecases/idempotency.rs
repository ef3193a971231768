//! Who may have what an Idempotency-Key remembers (docs/api.md#idempotency).
//!
//! A `full` key's Idempotency-Key is the workspace's: a repeat with the same body from any
//! `full` key gets the original message back (201, `Idempotent-Replayed: true`), and another
//! body is 409 `idempotency_key_reused`.
//!
//! A `send` key's Idempotency-Key is its own: it is remembered under
//! [`IdempotencyKey::scoped_to`] that API key, so another key using the same text finds
//! nothing and sends anew. A workspace-wide key let one `send` key learn whether another used
//! a given Idempotency-Key (409 for a key taken, 201 for a free one); now both answers are
//! what a free key gets. [`Tidings::find_idempotency`] also finds a record a `send` key made
//! before records were scoped (stored under the bare key) when that key made it, so a retry
//! across an upgrade is still a replay; a bare record of another key is treated as absent.
//! [`Tidings::check_repeat`] still refuses a `send` key another key's record
//! ([`IdempotencyConflict::OtherKey`]) as a second line: no lookup hands it one any more.
//! The cost: a `full` key repeating an Idempotency-Key a `send` key used finds nothing and
//! sends anew, where it used to get the `send` key's message back.
//!
//! The stored request hash is SHA-256 of the canonical body followed by the id of the key
//! that made the record, as it has been since the first release; a repeat is hashed with
//! that key's id (named by the original message), so records stored before keys of one
//! workspace shared them compare the same way and no store needed migrating.

use crate::error::IdempotencyConflict;
use crate::ids::ApiKeyId;
use chrono::{DateTime, Utc};

use crate::model::{IdempotencyKey, IdempotencyRecord, KeyScope, Message, RequestHash};
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

/// The key under which `who`'s Idempotency-Key `key` is remembered: `key` itself for a
/// `full` key, [`IdempotencyKey::scoped_to`] the API key for a `send` key.
pub(crate) fn stored_key(who: &Principal, key: &IdempotencyKey) -> IdempotencyKey {
    match who.scope {
        KeyScope::Full => key.clone(),
        KeyScope::Send => key.scoped_to(who.key_id),
    }
}

/// The name of the in-process turn ([`Tidings::take_send_turn`]) of `who`'s Idempotency-Key
/// text: scoped like the record, so that one `send` key never waits on another's send.
pub(crate) fn turn_key(who: &Principal, key: &str) -> String {
    match who.scope {
        KeyScope::Full => key.to_owned(),
        KeyScope::Send => format!("{}\u{1f}{key}", who.key_id),
    }
}

impl Tidings {
    /// The live record of `who`'s Idempotency-Key `key`, if any, and the key a new record is
    /// stored under ([`stored_key`]). For a `send` key with no scoped record, a bare record
    /// that the same API key made before records were scoped counts too (see the module
    /// docs); one another key made does not.
    pub(crate) async fn find_idempotency(
        &self,
        who: &Principal,
        key: &IdempotencyKey,
        now: DateTime<Utc>,
    ) -> Result<(IdempotencyKey, Option<IdempotencyRecord>)> {
        let stored = stored_key(who, key);
        let live = |record: Option<IdempotencyRecord>| record.filter(|r| r.expires_at > now);
        let found = live(self.store.get_idempotency(who.workspace_id, &stored).await?);
        if found.is_some() || who.scope == KeyScope::Full {
            return Ok((stored, found));
        }
        let Some(bare) = live(self.store.get_idempotency(who.workspace_id, key).await?) else {
            return Ok((stored, None));
        };
        let maker = match bare.original_message_id() {
            Some(id) => self.store.get_message(who.workspace_id, id).await?.map(|m| m.api_key_id),
            None => None,
        };
        Ok((stored, (maker == Some(who.key_id)).then_some(bare)))
    }

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
