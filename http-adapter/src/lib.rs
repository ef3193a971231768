//! Tidings' REST API (docs/api.md) as an axum router over hyper.
//!
//! [`router`] returns an `axum::Router` — a `tower::Service` — so an application can serve it
//! alone or nest it in its own axum/tower/hyper stack. Handlers translate HTTP to the use
//! cases of `tidings-core` and back; every rule lives in core. Errors become the API's
//! envelope in one place (`error.rs`).
//!
//! `GET /v1/openapi.json` serves the OpenAPI 3.1 document of the whole API, derived with utoipa
//! from the request and response types and the handlers (`openapi`); [`served_routes`] lists
//! what the router serves, so tests can hold the two together.
//!
//! Resend's emails, domains and API keys are served under `/resend` (`compat::resend`) and
//! Postmark's email API under `/postmark` (`compat::postmark`;
//! docs/api.md#switching-from-resend-or-postmark) over the same use cases, in their shapes and
//! error bodies; they are not in the OpenAPI document (docs/decisions.md says why).
//!
//! `GET /metrics` exports this process's counters in the Prometheus text format ([`metrics`]);
//! `GET /readyz` answers 503 once the server starts shutting down ([`Drain`]).
//!
//! Every response carries `X-Request-Id` (the client's, when well-formed, else a new ULID),
//! and what is logged while handling a request is inside a `request` span with that id.
//!
//! Serve it with `into_make_service_with_connect_info::<SocketAddr>()` so the failed-auth
//! throttle sees client addresses; without it all clients share one throttle bucket. Behind
//! a load balancer, name it in [`HttpConfig::trusted_proxies`] so that the client is read
//! from `X-Forwarded-For` ([`ClientIp`]).
//!
//! Mounted under a path of the application's, and called like any tower service:
//!
//! ```
//! use std::sync::Arc;
//! use axum::body::Body;
//! use axum::http::{Request, StatusCode};
//! use tidings_core::ports::{NoDns, SystemClock, SystemRandom};
//! use tidings_core::usecases::{CoreConfig, Tidings};
//! use tidings_http::{ApiState, HttpConfig};
//! use tower::ServiceExt as _;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = Arc::new(tidings_testing::MemoryStore::new()); // or sled, or PostgreSQL
//! let core = Tidings::new(store, Arc::new(SystemClock), Arc::new(SystemRandom), Arc::new(NoDns), CoreConfig::default());
//! let (_, key) = core.workspaces().create("acme", None).await.unwrap();
//! let api = tidings_http::router(ApiState::new(core, HttpConfig::default()));
//! let app = axum::Router::new().nest_service("/mail", api);
//!
//! let request = Request::get("/mail/v1/domains")
//!     .header("authorization", format!("Bearer {}", key.plaintext.expose()))
//!     .body(Body::empty())
//!     .unwrap();
//! let response = app.clone().oneshot(request).await.unwrap();
//! assert_eq!(response.status(), StatusCode::OK);
//!
//! // Without a key: 401 in the API's error envelope.
//! let response = app.oneshot(Request::get("/mail/v1/domains").body(Body::empty()).unwrap()).await.unwrap();
//! assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
//! # });
//! ```

mod auth;
mod body;
mod budget;
mod client_addr;
mod compat;
mod envelope;
mod error;
mod head;
mod json;
mod logged_path;
pub mod metrics;
mod openapi;
mod operator;
mod path;
mod query;
mod rate_limit;
mod request_id;
mod routes;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tidings_core::ports::{FileFetcher, Limits, NoFileFetcher};
use tidings_core::usecases::{AuthThrottleConfig, LocalLimits, MetricsToken, Tidings};

pub use body::{BodyError, ConnectionUploads, DEFAULT_MAX_BODY_BYTES_IN_FLIGHT, receive};
pub use budget::{Claim, MemoryBudget, Owner, Refusal};
pub use client_addr::{ClientIp, TrustedProxies};
pub use envelope::{ErrorCode, failure_body};
pub use error::{ApiError, ApiResult};
pub use head::{MAX_HEADER_LIST_BYTES, MAX_URI_BYTES};
pub use metrics::Metrics;
pub use request_id::REQUEST_ID;
pub use routes::{Unrouted, loggable_path, metrics_router, router, served_routes};

/// Default of [`HttpConfig::max_send_body_bytes`]: 56 MiB.
pub const DEFAULT_MAX_SEND_BODY_BYTES: usize = 56 * 1024 * 1024;

/// Settings of the HTTP layer.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Largest accepted request body (10 MiB by default).
    pub max_body_bytes: usize,
    /// Largest body of `POST /v1/messages`, which may carry 40 MiB of base64 attachments
    /// (default 56 MiB: those, 10 MiB of bodies and JSON around them). The larger of this and
    /// `max_body_bytes` applies to that route.
    pub max_send_body_bytes: usize,
    /// Most request-body (and large response) bytes held at once, all requests together, one
    /// workspace or client address at most half of it ([`MemoryBudget`]); a body that does
    /// not fit is answered 503 with `Retry-After`. At least the larger body limit, or such a
    /// body could never be served.
    pub max_body_bytes_in_flight: usize,
    /// Longest a request may take before it is answered 503.
    pub request_timeout: Duration,
    /// Failed-auth throttle (docs/api.md#failed-authentication-throttle), for the limits
    /// [`ApiState::new`] makes.
    pub auth_throttle: AuthThrottleConfig,
    /// Proxies whose `X-Forwarded-For` names the client (default: none, the TCP peer is the
    /// client).
    pub trusted_proxies: TrustedProxies,
    /// When set, `/metrics` answers only a scraper presenting this token as
    /// `Authorization: Bearer <token>` (401 otherwise).
    pub metrics_token: Option<MetricsToken>,
    /// Whether [`router`] serves `/metrics`. Off by default: a router nested in an
    /// application's own must not export the service's counters to whoever reaches that
    /// application unless the embedder chose to (with [`metrics_token`](Self::metrics_token)
    /// set, or behind its own guard). The server turns it on unless [`metrics_router`] serves
    /// them on a listener of its own.
    pub serve_metrics: bool,
    /// When set, the operator's API under `/v1/operator` (the delivery sites: list, suspend,
    /// resume) answers a client presenting this token as `Authorization: Bearer`; unset,
    /// those paths are not served.
    pub operator_token: Option<MetricsToken>,
    /// The delivery sites, when the server delivers directly (`mx` mode): shown by the
    /// operator's API and as gauges in `/metrics`.
    pub sites: Option<tidings_core::delivery::SiteControl>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 10 * 1024 * 1024,
            max_send_body_bytes: DEFAULT_MAX_SEND_BODY_BYTES,
            max_body_bytes_in_flight: DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
            request_timeout: Duration::from_secs(30),
            auth_throttle: AuthThrottleConfig::default(),
            trusted_proxies: TrustedProxies::default(),
            metrics_token: None,
            serve_metrics: false,
            operator_token: None,
            sites: None,
        }
    }
}

/// Whether the server is shutting down. Once [`Drain::start`] is called, `GET /readyz`
/// answers 503 so that load balancers stop sending new requests while in-flight ones finish.
#[derive(Debug, Clone, Default)]
pub struct Drain(Arc<AtomicBool>);

impl Drain {
    /// Marks the server as shutting down (for good).
    pub fn start(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether [`Self::start`] was called.
    pub fn is_draining(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// What every handler shares: the service, the limits, the metrics and the drain flag.
#[derive(Clone)]
pub struct ApiState {
    pub(crate) core: Tidings,
    pub(crate) limits: Arc<dyn Limits>,
    pub(crate) config: Arc<HttpConfig>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) drain: Drain,
    pub(crate) body_budget: MemoryBudget,
    /// Fetches the files Resend's attachment `path` names; by default none is fetched.
    pub(crate) file_fetcher: Arc<dyn FileFetcher>,
}

impl ApiState {
    /// State for [`router`], with this process's own limits ([`LocalLimits`]): right for a
    /// single node.
    pub fn new(core: Tidings, config: HttpConfig) -> Self {
        let limits = Arc::new(LocalLimits::new(config.auth_throttle));
        Self::with_limits(core, config, limits)
    }

    /// State for [`router`] with limits kept elsewhere, e.g. in the database that several
    /// nodes share (`config.auth_throttle` is then the limits' business).
    pub fn with_limits(core: Tidings, config: HttpConfig, limits: Arc<dyn Limits>) -> Self {
        let metrics = Arc::new(Metrics::new());
        let largest = config.max_body_bytes.max(config.max_send_body_bytes);
        let body_budget = MemoryBudget::new(config.max_body_bytes_in_flight, largest, config.request_timeout);
        let file_fetcher = Arc::new(NoFileFetcher);
        Self { core, limits, config: Arc::new(config), metrics, drain: Drain::default(), body_budget, file_fetcher }
    }

    /// The same state fetching the files a Resend attachment names by `path` with `fetcher`
    /// (the server gives it `tidings_webhook_http::HttpFileFetcher`, behind the webhooks' SSRF
    /// guard). Without this call such an attachment is refused with a 422 naming it.
    pub fn with_file_fetcher(mut self, fetcher: Arc<dyn FileFetcher>) -> Self {
        self.file_fetcher = fetcher;
        self
    }

    /// The same state exporting `metrics` at `/metrics` and counting requests into it; give
    /// core the same ([`Tidings::with_observer`]) so that message events are counted too.
    /// Without this call the router has metrics of its own, without core's events.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The limits this state counts failed authentications and send tokens in, for another
    /// front end on the same listener (the dashboard) to count in the same ones.
    pub fn limits(&self) -> Arc<dyn Limits> {
        Arc::clone(&self.limits)
    }

    /// The memory budget this state's requests count in, for another front end on the same
    /// listener (the dashboard) to count in the same one.
    pub fn memory_budget(&self) -> MemoryBudget {
        self.body_budget.clone()
    }

    /// The drain flag of this state's routers: start it when shutting down.
    pub fn drain(&self) -> Drain {
        self.drain.clone()
    }
}
