//! The reference `MemoryStore` passes the Store conformance suite and agrees with itself in
//! the model test (which checks the suite and the model, more than the store).
use tidings_testing::{MemoryStore, model_test, run_all, search_test};

fn fresh() -> (MemoryStore, ()) {
    (MemoryStore::new(), ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_conforms_to_the_store_contract() {
    run_all(&fresh).await;
}

#[test]
fn memory_store_answers_like_the_model() {
    model_test(&fresh, 32);
}

#[test]
fn memory_store_finds_messages_like_a_plain_filter() {
    search_test(&fresh, 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_moves_its_secrets_to_a_new_key() {
    tidings_testing::conformance::rotation_test(|previous: Option<MemoryStore>, sealer| async move {
        match previous {
            None => Ok(MemoryStore::with_sealer(sealer)),
            Some(store) => store.reopen(sealer).map_err(|e| e.to_string()),
        }
    })
    .await;
}
