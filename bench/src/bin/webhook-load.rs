//! webhook-load: how many signed webhook deliveries per second does the server make to a
//! local receiver?
//!
//! Starts the release `tidings-server` (outbox delivery, private webhook targets allowed),
//! creates `--endpoints` endpoints subscribed to every message event on one in-process HTTP
//! receiver (axum on hyper, answering 200 at once), sends `--messages` messages over HTTPS
//! (64 concurrent senders), and waits until the receiver has had every delivery: three
//! events (Queued, Sent, Delivered) per message per endpoint. Every 50th request is verified
//! with the `standardwebhooks` crate; a bad signature ends the run. Prints deliveries per
//! second from the first send to the last delivery, and the latency from an event
//! (`createdAt` in the payload) to its arrival.
//!
//! ```text
//! cargo build --release -p tidings-server -p tidings-bench
//! target/release/webhook-load [--messages 5000] [--endpoints 4]
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use tidings_bench::{Result, create_keys, release_server_binary, send_receipts, verified_domain};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options as ServerOptions, TestServer, fresh_key};

/// Concurrent senders.
const SENDERS: usize = 64;
/// Events per message with outbox delivery: Queued, Sent, Delivered.
const EVENTS_PER_MESSAGE: usize = 3;
/// One request in this many is verified.
const VERIFY_EVERY: usize = 50;

#[derive(Debug)]
struct Options {
    messages: usize,
    endpoints: usize,
}

fn parse_options() -> Result<Options> {
    let mut options = Options { messages: 5_000, endpoints: 4 };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--messages" => options.messages = value()?.parse()?,
            "--endpoints" => options.endpoints = value()?.parse::<usize>()?.max(1),
            "--help" | "-h" => {
                println!("usage: webhook-load [--messages N] [--endpoints N]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    Ok(options)
}

/// What the receiver has seen.
#[derive(Default)]
struct Tally {
    received: AtomicUsize,
    /// Event → arrival, milliseconds.
    latencies: Mutex<Vec<i64>>,
    /// Endpoint path → its secret, for verification.
    secrets: Mutex<HashMap<String, standardwebhooks::Webhook>>,
    bad_signatures: AtomicUsize,
}

async fn receive(State(tally): State<Arc<Tally>>, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    let n = tally.received.fetch_add(1, Ordering::Relaxed);
    if let Ok(payload) = serde_json::from_slice::<serde_json::Value>(&body)
        && let Some(created) = payload["createdAt"].as_str()
        && let Ok(created) = chrono::DateTime::parse_from_rfc3339(created)
    {
        let latency = chrono::Utc::now().signed_duration_since(created).num_milliseconds();
        tally.latencies.lock().unwrap().push(latency);
    }
    if n % VERIFY_EVERY == 0 {
        let secrets = tally.secrets.lock().unwrap();
        let verified = secrets.get(uri.path()).is_some_and(|hook| hook.verify(&body, &headers).is_ok());
        if !verified {
            tally.bad_signatures.fetch_add(1, Ordering::Relaxed);
        }
    }
    StatusCode::OK
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = parse_options()?;
    let tally = Arc::new(Tally::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let receiver = listener.local_addr()?;
    let app = Router::new().fallback(receive).with_state(tally.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dns = TestDnsServer::start([]).await?;
    let env = vec![
        ("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()),
        ("TIDINGS_LOG".to_owned(), "warn".to_owned()),
        ("TIDINGS_WEBHOOK_ALLOW_PRIVATE".to_owned(), "true".to_owned()),
    ];
    let binary = Some(release_server_binary()?);
    let server = Arc::new(
        TestServer::start_with(ServerOptions { bootstrap_key: Some(fresh_key()), env, binary, ..Default::default() })
            .await,
    );
    verified_domain(&server, &dns, "hooks.example").await?;
    let key = create_keys(&server, 1).await?.remove(0);
    for i in 0..options.endpoints {
        let path = format!("/endpoint-{i}");
        let request = serde_json::json!({
            "url": format!("http://{receiver}{path}"),
            "eventTypes": ["Queued", "Sent", "Delivered", "Deferred", "Bounced", "Failed", "Suppressed"],
        });
        let (status, body) = server.post("/v1/webhooks", server.key(), request).await;
        let secret = body["data"]["secret"].as_str().filter(|_| status == 201);
        let secret = secret.ok_or_else(|| format!("creating an endpoint: {status} {body}"))?;
        tally.secrets.lock().unwrap().insert(path, standardwebhooks::Webhook::new(secret)?);
    }
    let expected = options.messages * EVENTS_PER_MESSAGE * options.endpoints;
    println!(
        "{} messages × {EVENTS_PER_MESSAGE} events × {} endpoints = {expected} deliveries to http://{receiver}",
        options.messages, options.endpoints
    );

    let started = Instant::now();
    send_receipts(&server, &key, "orders@hooks.example", options.messages, SENDERS).await?;
    let sent_in = started.elapsed();

    // Wait for the receiver to have everything, or for progress to stop for 30 s.
    let mut last = (0, Instant::now());
    loop {
        let received = tally.received.load(Ordering::Relaxed);
        if received >= expected {
            break;
        }
        if received > last.0 {
            last = (received, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(30) {
            return Err(format!("stalled at {received} of {expected} deliveries").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    let received = tally.received.load(Ordering::Relaxed);
    let bad = tally.bad_signatures.load(Ordering::Relaxed);
    let mut latencies = tally.latencies.lock().unwrap().clone();
    latencies.sort_unstable();
    println!(
        "sent {} messages in {:.1} s ({:.0}/s); {received} deliveries in {:.1} s: {:.0} deliveries/s",
        options.messages,
        sent_in.as_secs_f64(),
        options.messages as f64 / sent_in.as_secs_f64(),
        elapsed.as_secs_f64(),
        received as f64 / elapsed.as_secs_f64()
    );
    println!(
        "event → receiver latency: p50 {} ms, p90 {} ms, p99 {} ms, max {} ms; {} of {} sampled signatures bad",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.9),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or(0),
        bad,
        received.div_ceil(VERIFY_EVERY)
    );
    if bad > 0 {
        return Err(format!("{bad} sampled signatures did not verify").into());
    }
    drop(dns);
    match Arc::try_unwrap(server) {
        Ok(server) => {
            server.stop().await;
        }
        Err(_) => return Err("a sender still holds the server".into()),
    }
    Ok(())
}
