//! Batch sends through the use case: strict all-or-nothing, permissive per-index results,
//! idempotent replays of both, and the size limits.

use tidings_core::model::{KeyScope, MessageStatus, RateLimit};
use tidings_core::ports::SuppressionStore;
use tidings_core::usecases::{BatchItem, BatchValidation, MAX_BATCH, Principal, SendRequest};
use tidings_core::{Error, IdempotencyConflict};
use tidings_testing::delivery::Delivery;
use tidings_testing::fixtures;
use tidings_testing::service;

fn item(to: &str) -> SendRequest {
    SendRequest {
        to: Some(to.into()),
        from: Some("Acme Billing <billing@acme.example.com>".into()),
        subject: Some("Your invoice".into()),
        text: Some("Thanks for your order.".into()),
        ..SendRequest::default()
    }
}

fn items(n: usize) -> Vec<SendRequest> {
    (0..n).map(|i| item(&format!("reader{i}@example.net"))).collect()
}

fn roomy(who: &Principal) -> Principal {
    Principal { rate_limit: RateLimit::new(1_000).unwrap(), ..who.clone() }
}

async fn message_count(d: &Delivery) -> usize {
    let params = tidings_core::usecases::ListParams { limit: Some(200), cursor: None };
    let filters = tidings_core::usecases::MessageFilters::default();
    d.t.core.messages().list(&d.who, params, &filters).await.unwrap().items.len()
}

#[tokio::test]
async fn a_strict_batch_queues_every_item_at_its_index_and_the_worker_delivers_them() {
    let d = Delivery::new("1m", vec![]).await;
    let who = roomy(&d.who);
    let out = d.t.core.messages().send_batch(&who, items(50), BatchValidation::Strict, None).await.unwrap();
    assert!(!out.replayed);
    assert_eq!(out.items.len(), 50);
    for (i, result) in out.items.iter().enumerate() {
        match result {
            BatchItem::Queued(m) => {
                assert_eq!(m.to.to_string(), format!("reader{i}@example.net"), "index {i}");
                assert_eq!(m.status, MessageStatus::Queued);
            }
            BatchItem::Refused(e) => panic!("item {i} refused: {e:?}"),
        }
    }
    let report = d.step().await;
    assert_eq!(report.delivered, 50);
    assert_eq!(d.mailer.sent().len(), 50);
}

#[tokio::test]
async fn one_bad_item_refuses_a_strict_batch_and_names_every_bad_field() {
    let d = Delivery::new("1m", vec![]).await;
    let who = roomy(&d.who);
    let suppressed = fixtures::suppression(who.workspace_id, "gone@example.net");
    d.t.store.insert_suppression(&suppressed).await.unwrap();
    let mut reqs = items(5);
    reqs[1].to = Some("not an address".into());
    reqs[3].subject = None;
    reqs[3].scheduled_at = Some("soon".into());
    reqs[4].to = Some("gone@example.net".into());
    let refused = d.t.core.messages().send_batch(&who, reqs, BatchValidation::Strict, Some("k1")).await;
    let Err(Error::Validation { fields }) = refused else { panic!("expected a validation error: {refused:?}") };
    let named: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(named, ["[1].to", "[3].scheduledAt", "[3].subject", "[4]"]);
    assert!(fields[3].message.starts_with("recipient_suppressed"), "{:?}", fields[3]);
    assert_eq!(message_count(&d).await, 0, "nothing queued");
    // The key was not used up: the corrected batch goes through under it.
    let out = d.t.core.messages().send_batch(&who, items(2), BatchValidation::Strict, Some("k1")).await.unwrap();
    assert!(!out.replayed);
}

#[tokio::test]
async fn a_permissive_batch_queues_the_valid_items_and_answers_errors_at_their_index() {
    let d = Delivery::new("1m", vec![]).await;
    let who = roomy(&d.who);
    let mut reqs = items(4);
    reqs[2].to = None;
    let out =
        d.t.core.messages().send_batch(&who, reqs.clone(), BatchValidation::Permissive, Some("p1")).await.unwrap();
    assert_eq!(out.refused(), 1);
    let BatchItem::Refused(error) = &out.items[2] else { panic!("item 2 must be refused") };
    assert_eq!(
        (error.code.as_str(), error.fields.clone()),
        ("validation_error", vec![("to".into(), "is required".into())])
    );
    assert_eq!(message_count(&d).await, 3);

    // The replay answers the same results, the error included, and queues nothing.
    let again =
        d.t.core.messages().send_batch(&who, reqs.clone(), BatchValidation::Permissive, Some("p1")).await.unwrap();
    assert!(again.replayed);
    assert_eq!(again.items, out.items);
    assert_eq!(message_count(&d).await, 3);
    // So does the read-only replay a front end asks before taking tokens.
    let peek =
        d.t.core
            .messages()
            .idempotent_batch_replay(&who, &reqs, BatchValidation::Permissive, Some("p1"))
            .await
            .unwrap();
    assert_eq!(peek.map(|o| o.items), Some(out.items.clone()));
    // Another body, or the same body strict, under the key: reused.
    let other = d.t.core.messages().send_batch(&who, items(4), BatchValidation::Permissive, Some("p1")).await;
    assert_eq!(other, Err(Error::IdempotencyKeyReused(IdempotencyConflict::OtherRequest)));
    let strict = d.t.core.messages().send_batch(&who, reqs, BatchValidation::Strict, Some("p1")).await;
    assert_eq!(strict, Err(Error::IdempotencyKeyReused(IdempotencyConflict::OtherRequest)));
    // A single send under a batch's key: reused.
    let single = d.t.core.messages().send(&who, item("x@example.net"), Some("p1")).await;
    assert_eq!(single.map(|o| o.replayed), Err(Error::IdempotencyKeyReused(IdempotencyConflict::OtherRequest)));
}

/// The error code and message of a refused batch.
fn refusal<T: std::fmt::Debug>(result: tidings_core::Result<T>) -> (&'static str, String) {
    let err = result.expect_err("a refusal");
    (err.code(), err.to_string())
}

#[tokio::test]
async fn a_batch_idempotency_key_is_shared_by_full_keys_and_each_send_key_has_its_own() {
    let d = Delivery::new("1m", vec![]).await;
    let admin = roomy(&d.who);
    let other_admin = roomy(&service::key_in(admin.workspace_id, KeyScope::Full));
    let sender = roomy(&service::send_key_beside(&admin));
    let other_sender = roomy(&service::send_key_beside(&admin));
    let other_request =
        ("idempotency_key_reused", "this Idempotency-Key was already used with a different request".to_owned());
    let mut reqs = items(3);
    reqs[0].to = None;
    let permissive = BatchValidation::Permissive;

    let first = d.t.core.messages().send_batch(&admin, reqs.clone(), permissive, Some("b1")).await.unwrap();
    let again = d.t.core.messages().send_batch(&other_admin, reqs.clone(), permissive, Some("b1")).await.unwrap();
    assert!(again.replayed, "another full key gets the batch's results");
    assert_eq!(again.items, first.items, "the same ids and the refused first item's error");
    assert_eq!(
        refusal(d.t.core.messages().send_batch(&other_admin, items(3), permissive, Some("b1")).await),
        other_request
    );
    assert_eq!(refusal(d.t.core.messages().send(&other_admin, item("x@example.net"), Some("b1")).await), other_request);
    // The full keys' "b1" is not in a send key's way: nothing to replay, whatever the body.
    for body in [reqs.clone(), items(3)] {
        let peek = d.t.core.messages().idempotent_batch_replay(&sender, &body, permissive, Some("b1")).await.unwrap();
        assert!(peek.is_none(), "nothing to replay for a send key");
    }

    let mine = d.t.core.messages().send_batch(&sender, items(2), BatchValidation::Strict, Some("b1")).await.unwrap();
    assert!(!mine.replayed, "the send key's own batch");
    let replay = d.t.core.messages().send_batch(&sender, items(2), BatchValidation::Strict, Some("b1")).await.unwrap();
    assert!(replay.replayed && replay.items == mine.items, "replayed to itself");
    assert_eq!(refusal(d.t.core.messages().send(&sender, item("x@example.net"), Some("b1")).await), other_request);
    let theirs =
        d.t.core.messages().send_batch(&other_sender, items(2), BatchValidation::Strict, Some("b1")).await.unwrap();
    assert!(!theirs.replayed && theirs.items != mine.items, "another send key sends anew");
    assert_eq!(message_count(&d).await, 6, "two from each of the three batches");
}

#[tokio::test]
async fn a_strict_replay_returns_the_same_messages_as_they_are_now() {
    let d = Delivery::new("1m", vec![]).await;
    let who = roomy(&d.who);
    let first = d.t.core.messages().send_batch(&who, items(3), BatchValidation::Strict, Some("s1")).await.unwrap();
    d.step().await;
    let again = d.t.core.messages().send_batch(&who, items(3), BatchValidation::Strict, Some("s1")).await.unwrap();
    assert!(again.replayed);
    let ids = |items: &[BatchItem]| -> Vec<_> {
        items.iter().map(|i| if let BatchItem::Queued(m) = i { (m.id, m.status) } else { panic!("refused") }).collect()
    };
    let first_ids: Vec<_> = ids(&first.items).into_iter().map(|(id, _)| id).collect();
    let replayed = ids(&again.items);
    assert_eq!(replayed.iter().map(|(id, _)| *id).collect::<Vec<_>>(), first_ids, "the same ids, in order");
    assert!(replayed.iter().all(|(_, s)| *s == MessageStatus::Delivered), "their current state");
    assert_eq!(message_count(&d).await, 3);
}

#[tokio::test]
async fn batch_sizes_are_bounded_by_500_and_by_the_keys_bucket() {
    let d = Delivery::new("1m", vec![]).await;
    let roomy = roomy(&d.who);
    let empty = d.t.core.messages().send_batch(&roomy, vec![], BatchValidation::Strict, None).await;
    assert_eq!(service::invalid_fields(empty), ["batch"]);
    let big = d.t.core.messages().send_batch(&roomy, items(MAX_BATCH + 1), BatchValidation::Strict, None).await;
    assert_eq!(service::invalid_fields(big), ["batch"]);
    // The default key holds 10 tokens: a batch of 11 could never pass.
    assert_eq!(d.who.rate_limit.per_sec(), 10);
    let over = d.t.core.messages().send_batch(&d.who, items(11), BatchValidation::Strict, None).await;
    assert_eq!(service::invalid_fields(over), ["batch"]);
    assert!(d.t.core.messages().send_batch(&d.who, items(10), BatchValidation::Strict, None).await.is_ok());
    assert_eq!(BatchValidation::parse(Some("PERMISSIVE")), Ok(BatchValidation::Permissive));
    assert_eq!(BatchValidation::parse(None), Ok(BatchValidation::Strict));
    assert!(BatchValidation::parse(Some("lenient")).is_err());
}

#[tokio::test]
async fn scheduled_items_in_a_batch_are_scheduled() {
    let d = Delivery::new("1m", vec![]).await;
    let mut reqs = items(2);
    let at = d.t.now() + chrono::Duration::hours(1);
    reqs[1].scheduled_at = Some(at.to_rfc3339());
    let out = d.t.core.messages().send_batch(&d.who, reqs, BatchValidation::Strict, None).await.unwrap();
    let statuses: Vec<_> =
        out.items.iter().map(|i| if let BatchItem::Queued(m) = i { m.status } else { panic!() }).collect();
    assert_eq!(statuses, [MessageStatus::Queued, MessageStatus::Scheduled]);
    assert_eq!(d.step().await.delivered, 1, "only the unscheduled one is due");
}
