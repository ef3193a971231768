//! The render pool: its limits, the executor kept free, workspaces' turns, and permits given
//! back by abandoned waiters.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::*;

fn ws(n: u128) -> WorkspaceId {
    WorkspaceId(ulid::Ulid(n))
}

/// Blocking jobs wait on it until it opens.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    changed: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.changed.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.changed.notify_all();
    }
}

/// Waits (polling, without a fixed sleep) until `check` holds on the pool's state.
async fn until(pool: &RenderPool, what: &str, check: impl Fn(&Turns) -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        while !check(&pool.turns()) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    waited.await.unwrap_or_else(|_| panic!("still not the case: {what}: {:?}", pool.turns()));
}

fn waiting(turns: &Turns) -> usize {
    turns.waiting.values().map(VecDeque::len).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_than_the_pool_size_runs_at_once_and_the_executor_stays_free() {
    let pool = RenderPool::new(2, 2);
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (pool, running, most) = (pool.clone(), Arc::clone(&running), Arc::clone(&most));
            tokio::spawn(async move {
                pool.run(ws(i % 3), move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(50));
                    running.fetch_sub(1, Ordering::SeqCst);
                })
                .await
            })
        })
        .collect();
    // While eight blocking jobs are queued or running, the executor answers at once.
    let started = std::time::Instant::now();
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(started.elapsed() < Duration::from_millis(40), "the executor was held up: {:?}", started.elapsed());
    for task in tasks {
        task.await.expect("task").expect("ran");
    }
    assert_eq!(most.load(Ordering::SeqCst), 2, "at most two at once, and two did run together");
    let turns = pool.turns();
    assert_eq!((turns.free, turns.running.len(), waiting(&turns)), (2, 0, 0), "all given back: {turns:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_at_its_limit_leaves_a_thread_to_the_others() {
    let pool = RenderPool::new(2, 1);
    let gate = Arc::new(Gate::default());
    let busy: Vec<_> = (0..3)
        .map(|_| {
            let (pool, gate) = (pool.clone(), Arc::clone(&gate));
            tokio::spawn(async move { pool.run(ws(1), move || gate.wait()).await })
        })
        .collect();
    until(&pool, "one of workspace 1 runs, two wait", |t| t.running(ws(1)) == 1 && waiting(t) == 2).await;

    let other = tokio::time::timeout(Duration::from_secs(20), pool.run(ws(2), || "rendered")).await;

    assert_eq!(other.expect("the other workspace's render starts at once").expect("ran"), "rendered");
    assert_eq!(pool.turns().running(ws(1)), 1, "workspace 1 is still at its limit, with a permit free");
    gate.open();
    for task in busy {
        task.await.expect("task").expect("ran");
    }
    assert_eq!(pool.turns().free, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_workspaces_take_turns_and_each_keeps_its_order() {
    let pool = RenderPool::new(1, 1);
    let gate = Arc::new(Gate::default());
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    // Workspace 1 queues five renders, then workspace 2 one: a first-come queue would run
    // workspace 2's last.
    for (n, workspace) in [(10, 1), (11, 1), (12, 1), (13, 1), (14, 1), (20, 2)] {
        let (task_pool, gate, order) = (pool.clone(), Arc::clone(&gate), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            task_pool
                .run(ws(workspace), move || {
                    gate.wait();
                    order.lock().unwrap().push(n);
                })
                .await
        }));
        let queued = tasks.len();
        until(&pool, "queued in this order", |t| t.running.len() + waiting(t) == queued).await;
    }

    gate.open();
    for task in tasks {
        task.await.expect("task").expect("ran");
    }

    assert_eq!(*order.lock().unwrap(), [10, 11, 20, 12, 13, 14], "workspace 2 has the next turn after 1's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_waiter_gives_its_turn_to_the_next() {
    let pool = RenderPool::new(1, 1);
    let gate = Arc::new(Gate::default());
    let first = {
        let (pool, gate) = (pool.clone(), Arc::clone(&gate));
        tokio::spawn(async move { pool.run(ws(1), move || gate.wait()).await })
    };
    until(&pool, "the first runs", |t| t.free == 0).await;
    let abandoned = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.run(ws(2), || ()).await })
    };
    let next = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.run(ws(3), || "next").await })
    };
    until(&pool, "two wait", |t| waiting(t) == 2).await;

    abandoned.abort();
    assert!(abandoned.await.is_err_and(|e| e.is_cancelled()));
    gate.open();

    first.await.expect("task").expect("ran");
    assert_eq!(next.await.expect("task").expect("ran"), "next");
    let turns = pool.turns();
    assert_eq!((turns.free, turns.running.len(), waiting(&turns), turns.ring.len()), (1, 0, 0, 0), "{turns:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dropped_after_its_turn_came_gives_the_permit_back() {
    let pool = RenderPool::new(1, 1);
    let held = pool.permit(ws(1)).await.expect("a free permit");
    let mut waiter = Box::pin(pool.permit(ws(2)));
    assert!(futures::poll!(&mut waiter).is_pending(), "no permit free");
    drop(held);
    assert_eq!(pool.turns().running(ws(2)), 1, "handed to the waiter, which has not looked yet");

    drop(waiter);

    let turns = pool.turns();
    assert_eq!((turns.free, turns.running.len()), (1, 0), "given back: {turns:?}");
}

#[test]
fn the_defaults_leave_a_core_to_the_executor_against_one_workspace() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(default_render_threads_per_workspace(), cores.saturating_sub(1).max(1));
    assert_eq!(default_render_threads(), cores.max(2));
    assert!(default_render_threads() > default_render_threads_per_workspace(), "one left for other workspaces");
}
