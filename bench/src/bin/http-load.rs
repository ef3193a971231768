//! http-load: durable sends accepted per second through HTTPS, measured with wrk.
//!
//! Starts the release `tidings-server` (next to this executable, or `TIDINGS_SERVER_BIN`) on a
//! fresh data dir with a DNS server on loopback, verifies a sending domain through it, creates
//! keys with the highest rate limit (10,000/s each; enough keys that the limit never binds),
//! then runs `wrk` once per connection count. Every request is `POST /v1/messages` with its
//! own `Idempotency-Key` (so each pays the idempotency write) and a ~1 KiB HTML body; a 201
//! means the message is on disk. Prints a Markdown table of requests/s and latency.
//!
//! ```text
//! cargo build --release -p tidings-server -p tidings-bench
//! target/release/http-load [--seconds 10] [--connections 16,64,256] [--threads 1] [--keys 4]
//!     [--delivery outbox|hold]
//! ```
//!
//! `--delivery` is the server's `TIDINGS_DELIVERY`: `outbox` (the default) writes every
//! accepted message to the outbox directory while the load runs, so acceptance shares the
//! machine with delivery; `hold` delivers nothing and measures acceptance alone. With the
//! outbox, the table also counts the `.eml` files written during each run (delivered/s).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use tidings_bench::{Result, WrkFigures, create_keys, parse_wrk, receipt, release_server_binary, verified_domain};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options as ServerOptions, TestServer, fresh_key};

/// What to run.
#[derive(Debug)]
struct Options {
    seconds: u64,
    connections: Vec<usize>,
    threads: usize,
    keys: usize,
    log: String,
    delivery: String,
}

fn parse_options() -> Result<Options> {
    let mut options = Options {
        seconds: 10,
        connections: vec![16, 64, 256],
        threads: 1,
        keys: 4,
        log: "warn".into(),
        delivery: "outbox".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => options.seconds = value()?.parse()?,
            "--connections" => {
                options.connections = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?;
            }
            "--threads" => options.threads = value()?.parse()?,
            "--keys" => options.keys = value()?.parse()?,
            "--log" => options.log = value()?,
            "--delivery" => match value()?.as_str() {
                mode @ ("outbox" | "hold") => options.delivery = mode.to_owned(),
                other => return Err(format!("--delivery is outbox or hold, not {other:?}").into()),
            },
            "--help" | "-h" => {
                println!(
                    "usage: http-load [--seconds N] [--connections 16,64,256] [--threads N] [--keys N] [--log LEVEL] [--delivery outbox|hold]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    Ok(options)
}

/// The wrk script: one POST per request, keys round-robin, an Idempotency-Key unique per
/// run, thread and request (wrk gives every thread its own Lua state, so the thread number
/// comes from `setup`).
fn wrk_script(keys: &[String], run: &str, body: &str) -> String {
    let keys = keys.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ");
    let mut script = String::new();
    let _ = write!(
        script,
        r#"local keys = {{ {keys} }}
local body = [==[{body}]==]
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local n = 0
function request()
  n = n + 1
  local key = keys[(n % #keys) + 1]
  return wrk.format("POST", "/v1/messages", {{
    ["Authorization"] = "Bearer " .. key,
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = "{run}-" .. tid .. "-" .. n,
  }}, body)
end
"#
    );
    script
}

fn run_wrk(script: &Path, url: &str, connections: usize, threads: usize, seconds: u64) -> Result<WrkFigures> {
    let output = Command::new("wrk")
        .args(["--latency", "-t", &threads.to_string(), "-c", &connections.to_string()])
        .args(["-d", &format!("{seconds}s"), "--timeout", "10s", "-s"])
        .arg(script)
        .arg(url)
        .output()
        .map_err(|e| format!("running wrk (apt-get install wrk): {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!("wrk failed: {stdout}{}", String::from_utf8_lossy(&output.stderr)).into());
    }
    parse_wrk(&stdout)
}

/// How many `.eml` files `dir` holds (none if it does not exist yet).
fn eml_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().ends_with(".eml")).count()
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = parse_options()?;
    let dns = TestDnsServer::start([]).await?;
    let env = vec![
        ("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()),
        // Per-request logging at info would be measured too; operators choose it.
        ("TIDINGS_LOG".to_owned(), options.log.clone()),
        ("TIDINGS_DELIVERY".to_owned(), options.delivery.clone()),
    ];
    let binary = Some(release_server_binary()?);
    let server = TestServer::start_with(ServerOptions {
        bootstrap_key: Some(fresh_key()),
        env,
        binary,
        ..ServerOptions::default()
    })
    .await;
    verified_domain(&server, &dns, "load.example").await?;
    let keys = create_keys(&server, options.keys).await?;

    let body = receipt("orders@load.example", "ann@example.com");
    let dir = tempfile::tempdir()?;
    let url = server.url("/v1/messages");

    let outbox = server.data_dir().path().join("outbox");
    println!(
        "| connections | wrk threads | sends/s | p50 | p90 | p99 | requests | non-2xx | socket errors | outbox files/s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    );
    for (i, &connections) in options.connections.iter().enumerate() {
        let script = dir.path().join(format!("send-{i}.lua"));
        let run = format!("{}-{i}", fresh_key());
        std::fs::write(&script, wrk_script(&keys, &run, &body.to_string()))?;
        let files_before = eml_files(&outbox);
        let started = std::time::Instant::now();
        let f = run_wrk(&script, &url, connections, options.threads.min(connections), options.seconds)?;
        let written = eml_files(&outbox).saturating_sub(files_before);
        let delivered = match options.delivery.as_str() {
            "outbox" => format!("{:.0}", written as f64 / started.elapsed().as_secs_f64()),
            _ => "–".to_owned(),
        };
        println!(
            "| {connections} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {delivered} |",
            options.threads.min(connections),
            f.requests_per_sec,
            f.p50,
            f.p90,
            f.p99,
            f.requests,
            f.non_2xx,
            f.socket_errors
        );
    }
    let (status, _) = server.stop().await;
    if !status.success() {
        return Err(format!("tidings-server exited with {status}").into());
    }
    Ok(())
}
