//! A scratch PostgreSQL database for the tests that start several nodes on one database
//! themselves (so they cannot use the data dir's own, `TIDINGS_E2E_STORE=postgres`):
//! `tidings_e2e_<random>`, made through `TIDINGS_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) and dropped with its value, also when the
//! test fails. Where no PostgreSQL answers, [`Database::create`] prints why and the test
//! skips.

use std::time::Duration;

use tidings_e2e::fresh_key;

/// The server the scratch databases are made on.
const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A scratch database, dropped (with any connection still open to it) when this is.
pub struct Database {
    admin_url: String,
    name: String,
}

impl Database {
    /// A fresh database; `None`, after printing `skipped: PostgreSQL not reachable at …`,
    /// when PostgreSQL does not answer.
    pub async fn create() -> Option<Self> {
        let admin_url = std::env::var("TIDINGS_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.to_owned());
        let client = match connect(&admin_url).await {
            Ok(client) => client,
            Err(e) => {
                println!("skipped: PostgreSQL not reachable at {admin_url}: {e}");
                return None;
            }
        };
        let name = format!("tidings_e2e_{}", fresh_key()[4..16].to_ascii_lowercase());
        client.batch_execute(&format!("CREATE DATABASE \"{name}\"")).await.expect("create the scratch database");
        Some(Self { admin_url, name })
    }

    /// Its URL: the admin URL with the database name swapped.
    pub fn url(&self) -> String {
        let base = self.admin_url.split('?').next().unwrap_or(&self.admin_url);
        let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
        format!("{server}/{}", self.name)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        // Drop may run inside the test's runtime, which cannot be blocked on: a thread of
        // its own with a runtime of its own does the dropping.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async {
                let client = connect(&admin_url).await?;
                client.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            })?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop the scratch database {}: {dropped:?}", self.name);
        }
    }
}

/// A client on `url`, its connection driven by a task, giving up after 5 s.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client, Box<dyn std::error::Error + Send + Sync>> {
    let connecting = tokio_postgres::connect(url, tokio_postgres::NoTls);
    let (client, connection) =
        tokio::time::timeout(Duration::from_secs(5), connecting).await.map_err(|_| "timed out")??;
    tokio::spawn(connection);
    Ok(client)
}
