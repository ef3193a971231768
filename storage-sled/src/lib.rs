//! `SledStore`: the embedded default `Store` of Tidings, on sled 0.34.
//!
//! - **Layout**: one tree; every record and index is a key with a tag byte and, for
//!   workspace data, the workspace id next (`layout.rs` lists them all).
//! - **Atomicity**: each method checks and writes under one writer lock; its writes are
//!   made crash-atomic by a redo record rather than sled's `apply_batch`, which would wait
//!   for every flush in progress (`db.rs`).
//! - **Durability**: methods the trait marks durable (and the rare management writes, which
//!   cost nothing noticeable) return after a group commit by one flusher thread
//!   (`flusher.rs`). `touch_api_key` and the claims are not waited for; they reach disk
//!   with the next flush, at most half a second later.
//! - **Lists** walk a key range newest first, so a page costs O(limit); filtered message
//!   lists walk the smallest matching index (`messages.rs`).
//! - **Upgrades**: an index added later is built once at open for the records that predate
//!   it, and a `META` key remembers that it was (the global message id index, `messages.rs`).
//!   A store that an older build has written to since keeps the marker but misses entries:
//!   going back to an older build is not supported.
//! - **Secrets** (DKIM private keys, webhook secrets, the store's secrets) are sealed with the
//!   [`Sealer`] the store is opened with; at open the key is checked and plaintext left by a
//!   version before sealing is sealed (`sealing.rs`).
//! - **Expiry**: idempotency records stay until `purge_expired_idempotency` removes them; the
//!   server calls it periodically, so expired keys do not grow the store without bound.
//!
//! sled calls are made directly from the async methods: they work in memory and sled's log
//! buffers and take microseconds; waiting for the disk is the flusher thread's job.
//!
//! Open one in a directory of the application's and hand it to the service; a second open
//! of the same directory sees everything the first wrote:
//!
//! ```
//! use std::sync::Arc;
//! use tidings_core::ports::{NoDns, SystemClock, SystemRandom};
//! use tidings_core::sealing::{Sealer, SealingKey};
//! use tidings_core::usecases::{CoreConfig, Tidings};
//! use tidings_storage_sled::SledStore;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir()?;
//! // The key that seals the store's secrets: keep it apart from the store, and reuse it.
//! let key = SealingKey::generate(&SystemRandom);
//! let open = |key: &SealingKey| -> Result<Tidings, Box<dyn std::error::Error>> {
//!     let store = Arc::new(SledStore::open(dir.path().join("store"), Sealer::new(key))?);
//!     Ok(Tidings::new(store, Arc::new(SystemClock), Arc::new(SystemRandom), Arc::new(NoDns), CoreConfig::default()))
//! };
//! let core = open(&key)?;
//! let (workspace, first_key) = core.workspaces().create("acme", None).await?;
//! drop(core); // sled admits one process, and one open store, per directory
//! let reopened = open(&key)?;
//! let who = reopened.authenticate(first_key.plaintext.expose()).await?;
//! assert_eq!(who.workspace_id, workspace.id);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod activity;
mod api_keys;
mod codec;
mod content;
mod db;
mod domain_cache;
mod domains;
mod event_feed;
mod flusher;
mod inbound;
mod layout;
mod message_list;
mod messages;
pub mod private_files;
mod queue;
mod reputation;
mod retention;
mod sealing;
mod search_index;
mod secrets;
mod sessions;
mod suppressions;
mod templates;
mod webhooks;
mod workspaces;

use std::path::Path;
use std::sync::Arc;

use db::Inner;
use flusher::Flusher;
pub use private_files::{KeyFileError, KeyOrigin, load_or_create_sealing_key};
pub use sealing::SealingError;
use tidings_core::sealing::Sealer;

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SledError {
    /// sled could not open or recover the database (I/O error, held by another process,
    /// corrupt files).
    #[error("cannot open the sled database: {0}")]
    Open(#[from] sled::Error),
    /// The store's directory could not be created or made private.
    #[error("cannot make the store's directory {path} private: {source}")]
    Directory {
        /// The directory.
        path: std::path::PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// The flusher thread could not be started.
    #[error("cannot start the flusher thread: {0}")]
    Flusher(#[from] std::io::Error),
    /// The write interrupted by the last crash could not be completed.
    #[error("cannot complete the write interrupted by a crash: {0}")]
    Recovery(#[from] tidings_core::ports::StoreError),
    /// The key does not open the store's secrets, or they could not be sealed.
    #[error("{0}")]
    Sealing(#[from] SealingError),
}

impl SledError {
    /// Whether the store's secrets were sealed with another key than the one given.
    pub fn is_wrong_key(&self) -> bool {
        matches!(self, Self::Sealing(SealingError::WrongKey(_)))
    }
}

/// How the store uses memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SledOptions {
    /// Bytes of pages sled keeps in memory (its page cache). The process's memory grows with
    /// the data up to about this much and then stays there. Default 256 MiB (sled's own is
    /// 1 GiB): with 128 MiB a server holding 100,000 queued messages stayed near 200 MiB
    /// while retrying them (bench/README.md, queue-memory).
    pub cache_capacity_bytes: u64,
}

impl Default for SledOptions {
    fn default() -> Self {
        Self { cache_capacity_bytes: 256 * 1024 * 1024 }
    }
}

/// The sled-backed store. Cheap to clone: clones share one database, writer lock and
/// flusher thread, which stops (after a last flush) when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct SledStore {
    inner: Arc<Inner>,
    sealer: Sealer,
    sealed_at_open: usize,
    narrowed_at_open: Option<u32>,
    domains: Arc<domain_cache::DomainCache>,
}

impl SledStore {
    /// Opens (or creates) the store in directory `path` with the default [`SledOptions`].
    /// Only one process may have it open. See [`Self::open_with`] for `sealer`.
    pub fn open(path: impl AsRef<Path>, sealer: Sealer) -> Result<Self, SledError> {
        Self::open_with(path, SledOptions::default(), sealer)
    }

    /// Opens (or creates) the store in directory `path`. Only one process may have it open.
    /// Secrets are sealed with `sealer`, which must have the key the store was sealed with:
    /// [`SledError::is_wrong_key`] otherwise. Plaintext secrets of an older store are sealed
    /// now ([`Self::sealed_at_open`] says how many). The directory is made this user's only
    /// (`700`, [`private_files`]); [`Self::narrowed_at_open`] says if it was open to others.
    pub fn open_with(path: impl AsRef<Path>, options: SledOptions, sealer: Sealer) -> Result<Self, SledError> {
        let path = path.as_ref();
        let narrowed_at_open = private_files::make_private_dir(path)
            .map_err(|source| SledError::Directory { path: path.to_owned(), source })?;
        let db = sled::Config::new()
            .path(path)
            .cache_capacity(options.cache_capacity_bytes)
            .mode(sled::Mode::HighThroughput)
            // Our flusher thread is the only one that flushes: sled's periodic flusher would
            // flush concurrently with it, and concurrent flushing is what deadlocks in sled
            // 0.34 (see flusher.rs).
            .flush_every_ms(None)
            .open()?;
        let tree = db.open_tree("tidings")?;
        db::recover(&tree)?;
        content::move_content_apart(&tree)?;
        messages::build_id_index(&tree)?;
        search_index::build_search_index(&tree)?;
        retention::build_purge_index(&tree)?;
        let flusher = Flusher::start(db.clone())?;
        let inner = Arc::new(Inner::new(db, tree, flusher));
        let sealed_at_open = sealing::seal_at_open(&inner, &sealer)?.sealed;
        Ok(Self { inner, sealer, sealed_at_open, narrowed_at_open, domains: Arc::default() })
    }

    /// The permission bits the store's directory had when this open took group and other
    /// permissions away from it (a directory made by hand or by an older version), for the
    /// caller to log; `None` if it was private already.
    pub fn narrowed_at_open(&self) -> Option<u32> {
        self.narrowed_at_open
    }

    /// How many records and secrets were stored in plaintext (by a version before sealing)
    /// and were sealed when this store was opened.
    pub fn sealed_at_open(&self) -> usize {
        self.sealed_at_open
    }

    /// Bytes the database occupies on disk.
    pub fn size_on_disk(&self) -> Result<u64, SledError> {
        Ok(self.inner.size_on_disk()?)
    }
}
