//! The `Store` conformance suite of `tidings_testing` on PostgreSQL, each check (and
//! each model case) in a fresh schema that is dropped afterwards.
//!
//! The server comes from `TIDINGS_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`). Where none is reachable the tests say
//! "skipped" and pass, so machines without PostgreSQL can run the workspace's tests.

use std::future::Future;

use crate::common::{DropSchema, database_url, fresh_schema, fresh_store, options, reachable};
use tidings_storage_postgres::{PgStore, migrate};
use tidings_testing::conformance::{StoreFactory, model_test, run_all, search_test};

/// Makes each store in a fresh schema of the database at `url`.
struct FreshSchema {
    url: String,
}

impl StoreFactory for FreshSchema {
    type Store = PgStore;
    type Guard = DropSchema;

    fn make(&self) -> impl Future<Output = (PgStore, DropSchema)> {
        let url = self.url.clone();
        async move { fresh_store(&url).await }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conforms_to_the_store_contract() {
    let url = database_url();
    if reachable(&url).await {
        run_all(&FreshSchema { url }).await;
    }
}

#[test]
fn answers_like_the_reference_model() {
    let url = database_url();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    if runtime.block_on(reachable(&url)) {
        drop(runtime);
        model_test(&FreshSchema { url }, 32);
    }
}

#[test]
fn finds_messages_like_a_plain_filter() {
    let url = database_url();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    if runtime.block_on(reachable(&url)) {
        drop(runtime);
        search_test(&FreshSchema { url }, 16);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_starting_together_migrate_once() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let schema = fresh_schema();
    let _guard = DropSchema { url: url.clone(), schema: schema.clone() };
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let (url, options) = (url.clone(), options(&schema));
            tokio::spawn(async move { migrate(&url, options).await })
        })
        .collect();
    for run in runs {
        run.await.expect("migration task").expect("migrate");
    }
    let store = PgStore::connect(&url, options(&schema), tidings_testing::fixtures::sealer())
        .await
        .expect("connect after migrating");
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn moves_its_secrets_to_a_new_key() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let schema = fresh_schema();
    let _guard = DropSchema { url: url.clone(), schema: schema.clone() };
    tidings_testing::conformance::rotation_test(|previous: Option<PgStore>, sealer| {
        // Another node may keep running: PostgreSQL shares the database.
        drop(previous);
        let (url, options) = (url.clone(), options(&schema));
        async move { PgStore::connect(&url, options, sealer).await.map_err(|e| e.to_string()) }
    })
    .await;
}
