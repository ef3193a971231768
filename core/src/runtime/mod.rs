//! [`Runtime`]: every background loop a Tidings service needs, started with one call.
//!
//! The use cases accept and record; the loops make things happen afterwards: delivery of due
//! messages through a [`Mailer`], webhook deliveries through a [`WebhookSender`], re-checks of
//! domains not yet verified, and the purges of expired Idempotency-Keys, limits, dashboard
//! sessions and message content past retention. The server and an embedding application
//! start them the same way:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tidings_core::model::MessageStatus;
//! use tidings_core::ports::{NoDns, SystemClock, SystemRandom};
//! use tidings_core::runtime::{Runtime, RuntimeSettings};
//! use tidings_core::usecases::{CoreConfig, SendRequest, Tidings};
//! use tidings_testing::MemoryStore;
//! use tidings_testing::mailer::FakeMailer;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let config = CoreConfig { sandbox_sending: true, ..CoreConfig::default() };
//! let store = Arc::new(MemoryStore::new());
//! let core = Tidings::new(store, Arc::new(SystemClock), Arc::new(SystemRandom), Arc::new(NoDns), config);
//! // A mailer that keeps mail on this machine (an application's is the SMTP relay of
//! // `tidings-transport-smtp`); no webhook sender (`tidings-webhook-http`'s in a service
//! // that has webhook endpoints).
//! let mailer = Arc::new(FakeMailer::local());
//! let runtime = Runtime::start(core.clone(), Some(mailer.clone()), None, RuntimeSettings::default()).await;
//!
//! let (_, key) = core.workspaces().create("acme", None).await?;
//! let who = core.authenticate(key.plaintext.expose()).await?;
//! let request = SendRequest {
//!     to: Some("ann@example.net".into()),
//!     subject: Some("Welcome".into()),
//!     text: Some("Hello.".into()),
//!     ..SendRequest::default()
//! };
//! let id = core.messages().send(&who, request, None).await?.message.id;
//! // The delivery loop picks it up in the background.
//! while core.messages().get(&who, id).await?.status != MessageStatus::Delivered {
//!     tokio::time::sleep(Duration::from_millis(10)).await;
//! }
//! assert_eq!(mailer.sent().len(), 1);
//! runtime.shutdown().await; // waits for every loop (in-flight sends get a few seconds)
//! # Ok::<(), tidings_core::Error>(())
//! # }).unwrap();
//! ```
//!
//! [`Mailer`]: crate::ports::Mailer
//! [`WebhookSender`]: crate::ports::WebhookSender

mod loops;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::delivery::{
    DeliverySettings, DeliveryWorker, DispatchSettings, WebhookDispatcher, WebhookSettings, WebhookWorker,
};
use crate::ports::{Limits, Mailer, WebhookSender};
use crate::usecases::Tidings;

/// How the loops run.
#[derive(Clone)]
pub struct RuntimeSettings {
    /// Delivery: retry schedule, batch, concurrency, timeouts, lease.
    pub delivery: DeliverySettings,
    /// Webhook deliveries: retry schedule, timeouts, lease.
    pub webhooks: WebhookSettings,
    /// How many webhook POSTs run at once, in all, per endpoint and per workspace.
    pub dispatch: DispatchSettings,
    /// How often message content past retention is purged (when the core's retention is
    /// set).
    pub retention_interval: Duration,
    /// Limits whose stale entries are purged periodically (the PostgreSQL limits keep rows;
    /// in memory, the key and client tables bound themselves and idle delivery sites are
    /// forgotten here). `None` purges none.
    pub limits: Option<Arc<dyn Limits>>,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self {
            delivery: DeliverySettings::default(),
            webhooks: WebhookSettings::default(),
            dispatch: DispatchSettings::default(),
            retention_interval: Duration::from_secs(600),
            limits: None,
        }
    }
}

impl std::fmt::Debug for RuntimeSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeSettings")
            .field("delivery", &self.delivery)
            .field("webhooks", &self.webhooks)
            .field("dispatch", &self.dispatch)
            .field("retention_interval", &self.retention_interval)
            .field("limits", &self.limits.is_some())
            .finish()
    }
}

/// The running background loops. Dropping it without [`Runtime::shutdown`] leaves them
/// running until the Tokio runtime ends.
#[derive(Debug)]
pub struct Runtime {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Runtime {
    /// Starts every loop on the current Tokio runtime. `mailer` `None` delivers nothing
    /// (messages are accepted and stay queued: the server's `hold` mode). `webhook_sender`
    /// `None` posts no webhooks: for a service with no webhook endpoints, which then needs
    /// no HTTP client; deliveries to endpoints created anyway stay pending (the API and the
    /// dashboard show them so) until a runtime with a sender runs.
    ///
    /// On a store that only this process can have open ([`MessageStore::is_exclusive`]),
    /// messages and webhook deliveries that a previous run left leased are made due at once
    /// first, instead of waiting for their leases to end; on a shared store other processes
    /// may hold those leases for work they are doing, so they are left to expire.
    ///
    /// [`MessageStore::is_exclusive`]: crate::ports::MessageStore::is_exclusive
    pub async fn start(
        core: Tidings,
        mailer: Option<Arc<dyn Mailer>>,
        webhook_sender: Option<Arc<dyn WebhookSender>>,
        settings: RuntimeSettings,
    ) -> Self {
        let (stop, stopped) = watch::channel(false);
        let exclusive = core.store().is_exclusive();
        let mut tasks = Vec::new();
        if let Some(mailer) = mailer {
            let worker = Arc::new(DeliveryWorker::new(core.clone(), mailer, settings.delivery.clone()));
            if exclusive {
                match worker.release_leases_after_restart(core.clock().now()).await {
                    Ok(0) => {}
                    Ok(released) => tracing::info!(released, "messages left claimed by the previous run are due again"),
                    // The leases then end on their own: a reason to warn, not to refuse to start.
                    Err(e) => tracing::warn!("could not release the delivery leases of the previous run: {e}"),
                }
            }
            tasks.push(tokio::spawn(loops::deliver(worker, core.clone(), stopped.clone())));
        }
        match webhook_sender {
            Some(sender) => {
                let dispatcher = Self::webhook_dispatcher(&core, sender, &settings, exclusive).await;
                tasks.push(tokio::spawn(loops::deliver_webhooks(dispatcher, core.clone(), stopped.clone())));
            }
            None => tracing::info!("no webhook sender: webhook deliveries wait for a runtime that has one"),
        }
        let recheck_every = core.config().domain_recheck_interval.to_std().unwrap_or(Duration::from_secs(600));
        tasks.extend([
            tokio::spawn(loops::recheck_domains(core.clone(), recheck_every, stopped.clone())),
            tokio::spawn(loops::purge_idempotency_keys(core.clone(), stopped.clone())),
            tokio::spawn(loops::purge_sessions(core.clone(), stopped.clone())),
            tokio::spawn(loops::judge_reputation(core.clone(), stopped.clone())),
            tokio::spawn(loops::purge_activity(core.clone(), stopped.clone())),
            tokio::spawn(loops::purge_message_content(core.clone(), settings.retention_interval, stopped.clone())),
            tokio::spawn(loops::purge_inbound(core.clone(), settings.retention_interval, stopped.clone())),
        ]);
        if let Some(limits) = settings.limits {
            tasks.push(tokio::spawn(loops::purge_limits(limits, core, stopped)));
        }
        Self { stop, tasks }
    }

    /// The webhook worker and its dispatcher; on an exclusive store, deliveries a previous
    /// run left leased are made due first.
    async fn webhook_dispatcher(
        core: &Tidings,
        sender: Arc<dyn WebhookSender>,
        settings: &RuntimeSettings,
        exclusive: bool,
    ) -> Arc<WebhookDispatcher> {
        let webhooks = Arc::new(WebhookWorker::new(core.clone(), sender, settings.webhooks.clone()));
        if exclusive {
            match webhooks.release_leases_after_restart(core.clock().now()).await {
                Ok(0) => {}
                Ok(released) => {
                    tracing::info!(released, "webhook deliveries left claimed by the previous run are due again");
                }
                Err(e) => tracing::warn!("could not release the webhook delivery leases of the previous run: {e}"),
            }
        }
        WebhookDispatcher::new(webhooks, settings.dispatch)
    }

    /// Asks every loop to stop and waits until all have: in-flight sends and webhook POSTs
    /// get a few seconds to finish; what they leave stays leased and is done again after the
    /// next start.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            // A loop that panicked has stopped too; there is nothing left to wait for.
            let _ = task.await;
        }
    }
}
