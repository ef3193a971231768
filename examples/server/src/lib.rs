//! Tidings' runnable server: reads the configuration (`config`), makes or loads the TLS
//! certificate (`tls`), opens the store (sled, or PostgreSQL shared by several nodes) and
//! wires core, DNS, the mail transport (obeying MTA-STS: `mta_sts`) and the HTTP adapter
//! (`bootstrap`), runs the background loops (core's `Runtime`: delivery, webhook delivery,
//! domain re-checks, the purges, retention), watches the store's health (`workers`), runs
//! the SMTP listeners for reports (`inbound`) and submission (`submission`), says which
//! name mail is sent under and whether it points at this host (`sending_host`), and serves
//! HTTPS until SIGTERM/SIGINT (`serve`), with `/readyz` answering 503 from the signal on.
//! What happens to mail and webhooks is logged for the operator (`oplog`). The binary's
//! `main` only calls [`cli::main`]; [`run`] is the server itself, for embedding.
//!
//! Logs go to stderr. Stdout carries only what an operator must copy: the generated
//! bootstrap key on first start, and the output of the operator subcommands.

pub mod bootstrap;
pub mod cli;
pub mod config;
pub mod data_dir;
pub mod inbound;
pub mod mta_sts;
pub mod oplog;
pub mod secret_key;
mod secret_key_command;
pub mod sending_host;
pub mod serve;
mod sites_command;
pub mod submission;
pub mod tls;
pub mod workers;

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tidings_core::delivery::{DeliverySettings, Shaping, SiteControl, WebhookSettings};
use tidings_core::runtime::{Runtime, RuntimeSettings};
use tidings_core::tracking::TrackingConfig;
use tidings_http::{ApiState, HttpConfig, Metrics, router};
use tokio::sync::watch;

pub use config::{Config, ConfigError};

/// How long shutdown waits for in-flight requests.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Why the server could not start or an operator command failed.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A setting is unusable; the message names it.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be opened.
    #[error("cannot open the store at {path}: {reason}")]
    Store {
        /// Its directory.
        path: String,
        /// Why.
        reason: String,
    },
    /// The store's secrets were sealed with another key than the configured one.
    #[error(
        "cannot open the store at {store}: its secrets were sealed with another key than {key}. Start with \
         the key it was sealed with: TIDINGS_SECRET_KEY, TIDINGS_SECRET_KEY_FILE, or the secret.key of the \
         data dir it was used with"
    )]
    WrongSecretKey {
        /// The store (sled directory or database URL, password masked).
        store: String,
        /// Where the key given came from.
        key: String,
    },
    /// The listener could not be bound.
    #[error("cannot listen on {addr} (TIDINGS_LISTEN): {source}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// A use case refused or failed.
    #[error(transparent)]
    Core(#[from] tidings_core::Error),
    /// A store call failed.
    #[error("store error: {0}")]
    StoreCall(#[from] tidings_core::ports::StoreError),
    /// The inbound SMTP listener could not be bound.
    #[error("cannot listen on {addr} (TIDINGS_INBOUND_SMTP_LISTEN): {source}")]
    InboundBind {
        /// The configured address.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// An SMTP submission listener could not be bound.
    #[error("cannot listen on {addr} ({var}): {source}")]
    SubmissionBind {
        /// The variable that configured it.
        var: &'static str,
        /// The configured address.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// The metrics listener could not be bound.
    #[error("cannot listen on {addr} (TIDINGS_METRICS_LISTEN): {source}")]
    MetricsBind {
        /// The configured address.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// The webhook sender could not be set up (e.g. no usable TLS root certificates).
    #[error("cannot set up the webhook sender: {0}")]
    WebhookSender(String),
    /// The PostgreSQL store could not be opened or migrated.
    #[error("cannot open the PostgreSQL store at {url} (TIDINGS_DATABASE_URL): {reason}")]
    Database {
        /// `TIDINGS_DATABASE_URL`, password masked.
        url: String,
        /// Why, password masked.
        reason: String,
    },
    /// An operator command was given something unusable.
    #[error("{0}")]
    Operator(String),
    /// The embedded store failed while serving (a flush to disk failed or stalled, e.g. the
    /// disk is full): the server stopped so that a supervisor restarts it, and the restarted
    /// store recovers exactly what was durable.
    #[error("the store failed, stopping so that the server is restarted: {0}")]
    StoreFailed(String),
}

impl ServerError {
    /// Configuration errors exit with 2, a failed store with 75 (`EX_TEMPFAIL`: restart
    /// me), everything else with 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Config(_) | Self::WrongSecretKey { .. } => 2,
            Self::StoreFailed(_) => 75,
            _ => 1,
        }
    }
}

/// Runs the server until `shutdown` completes: TLS, store (sled, or PostgreSQL with
/// `TIDINGS_DATABASE_URL`), first-start bootstrap, the background loops (delivery, webhooks,
/// domain re-checks, Idempotency-Key purge), the bounce and submission listeners when
/// configured, and the HTTPS listener. Prints `listening on https://ADDR` on stderr once
/// bound (with the real port when `TIDINGS_LISTEN` has port 0) and, on a first start
/// without `TIDINGS_BOOTSTRAP_KEY`, `bootstrap key: tid_…` once on stdout.
pub async fn run(config: Config, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServerError> {
    data_dir::prepare(&config)?;
    let tls = tls::load(&config)?;
    tracing::info!(
        path = %tls.cert_path.display(),
        sha256 = %tls.fingerprint,
        self_signed = tls.self_signed,
        "TLS certificate"
    );
    let dns = bootstrap::dns(&config)?;
    let mailer = bootstrap::mailer(&config, dns.clone())?;
    sending_host::announce(&config, dns.clone());
    if let Some(warning) = config.spf_warning() {
        tracing::warn!("{warning}");
    }
    for warning in config.risky_settings() {
        tracing::warn!("{warning}");
    }
    let webhook_sender = bootstrap::webhook_sender(&config, dns.clone())?;
    let file_fetcher = bootstrap::file_fetcher(&config, dns.clone())?;
    let bootstrap::OpenStore { store, limits, .. } = bootstrap::open_store(&config).await?;
    // Bound before core is made: tracking links default to the address actually bound.
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServerError::Bind { addr: config.listen, source })?;
    let local = listener.local_addr().map_err(|source| ServerError::Bind { addr: config.listen, source })?;
    let public_url = match &config.public_url {
        Some(url) => url.clone(),
        None => tidings_core::tracking::PublicUrl::parse(&format!("https://{local}"))
            .map_err(|e| ServerError::Config(ConfigError::new("TIDINGS_PUBLIC_URL", None, e.to_string())))?,
    };
    let tracking = TrackingConfig { public_url, key: bootstrap::tracking_key(&config, &*store).await? };
    // One registry for the process: core reports events into it, the router serves it.
    let metrics = Arc::new(Metrics::new());
    let return_paths = bootstrap::SignedReturnPaths::of(&config, &*store).await?;
    // Core tells both of every event: the metrics count it, the operator's log names it.
    let core = bootstrap::core_with_tracking(&config, store, dns, Some(tracking), return_paths)
        .with_observer(metrics.clone())
        .with_observer(Arc::new(oplog::OperatorLog));
    if let Some(key) = bootstrap::ensure_default_workspace(&core, config.bootstrap_key.clone()).await? {
        let mut stdout = std::io::stdout().lock();
        // Nothing else is ever written to stdout by the server, so this line is easy to
        // capture; if stdout is gone the key is lost, which the operator must hear about.
        if writeln!(stdout, "bootstrap key: {}", key.expose()).and_then(|()| stdout.flush()).is_err() {
            tracing::error!("could not print the generated bootstrap key; create a new workspace with the CLI");
        }
    }

    // Plain eprintln, not a log event: scripts and tests wait for this line whatever
    // TIDINGS_LOG filters out.
    eprintln!("listening on https://{local}");

    let (stop_tx, stop_rx) = watch::channel(false);
    // Direct delivery admits mail by site (contract §12), counted in the same limits as the
    // keys' (shared by every node on PostgreSQL); a relay shapes its own delivery.
    let shaping = (config.delivery.mode == config::Delivery::Mx)
        .then(|| Shaping::new(Arc::new(config.delivery.shaping.clone()), limits.clone()));
    let delivery = DeliverySettings {
        schedule: config.delivery.retry_schedule.clone(),
        // The transports give up on one message after their total timeout; the worker's own
        // cut-off (and with it the lease) must be longer.
        send_timeout: config.delivery.smtp_timeout + Duration::from_secs(10),
        lease_margin: config.lease_margin,
        shaping: shaping.clone(),
        ..DeliverySettings::default()
    };
    let webhooks = WebhookSettings {
        schedule: config.webhook_retry_schedule.clone(),
        // The sender gives up after its 10 s itself and says why; core's cut-off
        // is only the backstop, so it must not race the sender's.
        post_timeout: bootstrap::WEBHOOK_TIMEOUT + Duration::from_secs(5),
        lease_margin: config.lease_margin,
        ..WebhookSettings::default()
    };
    let settings = RuntimeSettings {
        delivery,
        webhooks,
        retention_interval: config.retention_interval,
        limits: Some(limits.clone()),
        ..RuntimeSettings::default()
    };
    // `TIDINGS_DELIVERY=hold` has no mailer: messages are accepted and stay Queued.
    let runtime = Runtime::start(core.clone(), mailer, Some(webhook_sender), settings).await;
    // Bounce and complaint reports: served until shutdown like the HTTPS listener.
    // Config refuses a listener without a return path to take reports at.
    let inbound = match config.inbound_smtp_listen {
        Some(addr) => {
            let domain = config.delivery.return_path_domain.clone();
            let auth = bootstrap::message_auth(&config)?;
            let listener =
                inbound::bind(addr, domain, &config.smtp_limits, &config.inbound, core.clone(), auth).await?;
            let mut stop = stop_rx.clone();
            Some(tokio::spawn(listener.serve(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })))
        }
        None => None,
    };
    // SMTP submission, with STARTTLS and with implicit TLS: served until shutdown like the others.
    // Listeners besides HTTPS (SMTP submission, metrics), stopped with the background loops.
    let mut submission = Vec::new();
    for (addr, implicit_tls) in [(config.submission_listen, false), (config.submission_tls_listen, true)] {
        let Some(addr) = addr else { continue };
        let listener =
            submission::bind(addr, implicit_tls, &tls.server_config, &config.smtp_limits, core.clone(), limits.clone())
                .await?;
        let mut stop = stop_rx.clone();
        submission.push(tokio::spawn(listener.serve(async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        })));
    }
    // The operator's view of the sites, for the API and the dashboard alike.
    let sites = shaping.map(|shaping| SiteControl::new(shaping, core.store().clone()));
    let http = HttpConfig {
        max_body_bytes: config.max_body_bytes,
        max_send_body_bytes: config.max_send_body_bytes,
        max_body_bytes_in_flight: config.max_body_bytes_in_flight,
        trusted_proxies: config.trusted_proxies.clone(),
        metrics_token: config.metrics_token.clone(),
        operator_token: config.operator_token.clone(),
        sites: sites.clone(),
        serve_metrics: config.metrics_listen.is_none(),
        ..HttpConfig::default()
    };
    if config.metrics_token.is_none() && config.metrics_listen.is_none() && !config.listen.ip().is_loopback() {
        tracing::warn!(
            "/metrics is served without a token on {}: set TIDINGS_METRICS_TOKEN or TIDINGS_METRICS_LISTEN",
            config.listen
        );
    }
    let core_for_dashboard = core.clone();
    let watched = core.store().clone();
    let state = ApiState::with_limits(core, http, limits).with_metrics(metrics).with_file_fetcher(file_fetcher);
    let drain = state.drain();
    // `/metrics` on a plain-HTTP listener of its own, served until shutdown like the others.
    if let Some(addr) = config.metrics_listen {
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|source| ServerError::MetricsBind { addr, source })?;
        let local = listener.local_addr().map_err(|source| ServerError::MetricsBind { addr, source })?;
        eprintln!("metrics listening on http://{local}");
        let app = tidings_http::metrics_router(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
        let mut stop = stop_rx.clone();
        submission.push(tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            };
            if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stopped).await {
                tracing::warn!("the metrics listener failed: {e}");
            }
        }));
    }
    let app = if config.dashboard {
        router(state.clone())
            .merge(dashboard_router(&config, &state, core_for_dashboard, sites))
            .layer(axum::middleware::from_fn(tidings_dashboard::pages_for_browsers))
    } else {
        router(state)
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config);
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel();
    // From the signal on `/readyz` answers 503; load balancers notice within their probe
    // interval, which `TIDINGS_SHUTDOWN_DELAY` covers by accepting a while longer. A failed
    // store stops at once: it answers nothing but 503 any more.
    let delay = config.shutdown_delay;
    let stop = async move {
        tokio::select! {
            () = shutdown => {
                drain.start();
                if !delay.is_zero() {
                    tracing::info!("shutting down: /readyz answers 503; still accepting for {delay:?}");
                    tokio::time::sleep(delay).await;
                }
            }
            reason = workers::store_failure(watched) => {
                drain.start();
                tracing::error!("the store failed, stopping so that the server is restarted: {reason}");
                let _ = failed_tx.send(reason);
            }
        }
    };
    serve::serve(listener, acceptor, app, stop, SHUTDOWN_GRACE, &config.connections).await;

    let _ = stop_tx.send(true);
    runtime.shutdown().await;
    for task in inbound.into_iter().chain(submission) {
        let _ = task.await;
    }
    // Every handle on the store (core, router, connection tasks) is gone once the tasks end;
    // the last drop flushes sled (PostgreSQL has committed each write already). Connections
    // that outlived the grace period hold a handle until the runtime drops their tasks, which
    // still happens before the process exits.
    if let Ok(reason) = failed_rx.await {
        return Err(ServerError::StoreFailed(reason.to_string()));
    }
    tracing::info!("stopped");
    Ok(())
}

/// The web dashboard (`TIDINGS_DASHBOARD`), counting failed sign-ins and sends in the API's
/// own limits, seeing clients through the same trusted proxies, offering each message's
/// `.eml` when the transport is the outbox, and, with `TIDINGS_OPERATOR_TOKEN`, the
/// operator's pages over the same `sites` as the operator API.
fn dashboard_router(
    config: &Config,
    api: &ApiState,
    core: tidings_core::usecases::Tidings,
    sites: Option<SiteControl>,
) -> axum::Router {
    let outbox = (config.delivery.mode == config::Delivery::Outbox).then(|| {
        tidings_dashboard::Outbox::new(config.outbox_dir(), |message| {
            let provider_id = message.provider_message_id.as_deref()?;
            Some(tidings_transport_smtp::OutboxMailer::file_name(message.id, provider_id))
        })
    });
    let settings = tidings_dashboard::DashboardConfig {
        trusted_proxies: config.trusted_proxies.clone(),
        outbox,
        operator_token: config.operator_token.clone(),
        sites,
        ..tidings_dashboard::DashboardConfig::default()
    };
    let state = tidings_dashboard::DashboardState::new(core, api.limits(), settings).with_budget(api.memory_budget());
    tidings_dashboard::router(state)
}

/// Registers for SIGTERM and SIGINT now (so a signal that arrives while starting is not
/// fatal) and returns a future that completes on the first of them. Needs a Tokio runtime.
#[cfg(unix)]
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM received"),
            _ = interrupt.recv() => tracing::info!("SIGINT received"),
        }
    })
}

/// Ctrl-C only, where there are no Unix signals.
#[cfg(not(unix))]
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
