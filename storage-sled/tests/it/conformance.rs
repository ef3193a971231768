//! The `Store` conformance suite of `tidings_testing`, each check on a fresh store in
//! its own temp dir.

use tidings_storage_sled::SledStore;
use tidings_testing::conformance::{model_test, run_all, search_test};

fn fresh() -> (SledStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    (SledStore::open(dir.path(), tidings_testing::fixtures::sealer()).expect("open store"), dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conforms_to_the_store_contract() {
    run_all(&fresh).await;
}

#[test]
fn answers_like_the_reference_model() {
    model_test(&fresh, 32);
}

#[test]
fn finds_messages_like_a_plain_filter() {
    search_test(&fresh, 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn moves_its_secrets_to_a_new_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().to_owned();
    tidings_testing::conformance::rotation_test(|previous: Option<SledStore>, sealer| {
        drop(previous);
        let path = path.clone();
        async move {
            crate::sealing::once_unlocked(|| SledStore::open(&path, sealer.clone())).await.map_err(|e| e.to_string())
        }
    })
    .await;
}
