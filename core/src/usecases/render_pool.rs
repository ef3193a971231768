//! Where templates are compiled and rendered: on tokio's blocking threads, at
//! most [`CoreConfig::render_threads`] at once, never on the async executor.
//!
//! A render is CPU work bounded by the template work budget (`templates` module docs), not
//! I/O: run on an executor thread, a few costly renders in parallel stall every other
//! request of the process, `/healthz` included. Here a render first waits (asynchronously)
//! for one of `render_threads` permits and then runs with `spawn_blocking`; the permit goes
//! with the blocking task, so a render whose request was abandoned still counts until it
//! ends. The default leaves one core to the executor.
//!
//! [`CoreConfig::render_threads`]: crate::usecases::CoreConfig::render_threads

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use crate::templates::{self, Rendered, TemplateError, TemplateSource};
use crate::usecases::Tidings;
use crate::{Error, Result};

/// The default of [`CoreConfig::render_threads`](crate::usecases::CoreConfig::render_threads):
/// one less than the cores this process may use, and at least one.
pub fn default_render_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1)).max(1)
}

/// The permits of the renders that may run at once.
#[derive(Debug, Clone)]
pub(crate) struct RenderPool {
    permits: Arc<Semaphore>,
}

impl RenderPool {
    /// A pool running at most `threads` renders at once (at least one).
    pub(crate) fn new(threads: usize) -> Self {
        Self { permits: Arc::new(Semaphore::new(threads.max(1))) }
    }

    /// Runs `work` on a blocking thread once a permit is free.
    async fn run<T, F>(&self, work: F) -> Result<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| Error::Unavailable("the template renderer is closed".into()))?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await
        .map_err(|e| Error::Internal(crate::Cause::context("a template render did not finish", e)))
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
    /// Compiles and renders `source` with `variables` in the render pool.
    pub(crate) async fn render_in_pool(&self, source: OwnedSource, variables: Map<String, Value>) -> Result<Rendered> {
        let rendered = self.render_pool.run(move || templates::render(&source.borrow(), &variables)).await?;
        Ok(rendered?)
    }

    /// Compiles `source` in the render pool (a template version being created).
    pub(crate) async fn check_syntax_in_pool(&self, source: OwnedSource) -> Result<()> {
        let checked: std::result::Result<(), TemplateError> =
            self.render_pool.run(move || templates::check_syntax(&source.borrow())).await?;
        Ok(checked?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_than_the_pool_size_runs_at_once_and_the_executor_stays_free() {
        let pool = RenderPool::new(2);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (pool, running, most) = (pool.clone(), Arc::clone(&running), Arc::clone(&most));
                tokio::spawn(async move {
                    pool.run(move || {
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
    }

    #[test]
    fn the_default_leaves_a_core_to_the_executor() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(default_render_threads(), cores.saturating_sub(1).max(1));
    }
}
