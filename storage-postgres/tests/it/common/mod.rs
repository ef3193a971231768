//! What the PostgreSQL tests share: the server's URL, the reachability check that turns
//! every test into a "skipped" pass without a server, and throw-away schemas.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tidings_storage_postgres::{PgOptions, PgStore};

const URL_ENV: &str = "TIDINGS_TEST_DATABASE_URL";
const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The server to test against.
pub fn database_url() -> String {
    std::env::var(URL_ENV).unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// Connects once to see whether PostgreSQL is there; `false` (after saying so) if not.
pub async fn reachable(url: &str) -> bool {
    let outcome = async {
        let mut config: tokio_postgres::Config = url.parse()?;
        config.connect_timeout(Duration::from_secs(3));
        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        client.simple_query("SELECT 1").await.map(drop)
    };
    match outcome.await {
        Ok(()) => true,
        Err(e) => {
            println!("skipped: PostgreSQL not reachable at {url}: {}", with_causes(&e));
            false
        }
    }
}

/// An error with its chain of causes (tokio-postgres puts the useful part in the source).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// A schema name no other check (or test process) uses.
pub fn fresh_schema() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("tidings_test_{}_{}_{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

pub fn options(schema: &str) -> PgOptions {
    PgOptions { max_connections: 8, schema: Some(schema.to_owned()), ..PgOptions::default() }
}

/// Drops its schema when dropped. `Drop` cannot wait for a future, and it runs inside the
/// suite's runtime, so the drop runs on a thread of its own with its own runtime.
pub struct DropSchema {
    pub url: String,
    pub schema: String,
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
                tokio::spawn(connection);
                client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}: {dropped:?}", self.schema);
        }
    }
}

/// A store in a fresh schema and the guard that drops the schema.
pub async fn fresh_store(url: &str) -> (PgStore, DropSchema) {
    let schema = fresh_schema();
    let guard = DropSchema { url: url.to_owned(), schema: schema.clone() };
    let store = PgStore::connect(url, options(&schema), tidings_testing::fixtures::sealer())
        .await
        .expect("connect and migrate");
    (store, guard)
}
