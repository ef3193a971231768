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
//! With `--database-url URL` Tidings runs on PostgreSQL: a fresh database made through that
//! admin URL and dropped at the end (an interrupted run leaves its `tidings_bench_*` database
//! behind). `--nodes N` starts N servers on that one database, each with its own data dir and
//! port; one wrk per node sends N_messages / N of the messages with `--connections` / N
//! connections, all started together, and the sink counts them all.
//!
//! ```text
//! cargo build --release -p tidings-server -p tidings-bench
//! target/release/delivery-load [--messages 20000] [--connections 64] [--keys 4]
//!     [--postfix-sessions 20] [--postfix-bytes N] [--sample N] [--log warn] [--no-postfix] [--dump DIR]
//!     [--database-url postgres://postgres@127.0.0.1:5432/postgres] [--nodes 3]
//! ```

mod interrupt;
mod postfix;
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
use tidings_bench::{
    Result, WrkFigures, create_keys, parse_wrk, procstat, receipt, release_server_binary, verified_domain,
};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options as ServerOptions, ScratchDatabase, TestServer, fresh_key};

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
    /// Admin URL of the PostgreSQL server to make the run's database on; sled when `None`.
    database_url: Option<String>,
    nodes: usize,
    /// Recipients per send (all in `to`): each send is one message delivered as this many
    /// copies, and the figures are per copy.
    recipients: usize,
}

impl Options {
    /// Copies the sink must count: one per recipient of every message.
    fn copies(&self) -> u64 {
        self.messages * self.recipients as u64
    }
}

/// Payload for `smtp-source -l`, so that both sides hand the sink messages of the same size:
/// Tidings' are 2,673 bytes (measured with `--dump`: ~1.3 KiB of headers with both DKIM
/// signatures, then the multipart body with the ~1 KiB HTML part and the text part);
/// smtp-source's headers and Postfix's Received header add 278 bytes to the payload.
const POSTFIX_BYTES: usize = 2_400;

const USAGE: &str = "usage: delivery-load [--messages N] [--connections N] [--keys N] [--postfix-sessions N] \
                     [--postfix-bytes N] [--sample N] [--log LEVEL] [--stall SECONDS] [--no-postfix] [--dump DIR] \
                     [--database-url ADMIN_URL] [--nodes N] [--recipients N]";

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
        database_url: None,
        nodes: 1,
        recipients: 1,
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
            "--database-url" => options.database_url = Some(value()?),
            "--nodes" => options.nodes = value()?.parse()?,
            "--recipients" => options.recipients = value()?.parse()?,
            "--help" | "-h" => {
                println!(
                    "{USAGE}\n\n--sample N: read the timelines of N messages spread over the run (default: all)\n\
                     --database-url URL: run Tidings on a fresh PostgreSQL database made through URL (default: sled)\n\
                     --nodes N: N servers on that database, the messages and connections split between them\n\
                     --recipients N: N recipients per send (1-50; figures per recipient delivered; needs --no-postfix)"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    if options.messages == 0 {
        return Err("--messages must be at least 1".into());
    }
    if options.nodes == 0 || options.nodes as u64 > options.messages || options.nodes > options.connections {
        return Err("--nodes must be at least 1 and at most --messages and --connections".into());
    }
    if !(1..=50).contains(&options.recipients) || (options.recipients > 1 && !options.no_postfix) {
        return Err("--recipients must be 1 to 50, and above 1 needs --no-postfix".into());
    }
    if options.nodes > 1 && options.database_url.is_none() {
        return Err("--nodes above 1 needs --database-url: sled allows one process".into());
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
    for m in tidings_bench::all_messages(server).await? {
        let field = |name: &str| m[name].as_str().map(str::to_owned).ok_or_else(|| format!("no {name} in {m}"));
        messages.push((field("id")?, field("status")?, field("createdAt")?.parse()?));
    }
    Ok(messages)
}

/// `Delivered.occurredAt − createdAt` in seconds for each message (`None`: no Delivered event).
async fn delivery_latencies(server: &TestServer, messages: &[(String, String, DateTime<Utc>)]) -> Vec<Option<f64>> {
    stream::iter(messages)
        .map(|(id, _, created)| async move {
            let (status, body) = server.get(&format!("/v1/messages/{id}/events?limit=200"), server.key()).await;
            let events = body["data"].as_array().filter(|_| status == 200)?;
            // The last recipient's: a message to several is delivered when all its copies are.
            let delivered: DateTime<Utc> = events
                .iter()
                .filter(|e| e["type"] == "Delivered")
                .filter_map(|e| e["occurredAt"].as_str()?.parse().ok())
                .max()?;
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

/// The run's PostgreSQL database and the processes whose CPU time is counted for it.
struct Database {
    scratch: ScratchDatabase,
    /// The postmaster: its process tree is all of PostgreSQL (other users' sessions too).
    postmaster: Option<u32>,
}

impl Database {
    fn create(admin_url: &str) -> Result<Self> {
        let scratch = ScratchDatabase::create_on(admin_url, "tidings_bench")
            .map_err(|e| format!("making a database through {admin_url}: {e}"))?;
        let postmaster = procstat::postmaster();
        if postmaster.is_none() {
            eprintln!("no postgres process on this machine: PostgreSQL's CPU time is not measured");
        }
        Ok(Self { scratch, postmaster })
    }

    /// CPU ticks so far of this database's backends (by pid) and of all of PostgreSQL.
    fn ticks(&self) -> (BTreeMap<u32, u64>, u64) {
        let Some(postmaster) = self.postmaster else { return Default::default() };
        let backends = procstat::backends_of(postmaster, self.scratch.name());
        (backends.into_iter().map(|pid| (pid, procstat::own_ticks(pid))).collect(), procstat::tree_ticks(postmaster))
    }
}

/// What is counted before and after a run: CPU ticks of the servers, of this process's reaped
/// children (wrk), of the sink, and of the database's backends and all of PostgreSQL.
struct Ticks {
    servers: u64,
    wrk: u64,
    sink: u64,
    backends: BTreeMap<u32, u64>,
    postgres: u64,
}

impl Ticks {
    fn now(servers: &[TestServer], sink: &Sink, database: Option<&Database>) -> Self {
        let (backends, postgres) = database.map(Database::ticks).unwrap_or_default();
        Self {
            servers: servers.iter().map(|s| procstat::own_ticks(s.pid())).sum(),
            wrk: procstat::stat(0).unwrap_or_default().1.children,
            sink: procstat::own_ticks(sink.pid()),
            backends,
            postgres,
        }
    }
}

/// Each node's share of `total`: as even as can be, the first nodes take the remainder.
fn split(total: u64, nodes: usize) -> Vec<u64> {
    let nodes = nodes as u64;
    (0..nodes).map(|i| total / nodes + u64::from(i < total % nodes)).collect()
}

/// The end of each node's log, for a failure message.
fn log_tails(servers: &[TestServer]) -> String {
    let mut out = String::new();
    for (n, server) in servers.iter().enumerate() {
        let log = server.stderr_lines();
        let _ =
            writeln!(out, "--- node {n}, last lines of its log:\n{}", log[log.len().saturating_sub(20)..].join("\n"));
    }
    out
}

async fn run_tidings(options: &Options, tools: &Tools, sink: &Sink, on_interrupt: &OnInterrupt) -> Result<Side> {
    // Declared first, so dropped (the database too) after the servers.
    let database = options.database_url.as_deref().map(Database::create).transpose()?;
    let dns = TestDnsServer::start([]).await?;
    let mut env = vec![
        ("TIDINGS_DNS_SERVER", dns.addr().to_string()),
        ("TIDINGS_LOG", options.log.clone()),
        ("TIDINGS_DELIVERY", "relay".to_owned()),
        ("TIDINGS_SMTP_RELAY", format!("smtp://127.0.0.1:{}", sink.port())),
    ];
    if let Some(database) = &database {
        eprintln!("database {}", database.scratch.url());
        env.push(("TIDINGS_DATABASE_URL", database.scratch.url()));
    }
    let binary = release_server_binary()?;
    let admin = fresh_key();
    let mut servers = Vec::with_capacity(options.nodes);
    // One after the other: the first applies the migrations and makes the default workspace.
    for node in 0..options.nodes {
        let server = TestServer::start_with(ServerOptions {
            bootstrap_key: Some(admin.clone()),
            env: env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect(),
            binary: Some(binary.clone()),
            ..ServerOptions::default()
        })
        .await;
        on_interrupt.kill(server.pid());
        eprintln!("tidings-server {node}: pid {} on {}", server.pid(), server.addr());
        servers.push(server);
    }
    let first = &servers[0];
    verified_domain(first, &dns, "load.example").await?;
    let keys = create_keys(first, options.keys).await?;

    let mut body = receipt("orders@load.example", "ann@example.com");
    if options.recipients > 1 {
        body["to"] = (0..options.recipients).map(|i| format!("user{i}@example.com")).collect();
    }
    let body = body.to_string();
    let dir = tempfile::tempdir()?;
    let run = fresh_key();
    let shares = split(options.messages, options.nodes);
    let connections = options.connections / options.nodes;
    let mut jobs = Vec::with_capacity(options.nodes);
    for (node, (server, &share)) in servers.iter().zip(&shares).enumerate() {
        let script = dir.path().join(format!("send-{node}.lua"));
        std::fs::write(&script, wrk_script(&keys, &format!("{run}-{node}"), &body, share))?;
        jobs.push((script, server.url("/v1/messages")));
    }

    let n = options.messages;
    let base = sink.count().messages;
    let before = Ticks::now(&servers, sink, database.as_ref());
    eprintln!("tidings: sending {n} messages with {} wrk ({connections} connections each)", options.nodes);
    let start = SystemTime::now();
    let sent: Vec<Result<(WrkFigures, SystemTime)>> = tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let running: Vec<_> = jobs
                .iter()
                .map(|(script, url)| scope.spawn(|| run_wrk(tools, script, url, connections, on_interrupt)))
                .collect();
            running.into_iter().map(|r| r.join().unwrap_or_else(|_| Err("a wrk thread panicked".into()))).collect()
        })
    });
    let sent = sent.into_iter().collect::<Result<Vec<_>>>()?;
    let accepted = sent.iter().map(|(_, at)| *at).max().ok_or("no wrk ran")?;
    eprintln!("tidings: accepted in {:.1} s; waiting for the sink", seconds_between(start, accepted));
    for (node, (wrk, _)) in sent.iter().enumerate() {
        if wrk.non_2xx > 0 || wrk.socket_errors != "0" {
            eprintln!("tidings: wrk {node} saw {} non-2xx answers, socket errors: {}", wrk.non_2xx, wrk.socket_errors);
        }
    }
    let copies = options.copies();
    let reached = tokio::task::block_in_place(|| sink.wait_for(base + copies, options.stall));
    let after = Ticks::now(&servers, sink, database.as_ref());
    let memory_kib = servers.iter().map(|s| procstat::peak_rss_kib(s.pid()).unwrap_or(0)).sum();
    let messages = list_messages(first).await?;
    let reached = match reached {
        Ok(count) => count,
        Err(count) => {
            return Err(format!(
                "tidings: the sink counted {} of {copies} copies and no more for {:?}.\n\
                 messages in the API: {} ({})\n{}",
                count.messages - base,
                options.stall,
                messages.len(),
                tally(&messages),
                log_tails(&servers),
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
    let found = delivery_latencies(first, &sampled).await;
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
    let extra_at_sink = sink.count().messages - base - copies;
    for server in servers {
        let pid = server.pid();
        let (status, _) = server.stop().await;
        on_interrupt.forget(pid);
        if !status.success() {
            return Err(format!("tidings-server {pid} exited with {status}").into());
        }
    }
    let ticks = procstat::ticks_per_second();
    let cpu = |b: u64, a: u64| a.saturating_sub(b) as f64 / ticks;
    // Backends that came after `before` started during the run: all their time counts.
    let backends: u64 =
        after.backends.iter().map(|(pid, &a)| a.saturating_sub(before.backends.get(pid).copied().unwrap_or(0))).sum();
    let per_node = sent
        .iter()
        .zip(&shares)
        .map(|((wrk, at), share)| {
            format!(
                "{:.0}/s (p50 {} p99 {}, {} requests, {} non-2xx)",
                *share as f64 / seconds_between(start, *at),
                wrk.p50,
                wrk.p99,
                wrk.requests,
                wrk.non_2xx
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Ok(Side {
        accepted_per_sec: n as f64 / seconds_between(start, accepted),
        delivered_per_sec: copies as f64 / seconds_between(start, reached.at),
        latencies,
        memory_kib,
        cpu: [cpu(before.servers, after.servers), cpu(before.wrk, after.wrk), cpu(before.sink, after.sink)],
        database_cpu: database
            .as_ref()
            .and_then(|d| d.postmaster)
            .map(|_| (backends as f64 / ticks, cpu(before.postgres, after.postgres))),
        extra_at_sink,
        note: format!(
            "{}; {} wrk, {connections} connections each; accepted per node: {per_node}; timelines read: {}",
            store_label(options),
            options.nodes,
            sampled.len()
        ),
    })
}

/// Where Tidings ran, for the report.
fn store_label(options: &Options) -> String {
    match (&options.database_url, options.nodes) {
        (None, _) => "sled, 1 node".to_owned(),
        (Some(_), 1) => "PostgreSQL, 1 node".to_owned(),
        (Some(_), n) => format!("PostgreSQL, {n} nodes"),
    }
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
        database_cpu: None,
        extra_at_sink,
        note,
    })
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
    let load_before = procstat::load_average();
    let on_interrupt = OnInterrupt::install()?;
    let sink = Sink::start(&tools.smtp_sink, options.dump.as_deref())?;
    on_interrupt.kill(sink.pid());
    eprintln!("smtp-sink pid {} on 127.0.0.1:{}", sink.pid(), sink.port());
    let tidings = run_tidings(&options, &tools, &sink, &on_interrupt).await?;
    let postfix = match options.no_postfix {
        true => None,
        false => Some(tokio::task::block_in_place(|| run_postfix(&options, &tools, &sink, &on_interrupt))?),
    };
    println!("{}", report(&options, &tidings, postfix.as_ref(), (&load_before, &procstat::load_average())));
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
    fn splits_the_messages_between_nodes() {
        assert_eq!(split(20_000, 3), vec![6_667, 6_667, 6_666]);
        assert_eq!(split(10, 1), vec![10]);
    }

    #[test]
    fn the_script_stops_after_the_target() {
        let script = wrk_script(&["tid_a".into()], "run", "{}", 20_000);
        assert!(script.contains("local target = 20000"));
        assert!(script.contains("wrk.thread:stop()"));
        assert!(script.contains(&format!(r#"io.stdout:write("\n{WRK_DONE}\n")"#)));
    }
}
