//! Tidings inside your own axum service, set up to keep running: state in a data directory
//! that survives restarts, secrets sealed with a key kept apart from it, the workspace,
//! domain and template found again at every start, a public route that sends under a rate
//! limit, a reaction to each delivered or bounced email that misses none across restarts
//! (the event feed, no webhooks), the API and its metrics under `/mail`, logs through
//! `tracing`, and a clean stop on SIGTERM. `cargo run -p tidings-example-embed-production`, configured by:
//!
//! - `TIDINGS_DATA_DIR`: the data directory (default `./tidings-data`); the store in it is
//!   made owner-only by the store.
//! - `TIDINGS_SEALING_KEY_FILE`: the sealing key (base64), made owner-only on the first
//!   start when absent. Back it up apart from the data: without it the store's DKIM keys
//!   and webhook secrets cannot be opened.
//! - `TIDINGS_RELAY_URL`: your provider's relay, e.g. `smtps://user:password@smtp.example.net`.
//! - `TIDINGS_DOMAIN`: the sending domain (default `example.com`).
//! - `TIDINGS_DNS`: `system` (the default: domains verify once their records are published)
//!   or `static` for development (the records are taken as published, so the domain
//!   verifies without a DNS host; never in production).
//! - `TIDINGS_LISTEN` (default `127.0.0.1:3000`), `TIDINGS_METRICS_TOKEN` (a scraper's
//!   bearer token for `/mail/metrics`), `RUST_LOG` (default `info`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use tidings_core::email::{EmailAddress, Mailbox};
use tidings_core::ids::TemplateId;
use tidings_core::inprocess::{Content, Email, TemplateBody, WorkspaceHandle};
use tidings_core::model::{DomainStatus, EventType, RateLimit};
use tidings_core::ports::{DnsCheck, StaticDns, SystemClock, SystemRandom};
use tidings_core::runtime::{Runtime, RuntimeSettings};
use tidings_core::sealing::Sealer;
use tidings_core::usecases::{
    Admission, CoreConfig, DEFAULT_WORKSPACE_NAME, FeedCursor, LocalLimits, MetricsToken, Tidings,
};
use tidings_dns::HickoryDns;
use tidings_http::{ApiError, ApiState, HttpConfig, Metrics};
use tidings_storage_sled::{KeyOrigin, SledStore, load_or_create_sealing_key};
use tidings_transport_smtp::{RelayConfig, RelayMailer};
use tracing_subscriber::EnvFilter;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Welcome emails the public may cause, per second.
const SIGNUPS_PER_SEC: u32 = 5;

#[tokio::main]
async fn main() -> Result<(), Error> {
    // Logs to stderr: stdout carries the ready and listening lines.
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    // The store's directory is made owner-only by the store itself, the key file is created
    // owner-only: both hold what nobody else on the machine may read.
    let data = PathBuf::from(env_or("TIDINGS_DATA_DIR", "tidings-data"));
    let (key, origin) =
        load_or_create_sealing_key(Path::new(&env_or("TIDINGS_SEALING_KEY_FILE", "tidings-sealing.key")))?;
    if origin == KeyOrigin::Generated {
        tracing::warn!("generated a new sealing key: back it up apart from the data directory");
    }
    let store = Arc::new(SledStore::open(data.join("store"), Sealer::new(&key))?);

    // DNS: the system's resolver, or for development a static one that vouches for the
    // records this service asks for.
    let resolver = Arc::new(HickoryDns::system()?);
    let development_dns = (env_or("TIDINGS_DNS", "system") == "static").then(|| Arc::new(StaticDns::default()));
    let dns: Arc<dyn DnsCheck> = match &development_dns {
        Some(dns) => dns.clone(),
        None => resolver,
    };

    // Events counted for /mail/metrics (an observer: any number may listen).
    let metrics = Arc::new(Metrics::new());
    let core = Tidings::new(store, Arc::new(SystemClock), Arc::new(SystemRandom), dns, CoreConfig::default())
        .with_observer(metrics.clone());
    let mailer = RelayMailer::new(&RelayConfig::from_url(&std::env::var("TIDINGS_RELAY_URL")?)?)?;
    // No webhook sender: this service has no webhook endpoints (it reads the event feed).
    let runtime = Runtime::start(core.clone(), Some(Arc::new(mailer)), None, RuntimeSettings::default()).await;

    // Found again at every start, made on the first: no keys, no duplicates.
    let acme = core.ensure_workspace(DEFAULT_WORKSPACE_NAME).await?;
    let mut domain = acme.ensure_domain(&env_or("TIDINGS_DOMAIN", "example.com")).await?;
    if let Some(dns) = &development_dns {
        dns.publish_all(&domain);
    }
    if domain.status != DomainStatus::Verified {
        domain = core.domains().verify(acme.principal(), domain.id).await?;
    }
    for record in domain.records.iter().filter(|_| domain.status != DomainStatus::Verified) {
        tracing::warn!(name = %record.name, value = %record.value, "publish this TXT record");
    }
    let welcome = acme
        .upsert_template("welcome", TemplateBody::new("Welcome, {{name}}").text("Hello {{name}}, welcome aboard."))
        .await?;
    println!("ready: workspace {} domain {} ({:?}) template {}", acme.id(), domain.id, domain.status, welcome.id);
    let reactions = tokio::spawn(react_to_outcomes(acme.clone(), data.join("events.cursor")));

    // The public route sends under its own limit (one bucket for the route, 5 a second);
    // the API under /mail takes API keys and protects /mail/metrics with the token.
    let signup = Signup {
        acme: acme.with_rate_limit(RateLimit::new(SIGNUPS_PER_SEC).ok_or("a rate limit of 1 to 10,000")?),
        limits: Arc::default(),
        sender: Mailbox::parse(&format!("Acme <hello@{}>", domain.name))?,
        welcome: welcome.id,
    };
    let metrics_token = std::env::var("TIDINGS_METRICS_TOKEN").ok().map(|t| MetricsToken::parse(&t)).transpose()?;
    let api = ApiState::new(core.clone(), HttpConfig { metrics_token, serve_metrics: true, ..HttpConfig::default() })
        .with_metrics(metrics);
    let app = Router::new()
        .route("/signup", post(sign_up))
        .with_state(signup)
        .nest_service("/mail", tidings_http::router(api));

    let listener = tokio::net::TcpListener::bind(env_or("TIDINGS_LISTEN", "127.0.0.1:3000")).await?;
    println!("listening on {}", listener.local_addr()?);
    let served = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, served).with_graceful_shutdown(stop_signal()).await?;
    // Messages being delivered finish their attempt; queued ones wait for the next start.
    runtime.shutdown().await;
    reactions.abort();
    tracing::info!("stopped");
    Ok(())
}

/// What `POST /signup` needs: the workspace, the route's own limiter, the sender and the
/// template.
#[derive(Clone)]
struct Signup {
    acme: WorkspaceHandle,
    limits: Arc<LocalLimits>,
    sender: Mailbox,
    welcome: TemplateId,
}

#[derive(serde::Deserialize)]
struct SignUpForm {
    email: String,
    name: String,
}

/// `POST /signup`: a visitor signs up and gets the welcome email, at most 5 a second. Core's
/// errors become the API's error envelope through `?`.
async fn sign_up(State(signup): State<Signup>, Json(form): Json<SignUpForm>) -> Result<(StatusCode, String), ApiError> {
    let to = EmailAddress::parse(&form.email).map_err(|e| tidings_core::Error::field("email", e.to_string()))?;
    let content = Content::template(signup.welcome).variables(&serde_json::json!({ "name": form.name }))?;
    let email = Email::new(signup.sender, to, content).idempotency_key(format!("welcome-{}", form.email));
    match signup.acme.send_rate_limited(&*signup.limits, email).await? {
        Admission::Allowed(sent) => Ok((StatusCode::ACCEPTED, sent.outcome.message.id.to_string())),
        Admission::Limited { retry_after } => Err(ApiError::RateLimited { retry_after, limit: SIGNUPS_PER_SEC }),
    }
}

/// Logs each welcome email once it is delivered or bounced, exactly once per event handled:
/// the feed is read from the cursor saved after the last events handled, so what happened
/// while the service was down comes first after a restart.
async fn react_to_outcomes(acme: WorkspaceHandle, saved: PathBuf) -> Result<(), Error> {
    let cursor = std::fs::read_to_string(&saved).ok().and_then(|text| FeedCursor::parse(text.trim()));
    let mut events = acme.core().events().follow(acme.principal(), cursor);
    loop {
        for entry in events.next().await? {
            if matches!(entry.event.event_type, EventType::Delivered | EventType::Bounced) {
                let (message, outcome) = (entry.event.message_id, entry.event.event_type);
                tracing::info!(%message, ?outcome, "welcome email settled");
            }
        }
        if let Some(cursor) = events.cursor() {
            std::fs::write(&saved, cursor.to_string())?;
        }
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// SIGTERM (a service manager stopping the service) or Ctrl-C.
async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! { _ = term.recv() => {}, _ = tokio::signal::ctrl_c() => {} }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
