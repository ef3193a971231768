//! Shared helpers: a real webhook receiver (hyper on loopback, optionally behind rustls), a
//! test DNS server, and the sender wired to it.

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::HeaderMap;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tidings_core::model::WebhookUrl;
use tidings_core::ports::WebhookRequest;
use tidings_dns::HickoryDns;
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_webhook_http::{HttpWebhookSender, SenderSettings};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The body every test request carries.
pub const BODY: &str = r#"{"type":"Delivered","createdAt":"2024-05-01T12:00:00Z","data":{"messageId":"m_1"}}"#;

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

type Respond = Arc<dyn Fn() -> Response<Full<Bytes>> + Send + Sync>;

/// A webhook receiver on 127.0.0.1 that records requests, counts accepted TCP connections
/// and answers every request with `respond()`. Stops when dropped.
pub struct Receiver {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: JoinHandle<()>,
}

impl Receiver {
    /// A plain-http receiver.
    pub async fn start(respond: impl Fn() -> Response<Full<Bytes>> + Send + Sync + 'static) -> io::Result<Self> {
        Self::spawn(None, Arc::new(respond)).await
    }

    /// An https receiver presenting `acceptor`'s certificate.
    pub async fn start_tls(
        acceptor: TlsAcceptor,
        respond: impl Fn() -> Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> io::Result<Self> {
        Self::spawn(Some(acceptor), Arc::new(respond)).await
    }

    async fn spawn(tls: Option<TlsAcceptor>, respond: Respond) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let accepts = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (accepted, recorded) = (accepts.clone(), requests.clone());
        let task = tokio::spawn(async move {
            // Dropping the set (when the receiver's task is aborted) ends every connection.
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                let (tls, respond, recorded) = (tls.clone(), respond.clone(), recorded.clone());
                connections.spawn(async move {
                    match tls {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                serve(TokioIo::new(stream), respond, recorded).await;
                            }
                        }
                        None => serve(TokioIo::new(stream), respond, recorded).await,
                    }
                });
            }
        });
        Ok(Self { addr, accepts, requests, task })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// TCP connections accepted so far.
    pub fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().map(|requests| requests.clone()).unwrap_or_default()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve<I>(io: I, respond: Respond, recorded: Arc<Mutex<Vec<Recorded>>>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = service_fn(move |request: Request<Incoming>| {
        let (respond, recorded) = (respond.clone(), recorded.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await.map(|collected| collected.to_bytes().to_vec()).unwrap_or_default();
            if let Ok(mut requests) = recorded.lock() {
                requests.push(Recorded {
                    method: parts.method.to_string(),
                    path: parts.uri.to_string(),
                    headers: parts.headers,
                    body,
                });
            }
            Ok::<_, Infallible>(respond())
        }
    });
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
}

/// A response with `status`, `headers` and `body`.
pub fn reply(status: u16, headers: &[(&str, &str)], body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(*name, *value);
    }
    response.body(Full::new(Bytes::from(body.to_owned()))).expect("valid test response")
}

/// A DNS server where `hooks.test` is 127.0.0.1.
pub async fn dns() -> io::Result<TestDnsServer> {
    TestDnsServer::start([TestRecord::a("hooks.test.", Ipv4Addr::LOCALHOST)]).await
}

/// The sender under test, resolving through `dns`.
pub fn sender(dns: &TestDnsServer, settings: SenderSettings) -> HttpWebhookSender {
    let resolver = HickoryDns::with_server(dns.addr()).expect("resolver");
    HttpWebhookSender::new(Arc::new(resolver), settings).expect("sender")
}

/// Default settings, with private targets allowed or not.
pub fn settings(allow_private: bool) -> SenderSettings {
    SenderSettings { allow_private, ..SenderSettings::default() }
}

/// A signed-looking request to `url` (accepted as the store would hold it, whatever the
/// sender's own settings).
pub fn request(url: &str) -> WebhookRequest {
    WebhookRequest {
        url: WebhookUrl::parse(url, true).expect("test URL"),
        webhook_id: "dlv_01HXYZ".to_owned(),
        webhook_timestamp: 1_714_564_800,
        webhook_signature: "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=".to_owned(),
        body: BODY.to_owned(),
        format: tidings_core::model::WebhookFormat::default(),
    }
}

/// Fails if `listener` has a connection waiting (or one arrives within a short while).
pub async fn assert_no_connection(listener: &TcpListener) {
    let accepted = tokio::time::timeout(Duration::from_millis(300), listener.accept()).await;
    assert!(accepted.is_err(), "the sender opened a connection: {accepted:?}");
}
