//! Where templates are compiled and rendered: on tokio's blocking threads, at most
//! [`CoreConfig::render_threads`] at once and at most
//! [`CoreConfig::render_threads_per_workspace`] of one workspace, never on the async
//! executor; waiting workspaces take turns.
//!
//! A render is CPU work bounded by the template work budget (`templates` module docs), not
//! I/O: run on an executor thread, a few costly renders in parallel stall every other
//! request of the process, `/healthz` included. Here a render first waits (asynchronously)
//! for a permit and then runs with `spawn_blocking`; the permit goes with the blocking task,
//! so a render whose request was abandoned still counts until it ends.
//!
//! Fairness between workspaces: with one first-come queue, a workspace sending render bombs
//! back to back keeps the queue full, and another workspace's ordinary send waits behind
//! every bomb queued before it (seconds). So:
//! - one workspace runs at most `render_threads_per_workspace` renders at once (by default
//!   one less than `render_threads`): a permit is always left for the other workspaces, and
//!   their renders start at once however many one workspace has queued;
//! - when permits are short, waiting renders queue per workspace, and a freed permit goes to
//!   the next workspace in turn (round-robin), first come first served within a workspace:
//!   with several busy workspaces, a render waits for at most one render of each other
//!   workspace waiting, not for their whole queues.
//!
//! The defaults, one thread per core and one less per workspace, keep a core for the
//! executor against any one workspace's renders. Only when several workspaces render at once
//! do the threads take every core, and then the operating system shares them.
//!
//! [`CoreConfig::render_threads`]: crate::usecases::CoreConfig::render_threads
//! [`CoreConfig::render_threads_per_workspace`]: crate::usecases::CoreConfig::render_threads_per_workspace

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::ids::WorkspaceId;
use crate::templates::{self, Rendered, TemplateError, TemplateSource};
use crate::usecases::Tidings;
use crate::{Error, Result};

/// The default of [`CoreConfig::render_threads`](crate::usecases::CoreConfig::render_threads):
/// one per core this process may use, and at least two (one more than
/// [`default_render_threads_per_workspace`], so that another workspace always finds one).
pub fn default_render_threads() -> usize {
    cores().max(2)
}

/// The default of
/// [`CoreConfig::render_threads_per_workspace`](crate::usecases::CoreConfig::render_threads_per_workspace):
/// one less than the cores this process may use, and at least one, so that one workspace's
/// renders leave a core to the executor.
pub fn default_render_threads_per_workspace() -> usize {
    cores().saturating_sub(1).max(1)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The permits of the renders that may run at once, and the workspaces waiting for one.
#[derive(Debug, Clone)]
pub(crate) struct RenderPool {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    per_workspace: usize,
    /// A std mutex, never held across an `.await`.
    turns: Mutex<Turns>,
}

/// Who runs and who waits.
#[derive(Debug, Default)]
struct Turns {
    /// Permits not held.
    free: usize,
    /// Renders running (or handed a permit) per workspace; absent means none.
    running: HashMap<WorkspaceId, usize>,
    /// Renders waiting per workspace, oldest first; absent means none. A waiter is told its
    /// turn by a `()` on its channel, with the permit already counted as its own.
    waiting: HashMap<WorkspaceId, VecDeque<oneshot::Sender<()>>>,
    /// The workspaces in `waiting`, in turn order.
    ring: VecDeque<WorkspaceId>,
}

impl Turns {
    fn running(&self, workspace: WorkspaceId) -> usize {
        self.running.get(&workspace).copied().unwrap_or(0)
    }

    fn start(&mut self, workspace: WorkspaceId) {
        self.free -= 1;
        *self.running.entry(workspace).or_default() += 1;
    }

    /// Gives free permits to waiters, one workspace at a time in turn, skipping workspaces
    /// at their limit and waiters that gave up.
    fn hand_out(&mut self, per_workspace: usize) {
        while self.free > 0 {
            let Some((workspace, waiter)) = self.next_waiter(per_workspace) else { return };
            // A waiter that gave up has dropped its receiver: the permit goes to the next.
            if waiter.send(()).is_ok() {
                self.start(workspace);
            }
        }
    }

    /// The oldest waiter of the first workspace in the ring below its limit; that workspace
    /// goes to the back of the ring if it has more waiting.
    fn next_waiter(&mut self, per_workspace: usize) -> Option<(WorkspaceId, oneshot::Sender<()>)> {
        for _ in 0..self.ring.len() {
            let workspace = self.ring.pop_front()?;
            if self.running(workspace) >= per_workspace {
                self.ring.push_back(workspace);
                continue;
            }
            // The ring holds exactly the workspaces in `waiting`.
            let Some(queue) = self.waiting.get_mut(&workspace) else { continue };
            let waiter = queue.pop_front();
            if queue.is_empty() {
                self.waiting.remove(&workspace);
            } else {
                self.ring.push_back(workspace);
            }
            if let Some(waiter) = waiter {
                return Some((workspace, waiter));
            }
        }
        None
    }
}

impl RenderPool {
    /// A pool running at most `threads` renders at once (at least one), at most
    /// `per_workspace` of one workspace (at least one, at most `threads`).
    pub(crate) fn new(threads: usize, per_workspace: usize) -> Self {
        let threads = threads.max(1);
        let turns = Turns { free: threads, ..Turns::default() };
        Self { shared: Arc::new(Shared { per_workspace: per_workspace.clamp(1, threads), turns: Mutex::new(turns) }) }
    }

    /// Runs `work` of `workspace` on a blocking thread once it has a permit.
    async fn run<T, F>(&self, workspace: WorkspaceId, work: F) -> Result<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let permit = self.permit(workspace).await?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await
        .map_err(|e| Error::Internal(crate::Cause::context("a template render did not finish", e)))
    }

    /// Waits for a permit for `workspace`: at once if one is free and the workspace is below
    /// its limit with nothing queued before, else in its workspace's queue until its turn.
    async fn permit(&self, workspace: WorkspaceId) -> Result<Permit> {
        let turn = {
            let mut turns = self.turns();
            let queued = turns.waiting.contains_key(&workspace);
            if turns.free > 0 && !queued && turns.running(workspace) < self.shared.per_workspace {
                turns.start(workspace);
                None
            } else {
                let (tell, told) = oneshot::channel();
                turns.waiting.entry(workspace).or_default().push_back(tell);
                if !queued {
                    turns.ring.push_back(workspace);
                }
                Some(told)
            }
        };
        let Some(told) = turn else { return Ok(Permit { pool: self.clone(), workspace }) };
        let mut waiting = Waiting { pool: self.clone(), workspace, told, got: false };
        match (&mut waiting.told).await {
            Ok(()) => {
                waiting.got = true;
                Ok(Permit { pool: self.clone(), workspace })
            }
            // The sender lives in the pool's state, which `waiting` keeps alive.
            Err(_) => Err(Error::Unavailable("the template renderer is closed".into())),
        }
    }

    /// Gives back a permit of `workspace` and hands free ones to the next waiters.
    fn release(&self, workspace: WorkspaceId) {
        let mut turns = self.turns();
        if let Some(n) = turns.running.get_mut(&workspace) {
            *n -= 1;
            if *n == 0 {
                turns.running.remove(&workspace);
            }
        }
        turns.free += 1;
        turns.hand_out(self.shared.per_workspace);
    }

    fn turns(&self) -> MutexGuard<'_, Turns> {
        // Every update is complete before the lock is released, so a poisoned lock is
        // consistent.
        self.shared.turns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running render's permit; dropping it gives the permit back.
#[derive(Debug)]
struct Permit {
    pool: RenderPool,
    workspace: WorkspaceId,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.pool.release(self.workspace);
    }
}

/// A render waiting for its turn. Dropped before it `got` the permit (its request was
/// abandoned), it gives back a permit that was handed to it meanwhile.
struct Waiting {
    pool: RenderPool,
    workspace: WorkspaceId,
    told: oneshot::Receiver<()>,
    got: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.got {
            return;
        }
        // After `close`, no turn can be handed to this waiter any more; one handed before is
        // in the channel, counted as this waiter's.
        self.told.close();
        if self.told.try_recv().is_ok() {
            self.pool.release(self.workspace);
        }
    }
}

/// A template's parts, owned so that they can go to another thread.
#[derive(Debug, Clone)]
pub(crate) struct OwnedSource {
    pub(crate) subject: String,
    pub(crate) html: Option<String>,
    pub(crate) text: Option<String>,
}

impl OwnedSource {
    fn borrow(&self) -> TemplateSource<'_> {
        TemplateSource { subject: &self.subject, html: self.html.as_deref(), text: self.text.as_deref() }
    }
}

impl Tidings {
    /// Compiles and renders `source` with `variables` in the render pool, in `workspace`'s
    /// turn.
    pub(crate) async fn render_in_pool(
        &self,
        workspace: WorkspaceId,
        source: OwnedSource,
        variables: Map<String, Value>,
    ) -> Result<Rendered> {
        let rendered = self.render_pool.run(workspace, move || templates::render(&source.borrow(), &variables)).await?;
        Ok(rendered?)
    }

    /// Compiles `source` in the render pool, in `workspace`'s turn (a template version being
    /// created).
    pub(crate) async fn check_syntax_in_pool(&self, workspace: WorkspaceId, source: OwnedSource) -> Result<()> {
        let checked: std::result::Result<(), TemplateError> =
            self.render_pool.run(workspace, move || templates::check_syntax(&source.borrow())).await?;
        Ok(checked?)
    }
}

#[cfg(test)]
#[path = "render_pool_tests.rs"]
mod tests;
