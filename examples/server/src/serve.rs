//! The HTTPS listener: accepts TCP connections, does the TLS handshake with a deadline, and
//! serves each connection with hyper (HTTP/1.1 and HTTP/2) until shutdown, when it stops
//! accepting and gives in-flight requests a bounded time to finish.
//!
//! A failed handshake (a plain-HTTP client, a scanner, a client that distrusts the
//! certificate) costs only its own connection task, and a client that never finishes the
//! handshake is dropped after [`HANDSHAKE_TIMEOUT`].

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tower::ServiceExt;

/// Longest a client may take to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` until `shutdown` completes, then waits up to `grace` for
/// in-flight requests. Returns whether every connection closed within `grace`.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> bool {
    let app = app.layer(axum::middleware::from_fn(log_request));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (acceptor, app, builder, watcher) = (acceptor.clone(), app.clone(), builder.clone(), graceful.watcher());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&acceptor, tcp)).await {
                Ok(Ok(Some(tls))) => tls,
                Ok(Ok(None)) => return tracing::debug!(%peer, "plain HTTP request refused"),
                Ok(Err(e)) => return tracing::debug!(%peer, "TLS handshake failed: {e}"),
                Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
            };
            // The adapter's failed-auth throttle keys on the client address.
            let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                app.clone().oneshot(req)
            });
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!(%peer, "connection ended with an error: {e}");
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: no longer accepting connections");
    match tokio::time::timeout(grace, graceful.shutdown()).await {
        Ok(()) => true,
        Err(_) => {
            tracing::warn!("in-flight requests did not finish within {grace:?}; closing them");
            false
        }
    }
}

/// The TLS handshake; `None` for a plain-HTTP client, which gets a 400 in the envelope
/// telling it to use https (a TLS record starts with 0x16; an HTTP request with a letter).
/// `https_required` is not among contract §1's codes: this answer is outside the API, which
/// exists only over TLS.
async fn handshake(acceptor: &TlsAcceptor, tcp: TcpStream) -> std::io::Result<Option<TlsStream<TcpStream>>> {
    let mut first = [0u8; 1];
    if tcp.peek(&mut first).await? == 1 && first[0].is_ascii_alphabetic() {
        const BODY: &str = r#"{"success":false,"statusCode":400,"message":"this server speaks HTTPS only","data":null,"error":{"code":"https_required","message":"this server speaks HTTPS only"}}"#;
        let response = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BODY}",
            BODY.len()
        );
        let mut tcp = tcp;
        // Best effort: the client may already be gone.
        let _ = tcp.write_all(response.as_bytes()).await;
        let _ = tcp.shutdown().await;
        return Ok(None);
    }
    acceptor.accept(tcp).await.map(Some)
}

/// One log line per request, with its id. The query string is left out: it can hold
/// addresses; so is a tracking link's token ([`tidings_http::loggable_path`]).
async fn log_request(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let path = tidings_http::loggable_path(req.uri().path()).into_owned();
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(a)| a.ip());
    let response = next.run(req).await;
    let status = response.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    // The router set it (outside the router's `request` span, this line names it itself).
    let request_id = response.headers().get(tidings_http::REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
    tracing::info!(target: "tidings::request", %method, %path, status, latency_ms = format!("{latency_ms:.2}"), peer = ?peer, %request_id, "request");
    response
}
