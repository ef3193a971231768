//! The SSRF guard: a connector that resolves the host itself, refuses non-public addresses and
//! checks the connected socket's peer address again before handing it to TLS and hyper.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper::http::uri::Scheme;
use hyper_util::rt::TokioIo;
use tidings_core::net_policy::is_public_ip;
use tokio::net::TcpStream;
use tower_service::Service;

use crate::ResolveHost;

/// An address the guard refused: not globally routable, and private targets are not allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("address {0} is not public (set TIDINGS_WEBHOOK_ALLOW_PRIVATE to allow it)")]
pub struct NotPublic(pub IpAddr);

/// The guard's decision for one address: every address passes with `allow_private`, else only
/// those [`is_public_ip`] accepts (IPv4-mapped, NAT64 and 6to4 forms judged by the IPv4
/// address they embed).
pub fn check_address(ip: IpAddr, allow_private: bool) -> Result<(), NotPublic> {
    if allow_private || is_public_ip(ip) { Ok(()) } else { Err(NotPublic(ip)) }
}

/// Why the connector produced no connection. Its `Display` is the delivery log's reason; the
/// sender finds it in hyper-util's error chain.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The URL has no host.
    #[error("the URL has no host")]
    NoHost,
    /// The resolver failed.
    #[error("DNS lookup failed for {host}: {reason}")]
    Dns { host: String, reason: String },
    /// The name exists but has no A/AAAA records.
    #[error("DNS lookup failed for {0}: no addresses")]
    NoAddresses(String),
    /// Every address was refused by the guard (the first is named).
    #[error(transparent)]
    NotPublic(#[from] NotPublic),
    /// TCP connect (or reading the connected socket's peer address) failed.
    #[error("{}", describe_io(.addr, .error))]
    Io {
        addr: SocketAddr,
        #[source]
        error: io::Error,
    },
}

fn describe_io(addr: &SocketAddr, error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::ConnectionRefused => format!("connection refused ({addr})"),
        io::ErrorKind::ConnectionReset => format!("connection reset ({addr})"),
        io::ErrorKind::NetworkUnreachable => format!("network unreachable ({addr})"),
        io::ErrorKind::HostUnreachable => format!("host unreachable ({addr})"),
        io::ErrorKind::AddrNotAvailable => format!("address not available ({addr})"),
        _ => format!("cannot connect to {addr}: {error}"),
    }
}

/// A `Service<Uri>` yielding plain TCP connections to addresses the guard allows.
#[derive(Clone)]
pub(crate) struct GuardedConnector {
    resolver: Arc<dyn ResolveHost>,
    allow_private: bool,
}

impl GuardedConnector {
    pub(crate) fn new(resolver: Arc<dyn ResolveHost>, allow_private: bool) -> Self {
        Self { resolver, allow_private }
    }

    async fn connect(self, uri: Uri) -> Result<TokioIo<TcpStream>, ConnectError> {
        let host = uri.host().ok_or(ConnectError::NoHost)?;
        let host = host.strip_prefix('[').and_then(|inner| inner.strip_suffix(']')).unwrap_or(host);
        let port = uri.port_u16().unwrap_or(if uri.scheme() == Some(&Scheme::HTTPS) { 443 } else { 80 });
        let addrs = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => self
                .resolver
                .resolve(host)
                .await
                .map_err(|reason| ConnectError::Dns { host: host.to_owned(), reason })?,
        };

        let mut refused = None;
        let mut failed = None;
        for ip in addrs {
            if let Err(not_public) = check_address(ip, self.allow_private) {
                tracing::debug!(host, %ip, "webhook target address refused");
                refused.get_or_insert(not_public);
                continue;
            }
            let addr = SocketAddr::new(ip, port);
            match self.open(addr).await {
                Ok(stream) => return Ok(TokioIo::new(stream)),
                // The peer is not the address dialled (should not happen): refuse, never retry.
                Err(error @ ConnectError::NotPublic(_)) => return Err(error),
                Err(error) => {
                    tracing::debug!(host, %addr, %error, "webhook connect attempt failed");
                    failed = Some(error);
                }
            }
        }
        Err(failed.or(refused.map(ConnectError::NotPublic)).unwrap_or(ConnectError::NoAddresses(host.to_owned())))
    }

    async fn open(&self, addr: SocketAddr) -> Result<TcpStream, ConnectError> {
        let io_error = |error| ConnectError::Io { addr, error };
        let stream = TcpStream::connect(addr).await.map_err(io_error)?;
        let peer = stream.peer_addr().map_err(io_error)?;
        check_address(peer.ip(), self.allow_private)?;
        stream.set_nodelay(true).map_err(io_error)?;
        Ok(stream)
    }
}

impl Service<Uri> for GuardedConnector {
    type Response = TokioIo<TcpStream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(self.clone().connect(uri))
    }
}
