//! Group commit: the writes of one kind (new messages, message events) that arrive on one
//! node while a group of them is being written are written next, together, by one statement
//! and one commit (`message_writes.rs` has the statements).
//!
//! Why: a send commits its message, and a delivery two events (`Sent` and the outcome). Each
//! statement and each commit (a WAL flush, an `fdatasync`) costs the backend the same
//! whatever it writes, and those costs, not the rows, were most of PostgreSQL's CPU per
//! message: shared by a group they fell from 1.76 to about 0.9 CPU-ms per message, where
//! dropping only the `BEGIN` and `COMMIT` round trips had changed nothing (bench/README.md).
//! In the benchmark a group held 14 creates or 8 events on average.
//!
//! How: callers queue their write and wait for its answer. The first caller to find no group
//! being written spawns a task that takes what is queued (at most [`MAX_GROUP`], no two
//! sharing a key: see [`Grouped::exclusive_keys`]), writes it, answers each caller, and takes
//! the next group until the queue is empty. Under a light load a group is one write, written
//! at once: nothing waits for a timer. The task, not the caller, runs the write, so a caller
//! that stops waiting (a request cancelled by its client) cannot cut a group short. Each
//! answer comes after the commit, so a successful return still means durable.
//!
//! If a group's statement fails (a duplicate id, a deadlock with another node), nothing of it
//! was written, and each write is retried alone, so that each caller gets its own answer.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use tidings_core::ports::{StoreError, StoreResult};
use tokio::sync::oneshot;

use crate::PgStore;

/// Most writes in one group: bounds the statement's size and how long its row locks are held.
pub(crate) const MAX_GROUP: usize = 256;

/// A kind of write that is committed in groups.
pub(crate) trait Grouped: Sized + Send + 'static {
    /// What a caller is answered.
    type Output: Send + 'static;

    /// The queue of this kind in `store`.
    fn groups(store: &PgStore) -> &Groups<Self>;

    /// Keys that no two writes of one group may share: one statement cannot write a row
    /// twice (a message's second event waits for the next group, after the first commits).
    fn exclusive_keys(&self) -> Vec<Vec<u8>>;

    /// Writes `group` and answers each of its callers.
    fn write_group(store: &PgStore, group: Vec<Pending<Self>>) -> impl Future<Output = ()> + Send;
}

/// A queued write and where its answer goes.
pub(crate) struct Pending<W: Grouped> {
    pub(crate) write: W,
    pub(crate) reply: oneshot::Sender<StoreResult<W::Output>>,
}

/// The queue of one kind of write of one store (shared by its clones).
pub(crate) struct Groups<W: Grouped> {
    queue: Mutex<VecDeque<Pending<W>>>,
    /// Whether a task is writing groups; it empties the queue before it stops.
    writing: AtomicBool,
}

impl<W: Grouped> Default for Groups<W> {
    fn default() -> Self {
        Self { queue: Mutex::new(VecDeque::new()), writing: AtomicBool::new(false) }
    }
}

/// Writes `write` in the next group and returns its answer once that group is committed.
pub(crate) async fn submit<W: Grouped>(store: &PgStore, write: W) -> StoreResult<W::Output> {
    let groups = W::groups(store);
    let (reply, answer) = oneshot::channel();
    groups.queue.lock().unwrap_or_else(PoisonError::into_inner).push_back(Pending { write, reply });
    if groups.writing.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        tokio::spawn(write_groups::<W>(store.clone()));
    }
    answer.await.unwrap_or_else(|_| Err(StoreError::Unavailable("the group write stopped".into())))
}

impl<W: Grouped> Groups<W> {
    /// Takes the next group: queued writes in order, none sharing a key with an earlier one
    /// (those stay queued, in order, for a later group).
    fn next_group(&self) -> Vec<Pending<W>> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let mut keys = HashSet::new();
        let mut group = Vec::new();
        let mut later = VecDeque::new();
        while group.len() < MAX_GROUP
            && let Some(pending) = queue.pop_front()
        {
            let own = pending.write.exclusive_keys();
            if own.iter().all(|k| !keys.contains(k)) {
                keys.extend(own);
                group.push(pending);
            } else {
                later.push_back(pending);
            }
        }
        later.append(&mut queue);
        *queue = later;
        group
    }
}

/// Clears `writing` if the writing task ends by a panic, after answering every queued
/// write with an error: otherwise they, and every later write, would wait for good.
struct PanicGuard<'a, W: Grouped>(&'a Groups<W>);

impl<W: Grouped> Drop for PanicGuard<'_, W> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let queued = std::mem::take(&mut *self.0.queue.lock().unwrap_or_else(PoisonError::into_inner));
            for pending in queued {
                let _ = pending.reply.send(Err(StoreError::Unavailable("a group write failed; retry".into())));
            }
            self.0.writing.store(false, Ordering::Release);
        }
    }
}

/// The writing task: groups until the queue is empty. A write queued just after the last
/// take either finds `writing` cleared (and spawns a task) or is seen by the re-check here.
async fn write_groups<W: Grouped>(store: PgStore) {
    let groups = W::groups(&store);
    let _guard = PanicGuard(groups);
    loop {
        let group = groups.next_group();
        if group.is_empty() {
            groups.writing.store(false, Ordering::Release);
            let queued = !groups.queue.lock().unwrap_or_else(PoisonError::into_inner).is_empty();
            if queued && groups.writing.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                continue;
            }
            return;
        }
        W::write_group(&store, group).await;
    }
}
