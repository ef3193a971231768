//! A database written by the previous version (the server of commit `bb14cf0`, before
//! recipient lists and migration 0008) is migrated and read by this one as it was written,
//! and this one goes on with it.
//!
//! The fixture, `tests/fixtures/bb14cf0/`, was made by running that server (a debug build)
//! on an empty database with the outbox transport, as
//! `storage-sled/tests/fixtures/bb14cf0/make.sh` records: two messages delivered (one with
//! an Idempotency-Key, tags, metadata and a mixed-case recipient), one scheduled, one
//! canceled, one soft-bounced and one deferred. `dump.sql` is `pg_dump --no-owner
//! --no-privileges --column-inserts` of that database (its tables in `public`), and
//! `manifest.json` what the old server's API answered about each message before it stopped.
//! The store's sealing key is `tidings_testing::fixtures::SEALING_KEY`.

use std::path::Path;

use crate::common::{DropSchema, database_url, fresh_schema, options, reachable};
use tidings_storage_postgres::PgStore;
use tidings_testing::fixtures::sealer;
use tidings_testing::legacy::check_store_of_bb14cf0;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bb14cf0");

/// The dump's statements with its tables in `schema` instead of `public`; psql's own
/// commands (`\restrict`) left out.
fn dump_into(schema: &str) -> String {
    let dump = std::fs::read_to_string(Path::new(FIXTURE).join("dump.sql")).unwrap();
    let statements: Vec<&str> = dump.lines().filter(|line| !line.starts_with('\\')).collect();
    format!("CREATE SCHEMA {schema};\n{}", statements.join("\n").replace("public.", &format!("{schema}.")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_the_previous_version_reads_as_it_was_written() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let schema = fresh_schema();
    let _guard = DropSchema { url: url.clone(), schema: schema.clone() };
    {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        let connection = tokio::spawn(connection);
        client.batch_execute(&dump_into(&schema)).await.expect("the old dump loads");
        let applied = client
            .query(&format!("SELECT version FROM {schema}.schema_migrations ORDER BY version"), &[])
            .await
            .unwrap();
        let versions: Vec<String> = applied.iter().map(|row| row.get(0)).collect();
        assert!(!versions.iter().any(|v| v.starts_with("0008")), "the old database predates 0008: {versions:?}");
        drop(client);
        let _ = connection.await;
    }
    let store =
        PgStore::connect(&url, options(&schema), sealer()).await.expect("this version migrates the old database");
    {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        let connection = tokio::spawn(connection);
        let sql = format!("SELECT count(*) FROM {schema}.schema_migrations WHERE version = '0008_recipients'");
        let applied: i64 = client.query_one(&sql, &[]).await.unwrap().get(0);
        assert_eq!(applied, 1, "migration 0008 ran on the old database");
        drop(client);
        let _ = connection.await;
    }
    let manifest = std::fs::read_to_string(Path::new(FIXTURE).join("manifest.json")).unwrap();
    check_store_of_bb14cf0(&store, &manifest).await;
}
