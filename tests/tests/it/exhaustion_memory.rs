//! What clients can make the server hold, against the real binary (issue #28, items 3–6 and
//! 12): every byte counted in one memory budget shared per workspace (per client address
//! without a key), and slow holders losing their place:
//!
//! - half-sent dashboard sign-in forms from one address hold at most that address's share;
//! - unread `/messages/{id}/html` and `/eml` responses of one workspace hold its share, not a
//!   copy each; an `html` over 5 MiB is a 422;
//! - slow uploads of one workspace leave room for another workspace's sends;
//! - a batch is held to the general body limit (10 MiB) and parsed without a `Value` tree;
//! - at the connection cap, connections whose requests all wait for trickling bodies are
//!   closed to make room for a fresh client.
//!
//! Each test prints the figures it measured (memory from `/proc/<pid>/status`).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::Request;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use reqwest::Method;
use serde_json::json;
use tidings_e2e::{DataDir, Options, TestServer};
use tokio::io::AsyncWriteExt;
use tokio_rustls::TlsConnector;

use crate::common::assert_error;
use crate::exhaustion::{connector, ip, peak_rss_mib, served_within, start, tls};

const MIB: usize = 1024 * 1024;

/// The server's resident memory now (VmRSS), in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib / 1024
}

/// An HTTP/2 client connection from `from`, driven by a task of its own. It offers the
/// default 64 KiB receive window, so a response it does not read stops there.
async fn h2_client(server: &TestServer, connector: &TlsConnector, from: IpAddr) -> h2::client::SendRequest<Bytes> {
    let stream = tls(server, connector, from).await.expect("a TLS connection");
    let (client, connection) = h2::client::handshake(stream).await.expect("an HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Statuses of the responses that arrived, by the tasks waiting for them.
#[derive(Clone, Default)]
struct Statuses(Arc<Mutex<Vec<u16>>>);

impl Statuses {
    fn count(&self, status: u16) -> usize {
        self.0.lock().unwrap().iter().filter(|s| **s == status).count()
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// Opens a stream with `request`, sends `sent` bytes of its body and no more; the returned
/// stream keeps it open. Its status, when it comes, goes into `statuses`.
async fn half_sent(
    client: &h2::client::SendRequest<Bytes>,
    request: Request<()>,
    sent: usize,
    statuses: &Statuses,
) -> Option<h2::SendStream<Bytes>> {
    let mut client = client.clone().ready().await.ok()?;
    let (response, mut body) = client.send_request(request, false).ok()?;
    body.send_data(Bytes::from(vec![b'k'; sent]), false).ok()?;
    let statuses = statuses.clone();
    tokio::spawn(async move {
        if let Ok(response) = response.await {
            statuses.0.lock().unwrap().push(response.status().as_u16());
        }
    });
    Some(body)
}

/// Signs in with `key` from the ordinary client; the session cookie.
async fn sign_in(server: &TestServer, key: &str) -> String {
    let signed = server
        .request(Method::POST, "/sign-in")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("key={key}"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(signed.status(), 303, "signed in");
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    cookie.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn half_sent_sign_in_forms_from_one_address_hold_only_its_share_of_memory() {
    const CONNECTIONS: usize = 120;
    const STREAMS: usize = 100;
    const DECLARED: usize = 64 * 1024;
    const SENT: usize = 60 * 1024;
    let server = start(&[]).await;
    let pid = server.pid();
    let before = rss_mib(pid);
    let h2 = connector(&server, b"h2");
    let statuses = Statuses::default();
    let mut clients = Vec::new();
    let mut streams = Vec::new();
    let started = Instant::now();
    for _ in 0..CONNECTIONS {
        let client = h2_client(&server, &h2, ip(10)).await;
        for _ in 0..STREAMS {
            let request = Request::post(server.url("/sign-in"))
                .header("content-type", "application/x-www-form-urlencoded")
                .header("content-length", DECLARED)
                .body(())
                .unwrap();
            streams.extend(half_sent(&client, request, SENT, &statuses).await);
        }
        clients.push(client);
    }
    println!(
        "{CONNECTIONS} HTTP/2 connections × {STREAMS} sign-in forms of {DECLARED} bytes, {SENT} sent, opened in {:?}",
        started.elapsed()
    );
    // Let what was sent arrive and what is held settle.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = rss_mib(pid);

    // Another address signs in meanwhile.
    let other = server.client_from(ip(2));
    let asked = Instant::now();
    let signed = other
        .post(server.url("/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("key={}", server.key()))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("an answer for another address");
    let took = asked.elapsed();
    let peak = peak_rss_mib(pid);
    println!(
        "half-sent sign-in forms: {} streams held, {} answered 503, {} answered otherwise; VmRSS {before} → {during} MiB, VmHWM {peak} MiB; 127.0.0.2 signed in with {} in {took:?}",
        streams.len(),
        statuses.count(503),
        statuses.len() - statuses.count(503),
        signed.status(),
    );
    assert_eq!(signed.status(), 303, "another address is served");
    assert!(statuses.count(503) > 0, "one address cannot hold {CONNECTIONS} × {STREAMS} forms");
    // Its share is 64 MiB of body bytes (half the default 128 MiB budget); the rest is the
    // connections and streams themselves.
    assert!(during.saturating_sub(before) < 300, "memory grew from {before} to {during} MiB");
    assert!(peak < before + 400, "peak memory {peak} MiB, {before} MiB at the start");
    drop(streams);
}

#[tokio::test]
async fn unread_html_and_eml_responses_of_one_workspace_hold_its_share_not_a_copy_each() {
    const STREAMS: usize = 60;
    let server = start(&[]).await;
    let key = server.key().to_owned();
    let limit = tidings_core::usecases::MAX_BODY_PART_BYTES;

    let too_large = json!({"to": "ann@example.net", "subject": "big", "html": "h".repeat(limit + 1)});
    let (status, body) = server.post("/v1/messages", &key, too_large).await;
    assert_error(status, &body, 422, "validation_error", "an html over 5 MiB");
    assert_eq!(body["error"]["details"][0]["field"], "html", "{body}");

    // The sandbox domain and the outbox: the message is written as an .eml at once.
    let html = format!("<p>{}</p>", "h".repeat(limit - 7));
    let (status, body) =
        server.post("/v1/messages", &key, json!({"to": "ann@example.net", "subject": "big", "html": html})).await;
    assert_eq!(status, 201, "{body}");
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, message) = server.get(&format!("/v1/messages/{id}"), &key).await;
        if message["data"]["status"] == "Delivered" {
            break;
        }
        assert!(Instant::now() < deadline, "not delivered: {message}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cookie = sign_in(&server, &key).await;
    let pid = server.pid();
    let h2 = connector(&server, b"h2");

    for what in ["html", "eml"] {
        let before = rss_mib(pid);
        let client = h2_client(&server, &h2, ip(20)).await;
        let mut unread = Vec::new();
        let mut statuses = Vec::new();
        for _ in 0..STREAMS {
            let request =
                Request::get(server.url(&format!("/messages/{id}/{what}"))).header("cookie", &cookie).body(()).unwrap();
            let mut ready = client.clone().ready().await.expect("a stream");
            let (response, _) = ready.send_request(request, true).expect("sent");
            let response = tokio::time::timeout(Duration::from_secs(20), response).await.expect("headers").unwrap();
            statuses.push(response.status().as_u16());
            // Its body is never read.
            unread.push(response);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let during = rss_mib(pid);
        let ok = statuses.iter().filter(|s| **s == 200).count();
        let busy = statuses.iter().filter(|s| **s == 503).count();
        println!(
            "{STREAMS} unread /messages/{{id}}/{what} streams (HTML of {limit} bytes): {ok} × 200, {busy} × 503; VmRSS {before} → {during} MiB"
        );
        assert_eq!(ok + busy, STREAMS, "only 200 and 503: {statuses:?}");
        if what == "html" {
            // 64 MiB of share hold 12 copies.
            assert!(busy > 0 && ok <= 13, "the workspace's share bounds the copies: {statuses:?}");
        } else {
            assert_eq!(ok, STREAMS, "an .eml stream holds 512 KiB: 60 fit the share");
        }
        assert!(during.saturating_sub(before) < 120, "{what}: memory grew from {before} to {during} MiB");
        drop(unread);
        drop(client);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn slow_uploads_of_one_workspace_leave_room_for_another_workspaces_sends() {
    let data_dir = DataDir::new();
    let alpha = data_dir.create_workspace("alpha");
    let beta = data_dir.create_workspace("beta");
    let options = Options { data_dir: Some(data_dir), bootstrap_key: Some(alpha.1.clone()), ..Options::default() };
    let server = TestServer::start_with(options).await;

    // Three uploads of the largest send, 1 KiB sent each, then nothing: alpha's whole budget,
    // before shares, and most of the server's.
    let h1 = connector(&server, b"http/1.1");
    let mut slow = Vec::new();
    for _ in 0..3 {
        let mut stream = tls(&server, &h1, ip(30)).await.expect("a connection");
        let head = format!(
            "POST /v1/messages HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{{\"to\": \"",
            alpha.1,
            56 * MIB
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(&[b'a'; 1024]).await.unwrap();
        stream.flush().await.unwrap();
        slow.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // Beta sends 20 MB messages meanwhile.
    let file = vec![7u8; 15 * MIB];
    let body = serde_json::to_vec(&json!({
        "to": "bob@example.net",
        "subject": "a file",
        "text": "attached",
        "attachments": [{"filename": "f.bin", "contentType": "application/octet-stream", "content": STANDARD.encode(&file)}],
    }))
    .unwrap();
    let mut outcomes = Vec::new();
    for i in 0..4 {
        let asked = Instant::now();
        let response = server
            .request(Method::POST, "/v1/messages")
            .bearer_auth(&beta.1)
            .header("content-type", "application/json")
            .header("idempotency-key", format!("beta-{i}"))
            .body(body.clone())
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .expect("an answer");
        outcomes.push((response.status().as_u16(), asked.elapsed()));
    }
    println!(
        "alpha: 3 stalled uploads declaring 56 MiB; beta: {} MB sends answered {outcomes:?}",
        body.len() / 1_000_000
    );
    assert!(outcomes.iter().all(|(status, _)| *status == 201), "beta's sends are served: {outcomes:?}");
    drop(slow);
}

#[tokio::test]
async fn a_batch_is_held_to_the_body_limit_and_parsed_without_a_tree() {
    // The outbox (the default), so that the items may use the sandbox sending domain.
    let server = start(&[]).await;
    let key = server.key().to_owned();
    // Declared over 10 MiB: 413 at once (it used to take the send route's 56 MiB).
    let h1 = connector(&server, b"http/1.1");
    let mut stream = tls(&server, &h1, ip(1)).await.expect("a connection");
    let head = format!(
        "POST /v1/messages/batch HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n[",
        10 * MIB + 1
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), tokio::io::AsyncReadExt::read(&mut stream, &mut answer))
        .await
        .expect("answered at once")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    println!("batch declaring 10 MiB + 1: {}", answer.lines().next().unwrap_or(""));
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");

    // Just under 10 MiB: ten items of 1 MB each (the key's rate allows ten at once).
    let batch: Vec<_> = (0..10)
        .map(|i| {
            json!({
                "to": format!("r{i}@example.net"),
                "subject": "news",
                "text": "hello",
                "html": format!("<p>{}</p>", "w0rd ".repeat(200_000)),
                "tags": [{"name": "batch", "value": "1"}],
                "metadata": {"i": i.to_string()},
            })
        })
        .collect();
    let body = serde_json::to_vec(&batch).unwrap();
    assert!(body.len() <= 10 * MIB, "{} bytes", body.len());
    let pid = server.pid();
    let before = peak_rss_mib(pid);
    let response = server
        .request(Method::POST, "/v1/messages/batch")
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(body.clone())
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    let peak = peak_rss_mib(pid);
    println!("batch of 10 items, {:.2} MB: {status}; VmHWM {before} → {peak} MiB", body.len() as f64 / 1e6);
    assert_eq!(status, 201, "{}", response.text().await.unwrap_or_default());
    assert!(peak.saturating_sub(before) < 150, "a 10 MB batch raised the peak from {before} to {peak} MiB");
}

#[tokio::test]
async fn at_the_connection_cap_trickling_uploads_make_room_for_a_fresh_client() {
    const CAP: usize = 90;
    let server = start(&[("TIDINGS_MAX_CONNECTIONS", "90")]).await;
    let key = server.key().to_owned();
    let h1 = connector(&server, b"http/1.1");
    let mut tasks = Vec::new();
    for i in 0..CAP {
        let mut stream = tls(&server, &h1, ip(40 + (i % 3) as u8)).await.expect("a connection");
        let head = format!(
            "POST /v1/templates HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: 4096\r\n\r\n{{"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.flush().await.unwrap();
        // One byte every half second: in flight for as long as the request timeout allows.
        // Done (true) once the server closes the connection.
        tasks.push(tokio::spawn(async move {
            let (mut read, mut write) = tokio::io::split(stream);
            let mut buf = [0u8; 1024];
            for _ in 0..100 {
                tokio::select! {
                    n = tokio::io::AsyncReadExt::read(&mut read, &mut buf) => {
                        if matches!(n, Ok(0) | Err(_)) {
                            return true;
                        }
                    }
                    () = tokio::time::sleep(Duration::from_millis(500)) => {
                        if write.write_all(b" ").await.is_err() || write.flush().await.is_err() {
                            return true;
                        }
                    }
                }
            }
            false
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let took = served_within(&server, ip(2), Duration::from_secs(25)).await.expect("a fresh client is served");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let closed = tasks.iter().filter(|t| t.is_finished()).count();
    println!(
        "{CAP} connections trickling a body at the cap: a fresh client served in {took:?}; {closed} closed by then"
    );
    assert!(took < Duration::from_secs(10), "served in {took:?}");
    assert!(closed >= 1, "a trickling connection was closed to make room");
    for task in tasks {
        task.abort();
    }
}
