//! No one, with or without a key, can exhaust the server, against the real binary:
//!
//! - connections: idle HTTP/2 connections (TLS and the preface, nothing more) are closed
//!   after `TIDINGS_IDLE_TIMEOUT`; one address holds at most
//!   `TIDINGS_MAX_CONNECTIONS_PER_IP`; at `TIDINGS_MAX_CONNECTIONS` idle connections make
//!   room for a fresh client; out of file descriptors (a low `RLIMIT_NOFILE` set with
//!   `prlimit`), the server keeps serving and logs the failing `accept` once;
//! - bodies: a declared `Content-Length` over the limit is a 413 at once; concurrent large
//!   sends stay within the budget of body bytes in flight (503 with `Retry-After` beyond
//!   it), and the process's peak memory stays under [`PEAK_MEMORY_BOUND_MIB`];
//! - heads: an oversized URI or header section and an invalid header byte get the envelope,
//!   on HTTP/1 (where hyper answers some itself) and HTTP/2.
//!
//! Connections are made with rustls directly (tokio-rustls), so that a test controls every
//! byte; fresh clients are the ordinary reqwest client.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{assert_error, server_with_dns, verified_domain};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use reqwest::Method;
use serde_json::{Value, json};
use tidings_e2e::{Options, TestServer, fresh_key};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

/// What the server's peak resident memory (VmHWM) must stay under while six sends of
/// 40.5 MB arrive at once, with the smallest budget of body bytes in flight (56 MiB: one
/// largest send at a time) and a 32 MiB sled cache. Measured here: 607–723 MiB on sled and
/// 568 MiB on PostgreSQL, against 886–931 MiB (sled) and 1,673 MiB (PostgreSQL) before the
/// budget existed, all six at once. Much of what is left is not the request path (one send
/// alone peaks at 181 MiB) but grows with the volume written (SECURITY.md). The bound leaves
/// room for the allocator's and the machine's variance (a tighter one failed now and then);
/// what shows that the budget works is the 503s this test also requires, which the code
/// before the budget never gave.
const PEAK_MEMORY_BOUND_MIB: u64 = 1024;

pub(crate) fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

pub(crate) async fn start(env: &[(&str, &str)]) -> TestServer {
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    TestServer::start_with(Options { bootstrap_key: Some(fresh_key()), env, ..Options::default() }).await
}

/// A TLS client trusting only the server's certificate, offering `alpn`.
pub(crate) fn connector(server: &TestServer, alpn: &[u8]) -> TlsConnector {
    let pem = std::fs::read(server.cert_path()).expect("the server's certificate");
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.expect("a PEM certificate")).expect("a usable certificate");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// A TLS connection to the server from `from`, ALPN `alpn`.
pub(crate) async fn tls(server: &TestServer, tls: &TlsConnector, from: IpAddr) -> io::Result<TlsStream<TcpStream>> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    let tcp = socket.connect(server.addr()).await?;
    let name = ServerName::IpAddress(Ipv4Addr::LOCALHOST.into());
    tls.connect(name, tcp).await
}

/// The HTTP/2 connection preface and an empty SETTINGS frame: a client that says it speaks
/// HTTP/2 and then asks for nothing.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// An HTTP/2 connection from `from` that sent the preface and then holds still; `None` if
/// the server refused it (closed before or during the handshake) or did not finish the
/// handshake within `wait`.
async fn hold_h2(
    server: &TestServer,
    connector: &TlsConnector,
    from: IpAddr,
    wait: Duration,
) -> Option<TlsStream<TcpStream>> {
    let attempt = async {
        let mut stream = tls(server, connector, from).await?;
        stream.write_all(H2_PREFACE).await?;
        stream.flush().await?;
        io::Result::Ok(stream)
    };
    tokio::time::timeout(wait, attempt).await.ok()?.ok()
}

/// Reads (and drops) whatever the server sends until it closes the connection; how long that
/// took, or `None` if it was still open after `limit`.
async fn closed_within(mut stream: TlsStream<TcpStream>, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    let read_to_end = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, read_to_end).await.ok().map(|()| started.elapsed())
}

/// Whether the server closed `stream` (EOF or an error on read) within `wait`.
async fn is_closed(stream: &mut TlsStream<TcpStream>, wait: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// `GET /healthz` from `from`, with one try of at most `timeout`.
async fn healthz_from(server: &TestServer, from: IpAddr, timeout: Duration) -> Result<u16, String> {
    let client = server.client_from(from);
    match tokio::time::timeout(timeout, client.get(server.url("/healthz")).send()).await {
        Ok(Ok(response)) => Ok(response.status().as_u16()),
        Ok(Err(e)) => Err(format!("{e:?}")),
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

/// Retries [`healthz_from`] until a 200 or `within` has passed; how long it took.
pub(crate) async fn served_within(server: &TestServer, from: IpAddr, within: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        let left = within.saturating_sub(started.elapsed());
        match healthz_from(server, from, left.min(Duration::from_secs(10))).await {
            Ok(200) => return Ok(started.elapsed()),
            outcome if started.elapsed() >= within => return Err(format!("last try: {outcome:?}")),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn log_lines(server: &TestServer, needle: &str) -> usize {
    server.stderr_lines().iter().filter(|l| l.contains(needle)).count()
}

#[tokio::test]
async fn idle_http2_connections_and_silent_tls_clients_are_closed_after_the_idle_timeout() {
    let server = start(&[("TIDINGS_IDLE_TIMEOUT", "2s")]).await;
    let h2 = connector(&server, b"h2");
    let mut held = Vec::new();
    for _ in 0..50 {
        held.push(hold_h2(&server, &h2, ip(1), Duration::from_secs(10)).await.expect("an idle HTTP/2 connection"));
    }
    // TLS done, then not one byte: hyper waits to learn the protocol.
    let silent = tls(&server, &connector(&server, b"http/1.1"), ip(1)).await.expect("a TLS connection");
    let started = Instant::now();
    let waits = futures::future::join_all(
        held.into_iter().chain([silent]).map(|stream| closed_within(stream, Duration::from_secs(20))),
    )
    .await;
    let closed: Vec<Duration> = waits.iter().flatten().copied().collect();
    println!(
        "idle connections: {} of {} closed, the last after {:?} (idle timeout 2 s)",
        closed.len(),
        waits.len(),
        started.elapsed()
    );
    assert_eq!(closed.len(), waits.len(), "every idle connection is closed: {waits:?}");
    for waited in closed {
        assert!(waited >= Duration::from_millis(1500), "closed before the idle timeout: {waited:?}");
        assert!(waited <= Duration::from_secs(10), "closed long after the idle timeout: {waited:?}");
    }
    // A connection in use is not idle: a request still works on a new one.
    assert_eq!(healthz_from(&server, ip(1), Duration::from_secs(10)).await, Ok(200));
}

#[tokio::test]
async fn one_address_holds_at_most_its_share_and_other_addresses_are_served() {
    let server = start(&[("TIDINGS_MAX_CONNECTIONS_PER_IP", "20")]).await;
    let h2 = connector(&server, b"h2");
    let attempts =
        futures::future::join_all((0..300).map(|_| hold_h2(&server, &h2, ip(1), Duration::from_secs(10)))).await;
    let mut held: Vec<_> = attempts.into_iter().flatten().collect();
    // The refused ones were closed at once; the rest must still be open.
    let mut open = 0;
    for stream in &mut held {
        if !is_closed(stream, Duration::from_millis(20)).await {
            open += 1;
        }
    }
    println!("per-address cap 20: {} of 300 connections from 127.0.0.1 held open", open);
    assert_eq!(open, 20, "exactly the per-address cap is held");

    assert!(healthz_from(&server, ip(1), Duration::from_secs(5)).await.is_err(), "a 21st from 127.0.0.1 is refused");
    let took = served_within(&server, ip(2), Duration::from_secs(5)).await.expect("127.0.0.2 is served");
    println!("a client on 127.0.0.2 was served in {took:?} while 127.0.0.1 held 20");

    held.truncate(15);
    let took = served_within(&server, ip(1), Duration::from_secs(10)).await.expect("places given back are usable");
    println!("127.0.0.1 served again {took:?} after closing 5 of its connections");
}

#[tokio::test]
async fn at_the_connection_cap_idle_connections_make_room_for_a_fresh_client() {
    let server = start(&[("TIDINGS_MAX_CONNECTIONS", "300")]).await;
    let h2 = connector(&server, b"h2");
    let attempts = futures::future::join_all(
        (0..300).map(|i| hold_h2(&server, &h2, ip(10 + (i % 3) as u8), Duration::from_secs(15))),
    )
    .await;
    let mut held: Vec<_> = attempts.into_iter().flatten().collect();
    println!("connection cap 300: {} idle HTTP/2 connections held from 3 addresses", held.len());
    assert_eq!(held.len(), 300, "all 300 fit under the cap");

    let took = served_within(&server, ip(2), Duration::from_secs(15)).await.expect("a fresh client is served");
    println!("a fresh client on 127.0.0.2 was served in {took:?} with the cap reached");
    let mut shed = 0;
    for stream in &mut held {
        if is_closed(stream, Duration::from_millis(10)).await {
            shed += 1;
        }
    }
    println!("idle connections closed to make room: {shed}");
    assert!(shed >= 1, "an idle connection was closed to make room");
    assert_eq!(log_lines(&server, "connection limit reached"), 1, "the cap is logged once");
}

/// The server's open file descriptors.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[tokio::test]
async fn out_of_file_descriptors_the_server_keeps_serving_and_logs_once() {
    // The caps far above the descriptors, so that descriptors run out first.
    let server = start(&[("TIDINGS_MAX_CONNECTIONS", "100000"), ("TIDINGS_MAX_CONNECTIONS_PER_IP", "100000")]).await;
    let pid = server.pid();
    let limit = open_fds(pid) + 60;
    let status = std::process::Command::new("prlimit")
        .args([format!("--pid={pid}"), format!("--nofile={limit}:{limit}")])
        .status()
        .expect("run prlimit (util-linux)");
    assert!(status.success(), "prlimit failed");
    let h2 = connector(&server, b"h2");
    let attempts = futures::future::join_all(
        (0..200).map(|i| hold_h2(&server, &h2, ip(20 + (i % 4) as u8), Duration::from_secs(5))),
    )
    .await;
    let held: Vec<_> = attempts.into_iter().flatten().collect();
    println!("RLIMIT_NOFILE {limit}: {} of 200 idle connections got through the handshake", held.len());
    let failed_accepts = || log_lines(&server, "accept failed");
    assert!(failed_accepts() >= 1, "descriptors ran out (no `accept failed` line)");

    let took = served_within(&server, ip(2), Duration::from_secs(30)).await.expect("a fresh client is served");
    println!("a fresh client was served {took:?} after the descriptors ran out");
    // The key-free path above touched no store; a send touches it and must work too.
    let (status, body) = server.get("/v1/keys", server.key()).await;
    assert_eq!(status, 200, "{body}");
    println!("`accept failed` lines: {}", failed_accepts());
    assert_eq!(failed_accepts(), 1, "the failing accept is logged once:\n{}", server.stderr_lines().join("\n"));
    drop(held);
}

/// One HTTP/1.1 exchange on a fresh TLS connection: writes `request`, reads one response.
/// Status, lower-cased head, body.
async fn raw_http1(server: &TestServer, request: &[u8]) -> (u16, String, Vec<u8>) {
    let mut stream = tls(server, &connector(server, b"http/1.1"), ip(1)).await.expect("a TLS connection");
    // The server may answer and close before it has read everything: a failed write is fine.
    let _ = stream.write_all(request).await;
    let _ = stream.flush().await;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let read = async {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                if buf.len() >= end + 4 + length {
                    let status = head[9..12].parse().unwrap();
                    return (status, head, buf[end + 4..end + 4 + length].to_vec());
                }
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => panic!("closed before a whole response: {}", String::from_utf8_lossy(&buf)),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read).await.expect("a response within 10 s")
}

fn envelope(status: u16, head: &str, body: &[u8], code: &str, what: &str) {
    assert!(head.contains("content-type: application/json"), "{what}: {head}");
    let body: Value = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {head}"));
    assert_error(status, &body, status, code, what);
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_413_at_once() {
    let server = start(&[]).await;
    let key = server.key().to_owned();
    for (path, declared) in [("/v1/messages", 100 << 20), ("/v1/templates", 11 << 20)] {
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n{{"
        );
        let started = Instant::now();
        let (status, head, body) = raw_http1(&server, request.as_bytes()).await;
        let took = started.elapsed();
        println!("{path}, Content-Length {declared}, one byte sent: {status} after {took:?}");
        envelope(status, &head, &body, "payload_too_large", path);
        assert!(took < Duration::from_secs(5), "answered at once, not after the request timeout: {took:?}");
    }
}

#[tokio::test]
async fn oversized_heads_and_invalid_header_bytes_get_the_envelope_on_http1() {
    let server = start(&[]).await;
    let key = server.key().to_owned();
    let cases: Vec<(String, Vec<u8>, u16, &str)> = vec![
        (
            "a 10 KB query (the router's limit)".into(),
            format!(
                "GET /v1/keys?filler={} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {key}\r\n\r\n",
                "a".repeat(10_000)
            )
            .into_bytes(),
            414,
            "uri_too_long",
        ),
        (
            "a 70 KB path (hyper's own limit)".into(),
            format!("GET /{} HTTP/1.1\r\nhost: localhost\r\n\r\n", "a".repeat(70_000)).into_bytes(),
            414,
            "uri_too_long",
        ),
        (
            "a control byte in a header value".into(),
            format!("GET /v1/keys HTTP/1.1\r\nhost: localhost\r\nx-bad: a\x01b\r\nauthorization: Bearer {key}\r\n\r\n")
                .into_bytes(),
            400,
            "bad_request",
        ),
        (
            "a space in a header name".into(),
            b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nbad name: x\r\n\r\n".to_vec(),
            400,
            "bad_request",
        ),
        (
            "20 KB of headers (the router's limit)".into(),
            format!(
                "GET /v1/keys HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {key}\r\n{}\r\n",
                (0..10).map(|i| format!("x-fill-{i}: {}\r\n", "b".repeat(2000))).collect::<String>()
            )
            .into_bytes(),
            431,
            "headers_too_large",
        ),
        (
            "1 MB of headers (hyper's own limit)".into(),
            format!(
                "GET /healthz HTTP/1.1\r\nhost: localhost\r\n{}\r\n",
                (0..99).map(|i| format!("x-fill-{i}: {}\r\n", "b".repeat(10_000))).collect::<String>()
            )
            .into_bytes(),
            431,
            "headers_too_large",
        ),
        (
            "200 headers (hyper's count limit)".into(),
            format!(
                "GET /healthz HTTP/1.1\r\nhost: localhost\r\n{}\r\n",
                (0..200).map(|i| format!("x-{i}: y\r\n")).collect::<String>()
            )
            .into_bytes(),
            431,
            "headers_too_large",
        ),
    ];
    for (what, request, status, code) in cases {
        let (got, head, body) = raw_http1(&server, &request).await;
        println!("HTTP/1.1, {what}: {got} {}", String::from_utf8_lossy(&body));
        assert_eq!(got, status, "{what}: {head}");
        envelope(got, &head, &body, code, &what);
    }
    // Still serving.
    assert_eq!(healthz_from(&server, ip(1), Duration::from_secs(5)).await, Ok(200));
}

#[tokio::test]
async fn oversized_heads_get_the_envelope_on_http2() {
    let server = start(&[]).await;
    let key = server.key().to_owned();
    let long_query = server.request(Method::GET, &format!("/v1/keys?filler={}", "a".repeat(10_000))).bearer_auth(&key);
    let mut many_headers = server.request(Method::GET, "/v1/keys").bearer_auth(&key);
    for i in 0..10 {
        many_headers = many_headers.header(format!("x-fill-{i}"), "b".repeat(2000));
    }
    for (what, request, status, code) in [
        ("a 10 KB query", long_query, 414, "uri_too_long"),
        ("20 KB of headers", many_headers, 431, "headers_too_large"),
    ] {
        let response = request.send().await.expect("an answer");
        assert_eq!(response.version(), reqwest::Version::HTTP_2, "{what}: the test speaks HTTP/2");
        let (got, body) = tidings_e2e::into_parts(response).await;
        println!("HTTP/2, {what}: {got} {body}");
        assert_error(got, &body, status, code, what);
    }
}

/// The process's peak resident set (VmHWM), in MiB.
pub(crate) fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib / 1024
}

#[tokio::test]
async fn concurrent_large_sends_stay_within_the_body_budget_and_the_memory_bound() {
    let (server, dns) = server_with_dns(&[
        ("TIDINGS_DELIVERY", "hold"),
        ("TIDINGS_STORE_CACHE", "32MiB"),
        ("TIDINGS_MAX_BODY_BYTES_IN_FLIGHT", "56MiB"),
    ])
    .await;
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "big.example").await;
    let pid = server.pid();
    let before = peak_rss_mib(pid);
    // 29 MiB of file: 38.7 MB of base64, as in the issue.
    let file: Vec<u8> = (0..29u32 * 1024 * 1024).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let body = Arc::new(
        serde_json::to_vec(&json!({
            "from": "news@big.example",
            "to": "ann@example.net",
            "subject": "a large file",
            "text": "attached",
            "attachments": [{"filename": "big.bin", "contentType": "application/octet-stream", "content": STANDARD.encode(&file)}],
        }))
        .unwrap(),
    );
    drop(file);
    println!("body: {:.1} MB", body.len() as f64 / 1e6);
    let sends = (0..6).map(|i| {
        let (server, key, body) = (&server, key.clone(), Arc::clone(&body));
        async move {
            let mut busy = 0;
            loop {
                let response = server
                    .request(Method::POST, "/v1/messages")
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .header("idempotency-key", format!("big-{i}"))
                    .body(body.to_vec())
                    .timeout(Duration::from_secs(120))
                    .send()
                    .await
                    .expect("an answer");
                let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
                let (status, envelope) = tidings_e2e::into_parts(response).await;
                if status == 201 {
                    return busy;
                }
                assert_error(status, &envelope, 503, "unavailable", "a send over the budget");
                let wait: u64 = retry_after.expect("Retry-After on the 503").parse().expect("whole seconds");
                busy += 1;
                assert!(busy < 120, "still refused after {busy} tries");
                tokio::time::sleep(Duration::from_secs(wait)).await;
            }
        }
    });
    let busy: Vec<u32> = futures::future::join_all(sends).await;
    let peak = peak_rss_mib(pid);
    println!(
        "6 concurrent sends of {:.1} MB: all 201; 503s on the way: {busy:?}; VmHWM {before} MiB before, {peak} MiB after (bound {PEAK_MEMORY_BOUND_MIB} MiB)",
        body.len() as f64 / 1e6
    );
    assert!(busy.iter().sum::<u32>() >= 1, "six 40.5 MB bodies do not fit a 56 MiB budget at once");
    assert!(peak < PEAK_MEMORY_BOUND_MIB, "peak memory {peak} MiB over the bound {PEAK_MEMORY_BOUND_MIB} MiB");
    let (status, listed) = server.get("/v1/messages?limit=10", &key).await;
    assert_eq!(status, 200);
    assert_eq!(listed["data"].as_array().unwrap().len(), 6, "six messages stored, no more");
}
