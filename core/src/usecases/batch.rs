//! `POST /v1/messages/batch`: up to [`MAX_BATCH`] sends in one request, each
//! exactly what `POST /v1/messages` takes, answered one result per item at its index.
//!
//! Every item goes through the same preparation as a single send
//! ([`Messages::prepare_message`]); the accepted ones are stored in one durable write
//! ([`MessageStore::create_messages`](crate::ports::MessageStore::create_messages)).
//! - [`BatchValidation::Strict`] (the default): all or nothing. One refused item refuses the
//!   batch with a 422 `validation_error` whose details name `[i].field` for every bad field
//!   of every bad item (`[i]` alone, with the item's error code in the message, for an item
//!   refused as a whole, e.g. a suppressed recipient); nothing is stored.
//! - [`BatchValidation::Permissive`]: the accepted items are stored, the others answered
//!   with their error at their index.
//!
//! The Idempotency-Key covers the batch: its record keeps every item's result, so a replay
//! answers the same message ids and the same errors, to any `full` key of the workspace, or
//! to the `send` key that sent it (see the `usecases::idempotency` module).

use crate::error::FieldError;
use crate::ids::{ApiKeyId, MessageId};
use crate::model::{BatchItemRecord, IdempotencyKey, IdempotencyRecord, Message, RequestHash, StoredError};
use crate::ports::{CreateOutcome, EventObserver, NewBatch, NewMessage};
use crate::usecases::idempotency::{RequestKind, hash_with_key};
use crate::usecases::rate_limited_send::is_render_refusal;
use crate::usecases::{Messages, Principal, SendRequest};
use crate::{Error, Result};

/// Most messages in one batch.
pub const MAX_BATCH: usize = 500;

/// 1 to [`MAX_BATCH`] items (a 422 naming `batch`); a front end may check it while it
/// parses, before it builds a single item.
pub fn check_batch_len(len: usize) -> Result<()> {
    if len == 0 {
        return Err(Error::field("batch", "must hold at least one message"));
    }
    if len > MAX_BATCH {
        return Err(Error::field("batch", format!("must hold at most {MAX_BATCH} messages")));
    }
    Ok(())
}

/// How a batch treats refused items (header `x-batch-validation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BatchValidation {
    /// All or nothing.
    #[default]
    Strict,
    /// Valid items queued, errors per index.
    Permissive,
}

impl BatchValidation {
    /// Parses the header value; absent is `Strict`.
    pub fn parse(value: Option<&str>) -> Result<Self> {
        match value.map(str::trim) {
            None => Ok(Self::Strict),
            Some(v) if v.eq_ignore_ascii_case("strict") => Ok(Self::Strict),
            Some(v) if v.eq_ignore_ascii_case("permissive") => Ok(Self::Permissive),
            Some(_) => Err(Error::field("x-batch-validation", "must be strict or permissive")),
        }
    }
}

/// The result of one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchItem {
    /// Queued (or scheduled) as this message (its current state on a replay).
    Queued(Box<Message>),
    /// Refused, with the error a single send would have got (permissive batches only).
    Refused(StoredError),
}

/// What a batch returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    /// One result per item, at the item's index.
    pub items: Vec<BatchItem>,
    /// True when an earlier request with the same Idempotency-Key produced these results.
    pub replayed: bool,
}

impl BatchOutcome {
    /// How many items were refused.
    pub fn refused(&self) -> usize {
        self.items.iter().filter(|i| matches!(i, BatchItem::Refused(_))).count()
    }
}

impl Messages<'_> {
    /// Checks a batch's size before anything else, so a front end can refuse it before taking
    /// rate-limit tokens: 1 to [`MAX_BATCH`] items, and no more than the key's whole bucket
    /// (`rateLimitPerSec`), which could never be granted at once (a 422 naming `batch`, not a
    /// 429: waiting would not help).
    pub fn check_batch_size(&self, who: &Principal, len: usize) -> Result<()> {
        let capacity = usize::try_from(who.rate_limit.per_sec()).unwrap_or(usize::MAX);
        check_batch_len(len)?;
        if len > capacity {
            return Err(Error::field(
                "batch",
                format!("holds {len} messages but this API key's rate limit allows at most {capacity} at once"),
            ));
        }
        Ok(())
    }

    /// `POST /v1/messages/batch`: see the module docs. A storage failure fails the whole
    /// batch (nothing stored); item errors are the client's.
    pub async fn send_batch(
        &self,
        who: &Principal,
        reqs: Vec<SendRequest>,
        mode: BatchValidation,
        idempotency_key: Option<&str>,
    ) -> Result<BatchOutcome> {
        self.send_batch_counted(who, reqs, mode, idempotency_key, &mut 0).await
    }

    /// [`Self::send_batch`] that also counts, into `rendered_refused`, the items that were
    /// rendered (or failed to render) and were then refused: every item of a refused strict
    /// batch whose template was rendered, and the permissive items refused by their template.
    /// They keep their rate-limit tokens (`rate_limited_send`).
    pub(crate) async fn send_batch_counted(
        &self,
        who: &Principal,
        reqs: Vec<SendRequest>,
        mode: BatchValidation,
        idempotency_key: Option<&str>,
        rendered_refused: &mut u32,
    ) -> Result<BatchOutcome> {
        self.check_batch_size(who, reqs.len())?;
        let now = self.core.clock.now();
        let key = match parse_key(idempotency_key)? {
            Some(key) => match self.core.find_idempotency(who, &key, now).await? {
                (_, Some(record)) => return self.replay_batch(who, &record, &reqs, mode).await,
                (stored, None) => Some(stored),
            },
            None => None,
        };

        let mut prepared = Vec::with_capacity(reqs.len());
        for req in &reqs {
            prepared.push(match self.prepare_message(who, req, now).await {
                Ok(new) => Ok(new),
                Err(e @ (Error::Unavailable(_) | Error::Internal(_))) => return Err(e),
                Err(e) => Err(e),
            });
        }
        let rendered = |p: &Result<NewMessage>| match p {
            Ok(new) => new.message.template_version_id.is_some(),
            Err(e) => is_render_refusal(e),
        };
        if mode == BatchValidation::Strict && prepared.iter().any(Result::is_err) {
            *rendered_refused = u32::try_from(prepared.iter().filter(|p| rendered(p)).count()).unwrap_or(u32::MAX);
            let fields = prepared
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.as_ref().err().map(|e| (i, e)))
                .flat_map(|(i, e)| item_fields(i, e))
                .collect();
            return Err(Error::Validation { fields });
        }
        *rendered_refused =
            u32::try_from(prepared.iter().filter(|p| p.is_err() && rendered(p)).count()).unwrap_or(u32::MAX);
        // Each item's refusal, or `None` where its message is (in `messages`, in order).
        let mut refusals = Vec::with_capacity(prepared.len());
        let mut records = Vec::with_capacity(prepared.len());
        let mut messages = Vec::new();
        for p in prepared {
            match p {
                Ok(new) => {
                    records.push(BatchItemRecord::Created(new.message.id));
                    refusals.push(None);
                    messages.push(new);
                }
                Err(e) => {
                    let stored = stored_error(&e);
                    records.push(BatchItemRecord::Refused(stored.clone()));
                    refusals.push(Some(stored));
                }
            }
        }
        if messages.is_empty() {
            // Nothing was accepted: like a refused single send, nothing is remembered.
            let items = refusals.into_iter().flatten().map(BatchItem::Refused).collect();
            return Ok(BatchOutcome { items, replayed: false });
        }
        let idempotency = match key {
            Some(key) => Some(IdempotencyRecord {
                workspace_id: who.workspace_id,
                key,
                request_hash: batch_hash(who.key_id, &reqs, mode)?,
                message_id: MessageId::new_at(now, &*self.core.random),
                created_at: now,
                expires_at: now + self.core.config.idempotency_window,
                batch: Some(records),
            }),
            None => None,
        };
        let batch = NewBatch { messages, idempotency, accepted_at: now };
        match self.core.store.create_messages(&batch).await? {
            CreateOutcome::Created => {
                // The stored messages move into the answer (with their attachments), not copies.
                let mut queued = batch.messages.into_iter();
                let items = refusals
                    .into_iter()
                    .filter_map(|refusal| match refusal {
                        Some(stored) => Some(BatchItem::Refused(stored)),
                        None => queued.next().map(|new| {
                            self.core.observer.message_accepted(&new.message);
                            self.core.observer.message_event(&new.message, &new.event);
                            BatchItem::Queued(Box::new(new.message))
                        }),
                    })
                    .collect();
                Ok(BatchOutcome { items, replayed: false })
            }
            CreateOutcome::Duplicate(record) => self.replay_batch(who, &record, &reqs, mode).await,
        }
    }

    /// The answer to a batch if it repeats an earlier one with the same Idempotency-Key:
    /// `Ok(Some(..))` for a replay, `Err(IdempotencyKeyReused)` for the same key with another
    /// body (or mode), `Ok(None)` when the key is new (for a `send` key: new to that key),
    /// expired or absent. Reads only, so a front end can answer replays without taking
    /// rate-limit tokens.
    pub async fn idempotent_batch_replay(
        &self,
        who: &Principal,
        reqs: &[SendRequest],
        mode: BatchValidation,
        idempotency_key: Option<&str>,
    ) -> Result<Option<BatchOutcome>> {
        let Some(key) = parse_key(idempotency_key)? else { return Ok(None) };
        match self.core.find_idempotency(who, &key, self.core.clock.now()).await? {
            (_, Some(record)) => self.replay_batch(who, &record, reqs, mode).await.map(Some),
            (_, None) => Ok(None),
        }
    }

    /// The recorded results of a batch that `reqs` repeats, if `who` may have them
    /// ([`Tidings::check_repeat`](crate::usecases::Tidings::check_repeat)), each queued item
    /// as its message is now.
    async fn replay_batch(
        &self,
        who: &Principal,
        record: &IdempotencyRecord,
        reqs: &[SendRequest],
        mode: BatchValidation,
    ) -> Result<BatchOutcome> {
        let first =
            self.core.check_repeat(who, record, RequestKind::Batch, |maker| batch_hash(maker, reqs, mode)).await?;
        let results = record.batch.as_deref().unwrap_or_default();
        let mut items = Vec::with_capacity(results.len());
        for result in results {
            items.push(match result {
                BatchItemRecord::Created(id) if *id == first.id => BatchItem::Queued(Box::new(first.clone())),
                BatchItemRecord::Created(id) => {
                    let message = self.core.store.get_message(who.workspace_id, *id).await?.ok_or_else(|| {
                        Error::Internal(format!("idempotency record points to missing message {id}").into())
                    })?;
                    BatchItem::Queued(Box::new(message))
                }
                BatchItemRecord::Refused(error) => BatchItem::Refused(error.clone()),
            });
        }
        Ok(BatchOutcome { items, replayed: true })
    }
}

fn parse_key(key: Option<&str>) -> Result<Option<IdempotencyKey>> {
    key.map(IdempotencyKey::parse).transpose().map_err(|e| Error::InvalidIdempotencyKey(e.to_string()))
}

/// The strict batch's details for item `i`: its fields as `[i].field`, or `[i]` with the
/// code for an error that names no field.
fn item_fields(i: usize, e: &Error) -> Vec<FieldError> {
    match e {
        Error::Validation { fields } => {
            fields.iter().map(|f| FieldError::new(format!("[{i}].{}", f.field), f.message.clone())).collect()
        }
        other => vec![FieldError::new(format!("[{i}]"), format!("{}: {other}", other.code()))],
    }
}

/// An item's error as the envelope shows it (4xx errors only reach here, whose text is
/// client-safe).
fn stored_error(e: &Error) -> StoredError {
    let (message, fields) = match e {
        Error::Validation { fields } => {
            ("validation failed".to_owned(), fields.iter().map(|f| (f.field.clone(), f.message.clone())).collect())
        }
        // Each recipient's field, so that a front end can name them (Postmark's 406 does).
        Error::AllRecipientsSuppressed { fields } => {
            (e.to_string(), fields.iter().map(|f| (f.field.clone(), f.message.clone())).collect())
        }
        other => (other.to_string(), Vec::new()),
    };
    StoredError { code: e.code().to_owned(), message, fields }
}

/// Hash of a batch for its idempotency record, as if `maker` sent it: the items' canonical
/// JSON, the mode and a marker that keeps it apart from a single send's ([`hash_with_key`]).
fn batch_hash(maker: ApiKeyId, reqs: &[SendRequest], mode: BatchValidation) -> Result<RequestHash> {
    hash_with_key(&CanonicalBatch { reqs, mode }, maker)
}

/// Writes what `json!({"batch": reqs, "validation": mode})` wrote, the form stored records
/// were hashed in, without building that tree of the whole batch: one item's tree at a time
/// (a `Value` object sorts its keys, so each item is still turned into one).
struct CanonicalBatch<'a> {
    reqs: &'a [SendRequest],
    mode: BatchValidation,
}

impl serde::Serialize for CanonicalBatch<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap as _, SerializeSeq as _};

        struct Items<'a>(&'a [SendRequest]);
        impl serde::Serialize for Items<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
                for req in self.0 {
                    seq.serialize_element(&serde_json::to_value(req).map_err(S::Error::custom)?)?;
                }
                seq.end()
            }
        }
        // The keys in the tree's (sorted) order.
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("batch", &Items(self.reqs))?;
        map.serialize_entry("validation", &serde_json::to_value(self.mode).map_err(S::Error::custom)?)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored batch records were hashed over the whole batch's `Value` tree; the item-by-item
    /// form must give the same bytes, or every stored batch's replay would become a 409.
    #[test]
    fn the_batch_hash_is_the_one_of_the_whole_tree() {
        let item = |to: &str, subject: &str| SendRequest {
            to: Some(to.into()),
            subject: Some(subject.into()),
            text: Some("t".into()),
            tags: Some(vec![crate::usecases::TagRequest { name: "z".into(), value: "1".into() }]),
            variables: Some(serde_json::json!({"b": 1, "a": [true, null]})),
            ..SendRequest::default()
        };
        let reqs = vec![item("a@example.com", "one"), item("b@example.com", "two")];
        let maker = ApiKeyId(ulid::Ulid::from_parts(7, 9));
        for mode in [BatchValidation::Strict, BatchValidation::Permissive] {
            let tree = hash_with_key(&serde_json::json!({ "batch": reqs, "validation": mode }), maker).unwrap();
            assert_eq!(batch_hash(maker, &reqs, mode).unwrap(), tree);
        }
    }
}
