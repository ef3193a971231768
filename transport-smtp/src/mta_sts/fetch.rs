//! Fetching a domain's policy file (RFC 8461 §3.3): `GET
//! https://mta-sts.<domain>/.well-known/mta-sts.txt`, the certificate verified for that name,
//! no redirects, only a `200` with `text/plain`, within a deadline and a size limit.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls_pki_types::{CertificateDer, ServerName};
use tidings_core::domain_name::DomainName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::crypto::aws_lc_rs;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use super::StsLookup;
use super::policy::{Policy, PolicyError};
use crate::config::human;
use crate::mx_guard;

/// The path every policy is served at.
const WELL_KNOWN: &str = "/.well-known/mta-sts.txt";

/// Which certificate authorities a policy host's certificate must chain to.
#[derive(Debug, Clone, Default)]
pub enum TrustRoots {
    /// The system's CA store (as the SMTP relay and the webhook sender use).
    #[default]
    System,
    /// These roots only (tests, or an operator's private CA).
    Only(Vec<CertificateDer<'static>>),
}

/// How [`HttpsPolicyFetcher`] fetches.
#[derive(Debug, Clone)]
pub struct FetchSettings {
    /// The whole fetch: DNS, connect, TLS, request and body. Default 10 s.
    pub timeout: Duration,
    /// The largest policy file read. Default 64 KiB.
    pub max_bytes: usize,
    /// The CA certificates trusted. Default the system's.
    pub roots: TrustRoots,
    /// The HTTPS port: 443, the only one RFC 8461 allows; tests point it at a server on
    /// loopback.
    pub port: u16,
    /// Connect to loopback, private and other non-public addresses (the MX setting,
    /// `TIDINGS_MX_ALLOW_PRIVATE`; for tests). Default `false`: a recipient domain chosen
    /// by a client must not make the server send requests into its own network.
    pub allow_private: bool,
}

impl Default for FetchSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            max_bytes: 64 * 1024,
            roots: TrustRoots::System,
            port: 443,
            allow_private: false,
        }
    }
}

/// Why no policy was fetched. The text names the host and is fit for a delivery log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The policy host's addresses could not be looked up, or it has none.
    #[error("cannot resolve {host}: {reason}")]
    Dns {
        /// `mta-sts.<domain>`.
        host: String,
        /// Why.
        reason: String,
    },
    /// Every address of the policy host is non-public and private targets are not allowed.
    #[error("{host} has no public address (refused: {refused})")]
    NotPublic {
        /// `mta-sts.<domain>`.
        host: String,
        /// The addresses refused.
        refused: String,
    },
    /// No TCP connection, or the TLS handshake failed (a certificate not valid for the
    /// host among the reasons).
    #[error("cannot connect to {host} over TLS: {reason}")]
    Connect {
        /// `mta-sts.<domain>`.
        host: String,
        /// The last address's failure.
        reason: String,
    },
    /// HTTP failed after the handshake.
    #[error("the request to {host} failed: {reason}")]
    Http {
        /// `mta-sts.<domain>`.
        host: String,
        /// hyper's error.
        reason: String,
    },
    /// Not `200 OK`. Redirects are not followed, so a `3xx` ends here too.
    #[error("{host} answered {status}, not 200")]
    Status {
        /// `mta-sts.<domain>`.
        host: String,
        /// The status code.
        status: u16,
    },
    /// The `Content-Type` is not `text/plain`.
    #[error("{host} served {content_type}, not text/plain")]
    ContentType {
        /// `mta-sts.<domain>`.
        host: String,
        /// What it said (`none` when absent).
        content_type: String,
    },
    /// The body is longer than [`FetchSettings::max_bytes`].
    #[error("the policy from {host} is larger than {limit} bytes")]
    TooLarge {
        /// `mta-sts.<domain>`.
        host: String,
        /// The limit.
        limit: usize,
    },
    /// The whole fetch took longer than [`FetchSettings::timeout`].
    #[error("no policy from {host} within {after}")]
    TimedOut {
        /// `mta-sts.<domain>`.
        host: String,
        /// The timeout, as text (`10s`).
        after: String,
    },
    /// The file is not a valid policy.
    #[error("the policy from {host} is invalid: {error}")]
    Invalid {
        /// `mta-sts.<domain>`.
        host: String,
        /// What is wrong with it.
        error: PolicyError,
    },
}

/// Where policies come from: [`HttpsPolicyFetcher`], or a fake in tests of the cache.
#[async_trait]
pub trait PolicySource: Send + Sync {
    /// The current policy of `domain`, fetched now.
    async fn fetch(&self, domain: &DomainName) -> Result<Policy, FetchError>;
}

/// Fetches policies over HTTPS, resolving `mta-sts.<domain>` itself so that only public
/// addresses are dialled (unless [`FetchSettings::allow_private`]).
///
/// Each fetch is one connection, closed afterwards: a domain's policy is fetched once per
/// `max_age` or id change, so pooling would only hold sockets open.
pub struct HttpsPolicyFetcher {
    dns: Arc<dyn StsLookup>,
    tls: TlsConnector,
    settings: FetchSettings,
}

impl std::fmt::Debug for HttpsPolicyFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpsPolicyFetcher").field("settings", &self.settings).finish_non_exhaustive()
    }
}

/// Why a fetcher could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FetcherBuildError {
    /// A root in [`TrustRoots::Only`] is not a usable CA certificate.
    #[error("invalid root certificate for MTA-STS: {0}")]
    Root(#[source] tokio_rustls::rustls::Error),
    /// rustls refused the protocol settings (should not happen with the built-in ones).
    #[error("cannot set up TLS for MTA-STS: {0}")]
    Tls(#[source] tokio_rustls::rustls::Error),
    /// A zero timeout or size limit would fail every fetch.
    #[error("the MTA-STS fetch timeout and size limit must be more than zero")]
    Settings,
}

impl HttpsPolicyFetcher {
    /// A fetcher resolving policy hosts with `dns`.
    pub fn new(dns: Arc<dyn StsLookup>, settings: FetchSettings) -> Result<Self, FetcherBuildError> {
        if settings.timeout.is_zero() || settings.max_bytes == 0 {
            return Err(FetcherBuildError::Settings);
        }
        let tls = TlsConnector::from(Arc::new(client_config(&settings.roots)?));
        Ok(Self { dns, tls, settings })
    }

    async fn fetch_from(&self, host: &str) -> Result<Policy, FetchError> {
        let addrs = self.addresses(host).await?;
        let stream = self.connect(host, &addrs).await?;
        let http = |error: hyper::Error| FetchError::Http { host: host.to_owned(), reason: error.to_string() };
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(http)?;
        let request = Request::get(WELL_KNOWN)
            .header(HOST, host)
            .header(USER_AGENT, concat!("Tidings-MTA-STS/", env!("CARGO_PKG_VERSION")))
            .body(Empty::<Bytes>::new())
            .map_err(|error| FetchError::Http { host: host.to_owned(), reason: error.to_string() })?;
        let exchange = async {
            let response = sender.send_request(request).await.map_err(http)?;
            self.check_head(host, &response)?;
            read_at_most(host, response.into_body(), self.settings.max_bytes).await
        };
        // The connection is driven here rather than spawned, so it ends with the fetch
        // (a server that stalls cannot keep a task and a socket alive after the deadline).
        tokio::pin!(exchange, connection);
        let body = tokio::select! {
            body = &mut exchange => body?,
            ended = &mut connection => {
                ended.map_err(http)?;
                exchange.await?
            }
        };
        Policy::from_bytes(&body).map_err(|error| FetchError::Invalid { host: host.to_owned(), error })
    }

    async fn addresses(&self, host: &str) -> Result<Vec<IpAddr>, FetchError> {
        let addrs = self
            .dns
            .host_addrs(host)
            .await
            .map_err(|error| FetchError::Dns { host: host.to_owned(), reason: error.to_string() })?;
        if addrs.is_empty() {
            return Err(FetchError::Dns { host: host.to_owned(), reason: "no A or AAAA records".to_owned() });
        }
        let (allowed, refused): (Vec<IpAddr>, Vec<IpAddr>) =
            addrs.into_iter().partition(|&ip| mx_guard::check(ip, self.settings.allow_private).is_ok());
        if allowed.is_empty() {
            let refused = refused.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            return Err(FetchError::NotPublic { host: host.to_owned(), refused });
        }
        Ok(allowed)
    }

    /// TCP to the first address that answers, then TLS with the certificate verified for
    /// `host`.
    async fn connect(
        &self,
        host: &str,
        addrs: &[IpAddr],
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, FetchError> {
        let failed = |reason: String| FetchError::Connect { host: host.to_owned(), reason };
        let name = ServerName::try_from(host.to_owned()).map_err(|error| failed(error.to_string()))?;
        let mut last = String::new();
        for &ip in addrs {
            let addr = SocketAddr::new(ip, self.settings.port);
            let tcp = match TcpStream::connect(addr).await {
                Ok(tcp) => tcp,
                Err(error) => {
                    last = format!("{addr}: {error}");
                    continue;
                }
            };
            // The address dialled was checked; this checks the socket's actual peer.
            if let Ok(peer) = tcp.peer_addr()
                && let Err(refused) = mx_guard::check(peer.ip(), self.settings.allow_private)
            {
                last = format!("{addr}: {refused}");
                continue;
            }
            return self.tls.connect(name, tcp).await.map_err(|error| failed(format!("{addr}: {error}")));
        }
        Err(failed(last))
    }

    fn check_head(&self, host: &str, response: &hyper::Response<Incoming>) -> Result<(), FetchError> {
        if response.status() != StatusCode::OK {
            return Err(FetchError::Status { host: host.to_owned(), status: response.status().as_u16() });
        }
        let content_type = response.headers().get(CONTENT_TYPE).map(|value| String::from_utf8_lossy(value.as_bytes()));
        let media_type = content_type.as_deref().and_then(|value| value.split(';').next()).map(str::trim);
        if !media_type.is_some_and(|media_type| media_type.eq_ignore_ascii_case("text/plain")) {
            return Err(FetchError::ContentType {
                host: host.to_owned(),
                content_type: content_type.map_or_else(|| "none".to_owned(), |value| format!("{value:?}")),
            });
        }
        let declared = response.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > self.settings.max_bytes as u64) {
            return Err(FetchError::TooLarge { host: host.to_owned(), limit: self.settings.max_bytes });
        }
        Ok(())
    }
}

#[async_trait]
impl PolicySource for HttpsPolicyFetcher {
    async fn fetch(&self, domain: &DomainName) -> Result<Policy, FetchError> {
        let host = domain.with_prefix("mta-sts");
        let timeout = self.settings.timeout;
        match tokio::time::timeout(timeout, self.fetch_from(&host)).await {
            Ok(result) => result,
            Err(_elapsed) => Err(FetchError::TimedOut { host, after: human(timeout) }),
        }
    }
}

/// The body, or [`FetchError::TooLarge`] as soon as it passes `max_bytes` (so no more than
/// that is ever held).
async fn read_at_most(host: &str, mut body: Incoming, max_bytes: usize) -> Result<Vec<u8>, FetchError> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| FetchError::Http { host: host.to_owned(), reason: error.to_string() })?;
        if let Some(data) = frame.data_ref() {
            if bytes.len() + data.len() > max_bytes {
                return Err(FetchError::TooLarge { host: host.to_owned(), limit: max_bytes });
            }
            bytes.extend_from_slice(data);
        }
    }
    Ok(bytes)
}

fn client_config(roots: &TrustRoots) -> Result<ClientConfig, FetcherBuildError> {
    let mut store = RootCertStore::empty();
    match roots {
        TrustRoots::System => {
            let native = rustls_native_certs::load_native_certs();
            for error in &native.errors {
                tracing::warn!(%error, "cannot read some of the system's CA certificates");
            }
            let (_added, _unusable) = store.add_parsable_certificates(native.certs);
            if store.is_empty() {
                tracing::warn!("no trusted CA certificates: every MTA-STS policy fetch will fail");
            }
        }
        TrustRoots::Only(certificates) => {
            for certificate in certificates {
                store.add(certificate.clone()).map_err(FetcherBuildError::Root)?;
            }
        }
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(FetcherBuildError::Tls)?
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
