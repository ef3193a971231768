//! `PgStore`: the `Store` of Tidings on PostgreSQL, which several nodes can share.
//!
//! - **Layout**: one table per resource; each row holds the record's serde form as JSONB
//!   (`doc`, so the core model stays the source of truth) next to the columns that lists,
//!   claims and uniqueness rules query (`migrations/`). Ids are UUIDs holding a ULID's bytes,
//!   so `ORDER BY id DESC` is newest first and every list is an index range: O(limit).
//! - **Atomicity**: each method is one statement or one short transaction; races are settled
//!   by unique constraints (`ON CONFLICT`), row locks, conditional updates (`record_event`
//!   updates `WHERE status = expected`) and, for the first workspace, a lock on the
//!   `workspaces` table, so they hold across processes.
//! - **Durability**: a successful return means committed, and PostgreSQL's default
//!   `synchronous_commit = on` makes a commit durable. New messages and events that arrive
//!   together share one statement and one commit (`group_commit.rs`).
//! - **Enabled webhooks, domains and senders** are kept per workspace by each store while it
//!   listens for their changes (`LISTEN`/`NOTIFY`, `workspace_cache.rs`); every other read
//!   goes to the database.
//! - **Claims** take due rows with `FOR UPDATE SKIP LOCKED` and move them to the lease in the
//!   same transaction; no transaction is ever held across network I/O.
//! - **Migrations** (`migrate.rs`) run at [`PgStore::connect`], serialised across nodes by an
//!   advisory lock; [`migrate`] runs them alone.
//! - **Secrets** (DKIM private keys, webhook secrets, the store's secrets) are sealed with the
//!   [`Sealer`] the store is connected with; at connect the key is checked and plaintext left
//!   by a version before sealing is sealed (`sealing.rs`).

mod activity;
mod db;
mod domains;
mod event_feed;
mod group_commit;
mod inbound;
mod keys;
mod limits;
mod message_list;
mod message_writes;
mod messages;
mod migrate;
mod queue;
mod reputation;
mod retention;
mod sealing;
mod secrets;
mod sessions;
mod site_limits;
mod suppressions;
mod templates;
mod webhooks;
mod workspace_cache;

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tidings_core::sealing::{SealError, Sealer};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{NoTls, Socket};

pub use limits::PgLimits;
pub use workspace_cache::LISTENER_NAME;

/// Why a store could not be opened or migrated.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The connection URL is not valid.
    #[error("invalid PostgreSQL URL: {0}")]
    Url(#[source] tokio_postgres::Error),
    /// An option is not valid (e.g. a schema name that would need quoting).
    #[error("invalid option: {0}")]
    Options(String),
    /// The connection pool could not be built.
    #[error("cannot build the connection pool: {0}")]
    Pool(#[source] BoxedCause),
    /// No connection could be made (server down, wrong credentials, timeout). The message
    /// carries the causes too: the driver's own text is often only "error connecting to
    /// server", with the reason (refused, no such role) in a cause.
    #[error("cannot connect to PostgreSQL: {}", with_causes(.0.as_ref()))]
    Connect(#[source] BoxedCause),
    /// A migration failed; the schema is as the last successful one left it.
    #[error("migration {version} failed: {source}")]
    Migration {
        /// The migration's file name.
        version: &'static str,
        /// The database's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement around the migrations (lock, bookkeeping) failed.
    #[error("cannot migrate: {0}")]
    Migrate(#[source] tokio_postgres::Error),
    /// The database's secrets were sealed with another key than the one given.
    #[error("its secrets were sealed with another key than the one given (the key check does not open)")]
    WrongKey(#[source] SealError),
    /// The secrets stored in plaintext by an older version could not be sealed.
    #[error("cannot seal the stored secrets: {0}")]
    Sealing(#[source] BoxedCause),
}

/// The cause of a [`PgError`] whose source types (the pool's, the driver's) are not part of
/// this crate's API.
pub type BoxedCause = Box<dyn std::error::Error + Send + Sync>;

impl PgError {
    /// Whether the database's secrets were sealed with another key than the one given.
    pub fn is_wrong_key(&self) -> bool {
        matches!(self, Self::WrongKey(_))
    }
}

/// How the store connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// Most connections the pool opens. Default 16. Each store opens one more of its own,
    /// which listens for changes to webhooks, domains and senders (`workspace_cache.rs`).
    pub max_connections: usize,
    /// How long to wait for a connection (to open, or to be free in the pool). Default 10 s.
    pub connect_timeout: Duration,
    /// Keep the tables in this schema (created if missing) instead of the URL's default
    /// search path; e.g. to share a database with other applications. Must be a plain
    /// lower-case identifier. Default `None`.
    pub schema: Option<String>,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self { max_connections: 16, connect_timeout: Duration::from_secs(10), schema: None }
    }
}

/// The PostgreSQL-backed store. Cheap to clone: clones share one connection pool.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// New messages and events waiting for their group (`group_commit.rs`).
    groups: std::sync::Arc<message_writes::WriteGroups>,
    /// Webhooks, domains and senders per workspace, while this store listens for changes.
    cache: std::sync::Arc<workspace_cache::WorkspaceCache>,
    sealer: Sealer,
    sealed_at_connect: usize,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("pool", &self.pool.status()).finish()
    }
}

impl PgStore {
    /// Connects without TLS and applies pending migrations; see [`Self::connect_with_tls`].
    pub async fn connect(url: &str, options: PgOptions, sealer: Sealer) -> Result<Self, PgError> {
        Self::connect_with_tls(url, options, sealer, NoTls).await
    }

    /// Connects through `tls` (e.g. a `tokio-postgres-rustls` connector) and applies pending
    /// migrations. Secrets are sealed with `sealer`, which must have the key the database
    /// was sealed with ([`PgError::WrongKey`] otherwise; every node must be given the same);
    /// plaintext secrets of an older version are sealed now ([`Self::sealed_at_connect`]).
    pub async fn connect_with_tls<T>(url: &str, options: PgOptions, sealer: Sealer, tls: T) -> Result<Self, PgError>
    where
        T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
        T::Stream: Send + Sync,
        T::TlsConnect: Send + Sync,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        let mut config: tokio_postgres::Config = url.parse().map_err(PgError::Url)?;
        config.connect_timeout(options.connect_timeout);
        if let Some(schema) = &options.schema {
            migrate::check_schema_name(schema)?;
            config.options(format!("-c search_path={schema}"));
        }
        let cache = workspace_cache::WorkspaceCache::start(config.clone(), tls.clone());
        let manager = Manager::from_config(config, tls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| PgError::Pool(e.into()))?;
        let mut client = pool.get().await.map_err(|e| PgError::Connect(e.into()))?;
        migrate::run(&mut client, options.schema.as_deref()).await?;
        let sealed_at_connect = sealing::seal_at_connect(&mut client, &sealer).await?;
        Ok(Self { pool, groups: Default::default(), cache, sealer, sealed_at_connect })
    }

    /// How many records and secrets were stored in plaintext (by a version before sealing)
    /// and were sealed when this store connected.
    pub fn sealed_at_connect(&self) -> usize {
        self.sealed_at_connect
    }
}

/// `error` and its causes, `: `-separated: the driver's own text is often only "db error" or
/// "error connecting to server", with the reason (refused, no such role) in a cause.
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

/// Applies pending migrations to the database at `url` (without TLS) and returns; for a
/// `tidings-server migrate` step run before the nodes start. Safe to run concurrently with
/// nodes starting: all migrate under one advisory lock.
pub async fn migrate(url: &str, options: PgOptions) -> Result<(), PgError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(PgError::Url)?;
    config.connect_timeout(options.connect_timeout);
    if let Some(schema) = &options.schema {
        migrate::check_schema_name(schema)?;
        config.options(format!("-c search_path={schema}"));
    }
    let (mut client, connection) = config.connect(NoTls).await.map_err(|e| PgError::Connect(e.into()))?;
    let driver = tokio::spawn(connection);
    let result = migrate::run(&mut client, options.schema.as_deref()).await;
    drop(client);
    let _ = driver.await;
    result
}
