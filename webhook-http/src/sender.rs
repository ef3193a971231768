//! [`HttpWebhookSender`]: hyper-util's pooled client over the guarded connector and rustls.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderName, HeaderValue, RETRY_AFTER, USER_AGENT};
use hyper::{Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls_pki_types::CertificateDer;
use tidings_core::ports::{MAX_BODY_PREFIX, WebhookRequest, WebhookResponse, WebhookSender};
use tokio::time::{Instant, timeout_at};
use tokio_rustls::rustls::crypto::aws_lc_rs;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

use crate::ResolveHost;
use crate::guard::GuardedConnector;
use crate::outcome::{failure_reason, human_duration, retry_after};

/// How the sender behaves. The defaults are those of docs/api.md#webhook-retries.
#[derive(Debug, Clone)]
pub struct SenderSettings {
    /// The whole request: DNS, connect, TLS, response head and body prefix. Default 10 s.
    pub timeout: Duration,
    /// Allow loopback, private and other non-public addresses, and plain http
    /// (`TIDINGS_WEBHOOK_ALLOW_PRIVATE`). Default false.
    pub allow_private: bool,
    /// Certificates trusted as roots besides the system's (tests, private CAs).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// The `user-agent` header. Default `Tidings-Webhooks/<crate version>`.
    pub user_agent: String,
    /// Idle pooled connections kept per host. Default 32.
    pub max_idle_per_host: usize,
}

impl Default for SenderSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            allow_private: false,
            extra_roots: Vec::new(),
            user_agent: concat!("Tidings-Webhooks/", env!("CARGO_PKG_VERSION")).to_owned(),
            max_idle_per_host: 32,
        }
    }
}

/// Why an [`HttpWebhookSender`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The timeout is zero: every request would fail at once.
    #[error("the webhook timeout must be more than zero")]
    ZeroTimeout,
    /// The user agent is not a valid header value.
    #[error("invalid webhook user agent {0:?}")]
    InvalidUserAgent(String),
    /// One of [`SenderSettings::extra_roots`] is not a usable CA certificate.
    #[error("invalid extra root certificate: {0}")]
    InvalidRoot(#[source] rustls::Error),
    /// rustls refused the client configuration.
    #[error("cannot configure TLS for webhooks: {0}")]
    Tls(#[source] rustls::Error),
}

/// The [`WebhookSender`] adapter. Cheap to clone: clones share the connection pool.
#[derive(Clone)]
pub struct HttpWebhookSender {
    client: Client<HttpsConnector<GuardedConnector>, Full<Bytes>>,
    timeout: Duration,
    allow_private: bool,
    user_agent: HeaderValue,
}

impl fmt::Debug for HttpWebhookSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpWebhookSender")
            .field("timeout", &self.timeout)
            .field("allow_private", &self.allow_private)
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}

impl HttpWebhookSender {
    /// A sender resolving host names with `resolver`. Reads the system's CA certificates once;
    /// needs no runtime to build (sending needs Tokio).
    pub fn new(resolver: Arc<dyn ResolveHost>, settings: SenderSettings) -> Result<Self, BuildError> {
        if settings.timeout.is_zero() {
            return Err(BuildError::ZeroTimeout);
        }
        let user_agent = HeaderValue::from_str(&settings.user_agent)
            .map_err(|_| BuildError::InvalidUserAgent(settings.user_agent.clone()))?;
        let connector = guarded_https(resolver, settings.allow_private, &settings.extra_roots)?;
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_max_idle_per_host(settings.max_idle_per_host)
            .build(connector);
        Ok(Self { client, timeout: settings.timeout, allow_private: settings.allow_private, user_agent })
    }

    fn build_request(&self, request: &WebhookRequest) -> Result<Request<Full<Bytes>>, String> {
        let uri: Uri = request.url.as_str().parse().map_err(|error| format!("invalid URL: {error}"))?;
        match uri.scheme_str() {
            Some("https") => {}
            Some("http") if self.allow_private => {}
            Some("http") => {
                return Err("plain http is not allowed (set TIDINGS_WEBHOOK_ALLOW_PRIVATE to allow it)".into());
            }
            Some(other) => return Err(format!("unsupported URL scheme {other} (https only)")),
            None => return Err("invalid URL: no scheme".into()),
        }
        let mut builder = Request::post(uri);
        for (name, value) in request.headers() {
            let value = HeaderValue::from_str(&value).map_err(|_| format!("invalid value for header {name}"))?;
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("invalid header name {name}"))?;
            builder = builder.header(name, value);
        }
        builder
            .header(USER_AGENT, self.user_agent.clone())
            .body(Full::new(Bytes::from(request.body.clone())))
            .map_err(|error| format!("cannot build the request: {error}"))
    }

    async fn exchange(&self, request: Request<Full<Bytes>>) -> WebhookResponse {
        let deadline = Instant::now() + self.timeout;
        let response = match timeout_at(deadline, self.client.request(request)).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => return WebhookResponse::Failed { reason: failure_reason(&error) },
            Err(_elapsed) => {
                return WebhookResponse::Failed { reason: format!("timeout after {}", human_duration(self.timeout)) };
            }
        };
        let status = response.status().as_u16();
        let retry_after = response.headers().get(RETRY_AFTER).and_then(|value| retry_after(value, SystemTime::now()));
        let mut prefix = Vec::new();
        // Time out or fail reading the body: the status arrived in time, report it with what
        // was read (see the crate docs).
        let _ = timeout_at(deadline, read_prefix(response.into_body(), &mut prefix)).await;
        WebhookResponse::Answered { status, retry_after, body_prefix: String::from_utf8_lossy(&prefix).into_owned() }
    }
}

/// Reads `body` into `prefix` until it ends, fails, or `prefix` holds [`MAX_BODY_PREFIX`]
/// bytes; the rest is never read.
async fn read_prefix(mut body: Incoming, prefix: &mut Vec<u8>) {
    while prefix.len() < MAX_BODY_PREFIX {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let take = data.len().min(MAX_BODY_PREFIX - prefix.len());
                    prefix.extend_from_slice(&data[..take]);
                }
            }
            Some(Err(error)) => {
                tracing::debug!(%error, "webhook response body failed");
                return;
            }
            None => return,
        }
    }
}

/// The guarded connector under rustls: https only unless `allow_private` (also checked before
/// each request; this makes the connector refuse on its own).
pub(crate) fn guarded_https(
    resolver: Arc<dyn ResolveHost>,
    allow_private: bool,
    extra_roots: &[CertificateDer<'static>],
) -> Result<HttpsConnector<GuardedConnector>, BuildError> {
    let tls = tls_config(extra_roots)?;
    let mut connector = HttpsConnector::from((GuardedConnector::new(resolver, allow_private), tls));
    if !allow_private {
        connector.enforce_https();
    }
    Ok(connector)
}

fn tls_config(extra_roots: &[CertificateDer<'static>]) -> Result<ClientConfig, BuildError> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::warn!(%error, "cannot read some of the system's CA certificates");
    }
    let (_added, ignored) = roots.add_parsable_certificates(native.certs);
    if ignored > 0 {
        tracing::debug!(ignored, "unusable system CA certificates ignored");
    }
    for root in extra_roots {
        roots.add(root.clone()).map_err(BuildError::InvalidRoot)?;
    }
    if roots.is_empty() {
        tracing::warn!("no trusted CA certificates: every https webhook will fail with a TLS error");
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(BuildError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[async_trait]
impl WebhookSender for HttpWebhookSender {
    async fn post(&self, request: &WebhookRequest) -> WebhookResponse {
        let outcome = match self.build_request(request) {
            Ok(http_request) => self.exchange(http_request).await,
            Err(reason) => WebhookResponse::Failed { reason },
        };
        match &outcome {
            WebhookResponse::Answered { status, .. } => {
                tracing::debug!(webhook_id = %request.webhook_id, status, "webhook answered");
            }
            WebhookResponse::Failed { reason } => {
                tracing::debug!(webhook_id = %request.webhook_id, reason, "webhook failed");
            }
        }
        outcome
    }
}
