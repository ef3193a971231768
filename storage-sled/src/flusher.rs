//! Group commit: one OS thread makes writes durable for every waiting caller at once.
//!
//! sled 0.34's `flush_async` deadlocks when called from concurrent tasks (sled's bug reports
//! <https://github.com/spacejam/sled/issues/1308> and
//! <https://github.com/spacejam/sled/issues/1412>), and a blocking `flush()` per write would
//! cap the store at one fsync per write. So a writer applies its batch, takes the next
//! ticket and queues itself under it, wakes the flusher thread and awaits (without blocking
//! its runtime thread) its own answer. The flusher loops: read the last ticket issued,
//! blocking `db.flush()`, answer every waiter up to that ticket, in order. Every write that
//! took a ticket before the read is covered by that flush, so one fsync serves all of them.
//!
//! Two measured costs shape it (bench/README.md, "Group commit on PostgreSQL, a sled group
//! commit that groups"):
//! - **Each waiter is woken once, by its own answer.** A broadcast of "durable up to N" woke
//!   every waiting task at every flush, most of them to wait again: 64 waiters, 3,100
//!   flushes a second.
//! - **Flushes are paced**: one starts at least [`FLUSH_PACE`] after the previous one
//!   started. On this kind of disk a flush takes a fraction of a millisecond, so unpaced the
//!   flusher flushed after nearly every write (1.5 writes per flush at 4,800 creates a
//!   second), and each flush costs sled a log-buffer seal, a hand-off to its I/O thread and
//!   the wake-ups around it. A write that finds the flusher idle for longer is flushed at
//!   once, so a lone request waits no longer than before.
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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tidings_core::ports::StoreError;
use tokio::sync::oneshot;

/// How long non-durable writes (key touches, claims) may wait for a flush when no durable
/// write comes along.
pub const IDLE_FLUSH: Duration = Duration::from_millis(500);

/// Least time between the starts of two flushes: see the module's docs. A millisecond adds
/// at most that to a durable write under load, and caps the flushes at 1,000 a second.
pub const FLUSH_PACE: Duration = Duration::from_millis(1);

/// A flush that has not finished after this long is taken as failed. Far above any healthy
/// fsync (0.15–2 ms on the machine the benchmarks ran on), and under the HTTP request timeout (30 s), so
/// a client hears 503 rather than a timeout.
pub const STALL_LIMIT: Duration = Duration::from_secs(10);

/// A waiter's answer: durable, or why the store failed.
type Answer = Result<(), Arc<str>>;

/// The tickets handed out and the writers waiting for theirs, in ticket order (both are
/// changed under one lock, so the queue is sorted).
#[derive(Debug, Default)]
struct Waiting {
    /// The last ticket handed out.
    issued: u64,
    queue: VecDeque<(u64, oneshot::Sender<Answer>)>,
}

/// State shared between writers and the flusher thread.
#[derive(Debug, Default)]
struct Shared {
    waiting: Mutex<Waiting>,
    /// Set on drop: flush what is left and exit.
    stop: AtomicBool,
    /// Why the store failed, once it has: see the module's docs.
    failed: OnceLock<Arc<str>>,
}

impl Shared {
    fn fail(&self, reason: impl Into<Arc<str>>) -> Arc<str> {
        Arc::clone(self.failed.get_or_init(|| reason.into()))
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // Nothing is left half-changed under this lock: recover from poisoning.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The last ticket handed out.
    fn issued(&self) -> u64 {
        self.waiting().issued
    }

    /// Answers every waiter whose ticket is at most `up_to`.
    fn answer(&self, up_to: u64, answer: &Answer) {
        let mut waiting = self.waiting();
        while waiting.queue.front().is_some_and(|(ticket, _)| *ticket <= up_to) {
            if let Some((_, reply)) = waiting.queue.pop_front() {
                // The waiter may have given up (timed out, cancelled): nothing to tell it.
                let _ = reply.send(answer.clone());
            }
        }
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
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    /// Starts the flusher thread for `db`.
    pub fn start(db: sled::Db) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let thread =
            std::thread::Builder::new().name("tidings-sled-flusher".into()).spawn(move || run(&db, &thread_shared))?;
        Ok(Self { shared, thread: Some(thread) })
    }

    /// Waits until everything written before this call is durable. Call it after the write
    /// has been applied; it never blocks the calling thread.
    pub async fn durable(&self) -> Result<(), StoreError> {
        self.check()?;
        let (reply, answer) = oneshot::channel();
        {
            let mut waiting = self.shared.waiting();
            waiting.issued += 1;
            let ticket = waiting.issued;
            waiting.queue.push_back((ticket, reply));
        }
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
        match tokio::time::timeout(STALL_LIMIT, answer).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(reason))) => Err(failed_error(&reason)),
            Ok(Err(_)) => Err(StoreError::Unavailable("the store's flusher has stopped".into())),
            Err(_) => {
                let reason = self.shared.fail(format!("a flush to disk has not finished in {STALL_LIMIT:?}"));
                Err(failed_error(&reason))
            }
        }
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

fn run(db: &sled::Db, shared: &Shared) {
    let mut covered = 0;
    let mut last_start: Option<Instant> = None;
    loop {
        let mut target = shared.issued();
        if let Some(reason) = shared.failed.get() {
            // Another flush would block for good; every waiter hears why at once.
            shared.answer(u64::MAX, &Err(Arc::clone(reason)));
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::park_timeout(IDLE_FLUSH);
            continue;
        }
        if target > covered {
            if let Some(wait) = last_start.and_then(|at| FLUSH_PACE.checked_sub(at.elapsed()))
                && !shared.stop.load(Ordering::SeqCst)
            {
                // Paced: the writes that come meanwhile share this flush.
                std::thread::sleep(wait);
                target = shared.issued();
            }
            last_start = Some(Instant::now());
            let answer = db.flush().map(drop).map_err(|e| shared.fail(format!("flushing to disk failed: {e}")));
            shared.answer(target, &answer);
            covered = target;
            continue;
        }
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let before = Instant::now();
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
