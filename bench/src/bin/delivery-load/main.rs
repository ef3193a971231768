//! delivery-load: end-to-end delivery, Tidings against a Postfix relay as the yardstick.
//!
//! Starts Postfix's `smtp-sink -c` on loopback, then:
//! 1. Tidings: the release `tidings-server` with `TIDINGS_DELIVERY=relay` pointed at the
//!    sink and a DNS server on loopback; verifies a sending domain, creates send keys, and
//!    sends N messages over HTTPS with `wrk` (one Idempotency-Key each; the Lua script stops
//!    once N fresh 201s came back). Measures until the sink has counted N more messages, then
//!    reads every message's timeline (`createdAt` → `Delivered.occurredAt`) from the API.
//! 2. Postfix: a minimal relay in a private config and queue dir (`postfix -c <dir>`) to the
//!    same sink, fed N messages by `smtp-source`; latency from `delay=` in its maillog.
//!
//! Prints a Markdown table of both and the ratio. Needs root (Postfix's master) and the
//! `postfix` and `wrk` packages.
//!
//! ```text
//! cargo build --release -p tidings-server -p tidings-bench
//! target/release/delivery-load [--messages 20000] [--connections 64] [--keys 4]
//!     [--postfix-sessions 20] [--postfix-bytes N] [--sample N] [--log warn] [--no-postfix] [--dump DIR]
//! ```

mod interrupt;
mod postfix;
mod procstat;
mod report;
mod sink;
mod tools;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use futures::{StreamExt as _, stream};
use tidings_bench::{Result, WrkFigures, create_keys, parse_wrk, receipt, release_server_binary, verified_domain};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options as ServerOptions, TestServer, fresh_key};

use crate::interrupt::OnInterrupt;
use crate::postfix::Postfix;
use crate::report::{Side, report};
use crate::sink::Sink;
use crate::tools::Tools;

/// What to run.
#[derive(Debug)]
struct Options {
    messages: u64,
    connections: usize,
    keys: usize,
    postfix_sessions: u32,
    postfix_bytes: usize,
    sample: usize,
    log: String,
    stall: Duration,
    no_postfix: bool,
    dump: Option<PathBuf>,
}

/// Payload for `smtp-source -l`, so that both sides hand the sink messages of the same size:
/// Tidings' are 2,673 bytes (measured with `--dump`: ~1.3 KiB of headers with both DKIM
/// signatures, then the multipart body with the ~1 KiB HTML part and the text part);
/// smtp-source's headers and Postfix's Received header add 278 bytes to the payload.
const POSTFIX_BYTES: usize = 2_400;

const USAGE: &str = "usage: delivery-load [--messages N] [--connections N] [--keys N] [--postfix-sessions N] \
                     [--postfix-bytes N] [--sample N] [--log LEVEL] [--stall SECONDS] [--no-postfix] [--dump DIR]";

fn parse_options() -> Result<Options> {
    let mut options = Options {
        messages: 20_000,
        connections: 64,
        keys: 4,
        postfix_sessions: 20,
        postfix_bytes: POSTFIX_BYTES,
        sample: 0,
        log: "warn".into(),
        stall: Duration::from_secs(60),
        no_postfix: false,
        dump: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--messages" => options.messages = value()?.parse()?,
            "--connections" => options.connections = value()?.parse()?,
            "--keys" => options.keys = value()?.parse()?,
            "--postfix-sessions" => options.postfix_sessions = value()?.parse()?,
            "--postfix-bytes" => options.postfix_bytes = value()?.parse()?,
            "--sample" => options.sample = value()?.parse()?,
            "--log" => options.log = value()?,
            "--stall" => options.stall = Duration::from_secs(value()?.parse()?),
            "--no-postfix" => options.no_postfix = true,
            "--dump" => options.dump = Some(PathBuf::from(value()?)),
            "--help" | "-h" => {
                println!("{USAGE}\n\n--sample N: read the timelines of N messages spread over the run (default: all)");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    if options.messages == 0 {
        return Err("--messages must be at least 1".into());
    }
    Ok(options)
}

fn seconds_between(from: SystemTime, to: SystemTime) -> f64 {
    to.duration_since(from).unwrap_or_default().as_secs_f64()
}

/// The line the wrk script prints once `target` messages were accepted.
const WRK_DONE: &str = "delivery-load: all accepted";

/// The wrk script: POST /v1/messages with Idempotency-Key `<run>-<n>` until `target` fresh
/// (not replayed) 201s came back, then print [`WRK_DONE`] and stop. Requests past the
/// `target`-th replay the first one (no new message) until the answers of the last real ones
/// are in; one wrk thread, so the counters are exact. A stopped thread does not end wrk (it
/// sleeps for its whole `-d`), so [`run_wrk`] sends it SIGINT on that line.
fn wrk_script(keys: &[String], run: &str, body: &str, target: u64) -> String {
    let keys = keys.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ");
    let mut script = String::new();
    let _ = write!(
        script,
        r#"local keys = {{ {keys} }}
local body = [==[{body}]==]
local target = {target}
local n = 0
local fresh = 0
function request()
  n = n + 1
  local i = n
  if i > target then i = 1 end
  return wrk.format("POST", "/v1/messages", {{
    ["Authorization"] = "Bearer " .. keys[(i % #keys) + 1],
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = "{run}-" .. i,
  }}, body)
end
function response(status, headers, body)
  if status == 201 and headers["idempotent-replayed"] == nil and headers["Idempotent-Replayed"] == nil then
    fresh = fresh + 1
    if fresh == target then
      io.stdout:write("\n{WRK_DONE}\n")
      io.stdout:flush()
      wrk.thread:stop()
    end
  end
end
"#
    );
    script
}

/// Runs the script until it says [`WRK_DONE`], then interrupts wrk (which then prints its
/// report); the report and when that line came.
fn run_wrk(
    tools: &Tools,
    script: &Path,
    url: &str,
    connections: usize,
    on_interrupt: &OnInterrupt,
) -> Result<(WrkFigures, SystemTime)> {
    let mut child = Command::new(&tools.wrk)
        .args(["--latency", "-t", "1", "-c", &connections.to_string(), "-d", "3600s", "--timeout", "10s", "-s"])
        .arg(script)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running wrk: {e}"))?;
    on_interrupt.kill(child.id());
    let mut output = String::new();
    let mut done = None;
    for line in BufReader::new(child.stdout.take().ok_or("wrk's stdout")?).lines() {
        let line = line?;
        if line == WRK_DONE {
            done = Some(SystemTime::now());
            Command::new("kill").args(["-INT", &child.id().to_string()]).status()?;
        }
        output.push_str(&line);
        output.push('\n');
    }
    let status = child.wait()?;
    on_interrupt.forget(child.id());
    let mut stderr = String::new();
    child.stderr.take().map(|mut e| e.read_to_string(&mut stderr));
    match done {
        Some(at) if status.success() => Ok((parse_wrk(&output)?, at)),
        _ => Err(format!("wrk ended ({status}) before all were accepted: {output}{stderr}").into()),
    }
}

/// Every message of the workspace: (id, status, createdAt).
async fn list_messages(server: &TestServer) -> Result<Vec<(String, String, DateTime<Utc>)>> {
    let mut messages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/messages?limit=200&cursor={c}"),
            None => "/v1/messages?limit=200".to_owned(),
        };
        let (status, body) = server.get(&path, server.key()).await;
        if status != 200 {
            return Err(format!("listing messages: {status} {body}").into());
        }
        for m in body["data"].as_array().ok_or("no data")? {
            let field = |name: &str| m[name].as_str().map(str::to_owned).ok_or_else(|| format!("no {name} in {m}"));
            messages.push((field("id")?, field("status")?, field("createdAt")?.parse()?));
        }
        match body["pagination"]["nextCursor"].as_str() {
            Some(next) if body["pagination"]["hasMore"] == true => cursor = Some(next.to_owned()),
            _ => return Ok(messages),
        }
    }
}

/// `Delivered.occurredAt − createdAt` in seconds for each message (`None`: no Delivered event).
async fn delivery_latencies(server: &TestServer, messages: &[(String, String, DateTime<Utc>)]) -> Vec<Option<f64>> {
    stream::iter(messages)
        .map(|(id, _, created)| async move {
            let (status, body) = server.get(&format!("/v1/messages/{id}/events?limit=50"), server.key()).await;
            let events = body["data"].as_array().filter(|_| status == 200)?;
            let delivered = events.iter().find(|e| e["type"] == "Delivered")?["occurredAt"].as_str()?;
            let delivered: DateTime<Utc> = delivered.parse().ok()?;
            Some((delivered - *created).as_seconds_f64())
        })
        .buffer_unordered(16)
        .collect()
        .await
}

/// `count` messages spread evenly over `all` (all of them when `count` is 0 or too large).
fn spread<T: Clone>(all: &[T], count: usize) -> Vec<T> {
    if count == 0 || count >= all.len() {
        return all.to_vec();
    }
    (0..count).map(|i| all[i * all.len() / count].clone()).collect()
}

fn tally(messages: &[(String, String, DateTime<Utc>)]) -> String {
    let mut by_status = BTreeMap::<&str, usize>::new();
    for (_, status, _) in messages {
        *by_status.entry(status.as_str()).or_default() += 1;
    }
    by_status.iter().map(|(s, n)| format!("{s}: {n}")).collect::<Vec<_>>().join(", ")
}

async fn run_tidings(options: &Options, tools: &Tools, sink: &Sink, on_interrupt: &OnInterrupt) -> Result<Side> {
    let dns = TestDnsServer::start([]).await?;
    let env = [
        ("TIDINGS_DNS_SERVER", dns.addr().to_string()),
        ("TIDINGS_LOG", options.log.clone()),
        ("TIDINGS_DELIVERY", "relay".to_owned()),
        ("TIDINGS_SMTP_RELAY", format!("smtp://127.0.0.1:{}", sink.port())),
    ];
    let binary = release_server_binary()?;
    let server = TestServer::start_with(ServerOptions {
        bootstrap_key: Some(fresh_key()),
        env: env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        binary: Some(binary.clone()),
        ..ServerOptions::default()
    })
    .await;
    let pid = procstat::child_running(&binary).ok_or("cannot find the tidings-server process")?;
    on_interrupt.kill(pid);
    eprintln!("tidings-server pid {pid} on {}", server.addr());
    verified_domain(&server, &dns, "load.example").await?;
    let keys = create_keys(&server, options.keys).await?;

    let body = receipt("orders@load.example", "ann@example.com");
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("send.lua");
    std::fs::write(&script, wrk_script(&keys, &fresh_key(), &body.to_string(), options.messages))?;
    let url = server.url("/v1/messages");

    let n = options.messages;
    let base = sink.count().messages;
    let before =
        (procstat::own_ticks(pid), procstat::stat(0).unwrap_or_default().1.children, procstat::own_ticks(sink.pid()));
    eprintln!("tidings: sending {n} messages with wrk ({} connections)", options.connections);
    let start = SystemTime::now();
    let (wrk, accepted) =
        tokio::task::block_in_place(|| run_wrk(tools, &script, &url, options.connections, on_interrupt))?;
    eprintln!("tidings: accepted in {:.1} s; waiting for the sink", seconds_between(start, accepted));
    if wrk.non_2xx > 0 || wrk.socket_errors != "0" {
        eprintln!("tidings: wrk saw {} non-2xx answers, socket errors: {}", wrk.non_2xx, wrk.socket_errors);
    }
    let reached = tokio::task::block_in_place(|| sink.wait_for(base + n, options.stall));
    let after =
        (procstat::own_ticks(pid), procstat::stat(0).unwrap_or_default().1.children, procstat::own_ticks(sink.pid()));
    let memory_kib = procstat::peak_rss_kib(pid).unwrap_or(0);
    let messages = list_messages(&server).await?;
    let reached = match reached {
        Ok(count) => count,
        Err(count) => {
            let log = server.stderr_lines();
            let tail = log[log.len().saturating_sub(40)..].join("\n");
            return Err(format!(
                "tidings: the sink counted {} of {n} messages and no more for {:?}.\n\
                 messages in the API: {} ({})\nlast lines of the server's log:\n{tail}",
                count.messages - base,
                options.stall,
                messages.len(),
                tally(&messages),
            )
            .into());
        }
    };
    if messages.len() as u64 != n {
        return Err(
            format!("tidings: the API lists {} messages, expected {n} ({})", messages.len(), tally(&messages)).into()
        );
    }
    eprintln!("tidings: delivered in {:.1} s; reading timelines", seconds_between(start, reached.at));
    let sampled = spread(&messages, options.sample);
    let found = delivery_latencies(&server, &sampled).await;
    let missing = found.iter().filter(|l| l.is_none()).count();
    if missing > 0 {
        eprintln!(
            "tidings: {missing} of {} sampled messages have no Delivered event ({})",
            found.len(),
            tally(&messages)
        );
    }
    let mut latencies: Vec<f64> = found.into_iter().flatten().collect();
    latencies.sort_by(f64::total_cmp);
    std::thread::sleep(Duration::from_secs(1));
    let extra_at_sink = sink.count().messages - base - n;
    let (status, _) = server.stop().await;
    on_interrupt.forget(pid);
    if !status.success() {
        return Err(format!("tidings-server exited with {status}").into());
    }
    let ticks = procstat::ticks_per_second();
    let cpu = |b: u64, a: u64| a.saturating_sub(b) as f64 / ticks;
    Ok(Side {
        accepted_per_sec: n as f64 / seconds_between(start, accepted),
        delivered_per_sec: n as f64 / seconds_between(start, reached.at),
        latencies,
        memory_kib,
        cpu: [cpu(before.0, after.0), cpu(before.1, after.1), cpu(before.2, after.2)],
        extra_at_sink,
        note: format!(
            "wrk, {} connections: send latency p50 {} p99 {}; {} requests, {} non-2xx; timelines read: {}",
            options.connections,
            wrk.p50,
            wrk.p99,
            wrk.requests,
            wrk.non_2xx,
            sampled.len()
        ),
    })
}

fn run_postfix(options: &Options, tools: &Tools, sink: &Sink, on_interrupt: &OnInterrupt) -> Result<Side> {
    let mut postfix = Postfix::start(tools, sink.port())?;
    on_interrupt.postfix(Some((tools.postfix.clone(), postfix.config_dir())));
    let master = postfix.master_pid().ok_or("Postfix started but wrote no master.pid")?;
    let n = options.messages;
    let base = sink.count().messages;
    let before = (
        procstat::tree_ticks(master),
        procstat::stat(0).unwrap_or_default().1.children,
        procstat::own_ticks(sink.pid()),
    );
    eprintln!("postfix: injecting {n} messages with smtp-source ({} sessions)", options.postfix_sessions);
    let start = SystemTime::now();
    postfix.inject(n, options.postfix_sessions, options.postfix_bytes)?;
    let accepted = SystemTime::now();
    eprintln!("postfix: accepted in {:.1} s; waiting for the sink", seconds_between(start, accepted));
    let reached = sink.wait_for(base + n, options.stall).map_err(|count| {
        let log = postfix.maillog();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        format!(
            "postfix: the sink counted {} of {n} messages; maillog ends:\n{}",
            count.messages - base,
            tail.join("\n")
        )
    })?;
    let after = (
        procstat::tree_ticks(master),
        procstat::stat(0).unwrap_or_default().1.children,
        procstat::own_ticks(sink.pid()),
    );
    let processes: Vec<u32> = std::iter::once(master).chain(procstat::children_of(master)).collect();
    let memory_kib = processes.iter().filter_map(|&pid| procstat::pss_kib(pid)).sum();
    let summed_hwm_kib: u64 = processes.iter().filter_map(|&pid| procstat::peak_rss_kib(pid)).sum();
    let mut latencies = postfix.delivery_delays(n as usize);
    latencies.sort_by(f64::total_cmp);
    std::thread::sleep(Duration::from_secs(1));
    let extra_at_sink = sink.count().messages - base - n;
    postfix.stop()?;
    on_interrupt.postfix(None);
    let ticks = procstat::ticks_per_second();
    let cpu = |b: u64, a: u64| a.saturating_sub(b) as f64 / ticks;
    let note = format!(
        "smtp-source, {} sessions, {} bytes of payload; memory: PSS summed over {} processes \
         (their VmHWM sum to {} MiB); delays in the maillog: {}",
        options.postfix_sessions,
        options.postfix_bytes,
        processes.len(),
        summed_hwm_kib / 1024,
        latencies.len()
    );
    Ok(Side {
        accepted_per_sec: n as f64 / seconds_between(start, accepted),
        delivered_per_sec: n as f64 / seconds_between(start, reached.at),
        latencies,
        memory_kib,
        cpu: [cpu(before.0, after.0), cpu(before.1, after.1), cpu(before.2, after.2)],
        extra_at_sink,
        note,
    })
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = parse_options()?;
    let tools = Tools::find()?;
    if !options.no_postfix && procstat::euid() != Some(0) {
        return Err("run delivery-load as root: Postfix's master must be started by root (or pass --no-postfix)".into());
    }
    if let Some(dir) = &options.dump {
        // smtp-sink writes as `nobody`.
        std::fs::create_dir_all(dir)?;
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))?;
    }
    let load_before = load_average();
    let on_interrupt = OnInterrupt::install()?;
    let sink = Sink::start(&tools.smtp_sink, options.dump.as_deref())?;
    on_interrupt.kill(sink.pid());
    eprintln!("smtp-sink pid {} on 127.0.0.1:{}", sink.pid(), sink.port());
    let tidings = run_tidings(&options, &tools, &sink, &on_interrupt).await?;
    let postfix = match options.no_postfix {
        true => None,
        false => Some(tokio::task::block_in_place(|| run_postfix(&options, &tools, &sink, &on_interrupt))?),
    };
    println!("{}", report(&options, &tidings, postfix.as_ref(), (&load_before, &load_average())));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_a_sample_over_the_run() {
        assert_eq!(spread(&[1, 2, 3, 4], 2), vec![1, 3]);
        assert_eq!(spread(&[1, 2, 3], 0), vec![1, 2, 3]);
    }

    #[test]
    fn the_script_stops_after_the_target() {
        let script = wrk_script(&["tid_a".into()], "run", "{}", 20_000);
        assert!(script.contains("local target = 20000"));
        assert!(script.contains("wrk.thread:stop()"));
        assert!(script.contains(&format!(r#"io.stdout:write("\n{WRK_DONE}\n")"#)));
    }
}
