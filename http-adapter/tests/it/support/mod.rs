//! The router over the in-memory store, driven in-process with `tower::ServiceExt::oneshot`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tidings_core::ports::{NoDns, SystemClock, SystemRandom};
use tidings_core::tracking::{PublicUrl, TrackingConfig, TrackingKey};
use tidings_core::usecases::{CoreConfig, Tidings};
use tidings_http::{ApiState, Drain, HttpConfig, Metrics, router};
use tidings_testing::{FaultyStore, MemoryStore};
use tower::ServiceExt;

/// The API with a fresh store and its bootstrap key.
pub struct TestApi {
    /// The router under test.
    pub app: Router,
    /// The bootstrap full key.
    pub key: String,
    /// The service behind it.
    pub core: Tidings,
    /// Its drain flag.
    pub drain: Drain,
}

/// Base of the tracking URLs of every [`TestApi`].
pub const PUBLIC_URL: &str = "https://track.tidings.test";

/// The tracking every [`TestApi`] is configured with.
pub fn tracking_config() -> TrackingConfig {
    TrackingConfig { public_url: PublicUrl::parse(PUBLIC_URL).unwrap(), key: TrackingKey::from_bytes([7; 32]) }
}

/// A response whose body is kept as bytes (a GIF, an empty redirect).
pub struct RawReply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: axum::http::HeaderMap,
    /// The body.
    pub bytes: Vec<u8>,
}

/// A response: status, headers and the parsed envelope.
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: axum::http::HeaderMap,
    /// The parsed body.
    pub body: Value,
}

impl TestApi {
    /// Adds `name` to the default workspace and marks it Verified in the store (no DNS
    /// server answers in these tests); its id.
    pub async fn verified_domain(&self, name: &str) -> String {
        let added = self.post("/v1/domains", serde_json::json!({ "domain": name })).await;
        assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
        let id = added.data()["id"].as_str().unwrap().to_owned();
        let who = self.core.authenticate(&self.key).await.unwrap();
        let id_typed = tidings_core::ids::DomainId::parse_or_none(&id);
        let mut domain = self.core.domains().get(&who, id_typed).await.unwrap();
        domain.status = tidings_core::model::DomainStatus::Verified;
        domain.verified_at = Some(domain.created_at);
        self.core.store().update_domain(&domain).await.unwrap();
        id
    }

    /// Default HTTP settings, with `/metrics` served as the server serves it.
    pub async fn new() -> Self {
        Self::with_config(HttpConfig { serve_metrics: true, ..HttpConfig::default() }).await
    }

    /// Given HTTP settings.
    pub async fn with_config(config: HttpConfig) -> Self {
        Self::with_configs(config, CoreConfig { tracking: Some(tracking_config()), ..CoreConfig::default() }).await
    }

    /// Default HTTP settings, with sandbox sending on (the server with the outbox).
    pub async fn with_sandbox() -> Self {
        let core = CoreConfig { tracking: Some(tracking_config()), sandbox_sending: true, ..CoreConfig::default() };
        Self::with_configs(HttpConfig::default(), core).await
    }

    async fn with_configs(config: HttpConfig, core_config: CoreConfig) -> Self {
        let core = Tidings::new(
            Arc::new(MemoryStore::new()),
            Arc::new(SystemClock),
            Arc::new(SystemRandom),
            Arc::new(NoDns),
            core_config,
        );
        let metrics = Arc::new(Metrics::new());
        let core = core.with_observer(metrics.clone());
        let (_, created) = core.workspaces().ensure_default(None).await.unwrap().unwrap();
        let state = ApiState::new(core.clone(), config).with_metrics(metrics);
        let drain = state.drain();
        let app = router(state);
        Self { app, key: created.plaintext.expose().to_owned(), core, drain }
    }

    /// The same service and key, its router fetching Resend's attachment `path`s with
    /// `fetcher`.
    pub fn with_file_fetcher(self, fetcher: Arc<dyn tidings_core::ports::FileFetcher>) -> Self {
        let state = ApiState::new(self.core.clone(), HttpConfig::default()).with_file_fetcher(fetcher);
        let drain = state.drain();
        Self { app: router(state), drain, ..self }
    }

    /// The API over a store that is down ([`FaultyStore::down`]); there is no key.
    pub fn without_store() -> Self {
        let core = Tidings::new(
            Arc::new(FaultyStore::down()),
            Arc::new(SystemClock),
            Arc::new(SystemRandom),
            Arc::new(NoDns),
            CoreConfig::default(),
        );
        let metrics = Arc::new(Metrics::new());
        let state = ApiState::new(core.clone(), HttpConfig::default()).with_metrics(metrics);
        let drain = state.drain();
        let app = router(state);
        Self { app, key: String::new(), core, drain }
    }

    /// Sends a request; `body` is sent as JSON with the right content type.
    pub async fn call(&self, method: &str, path: &str, key: Option<&str>, body: Option<Value>) -> Reply {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(key) = key {
            req = req.header("authorization", format!("Bearer {key}"));
        }
        let req = match body {
            Some(body) => req.header("content-type", "application/json").body(Body::from(body.to_string())),
            None => req.body(Body::empty()),
        }
        .unwrap();
        self.send(req).await
    }

    /// Sends a prepared request.
    pub async fn send(&self, req: Request<Body>) -> Reply {
        let RawReply { status, headers, bytes } = self.send_raw(req).await;
        let body = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("not JSON ({e}): {bytes:?}"));
        Reply { status, headers, body }
    }

    /// Sends a prepared request and keeps the body as it is.
    pub async fn send_raw(&self, req: Request<Body>) -> RawReply {
        let response = self.app.clone().oneshot(req).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes().to_vec();
        RawReply { status, headers, bytes }
    }

    /// GET with the bootstrap key.
    pub async fn get(&self, path: &str) -> Reply {
        self.call("GET", path, Some(&self.key.clone()), None).await
    }

    /// POST JSON with the bootstrap key.
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.call("POST", path, Some(&self.key.clone()), Some(body)).await
    }
}

impl Reply {
    /// The error code, asserting the envelope of a failure.
    pub fn error_code(&self) -> &str {
        assert_eq!(self.body["success"], false, "{}", self.body);
        assert_eq!(self.body["statusCode"], self.status.as_u16(), "{}", self.body);
        assert!(self.body["data"].is_null(), "{}", self.body);
        self.body["error"]["code"].as_str().unwrap_or_else(|| panic!("no error code: {}", self.body))
    }

    /// `data`, asserting the envelope of a success.
    pub fn data(&self) -> &Value {
        assert_eq!(self.body["success"], true, "{}", self.body);
        assert_eq!(self.body["statusCode"], self.status.as_u16(), "{}", self.body);
        assert!(self.body.get("error").is_none(), "{}", self.body);
        &self.body["data"]
    }
}
