//! Group commit: one OS thread makes writes durable for every waiting caller at once.
//!
//! sled 0.34's `flush_async` deadlocks when called from concurrent tasks (sled's bug reports
//! <https://github.com/spacejam/sled/issues/1308> and
//! <https://github.com/spacejam/sled/issues/1412>), and a blocking `flush()` per write would
//! cap the store at one fsync per write. So a writer applies its batch, takes a ticket from an atomic counter,
//! wakes the flusher thread and awaits (without blocking its runtime thread) until the
//! flusher publishes a durable ticket at least as large as its own. The flusher loops: read
//! the counter, blocking `db.flush()`, publish what it read. Every write that took a ticket
//! before the read is covered by that flush, so one fsync serves all of them.
//!
//! This thread is also the only one that ever flushes: sled's own periodic flusher is
//! turned off (`flush_every_ms(None)` in `db.rs`) and replaced by a flush every
//! [`IDLE_FLUSH`], which bounds what non-durable writes can lose.
//!
//! **A failed flush is final** (PostgreSQL's answer to "fsyncgate", for the same reason):
//! after sled 0.34 hits an I/O error such as a full disk, its writes stay applied in memory
//! but never become durable, and every later `flush()` blocks for good (seen on a full
//! tmpfs: the flusher waits in `make_stable_inner` after space returns). So the first error,
//! or a flush still unfinished after [`STALL_LIMIT`], marks the store failed: every waiter
//! and every later call gets `Unavailable` at once, nothing flushes again, and the owner is
//! expected to restart the process ([`Flusher::failure`]), whose recovery keeps exactly the
//! writes that were durable, i.e. the ones that were acknowledged.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use tidings_core::ports::StoreError;
use tokio::sync::watch;

/// How long non-durable writes (key touches, claims) may wait for a flush when no durable
/// write comes along.
pub const IDLE_FLUSH: Duration = Duration::from_millis(500);

/// A flush that has not finished after this long is taken as failed. Far above any healthy
/// fsync (0.15–2 ms on the machine the benchmarks ran on), and under the HTTP request timeout (30 s), so
/// a client hears 503 rather than a timeout.
pub const STALL_LIMIT: Duration = Duration::from_secs(10);

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
    /// Why the store failed, once it has: see the module's docs.
    failed: OnceLock<Arc<str>>,
}

impl Shared {
    fn fail(&self, reason: impl Into<Arc<str>>) -> Arc<str> {
        Arc::clone(self.failed.get_or_init(|| reason.into()))
    }
}

/// The error every caller gets once the store has failed.
fn failed_error(reason: &str) -> StoreError {
    StoreError::Unavailable(format!("the store failed and must be restarted: {reason}").into())
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
        self.check()?;
        let ticket = self.shared.issued.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
        let mut progress = self.progress.clone();
        let waited =
            tokio::time::timeout(STALL_LIMIT, progress.wait_for(|p| p.durable >= ticket || p.failed_up_to >= ticket))
                .await;
        let progress = match waited {
            Ok(progress) => progress.map_err(|_| StoreError::Unavailable("the store's flusher has stopped".into()))?,
            Err(_) => {
                let reason = self.shared.fail(format!("a flush to disk has not finished in {STALL_LIMIT:?}"));
                return Err(failed_error(&reason));
            }
        };
        if progress.failed_up_to >= ticket {
            return Err(failed_error(progress.error.as_deref().unwrap_or("a flush to disk failed")));
        }
        Ok(())
    }

    /// `Unavailable` once the store has failed (see the module's docs): its memory may hold
    /// writes that will never be durable, so nothing may be read or written any more.
    pub fn check(&self) -> Result<(), StoreError> {
        match self.failure() {
            Some(reason) => Err(failed_error(&reason)),
            None => Ok(()),
        }
    }

    /// Why the store failed, if it has. The process should then stop and be restarted.
    pub fn failure(&self) -> Option<Arc<str>> {
        self.shared.failed.get().cloned()
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if self.shared.failed.get().is_some() {
            // The thread may be blocked in a flush that never returns: leave it.
            return;
        }
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
        if shared.failed.get().is_some() {
            // Another flush would block for good; waiters are answered by `check`.
            tx.send_modify(|p| p.failed_up_to = target);
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::park_timeout(IDLE_FLUSH);
            continue;
        }
        if target > covered {
            let result = db.flush();
            tx.send_modify(|p| match result {
                Ok(_) => p.durable = target,
                Err(e) => {
                    let reason = shared.fail(format!("flushing to disk failed: {e}"));
                    p.failed_up_to = target;
                    p.error = Some(reason);
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
        if before.elapsed() >= IDLE_FLUSH && shared.failed.get().is_none() {
            // Idle: make non-durable writes durable too. Nobody waits on the result, but a
            // failure fails the store like any other.
            if let Err(e) = db.flush() {
                shared.fail(format!("flushing to disk failed: {e}"));
            }
        }
    }
    // Last flush on shutdown, for non-durable writes made since the last one.
    if shared.failed.get().is_none() {
        let _ = db.flush();
    }
}
