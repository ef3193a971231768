//! queue-memory: does the server's memory stay flat with a large queue and the SMTP server
//! down?
//!
//! Starts the release `tidings-server` delivering through a relay on a loopback port where
//! nothing listens, queues `--messages` sends over HTTPS,
//! then samples the server's resident memory (`VmRSS`) every `--every` seconds for
//! `--seconds` while the delivery worker keeps failing to connect and deferring them on
//! `--schedule` (`--cache` sets `TIDINGS_STORE_CACHE`). Prints a Markdown table of the samples, the peak (`VmHWM`) and how many
//! messages were Deferred by the end.
//!
//! ```text
//! cargo build --release -p tidings-server -p tidings-bench
//! target/release/queue-memory [--messages 100000] [--seconds 180] [--every 10] [--schedule 1m,5m] [--cache 256MiB]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use tidings_bench::{Result, create_keys, release_server_binary, send_receipts, verified_domain};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options as ServerOptions, TestServer, fresh_key};

/// Concurrent senders while queueing.
const SENDERS: usize = 64;

#[derive(Debug)]
struct Options {
    messages: usize,
    seconds: u64,
    every: u64,
    schedule: String,
    cache: Option<String>,
}

fn parse_options() -> Result<Options> {
    let mut options = Options { messages: 100_000, seconds: 180, every: 10, schedule: "1m,5m".into(), cache: None };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--messages" => options.messages = value()?.parse()?,
            "--seconds" => options.seconds = value()?.parse()?,
            "--every" => options.every = value()?.parse::<u64>()?.max(1),
            "--schedule" => options.schedule = value()?,
            "--cache" => options.cache = Some(value()?),
            "--help" | "-h" => {
                println!(
                    "usage: queue-memory [--messages N] [--seconds N] [--every N] [--schedule 1m,5m] [--cache 256MiB]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    Ok(options)
}

/// A `kB` field of `/proc/<pid>/status`, in MiB.
fn status_mib(pid: u32, field: &str) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// A loopback port nobody listens on (bound, then released).
fn dead_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Count of messages with `status`, by walking the list (200 per page).
async fn count_status(server: &TestServer, status: &str) -> Result<usize> {
    let mut count = 0;
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/messages?limit=200&status={status}&cursor={c}"),
            None => format!("/v1/messages?limit=200&status={status}"),
        };
        let (code, body) = server.get(&path, server.key()).await;
        if code != 200 {
            return Err(format!("listing messages: {code} {body}").into());
        }
        count += body["data"].as_array().map_or(0, Vec::len);
        match body["pagination"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(count),
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = parse_options()?;
    let dns = TestDnsServer::start([]).await?;
    let relay = format!("smtp://127.0.0.1:{}", dead_port()?);
    let mut env = vec![
        ("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()),
        ("TIDINGS_LOG".to_owned(), "warn".to_owned()),
        ("TIDINGS_DELIVERY".to_owned(), "relay".to_owned()),
        ("TIDINGS_SMTP_RELAY".to_owned(), relay.clone()),
        ("TIDINGS_RETRY_SCHEDULE".to_owned(), options.schedule.clone()),
    ];
    if let Some(cache) = &options.cache {
        env.push(("TIDINGS_STORE_CACHE".to_owned(), cache.clone()));
    }
    let binary = Some(release_server_binary()?);
    let server = Arc::new(
        TestServer::start_with(ServerOptions { bootstrap_key: Some(fresh_key()), env, binary, ..Default::default() })
            .await,
    );
    let pid = server.pid();
    verified_domain(&server, &dns, "queue.example").await?;
    let key = create_keys(&server, 1).await?.remove(0);
    let rss0 = status_mib(pid, "VmRSS:").unwrap_or(0.0);
    println!("relay {relay} (nothing listens); schedule {}; RSS before queueing {rss0:.0} MiB", options.schedule);

    let started = Instant::now();
    send_receipts(&server, &key, "orders@queue.example", options.messages, SENDERS).await?;
    let queued_in = started.elapsed();
    println!(
        "queued {} messages in {:.1} s ({:.0}/s)",
        options.messages,
        queued_in.as_secs_f64(),
        options.messages as f64 / queued_in.as_secs_f64()
    );

    println!("\n| t (s) | VmRSS MiB |\n|---:|---:|");
    let sampling = Instant::now();
    let mut samples = Vec::new();
    while sampling.elapsed() < Duration::from_secs(options.seconds) {
        let rss = status_mib(pid, "VmRSS:").ok_or("the server is gone")?;
        let t = started.elapsed().as_secs();
        println!("| {t} | {rss:.0} |");
        samples.push(rss);
        tokio::time::sleep(Duration::from_secs(options.every)).await;
    }
    let peak = status_mib(pid, "VmHWM:").unwrap_or(0.0);
    let deferred = count_status(&server, "Deferred").await?;
    let queued = count_status(&server, "Queued").await?;
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(0.0, f64::max);
    println!(
        "\nRSS after queueing: {min:.0}–{max:.0} MiB over {} s; peak (VmHWM) {peak:.0} MiB; at the end {deferred} Deferred, {queued} still Queued",
        options.seconds
    );
    drop(dns);
    match Arc::try_unwrap(server) {
        Ok(server) => {
            server.stop().await;
        }
        Err(_) => return Err("a sender still holds the server".into()),
    }
    Ok(())
}
