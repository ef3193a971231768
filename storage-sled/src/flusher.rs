//! Group commit: one OS thread makes writes durable for every waiting caller at once.
//!
//! sled 0.34's `flush_async` deadlocks when called from concurrent tasks (sled issues #1308
//! and #1412, see shared/FACTS.md), and a blocking `flush()` per write would cap the store at
//! one fsync per write. So a writer applies its batch, takes a ticket from an atomic counter,
//! wakes the flusher thread and awaits (without blocking its runtime thread) until the
//! flusher publishes a durable ticket at least as large as its own. The flusher loops: read
//! the counter, blocking `db.flush()`, publish what it read. Every write that took a ticket
//! before the read is covered by that flush, so one fsync serves all of them.
//!
//! This thread is also the only one that ever flushes: sled's own periodic flusher is
//! turned off (`flush_every_ms(None)` in `db.rs`) and replaced by a flush every
//! [`IDLE_FLUSH`], which bounds what non-durable writes can lose.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tidings_core::ports::StoreError;
use tokio::sync::watch;

/// How long non-durable writes (key touches, claims) may wait for a flush when no durable
/// write comes along.
pub const IDLE_FLUSH: Duration = Duration::from_millis(500);

/// What the flusher has published.
#[derive(Debug, Clone, Default)]
struct Progress {
    /// Every ticket up to this one is durable.
    durable: u64,
    /// Every ticket up to this one was covered by a flush that failed (sticky: a later
    /// success does not make an earlier failed caller's write certain).
    failed_up_to: u64,
    /// The last flush error.
    error: Option<Arc<str>>,
}

/// State shared between writers and the flusher thread.
#[derive(Debug, Default)]
struct Shared {
    /// The last ticket handed out.
    issued: AtomicU64,
    /// Set on drop: flush what is left and exit.
    stop: AtomicBool,
}

/// The flusher thread and the handle writers wait on. Dropping it flushes once more and
/// joins the thread.
#[derive(Debug)]
pub struct Flusher {
    shared: Arc<Shared>,
    progress: watch::Receiver<Progress>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    /// Starts the flusher thread for `db`.
    pub fn start(db: sled::Db) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let (tx, progress) = watch::channel(Progress::default());
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("tidings-sled-flusher".into())
            .spawn(move || run(&db, &thread_shared, &tx))?;
        Ok(Self { shared, progress, thread: Some(thread) })
    }

    /// Waits until everything written before this call is durable. Call it after the write
    /// has been applied; it never blocks the calling thread.
    pub async fn durable(&self) -> Result<(), StoreError> {
        let ticket = self.shared.issued.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
        let mut progress = self.progress.clone();
        let progress = progress
            .wait_for(|p| p.durable >= ticket || p.failed_up_to >= ticket)
            .await
            .map_err(|_| StoreError::Unavailable("the store's flusher has stopped".into()))?;
        if progress.failed_up_to >= ticket {
            let error = progress.error.as_deref().unwrap_or("unknown error");
            return Err(StoreError::Unavailable(format!("flushing to disk failed: {error}")));
        }
        Ok(())
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // A panic in the flusher has already been reported by the panic hook; there is
            // nothing more to do with it while dropping.
            let _ = thread.join();
        }
    }
}

fn run(db: &sled::Db, shared: &Shared, tx: &watch::Sender<Progress>) {
    let mut covered = 0;
    loop {
        let target = shared.issued.load(Ordering::SeqCst);
        if target > covered {
            let result = db.flush();
            tx.send_modify(|p| match result {
                Ok(_) => p.durable = target,
                Err(e) => {
                    p.failed_up_to = target;
                    p.error = Some(e.to_string().into());
                }
            });
            covered = target;
            continue;
        }
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let before = std::time::Instant::now();
        std::thread::park_timeout(IDLE_FLUSH);
        if before.elapsed() >= IDLE_FLUSH {
            // Idle: make non-durable writes durable too. Nobody waits on the result.
            let _ = db.flush();
        }
    }
    // Last flush on shutdown, for non-durable writes made since the last one.
    let _ = db.flush();
}
