//! Tidings' web dashboard (docs/dashboard.md): server-rendered HTML pages where a person signs in
//! with an API key and sees and does what that key may do through the API: messages and
//! their timelines, a test send, mail received and its routes, domains and their DNS
//! records, templates, suppressions, webhooks and API keys.
//!
//! [`router`] returns an `axum::Router` that the server merges beside the API router on its
//! HTTPS listener, and that an application embedding Tidings can mount the same way. Every
//! read and write goes through `tidings-core`'s use cases with the signed-in key's
//! [`Principal`](tidings_core::usecases::Principal), so the API's authorization holds here
//! unchanged: a `send` key sees its own messages and the send form, and every other page
//! answers it 403, as the API does. No rule lives here; pages translate forms to use-case
//! calls and results to HTML.
//!
//! Sessions are core's (`Tidings::sessions`: `sign_in`, `resume`, `sign_out`): the cookie holds
//! an opaque token, the store holds the session, so every node sharing a store honours it
//! and a revoked key ends it at once. What guards the pages (docs/dashboard.md has the
//! whole model):
//! - every POST is refused (403) unless its hidden `csrf` field matches the session's token,
//!   checked before anything else is read from the form (`form.rs`); a cross-site POST, told
//!   by `Sec-Fetch-Site` or `Origin`, is refused too, sign-in included;
//! - every response carries a `Content-Security-Policy` without inline script or style, and
//!   the pages load one script and one stylesheet, both compiled in ([`assets`]);
//! - an email's HTML, sent or received, is shown only in a sandboxed iframe whose document
//!   has its own policy: no script, no origin, no remote loads unless asked for, and no
//!   `<link>` or `<meta http-equiv>`, which could connect out regardless (`preview.rs`);
//!   received mail's raw bytes and attachments are only ever downloads (`pages/inbound`);
//! - maud escapes every value written into a page; nothing from a message is written raw;
//! - form bodies are bounded (64 KiB; 1 MiB for template forms) and every mistake is a page
//!   naming it, never a 500.

pub mod assets;
mod chart;
mod confirm;
mod error;
mod form;
mod headers;
mod held_body;
mod layout;
mod operator;
mod pages;
mod preview;
mod session;
mod table;
mod unrouted;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::Method;
use tidings_core::delivery::SiteControl;
use tidings_core::model::Message;
use tidings_core::ports::Limits;
use tidings_core::usecases::{MetricsToken, Tidings};
use tidings_http::TrustedProxies;

pub use form::{FORM_BODY_LIMIT, TEMPLATE_BODY_LIMIT};
pub use headers::{DOWNLOAD_CSP, MESSAGE_HTML_CSP, MESSAGE_HTML_IMAGES_CSP, PAGE_CSP};
pub use operator::OPERATOR_COOKIE;
pub use session::{SESSION_COOKIE, session_cookie};
pub use unrouted::pages_for_browsers;

/// How the signed `.eml` of a message delivered to the outbox is found: the outbox
/// directory and the rule that names a message's file, which the transport that writes
/// the files owns (`tidings_transport_smtp::OutboxMailer::file_name`).
#[derive(Clone)]
pub struct Outbox {
    dir: PathBuf,
    file_name: Arc<FileNameRule>,
}

/// The rule that names a message's file in the outbox (`None`: it has none).
type FileNameRule = dyn Fn(&Message) -> Option<String> + Send + Sync;

impl Outbox {
    /// The outbox at `dir`, whose file for a message is `file_name(message)` (`None` when the
    /// message has no file, e.g. it was never handed to the transport). Only names without a
    /// path separator or a leading dot are ever opened.
    pub fn new(
        dir: impl Into<PathBuf>,
        file_name: impl Fn(&Message) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Self { dir: dir.into(), file_name: Arc::new(file_name) }
    }

    /// The path of `message`'s file, if it has one. The name comes from the stored message,
    /// never from the request.
    pub(crate) fn path_for(&self, message: &Message) -> Option<PathBuf> {
        let name = (self.file_name)(message)?;
        let plain = !name.is_empty()
            && !name.starts_with('.')
            && !name.contains(['/', '\\', '\0'])
            && std::path::Path::new(&name).components().count() == 1;
        plain.then(|| self.dir.join(name))
    }
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// Settings of the dashboard.
#[derive(Debug, Clone)]
pub struct DashboardConfig {
    /// The proxies whose `X-Forwarded-For` names the client: the same as the API's
    /// (`TIDINGS_TRUSTED_PROXIES`), so that a failed sign-in counts for the client the API
    /// would count a failed call for.
    pub trusted_proxies: TrustedProxies,
    /// Where delivered `.eml` files are, when the transport is the outbox; `None` shows no
    /// download link.
    pub outbox: Option<Outbox>,
    /// Longest a request may take before it is answered 503.
    pub request_timeout: Duration,
    /// The operator's token (`TIDINGS_OPERATOR_TOKEN`): with it the dashboard serves the
    /// operator's pages under `/operator` (the delivery sites), to someone who signs in with
    /// it; without it those paths are not served at all.
    pub operator_token: Option<MetricsToken>,
    /// The delivery sites the operator's pages show and act on: the same `SiteControl` as
    /// the operator API's; `None` when the server does not deliver by site.
    pub sites: Option<SiteControl>,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        Self {
            trusted_proxies: TrustedProxies::default(),
            outbox: None,
            request_timeout: Duration::from_secs(30),
            operator_token: None,
            sites: None,
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct DashboardState {
    pub(crate) core: Tidings,
    pub(crate) limits: Arc<dyn Limits>,
    pub(crate) config: Arc<DashboardConfig>,
    pub(crate) budget: tidings_http::MemoryBudget,
    /// The operator's pages' side, when the operator set a token.
    pub(crate) operator: Option<operator::OperatorDesk>,
}

impl DashboardState {
    /// The dashboard over `core`, counting failed sign-ins and send tokens in `limits`: give
    /// it the API's own limits (`tidings_http::ApiState::limits`), so that a client's failed
    /// sign-ins and failed API calls share one allowance and a key's sends one bucket.
    ///
    /// Form bodies and large responses count in a memory budget of the dashboard's own
    /// ([`tidings_http::DEFAULT_MAX_BODY_BYTES_IN_FLIGHT`]) until [`Self::with_budget`] gives
    /// it the API's.
    pub fn new(core: Tidings, limits: Arc<dyn Limits>, config: DashboardConfig) -> Self {
        let budget = tidings_http::MemoryBudget::new(
            tidings_http::DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
            form::TEMPLATE_BODY_LIMIT,
            config.request_timeout,
        );
        let operator =
            config.operator_token.clone().map(|token| operator::OperatorDesk::new(token, config.sites.clone()));
        Self { core, limits, config: Arc::new(config), budget, operator }
    }

    /// The same dashboard counting its form bodies and large responses in `budget`: give it
    /// the API's (`tidings_http::ApiState::memory_budget`), so that one budget bounds what
    /// clients make the process hold, shared per workspace and client address.
    pub fn with_budget(mut self, budget: tidings_http::MemoryBudget) -> Self {
        self.budget = budget;
        self
    }
}

/// The `(method, path)` pairs [`router`] serves to workspace sessions, in axum's `{name}`
/// syntax; GET routes also answer HEAD. The operator's are [`operator_routes`].
pub fn served_routes() -> Vec<(Method, &'static str)> {
    pages::table().into_parts().1
}

/// The `(method, path)` pairs of the operator's pages, which [`router`] serves only when
/// [`DashboardConfig::operator_token`] is set.
pub fn operator_routes() -> Vec<(Method, &'static str)> {
    pages::operator_table(table::RouteTable::default()).into_parts().1
}

/// The dashboard: `/` (sign-in), the pages and forms under `/overview`, `/messages`,
/// `/inbound`, `/domains`, `/templates`, `/suppressions`, `/webhooks`, `/keys`, `/assets` and
/// `/favicon.ico`; with an operator token, `/operator` too. It has no fallback, so that it merges into a router that has one (the
/// API's); layer [`pages_for_browsers`] over the merged router so that a browser gets a
/// page, not the API's JSON, for a path nothing serves. Serve it with
/// `into_make_service_with_connect_info::<SocketAddr>()`, as the API, or every client
/// shares one failed-sign-in allowance.
pub fn router(state: DashboardState) -> Router {
    let timeout = state.config.request_timeout;
    let table = pages::table();
    let table = if state.operator.is_some() { pages::operator_table(table) } else { table };
    let (routes, _) = table.into_parts();
    routes
        .layer(axum::middleware::from_fn(move |req, next| headers::time_limited(timeout, req, next)))
        // Outside the time limit: its 503 gets the headers too.
        .layer(axum::middleware::from_fn(headers::security_headers))
        .layer(axum::middleware::from_fn_with_state(state.clone(), session::resolve_client))
        .with_state(state)
}
