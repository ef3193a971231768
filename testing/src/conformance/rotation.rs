//! Rotating the sealing key ([`SecretResealStore`], [`rotate_secret_key`]): a store sealed
//! with one key, opened with the new key and that previous key, re-sealed in part
//! (interrupted), written to meanwhile, re-sealed again to the end, then opened with the new
//! key alone; the previous key alone no longer opens it.
//!
//! Unlike the rest of the suite this needs the same store opened again with other keys, so a
//! storage crate gives an `open` function rather than a [`super::StoreFactory`].

use std::future::Future;
use std::sync::Arc;

use tidings_core::ids::WorkspaceId;
use tidings_core::model::{Domain, WebhookEndpoint, WebhookSecret};
use tidings_core::ports::{SecretHolder, SecretResealStore, Store, SystemRandom};
use tidings_core::sealing::Sealer;
use tidings_core::sealing::rotation::{RotationError, rotate_secret_key};
use tidings_core::secret::{Secret, SecretName};

use super::Must;
use crate::fixtures::{domain, now, sealing_key, ulid, webhook, workspace};

const TRACKING: SecretName = SecretName::new("conformance_rotation_tracking");
const OTHER: SecretName = SecretName::new("conformance_rotation_other");

/// Runs the rotation check. `open(previous, sealer)` closes `previous` (the store it opened
/// last, if any) and opens the same store again with `sealer`; an `Err` (its message) if the
/// store does not open with that key, because its key check is of another key. The first
/// call, with `None`, makes the store, empty.
pub async fn rotation_test<S, Open, Fut>(open: Open)
where
    S: Store + SecretResealStore + 'static,
    Open: Fn(Option<S>, Sealer) -> Fut,
    Fut: Future<Output = Result<S, String>>,
{
    let (old, new) = (sealing_key([0x0a; 32]), sealing_key([0x0b; 32]));
    let store = open(None, Sealer::new(&old)).await.unwrap_or_else(|e| panic!("a fresh store: {e}"));

    // Every kind of secret, under the old key.
    let ws = workspace();
    store.create_workspace(&ws, &crate::fixtures::api_key(ws.id)).await.must("create_workspace");
    let mut domains: Vec<Domain> = (0..3).map(|i| domain(ws.id, &format!("d{i}.rotation.test"))).collect();
    for d in &domains {
        store.insert_domain(d).await.must("insert_domain");
    }
    let mut webhooks: Vec<WebhookEndpoint> = (0..3).map(|_| rotated_webhook(ws.id)).collect();
    for w in &webhooks {
        store.insert_webhook(w).await.must("insert_webhook");
    }
    let tracking = Secret::new(ulid().to_bytes().to_vec());
    let other = Secret::new(vec![7; 32]);
    store.ensure_secret(TRACKING, &tracking).await.must("ensure_secret");
    store.ensure_secret(OTHER, &other).await.must("ensure_secret");

    // A rotation needs the previous key.
    let err = rotate_secret_key(&store, &Sealer::new(&old), 10, |_| {}).await.unwrap_err();
    assert!(matches!(err, RotationError::NoPreviousKey), "{err:?}");

    // Opened with both keys: everything reads; a pass re-seals the first two domains and stops.
    let rotating = || Sealer::with_previous(&new, &old);
    let store = open(Some(store), rotating()).await.unwrap_or_else(|e| panic!("opened with the new and old key: {e}"));
    assert_reads(&store, &domains, &webhooks, &tracking, &other).await;
    let first = store.reseal_secrets(SecretHolder::Domains, None, 2).await.must("reseal_secrets");
    assert_eq!((first.examined, first.resealed), (2, 2), "{first:?}");
    let cursor = first.next.expect("a full batch says where to go on");
    let again = store.reseal_secrets(SecretHolder::Domains, None, 2).await.must("reseal_secrets again");
    assert_eq!((again.examined, again.resealed), (2, 0), "what is under the new key is skipped: {again:?}");
    let rest = store.reseal_secrets(SecretHolder::Domains, Some(&cursor), 5).await.must("reseal_secrets after");
    assert_eq!((rest.examined, rest.next.is_none()), (1, true), "{rest:?}");
    assert_eq!(rest.resealed, 1);

    // "Interrupted": the store is opened again. Meanwhile a node writes with the new key.
    let store = open(Some(store), rotating()).await.unwrap_or_else(|e| panic!("opened again: {e}"));
    domains[2].open_tracking = true;
    store.update_domain(&domains[2]).await.must("update_domain while rotating");
    let added = rotated_webhook(ws.id);
    store.insert_webhook(&added).await.must("insert_webhook while rotating");
    webhooks.push(added);

    // The pass, run to the end with batches of one, and concurrent updates that it must not lose.
    let store = Arc::new(store);
    let updater = {
        let (store, webhooks) = (Arc::clone(&store), webhooks.clone());
        tokio::spawn(async move {
            for mut w in webhooks {
                w.enabled = false;
                w.updated_at = now();
                store.update_webhook(&w).await.must("update_webhook while rotating");
                tokio::task::yield_now().await;
            }
        })
    };
    let mut batches = 0;
    let report = rotate_secret_key(store.as_ref(), &rotating(), 1, |_| batches += 1).await.must_rotate();
    updater.await.unwrap_or_else(|e| panic!("updater: {e}"));
    for w in &mut webhooks {
        w.enabled = false;
    }
    assert!(report.finished);
    assert_eq!(report.domains.examined, 3, "{report:?}");
    assert_eq!(report.domains.resealed, 0, "every domain was under the new key already: {report:?}");
    assert_eq!(report.webhooks.examined, 4, "{report:?}");
    assert!(report.webhooks.resealed <= 3, "the added endpoint was under the new key: {report:?}");
    assert!(report.store_secrets.examined >= 2, "{report:?}");
    assert!(report.store_secrets.resealed >= 2, "{report:?}");
    assert!(batches >= 3 + 4 + 2, "batches of one record: {batches}");

    // A second pass finds nothing to do.
    let report = rotate_secret_key(store.as_ref(), &rotating(), 100, |_| {}).await.must_rotate();
    assert_eq!(report.resealed(), 0, "{report:?}");

    // The new key alone opens the store and reads every secret and every update; the old alone does not.
    let store = Arc::into_inner(store).expect("no other holder of the store");
    let store = open(Some(store), Sealer::new(&new)).await.unwrap_or_else(|e| panic!("the new key alone: {e}"));
    assert_reads(&store, &domains, &webhooks, &tracking, &other).await;
    assert!(
        open(Some(store), Sealer::new(&old)).await.is_err(),
        "the old key alone opened the store after the rotation"
    );
}

fn rotated_webhook(ws: WorkspaceId) -> WebhookEndpoint {
    let mut w = webhook(ws);
    w.previous_secret = Some((WebhookSecret::generate(&SystemRandom), now()));
    w
}

async fn assert_reads<S: Store>(
    store: &S,
    domains: &[Domain],
    webhooks: &[WebhookEndpoint],
    tracking: &Secret<Vec<u8>>,
    other: &Secret<Vec<u8>>,
) {
    for d in domains {
        let read = store.get_domain(d.workspace_id, d.id).await.must("get_domain");
        assert_eq!(read.as_ref(), Some(d), "domain {} reads back with its keys and last update", d.name);
    }
    for w in webhooks {
        let read = store.get_webhook(w.workspace_id, w.id).await.must("get_webhook").expect("the endpoint");
        assert_eq!(read.secret, w.secret, "webhook {} secret", w.id);
        assert_eq!(read.previous_secret, w.previous_secret, "webhook {} previous secret", w.id);
        assert_eq!(read.enabled, w.enabled, "webhook {} keeps its last update", w.id);
    }
    let read = store.ensure_secret(TRACKING, &Secret::new(vec![1; 32])).await.must("ensure_secret");
    assert_eq!(read.expose(), tracking.expose(), "the tracking secret is kept");
    let read = store.ensure_secret(OTHER, &Secret::new(vec![1; 32])).await.must("ensure_secret");
    assert_eq!(read.expose(), other.expose(), "another secret is kept");
}

trait MustRotate<T> {
    fn must_rotate(self) -> T;
}

impl<T> MustRotate<T> for Result<T, RotationError> {
    fn must_rotate(self) -> T {
        self.unwrap_or_else(|e| panic!("rotate_secret_key: {e:?}"))
    }
}
