//! The HTTPS listener: accepts TCP connections, does the TLS handshake with a deadline, and
//! serves each connection with hyper (HTTP/1.1 and HTTP/2) until shutdown, when it stops
//! accepting and gives in-flight requests a bounded time to finish.
//!
//! No client, with or without a key, can hold the listener down (docs/decisions.md, "Exhaustion"):
//! - a failed or unfinished handshake costs only its own task, dropped after
//!   `TIDINGS_HANDSHAKE_TIMEOUT`;
//! - a connection with no request in flight for `TIDINGS_IDLE_TIMEOUT` is closed, HTTP/2
//!   ones included (`connection`); an HTTP/2 connection has at most
//!   `TIDINGS_HTTP2_MAX_STREAMS` requests at once and is pinged, a peer that stops answering
//!   pings is dropped;
//! - at most `TIDINGS_MAX_CONNECTIONS` connections are open, at most
//!   `TIDINGS_MAX_CONNECTIONS_PER_IP` from one address (`slots`); one more from that address
//!   is closed at once;
//! - at the global cap, or when `accept` fails (out of file descriptors), the server is
//!   "under pressure": it stops accepting for a moment and closes connections idle for a
//!   second, and those whose requests all wait for bodies trickling in slower than 16 KiB/s,
//!   so that new clients get in; the failure is logged once, not once per attempt;
//! - hyper's own answers to unparseable HTTP/1 heads get the envelope (`parse_errors`).

mod connection;
mod parse_errors;
mod slots;

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
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tower::ServiceExt;

use crate::config::ConnectionConfig;
use connection::{Activity, Ended, IdlePolicy};
use parse_errors::EnvelopeParseErrors;
use slots::Slots;

/// Longest a client may take to send a request's headers (HTTP/1; hyper also applies it
/// between the requests of a kept-alive connection).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection may be idle while the server is under pressure.
const IDLE_UNDER_PRESSURE: Duration = Duration::from_secs(1);
/// How long an idle connection being closed may take over it (the HTTP/2 GOAWAY exchange).
const IDLE_CLOSE_GRACE: Duration = Duration::from_secs(5);
/// HTTP/2 keep-alive: a ping this often while a connection is open, and the connection is
/// dropped when one is not answered within [`PING_TIMEOUT`] (a peer that vanished).
const PING_INTERVAL: Duration = Duration::from_secs(30);
/// See [`PING_INTERVAL`].
const PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Under pressure, a connection whose requests all wait for their bodies must receive this
/// many body bytes a second to keep its place: 16 KiB/s, below which even the smallest
/// form takes seconds and a large send could not arrive within the request timeout.
const MIN_UPLOAD_RATE_UNDER_PRESSURE: u64 = 16 * 1024;
/// Under pressure with no new client for this long, the pressure is looked at again.
const PRESSURE_RECHECK: Duration = Duration::from_secs(1);
/// Pause after a failed `accept` (usually: out of file descriptors) before the next one.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// While `accept` keeps failing, one line at most this often.
const ACCEPT_FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Serves `app` on `listener` until `shutdown` completes, then waits up to `grace` for
/// in-flight requests. Returns whether every connection closed within `grace`.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    limits: &ConnectionConfig,
) -> bool {
    let app = app.layer(axum::middleware::from_fn(log_request));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.http2_max_streams)
        // Above the router's limits (URI, header section), so that a head over those reaches
        // the router and gets its envelope; only one four times over is refused by h2 itself
        // (a bare 431).
        .max_header_list_size((4 * tidings_http::MAX_HEADER_LIST_BYTES) as u32)
        .keep_alive_interval(PING_INTERVAL)
        .keep_alive_timeout(PING_TIMEOUT);
    let idle = IdlePolicy {
        timeout: limits.idle_timeout,
        under_pressure: IDLE_UNDER_PRESSURE,
        close_grace: IDLE_CLOSE_GRACE,
        shutdown_grace: grace,
        min_upload_rate: MIN_UPLOAD_RATE_UNDER_PRESSURE * IDLE_UNDER_PRESSURE.as_secs(),
    };
    let slots = Slots::new(limits.max_connections, limits.max_connections_per_ip);
    let (pressure_tx, pressure) = watch::channel(false);
    let (stopping_tx, stopping) = watch::channel(false);
    // Every connection task holds a sender; `recv` ends once all of them are gone.
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    let mut failures = AcceptFailures::default();
    let mut at_cap = false;
    tokio::pin!(shutdown);
    loop {
        // A place first: over the cap, new clients wait in the kernel's backlog while idle
        // connections are closed to make room.
        let total = match slots.try_total() {
            Some(total) => total,
            None => {
                if !at_cap {
                    tracing::warn!(
                        max = slots.max_total(),
                        "connection limit reached (TIDINGS_MAX_CONNECTIONS): closing idle connections, new clients wait"
                    );
                    at_cap = true;
                }
                pressure_tx.send_replace(true);
                tokio::select! {
                    () = &mut shutdown => break,
                    total = slots.total() => total,
                }
            }
        };
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            // No client for a while under pressure: see whether it is over, so that idle
            // connections get their full timeout again.
            () = tokio::time::sleep(PRESSURE_RECHECK), if *pressure_tx.borrow() => {
                at_cap = still_at_cap(at_cap, &slots);
                if !at_cap {
                    pressure_tx.send_replace(false);
                }
                continue;
            }
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    failures.failed(&e);
                    pressure_tx.send_replace(true);
                    drop(total);
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                    }
                }
            },
        };
        failures.succeeded();
        // Without it a response written in pieces (the TLS handshake's last flight, then
        // the response) waits for the client's delayed ACK: ~40 ms on a new connection.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, "cannot set TCP_NODELAY: {e}");
        }
        at_cap = still_at_cap(at_cap, &slots);
        if !at_cap {
            pressure_tx.send_if_modified(|p| std::mem::replace(p, false));
        }
        let Some(slot) = slots.claim(peer.ip(), total) else {
            // Closed before the handshake: it costs no TLS work.
            tracing::debug!(%peer, "connection refused: too many from this address (TIDINGS_MAX_CONNECTIONS_PER_IP)");
            continue;
        };
        let (acceptor, app, builder) = (acceptor.clone(), app.clone(), builder.clone());
        let (pressure, mut stopping, alive) = (pressure.clone(), stopping.clone(), alive_tx.clone());
        let handshake_timeout = limits.handshake_timeout;
        tokio::spawn(async move {
            let _slot = slot;
            let _alive = alive;
            let handshaking = tokio::time::timeout(handshake_timeout, handshake(&acceptor, tcp));
            let tls = match tokio::select! {
                done = handshaking => done,
                // Nothing in flight yet: shutdown need not wait for it.
                Ok(_) = stopping.wait_for(|stopping| *stopping) => return,
            } {
                Ok(Ok(Some(tls))) => tls,
                Ok(Ok(None)) => return tracing::debug!(%peer, "plain HTTP request refused"),
                Ok(Err(e)) => return tracing::debug!(%peer, "TLS handshake failed: {e}"),
                Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
            };
            let activity = Activity::default();
            let requests = activity.clone();
            let uploads = tidings_http::ConnectionUploads::default();
            let bodies = uploads.clone();
            // The adapter's failed-auth throttle keys on the client address (the peer, or
            // the one a trusted proxy forwarded); its body reader reports to `uploads`.
            let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                let busy = requests.begin();
                req.extensions_mut().insert(ConnectInfo(peer));
                req.extensions_mut().insert(bodies.clone());
                let response = app.clone().oneshot(req);
                async move {
                    let response = response.await;
                    drop(busy);
                    response
                }
            });
            let connection = builder.serve_connection(TokioIo::new(EnvelopeParseErrors::new(tls)), service);
            let ended =
                connection::drive(connection, |c| c.graceful_shutdown(), &activity, &uploads, idle, pressure, stopping)
                    .await;
            match ended {
                Ended::Finished(Ok(())) => {}
                Ended::Finished(Err(e)) => tracing::debug!(%peer, "connection ended with an error: {e}"),
                Ended::Idle => tracing::debug!(%peer, "idle connection closed"),
                Ended::Shutdown => {}
                Ended::Dropped => tracing::debug!(%peer, "connection dropped: it did not close in time"),
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: no longer accepting connections");
    stopping_tx.send_replace(true);
    drop(alive_tx);
    match tokio::time::timeout(grace, alive_rx.recv()).await {
        Ok(_) => true,
        Err(_) => {
            tracing::warn!("in-flight requests did not finish within {grace:?}; closing them");
            false
        }
    }
}

/// Whether the server is still at its connection cap: once it was, until a tenth of the
/// places are free again (so that shedding does not flap on and off at every connection).
fn still_at_cap(at_cap: bool, slots: &Slots) -> bool {
    if at_cap && slots.free() >= (slots.max_total() / 10).max(1) {
        tracing::info!("below the connection limit again");
        return false;
    }
    at_cap
}

/// Failed `accept` calls: the first of a run is logged, then at most one line a minute with
/// the count, and one when accepting works again.
#[derive(Debug, Default)]
struct AcceptFailures {
    /// Failures since accepting last worked.
    run: u64,
    /// Failures not yet logged, and when the last line was written.
    unlogged: u64,
    logged_at: Option<Instant>,
}

impl AcceptFailures {
    fn failed(&mut self, e: &std::io::Error) {
        self.run += 1;
        self.unlogged += 1;
        if self.logged_at.is_none_or(|at| at.elapsed() >= ACCEPT_FAILURE_LOG_INTERVAL) {
            tracing::warn!(
                failures = self.unlogged,
                "accept failed: {e}; pausing new connections and closing idle ones until it works again"
            );
            self.unlogged = 0;
            self.logged_at = Some(Instant::now());
        }
    }

    fn succeeded(&mut self) {
        if self.run > 0 {
            tracing::info!(failures = self.run, "accepting connections again");
            self.run = 0;
            self.unlogged = 0;
        }
    }
}

/// The TLS handshake; `None` for a plain-HTTP client, which gets a 400 in the envelope
/// telling it to use https (a TLS record starts with 0x16; an HTTP request with a letter).
/// `https_required` is not an API code (docs/api.md#errors): this answer is outside the API, which
/// exists only over TLS.
async fn handshake(acceptor: &TlsAcceptor, tcp: TcpStream) -> std::io::Result<Option<TlsStream<TcpStream>>> {
    let mut first = [0u8; 1];
    if tcp.peek(&mut first).await? == 1 && first[0].is_ascii_alphabetic() {
        let body = tidings_http::failure_body(
            axum::http::StatusCode::BAD_REQUEST,
            "https_required",
            "this server speaks HTTPS only",
        );
        let mut response = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        response.extend_from_slice(&body);
        let mut tcp = tcp;
        // Best effort: the client may already be gone.
        let _ = tcp.write_all(&response).await;
        let _ = tcp.shutdown().await;
        return Ok(None);
    }
    acceptor.accept(tcp).await.map(Some)
}

/// One log line per request, with its id. The query string is left out: it can hold
/// addresses (the `to` filter of message lists); so are a tracking link's token and path
/// segments holding an address ([`tidings_http::loggable_path`]).
async fn log_request(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let path = tidings_http::loggable_path(req.uri().path()).into_owned();
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(a)| a.ip());
    let response = next.run(req).await;
    // The router tells who the client is (behind a trusted proxy, not the peer).
    let peer = response.extensions().get::<tidings_http::ClientIp>().map(|c| c.0).or(peer);
    let status = response.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    // The router set it (outside the router's `request` span, this line names it itself).
    let request_id = response.headers().get(tidings_http::REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
    let peer = peer.map_or_else(|| "-".to_owned(), |ip| ip.to_string());
    let latency_ms = format!("{latency_ms:.2}");
    // A refusal names its `error.code` (422 `domain_not_verified`, 429 `rate_limit_exceeded`).
    match response.extensions().get::<tidings_http::ErrorCode>() {
        Some(code) => {
            let error = code.0.as_ref();
            tracing::info!(target: "tidings::request", %method, %path, status, error, %latency_ms, %peer, %request_id, "request");
        }
        None => {
            tracing::info!(target: "tidings::request", %method, %path, status, %latency_ms, %peer, %request_id, "request")
        }
    }
    response
}
