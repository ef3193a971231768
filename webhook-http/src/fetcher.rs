//! [`HttpFileFetcher`]: the [`FileFetcher`] port on the webhook sender's guarded connector,
//! for files a client names by URL (Resend's attachment `path`). Same rules as a webhook
//! POST: the SSRF guard on the address connected to, https only unless private targets are
//! allowed, no redirects, one deadline for DNS, connect, TLS, head and the whole body; and a
//! size limit checked against `Content-Length` first and then as the body arrives, so no more
//! than the limit is ever held.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue, USER_AGENT};
use hyper::{Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls_pki_types::CertificateDer;
use tidings_core::ports::{FetchError, FetchedFile, FileFetcher};
use tokio::time::{Instant, timeout_at};

use crate::guard::GuardedConnector;
use crate::outcome::{failure_reason, guard_refusal, human_duration};
use crate::sender::guarded_https;
use crate::{BuildError, ResolveHost};

/// How the fetcher behaves.
#[derive(Debug, Clone)]
pub struct FetcherSettings {
    /// The whole fetch: DNS, connect, TLS, head and body. Default 10 s.
    pub timeout: Duration,
    /// Allow loopback, private and other non-public addresses, and plain http (the webhook
    /// setting, `TIDINGS_WEBHOOK_ALLOW_PRIVATE`). Default false.
    pub allow_private: bool,
    /// Certificates trusted as roots besides the system's.
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// The `user-agent` header. Default `Tidings-Fetch/<crate version>`.
    pub user_agent: String,
}

impl Default for FetcherSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            allow_private: false,
            extra_roots: Vec::new(),
            user_agent: concat!("Tidings-Fetch/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }
}

/// The [`FileFetcher`] adapter. Cheap to clone: clones share the connection pool.
#[derive(Clone)]
pub struct HttpFileFetcher {
    client: Client<HttpsConnector<GuardedConnector>, Empty<Bytes>>,
    timeout: Duration,
    allow_private: bool,
    user_agent: HeaderValue,
}

impl fmt::Debug for HttpFileFetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpFileFetcher")
            .field("timeout", &self.timeout)
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl HttpFileFetcher {
    /// A fetcher resolving host names with `resolver`.
    pub fn new(resolver: Arc<dyn ResolveHost>, settings: FetcherSettings) -> Result<Self, BuildError> {
        if settings.timeout.is_zero() {
            return Err(BuildError::ZeroTimeout);
        }
        let user_agent = HeaderValue::from_str(&settings.user_agent)
            .map_err(|_| BuildError::InvalidUserAgent(settings.user_agent.clone()))?;
        let connector = guarded_https(resolver, settings.allow_private, &settings.extra_roots)?;
        let client = Client::builder(TokioExecutor::new()).pool_timer(TokioTimer::new()).build(connector);
        Ok(Self { client, timeout: settings.timeout, allow_private: settings.allow_private, user_agent })
    }

    fn request(&self, url: &str) -> Result<Request<Empty<Bytes>>, FetchError> {
        let uri: Uri = url.parse().map_err(|e| FetchError::Refused(format!("not a URL ({e})")))?;
        match uri.scheme_str() {
            Some("https") => {}
            Some("http") if self.allow_private => {}
            Some("http") => return Err(FetchError::Refused("plain http is not allowed, only https".into())),
            Some(other) => return Err(FetchError::Refused(format!("the scheme {other} is not allowed, only https"))),
            None => return Err(FetchError::Refused("not an absolute URL".into())),
        }
        if uri.host().is_none() {
            return Err(FetchError::Refused("the URL has no host".into()));
        }
        Request::get(uri)
            .header(USER_AGENT, self.user_agent.clone())
            .body(Empty::new())
            .map_err(|e| FetchError::Refused(e.to_string()))
    }
}

#[async_trait]
impl FileFetcher for HttpFileFetcher {
    async fn fetch(&self, url: &str, max_bytes: usize) -> Result<FetchedFile, FetchError> {
        let request = self.request(url)?;
        let deadline = Instant::now() + self.timeout;
        let timed_out = || FetchError::Failed(format!("no answer within {}", human_duration(self.timeout)));
        let response = match timeout_at(deadline, self.client.request(request)).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => {
                return Err(match guard_refusal(&error) {
                    Some(refused) => FetchError::Refused(refused.to_string()),
                    None => FetchError::Failed(failure_reason(&error)),
                });
            }
            Err(_) => return Err(timed_out()),
        };
        // Redirects are not followed: a 3xx is refused like any other status.
        if response.status() != StatusCode::OK {
            return Err(FetchError::Status(response.status().as_u16()));
        }
        let declared = response.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > max_bytes as u64) {
            return Err(FetchError::TooLarge { limit: max_bytes });
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        let bytes =
            timeout_at(deadline, read_at_most(response.into_body(), max_bytes)).await.map_err(|_| timed_out())??;
        Ok(FetchedFile { bytes, content_type })
    }
}

/// The whole body, or [`FetchError::TooLarge`] as soon as it passes `max_bytes`.
async fn read_at_most(mut body: Incoming, max_bytes: usize) -> Result<Vec<u8>, FetchError> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| FetchError::Failed(format!("the body failed: {e}")))?;
        if let Some(data) = frame.data_ref() {
            if bytes.len() + data.len() > max_bytes {
                return Err(FetchError::TooLarge { limit: max_bytes });
            }
            bytes.extend_from_slice(data);
        }
    }
    Ok(bytes)
}
