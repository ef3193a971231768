//! [`PolicyServer`]: an HTTPS server on loopback with its own CA, serving a scripted answer
//! to every request, for tests of MTA-STS policy fetching (here and end to end).

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::CertificateDer;

use super::certs;

/// The most of a request head the server reads.
const MAX_HEAD: usize = 16 * 1024;

/// What the server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyReply {
    /// A response.
    Respond {
        /// The status code.
        status: u16,
        /// The `Content-Type` header, if any.
        content_type: Option<String>,
        /// Extra header lines (`Location: …`), without line ends.
        headers: Vec<String>,
        /// The body.
        body: Vec<u8>,
        /// Send `Content-Length`; without it the body ends when the connection closes.
        declare_length: bool,
    },
    /// Read the request and never answer (the connection stays open until the server is
    /// dropped).
    Hang,
}

impl PolicyReply {
    /// `200`, `text/plain`, the policy text.
    pub fn policy(text: &str) -> Self {
        Self::status(200, Some("text/plain"), text.as_bytes())
    }

    /// Any status, content type and body, with `Content-Length`.
    pub fn status(status: u16, content_type: Option<&str>, body: &[u8]) -> Self {
        Self::Respond {
            status,
            content_type: content_type.map(str::to_owned),
            headers: Vec::new(),
            body: body.to_vec(),
            declare_length: true,
        }
    }
}

struct Shared {
    reply: Mutex<PolicyReply>,
    /// The request heads received, in order.
    requests: Mutex<Vec<String>>,
}

/// A scripted HTTPS server on 127.0.0.1, its certificate for the names given, signed by a
/// CA of its own ([`PolicyServer::ca_der`]). Stops when dropped.
pub struct PolicyServer {
    addr: SocketAddr,
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for PolicyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Drop for PolicyServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl PolicyServer {
    /// Starts a server whose certificate covers `names` (e.g. `mta-sts.acme.test`),
    /// answering `reply` until told otherwise.
    pub async fn start(names: &[&str], reply: PolicyReply) -> io::Result<Self> {
        let certificates = certs::generate(names.iter().map(|name| (*name).to_owned()).collect())?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared { reply: Mutex::new(reply), requests: Mutex::new(Vec::new()) });
        let acceptor = certificates.acceptor;
        let accept = tokio::spawn({
            let shared = Arc::clone(&shared);
            async move {
                let mut connections = tokio::task::JoinSet::new();
                while let Ok((stream, _)) = listener.accept().await {
                    connections.spawn(serve(stream, acceptor.clone(), Arc::clone(&shared)));
                }
            }
        });
        Ok(Self { addr, ca_pem: certificates.ca_pem, ca_der: certificates.ca_der, shared, accept })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Its CA certificate, DER (for a trust store).
    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.ca_der.clone()
    }

    /// Answers `reply` from now on.
    pub fn set_reply(&self, reply: PolicyReply) {
        *self.shared.reply.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = reply;
    }

    /// The request heads received so far (request line and headers), in order.
    pub fn requests(&self) -> Vec<String> {
        self.shared.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// One connection: TLS, one request head, the scripted answer, close.
async fn serve(stream: TcpStream, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    let Ok(mut tls) = acceptor.accept(stream).await else { return };
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match tls.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    shared
        .requests
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(String::from_utf8_lossy(&head).into_owned());
    let reply = shared.reply.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    match reply {
        PolicyReply::Hang => {
            // Hold the connection until the server is dropped (the accept task's JoinSet
            // aborts this one).
            std::future::pending::<()>().await;
        }
        PolicyReply::Respond { status, content_type, headers, body, declare_length } => {
            let mut response = format!("HTTP/1.1 {status} Scripted\r\nConnection: close\r\n");
            if let Some(content_type) = content_type {
                response.push_str(&format!("Content-Type: {content_type}\r\n"));
            }
            for header in headers {
                response.push_str(&header);
                response.push_str("\r\n");
            }
            if declare_length {
                response.push_str(&format!("Content-Length: {}\r\n", body.len()));
            }
            response.push_str("\r\n");
            let _ = tls.write_all(response.as_bytes()).await;
            let _ = tls.write_all(&body).await;
            let _ = tls.shutdown().await;
        }
    }
}
