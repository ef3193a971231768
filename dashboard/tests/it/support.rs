//! The API router and the dashboard router merged as the server merges them, over the
//! in-memory store, driven in-process with `tower::ServiceExt::oneshot`: real HTTP requests
//! and responses, a DNS that answers what a test publishes, a clock a test sets.

#![allow(dead_code)] // each module uses a different part

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request, StatusCode};
use chrono::{DateTime, Utc};
use http_body_util::BodyExt;
use tidings_core::delivery::{Shaping, SiteControl};
use tidings_core::domain_name::DnsName;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{ApiKeyId, DomainId, InboundMessageId, WorkspaceId};
use tidings_core::model::{AuthResults, InboundEnvelope, InboundMessage, Message};
use tidings_core::ports::InboundQuota;
use tidings_core::ports::{Clock, Limits, SystemRandom};
use tidings_core::shaping::ShapingTable;
use tidings_core::usecases::{CoreConfig, CreateApiKeyRequest, LocalLimits, MetricsToken, Principal, Tidings};
use tidings_dashboard::{DashboardConfig, DashboardState, Outbox};
use tidings_http::{ApiState, HttpConfig, TrustedProxies};
use tidings_testing::{FakeDns, FixedClock, MemoryStore};
use tower::ServiceExt;

/// The operator token of [`TestApp::with_operator`].
pub const OPERATOR_TOKEN: &str = "operator-token-0123456789abcdef";

/// The listener's host of [`TestApp::receiving`].
pub const INBOUND_MX_HOST: &str = "mx.tidings.test";

/// The client address of requests that do not name one.
pub const CLIENT: &str = "203.0.113.10";

/// One server: API and dashboard on one router, as `tidings-server` serves them.
pub struct TestApp {
    /// The merged router.
    pub app: Router,
    /// The service behind both.
    pub core: Tidings,
    /// The store under it, for arranging data directly.
    pub store: Arc<MemoryStore>,
    /// Its clock.
    pub clock: Arc<FixedClock>,
    /// Its DNS.
    pub dns: Arc<FakeDns>,
    /// The bootstrap `full` key.
    pub key: String,
    /// Who the bootstrap key is.
    pub principal: Principal,
    /// The outbox directory the dashboard reads `.eml` files from.
    pub outbox: tempfile::TempDir,
}

/// A response with its body as text.
pub struct Page {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: String,
}

impl Page {
    /// A header's value as text ("" when absent).
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// The `Location` of a redirect.
    pub fn location(&self) -> &str {
        self.header("location")
    }
}

impl TestApp {
    /// Default settings.
    pub async fn new() -> Self {
        Self::with(HttpConfig::default(), TrustedProxies::default()).await
    }

    /// With the sandbox sending domain on, as the server runs with its outbox transport.
    pub async fn sandboxed() -> Self {
        let config = CoreConfig { sandbox_sending: true, ..CoreConfig::default() };
        Self::assemble(HttpConfig::default(), TrustedProxies::default(), config, None).await
    }

    /// A server that receives mail: its domains' records ask for an `MX` to
    /// [`INBOUND_MX_HOST`] once a domain's inbound is switched on.
    pub async fn receiving() -> Self {
        let mut config = CoreConfig::default();
        config.records.return_path_host = Some(DnsName::parse(INBOUND_MX_HOST).unwrap());
        Self::assemble(HttpConfig::default(), TrustedProxies::default(), config, None).await
    }

    /// With these API settings and trusted proxies (shared by API and dashboard).
    pub async fn with(http: HttpConfig, proxies: TrustedProxies) -> Self {
        Self::assemble(http, proxies, CoreConfig::default(), None).await
    }

    /// With the operator's pages on (token [`OPERATOR_TOKEN`]) over the delivery sites
    /// counted in the limits returned (`with_sites`: by site, as in `mx` mode; else no sites,
    /// as a relay).
    pub async fn with_operator(with_sites: bool) -> (Self, Arc<LocalLimits>) {
        let limits = Arc::new(LocalLimits::default());
        let shaping = Shaping::new(Arc::new(ShapingTable::default()), Arc::clone(&limits) as Arc<dyn Limits>);
        let operator = (
            MetricsToken::parse(OPERATOR_TOKEN).unwrap(),
            with_sites.then(|| SiteControl::new(shaping, Arc::new(tidings_testing::MemoryStore::new()))),
        );
        let app =
            Self::assemble(HttpConfig::default(), TrustedProxies::default(), CoreConfig::default(), Some(operator))
                .await;
        (app, limits)
    }

    async fn assemble(
        mut http: HttpConfig,
        proxies: TrustedProxies,
        config: CoreConfig,
        operator: Option<(MetricsToken, Option<SiteControl>)>,
    ) -> Self {
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(FixedClock::at(tidings_testing::fixtures::now()));
        let dns = Arc::new(FakeDns::default());
        let core = Tidings::new(store.clone(), clock.clone(), Arc::new(SystemRandom), dns.clone(), config);
        let (_, created) = core.workspaces().ensure_default(None).await.unwrap().unwrap();
        let key = created.plaintext.expose().to_owned();
        let principal = core.authenticate(&key).await.unwrap();
        http.trusted_proxies = proxies.clone();
        let api = ApiState::new(core.clone(), http);
        let outbox = tempfile::tempdir().unwrap();
        let settings = DashboardConfig {
            trusted_proxies: proxies,
            outbox: Some(Outbox::new(outbox.path(), |m: &Message| {
                m.provider_message_id.as_deref().map(|id| format!("{id}.eml"))
            })),
            operator_token: operator.as_ref().map(|(token, _)| token.clone()),
            sites: operator.and_then(|(_, sites)| sites),
            ..DashboardConfig::default()
        };
        let dashboard = tidings_dashboard::router(DashboardState::new(core.clone(), api.limits(), settings));
        let app = tidings_http::router(api)
            .merge(dashboard)
            .layer(axum::middleware::from_fn(tidings_dashboard::pages_for_browsers));
        Self { app, core, store, clock, dns, key, principal, outbox }
    }

    /// Sends `req` from [`CLIENT`] (unless it carries its own `ConnectInfo`).
    pub async fn send(&self, mut req: Request<Body>) -> Page {
        if req.extensions().get::<ConnectInfo<SocketAddr>>().is_none() {
            let peer: IpAddr = CLIENT.parse().unwrap();
            req.extensions_mut().insert(ConnectInfo(SocketAddr::new(peer, 40_000)));
        }
        let response = self.app.clone().oneshot(req).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Page { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
    }

    /// `GET path` without a session.
    pub async fn get(&self, path: &str) -> Page {
        self.send(Request::get(path).body(Body::empty()).unwrap()).await
    }

    /// A form POST of `fields` from `peer`, with `cookie` if given.
    pub async fn post_form(
        &self,
        path: &str,
        cookie: Option<&str>,
        fields: &[(&str, &str)],
        peer: Option<&str>,
    ) -> Page {
        let mut req = Request::post(path).header("content-type", "application/x-www-form-urlencoded");
        if let Some(cookie) = cookie {
            req = req.header("cookie", format!("__Host-tidings_session={cookie}"));
        }
        let mut req = req.body(Body::from(encode(fields))).unwrap();
        if let Some(peer) = peer {
            let peer: IpAddr = peer.parse().unwrap();
            req.extensions_mut().insert(ConnectInfo(SocketAddr::new(peer, 40_000)));
        }
        self.send(req).await
    }

    /// Signs in with `key` through `POST /sign-in`; panics unless it works.
    pub async fn sign_in(&self, key: &str) -> Browser<'_> {
        let page = self.post_form("/sign-in", None, &[("key", key)], None).await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "sign-in: {}", page.body);
        let cookie = page.header("set-cookie");
        let token = cookie
            .strip_prefix("__Host-tidings_session=")
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_else(|| panic!("no session cookie: {cookie}"))
            .to_owned();
        let mut browser = Browser { app: self, token, csrf: String::new() };
        let overview = browser.get("/overview").await;
        assert_eq!(overview.status, StatusCode::OK, "{}", overview.body);
        browser.csrf = csrf_of(&overview.body).expect("a CSRF field on the overview");
        browser
    }

    /// A new key of the bootstrap key's workspace: its plaintext and id.
    pub async fn create_key(&self, scope: &str, domain: Option<String>) -> (String, ApiKeyId) {
        let req = CreateApiKeyRequest {
            name: Some(format!("{scope} key")),
            scope: Some(scope.to_owned()),
            sending_domain_id: domain,
            rate_limit_per_sec: None,
        };
        let created = self.core.keys().create(&self.principal, req).await.unwrap();
        (created.plaintext.expose().to_owned(), created.key.id)
    }

    /// Adds `name`, publishes its records, verifies it; returns its id.
    pub async fn verified_domain(&self, name: &str) -> String {
        let domain = self
            .core
            .domains()
            .add(&self.principal, tidings_core::usecases::AddDomainRequest { domain: Some(name.to_owned()) })
            .await
            .unwrap();
        for record in &domain.records {
            self.dns.add_txt(&record.name, &record.value);
        }
        let id = domain.id.to_string();
        let checked = self.core.domains().verify(&self.principal, DomainId::parse_or_none(&id)).await.unwrap();
        assert!(checked.is_sendable(), "{:?}", checked.status);
        id
    }

    /// The clock's time.
    pub fn clock_now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// `method path` with the session `token` (if any); a POST carries `fields` as a form.
    pub async fn call(&self, method: &str, path: &str, token: Option<&str>, fields: &[(&str, &str)]) -> Page {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            req = req.header("cookie", format!("__Host-tidings_session={token}"));
        }
        let req = if method == "POST" {
            req.header("content-type", "application/x-www-form-urlencoded").body(Body::from(encode(fields)))
        } else {
            req.body(Body::empty())
        };
        self.send(req.unwrap()).await
    }

    /// The bootstrap key's workspace.
    pub fn workspace(&self) -> WorkspaceId {
        self.principal.workspace_id
    }
}

/// A signed-in browser: the session cookie and the CSRF token of its pages.
pub struct Browser<'a> {
    app: &'a TestApp,
    /// The session token (the cookie's value).
    pub token: String,
    /// The session's CSRF token.
    pub csrf: String,
}

impl Browser<'_> {
    /// `GET path` with the session.
    pub async fn get(&self, path: &str) -> Page {
        let req = Request::get(path).header("cookie", format!("__Host-tidings_session={}", self.token));
        self.app.send(req.body(Body::empty()).unwrap()).await
    }

    /// POSTs `fields` and the session's CSRF token.
    pub async fn post(&self, path: &str, fields: &[(&str, &str)]) -> Page {
        let mut all = vec![("csrf", self.csrf.as_str())];
        all.extend_from_slice(fields);
        self.app.post_form(path, Some(&self.token), &all, None).await
    }

    /// POSTs exactly `fields` (no token added).
    pub async fn post_raw(&self, path: &str, fields: &[(&str, &str)]) -> Page {
        self.app.post_form(path, Some(&self.token), fields, None).await
    }
}

/// Stores `raw` as received now by `core` for `workspace`, delivered to `recipient`, as the
/// listener would (`tidings_core::inbound::parse`), after `adjust` changed what it likes
/// (the authentication results, the message it answers, the time).
pub async fn store_inbound(
    core: &Tidings,
    workspace: WorkspaceId,
    raw: &[u8],
    recipient: &str,
    adjust: impl FnOnce(&mut InboundMessage),
) -> InboundMessage {
    let now = core.clock().now();
    let mut message = InboundMessage {
        id: InboundMessageId::new_at(now, &SystemRandom),
        workspace_id: workspace,
        received_at: now,
        envelope: InboundEnvelope {
            mail_from: Some("bounces@sender.example".to_owned()),
            recipients: vec![EmailAddress::parse(recipient).unwrap()],
            client_ip: std::net::Ipv4Addr::new(192, 0, 2, 25).into(),
            helo: "mail.sender.example".to_owned(),
        },
        parsed: tidings_core::inbound::parse(raw).unwrap(),
        auth: AuthResults::unchecked(),
        in_reply_to_message_id: None,
        route_id: None,
        size: raw.len() as u64,
    };
    adjust(&mut message);
    let quota = InboundQuota { max_messages: 1000, max_bytes: 1 << 30 };
    assert!(core.store().insert_inbound(&message, raw, &[], &quota).await.unwrap(), "stored");
    message
}

/// `application/x-www-form-urlencoded` of `fields`.
pub fn encode(fields: &[(&str, &str)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        out.append_pair(name, value);
    }
    out.finish()
}

/// The value of the first hidden `csrf` field of a page.
pub fn csrf_of(html: &str) -> Option<String> {
    let at = html.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
    Some(html[at..].split('"').next()?.to_owned())
}
