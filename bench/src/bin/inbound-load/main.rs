//! inbound-load: inbound mail accepted per second and CPU per message, Tidings' SMTP listener
//! against Postfix delivering the same mail to a Maildir (issue #35).
//!
//! Makes N messages (a text+HTML reply with a small attachment, about `--size` bytes), then:
//! 1. Tidings: the release `tidings-server` with its inbound listener on loopback and a DNS
//!    server on loopback holding the inbound domain's SPF, DKIM, DMARC and MX records; the
//!    domain is added, switched to inbound and verified through the API. C clients hand it the
//!    N messages; at the end the API must list N received messages.
//! 2. Postfix: a private instance (`postfix -c <dir>`) whose smtpd takes mail for the same
//!    domain and whose `virtual` agent writes it to a Maildir; the same clients hand it the
//!    same N messages; at the end the Maildir must hold N files.
//!
//! Prints a Markdown table of both. Needs root (Postfix's master) and the `postfix` package.
//!
//! ```text
//! cargo build --release -p tidings-server -p tidings-bench
//! target/release/inbound-load [--messages 5000] [--connections 20] [--size 4096] [--log info]
//!     [--database-url postgres://postgres@127.0.0.1:5432/postgres] [--no-postfix] [--no-tidings]
//! ```

mod client;
#[path = "../delivery-load/interrupt.rs"]
mod interrupt;
mod postfix;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tidings_bench::{Result, procstat};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options as ServerOptions, ScratchDatabase, TestServer, fresh_key};

use crate::client::{Outcome, percentile, send_all};
use crate::interrupt::OnInterrupt;
use crate::postfix::Postfix;

/// The domain both sides receive mail for.
pub const DOMAIN: &str = "in.bench.test";
/// The recipient of every message.
const RECIPIENT: &str = "support@in.bench.test";
/// The listener's public name, which the domain's MX record names.
const MX_HOST: &str = "mx.bench.test";

/// What to run.
#[derive(Debug)]
struct Options {
    messages: usize,
    connections: usize,
    size: usize,
    log: String,
    database_url: Option<String>,
    postfix: bool,
    tidings: bool,
    /// How long to wait for the stored count (API, Maildir) to reach N after the last reply.
    stall: Duration,
}

const USAGE: &str = "usage: inbound-load [--messages N] [--connections N] [--size BYTES] [--log FILTER] \
                     [--database-url ADMIN_URL] [--no-postfix] [--no-tidings] [--stall SECONDS]";

fn parse_options() -> Result<Options> {
    let mut options = Options {
        messages: 5_000,
        connections: 20,
        size: 4_096,
        log: "info".into(),
        database_url: None,
        postfix: true,
        tidings: true,
        stall: Duration::from_secs(120),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--messages" => options.messages = value()?.parse()?,
            "--connections" => options.connections = value()?.parse()?,
            "--size" => options.size = value()?.parse()?,
            "--log" => options.log = value()?,
            "--database-url" => options.database_url = Some(value()?),
            "--no-postfix" => options.postfix = false,
            "--no-tidings" => options.tidings = false,
            "--stall" => options.stall = Duration::from_secs(value()?.parse()?),
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    if options.messages == 0 || options.connections == 0 {
        return Err("--messages and --connections must be at least 1".into());
    }
    Ok(options)
}

/// One side's figures.
#[derive(Debug)]
struct Side {
    outcome: Outcome,
    /// First connect → N stored (Tidings: N listed by the API is checked after; each is
    /// stored before its 250. Postfix: N files in the Maildir).
    stored_after: Duration,
    /// CPU seconds of the receiving side (server; Postfix's process tree), of the database
    /// (all of PostgreSQL), and of this process (the clients).
    cpu: [f64; 3],
    memory_kib: u64,
    note: String,
}

fn cpu_seconds(ticks: u64) -> f64 {
    ticks as f64 / procstat::ticks_per_second()
}

/// The inbound listener's address from the server's log.
fn listener_addr(server: &TestServer) -> Result<SocketAddr> {
    let line = server.wait_for_log(&["inbound SMTP listening on "]).ok_or("the server logged no inbound listener")?;
    Ok(line.rsplit(' ').next().unwrap_or_default().trim().parse()?)
}

/// Publishes `domain`'s records whose purpose starts with one of `kinds` on `dns`.
async fn publish(dns: &TestDnsServer, domain: &Value, kinds: &[&str]) -> Result<()> {
    for record in domain["dnsRecords"].as_array().ok_or("no dnsRecords")? {
        let purpose = record["purpose"].as_str().unwrap_or_default();
        if !kinds.iter().any(|k| purpose.starts_with(k)) {
            continue;
        }
        let (Some(name), Some(value)) = (record["name"].as_str(), record["value"].as_str()) else {
            return Err(format!("a record without name or value: {record}").into());
        };
        match record["type"].as_str() {
            Some("MX") => {
                let preference = record["priority"].as_u64().and_then(|p| u16::try_from(p).ok()).unwrap_or(10);
                dns.set_mx(name, &[(preference, value)]).await;
            }
            _ => dns.set_txt(name, &[value]).await,
        }
    }
    Ok(())
}

/// Adds [`DOMAIN`], publishes its records, switches inbound on and verifies it.
async fn inbound_domain(server: &TestServer, dns: &TestDnsServer) -> Result<()> {
    let (status, body) = server.post("/v1/domains", server.key(), json!({"domain": DOMAIN})).await;
    if status != 201 {
        return Err(format!("adding {DOMAIN}: {status} {body}").into());
    }
    let id = body["data"]["id"].as_str().ok_or("no domain id")?.to_owned();
    publish(dns, &body["data"], &["SPF", "DKIM", "DMARC"]).await?;
    let (status, body) = server.patch(&format!("/v1/domains/{id}"), server.key(), json!({"inbound": true})).await;
    if status != 200 {
        return Err(format!("switching inbound on: {status} {body}").into());
    }
    publish(dns, &body["data"], &["Inbound"]).await?;
    let (status, body) = server.post(&format!("/v1/domains/{id}/verify"), server.key(), json!({})).await;
    if status != 200 || body["data"]["inboundStatus"] != "Verified" {
        return Err(format!("verifying {DOMAIN}: {status} {body}").into());
    }
    Ok(())
}

/// Every received message as `GET /v1/inbound/messages` lists it, page by page.
async fn all_inbound(server: &TestServer) -> Result<Vec<Value>> {
    let mut messages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/inbound/messages?limit=100&cursor={c}"),
            None => "/v1/inbound/messages?limit=100".to_owned(),
        };
        let (status, body) = server.get(&path, server.key()).await;
        if status != 200 {
            return Err(format!("listing inbound messages: {status} {body}").into());
        }
        messages.extend(body["data"].as_array().ok_or("no data")?.iter().cloned());
        match body["pagination"]["nextCursor"].as_str() {
            Some(next) if body["pagination"]["hasMore"] == true => cursor = Some(next.to_owned()),
            _ => return Ok(messages),
        }
    }
}

/// CPU ticks of the whole PostgreSQL server (other sessions too; the machine is quiet).
fn postgres_ticks(postmaster: Option<u32>) -> u64 {
    postmaster.map_or(0, procstat::tree_ticks)
}

async fn run_tidings(options: &Options, messages: &Arc<Vec<Vec<u8>>>, on_interrupt: &OnInterrupt) -> Result<Side> {
    // Declared first, so dropped after the server.
    let database = options
        .database_url
        .as_deref()
        .map(|url| {
            ScratchDatabase::create_on(url, "tidings_bench")
                .map_err(|e| format!("making a database through {url}: {e}"))
        })
        .transpose()?;
    let postmaster = database.as_ref().and_then(|_| procstat::postmaster());
    let dns = TestDnsServer::start([]).await?;
    let mut env = vec![
        ("TIDINGS_DNS_SERVER", dns.addr().to_string()),
        ("TIDINGS_LOG", options.log.clone()),
        ("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:0".to_owned()),
        ("TIDINGS_INBOUND_MX_HOST", MX_HOST.to_owned()),
        // All the load comes from 127.0.0.1: lift the per-client limits and the quota.
        ("TIDINGS_INBOUND_MESSAGES_PER_MINUTE", "1000000".to_owned()),
        ("TIDINGS_INBOUND_QUOTA_MESSAGES", "100000000".to_owned()),
        ("TIDINGS_INBOUND_QUOTA_BYTES", "1TiB".to_owned()),
        ("TIDINGS_SMTP_MAX_SESSIONS", "1000".to_owned()),
        ("TIDINGS_SMTP_MAX_SESSIONS_PER_IP", "1000".to_owned()),
    ];
    if let Some(database) = &database {
        eprintln!("database {}", database.url());
        env.push(("TIDINGS_DATABASE_URL", database.url()));
    }
    let server = TestServer::start_with(ServerOptions {
        bootstrap_key: Some(fresh_key()),
        env: env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect(),
        binary: Some(tidings_bench::release_server_binary()?),
        ..ServerOptions::default()
    })
    .await;
    on_interrupt.kill(server.pid());
    let addr = listener_addr(&server)?;
    eprintln!("tidings-server: pid {}, inbound SMTP on {addr}", server.pid());
    inbound_domain(&server, &dns).await?;

    let n = messages.len();
    let before = (procstat::own_ticks(server.pid()), postgres_ticks(postmaster), procstat::own_ticks(0));
    eprintln!("tidings: sending {n} messages over {} connections", options.connections);
    let outcome = send_all(addr, messages.clone(), RECIPIENT, options.connections).await;
    // Anything the server does after its 250 (events, indexes) within a second counts too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = (procstat::own_ticks(server.pid()), postgres_ticks(postmaster), procstat::own_ticks(0));
    let memory_kib = procstat::peak_rss_kib(server.pid()).unwrap_or(0);
    eprintln!("tidings: {} accepted in {:.1} s; listing them", outcome.accepted, outcome.elapsed.as_secs_f64());

    let listed = all_inbound(&server).await?;
    if listed.len() != n || outcome.accepted != n as u64 {
        let log = server.stderr_lines();
        return Err(format!(
            "tidings: {} accepted, the API lists {} of {n}; refused: {:?}\nlast lines of the log:\n{}",
            outcome.accepted,
            listed.len(),
            outcome.refused,
            log[log.len().saturating_sub(20)..].join("\n")
        )
        .into());
    }
    // What was stored is the message sent: one attachment, both parts.
    let (status, one) =
        server.get(&format!("/v1/inbound/messages/{}", listed[0]["id"].as_str().unwrap_or("")), server.key()).await;
    let shape = &one["data"];
    if status != 200 || shape["attachments"].as_array().map(Vec::len) != Some(1) || !shape["html"].is_string() {
        return Err(format!("tidings: a stored message lacks its attachment or HTML: {status} {one}").into());
    }
    let pid = server.pid();
    let (status, _) = server.stop().await;
    on_interrupt.forget(pid);
    if !status.success() {
        return Err(format!("tidings-server exited with {status}").into());
    }
    let store = if database.is_some() { "PostgreSQL" } else { "sled" };
    Ok(Side {
        stored_after: outcome.elapsed,
        cpu: [
            cpu_seconds(after.0 - before.0),
            cpu_seconds(after.1.saturating_sub(before.1)),
            cpu_seconds(after.2 - before.2),
        ],
        memory_kib,
        note: format!(
            "{store}; the API lists {} messages; a stored one has its attachment and HTML; SPF {}, DKIM {}, DMARC {}",
            listed.len(),
            shape["spf"]["result"],
            shape["dkim"]["result"],
            shape["dmarc"]["result"]
        ),
        outcome,
    })
}

async fn run_postfix(options: &Options, messages: &Arc<Vec<Vec<u8>>>, on_interrupt: &OnInterrupt) -> Result<Side> {
    let tool = |name: &str| {
        ["/usr/sbin", "/sbin", "/usr/bin"]
            .iter()
            .map(|d| PathBuf::from(d).join(name))
            .find(|p| p.is_file())
            .ok_or_else(|| format!("`{name}` not found: `DEBIAN_FRONTEND=noninteractive apt-get install -y postfix`"))
    };
    let mut postfix = Postfix::start(&tool("postfix")?, &tool("postconf")?)?;
    on_interrupt.postfix(Some((tool("postfix")?, postfix.config_dir())));
    let master = postfix.master_pid().ok_or("Postfix started but wrote no master.pid")?;
    let n = messages.len();
    let before = (procstat::tree_ticks(master), procstat::own_ticks(0));
    eprintln!("postfix: sending {n} messages over {} connections to {}", options.connections, postfix.addr());
    let start = Instant::now();
    let outcome = send_all(postfix.addr(), messages.clone(), RECIPIENT, options.connections).await;
    eprintln!(
        "postfix: {} accepted in {:.1} s; waiting for the Maildir",
        outcome.accepted,
        outcome.elapsed.as_secs_f64()
    );
    let deadline = Instant::now() + options.stall;
    while postfix.delivered() < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stored_after = start.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = (procstat::tree_ticks(master), procstat::own_ticks(0));
    let processes: Vec<u32> = std::iter::once(master).chain(procstat::children_of(master)).collect();
    let memory_kib = processes.iter().filter_map(|&pid| procstat::pss_kib(pid)).sum();
    let summed_hwm_kib: u64 = processes.iter().filter_map(|&pid| procstat::peak_rss_kib(pid)).sum();
    let delivered = postfix.delivered();
    if delivered != n || outcome.accepted != n as u64 {
        let log = postfix.maillog();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        return Err(format!(
            "postfix: {} accepted, {delivered} of {n} in the Maildir; refused: {:?}\nmaillog ends:\n{}",
            outcome.accepted,
            outcome.refused,
            tail.join("\n")
        )
        .into());
    }
    postfix.stop()?;
    on_interrupt.postfix(None);
    Ok(Side {
        stored_after,
        cpu: [cpu_seconds(after.0 - before.0), 0.0, cpu_seconds(after.1 - before.1)],
        memory_kib,
        note: format!(
            "{delivered} files in the Maildir; memory: Σ PSS of {} processes (their VmHWM sum to {} MiB)",
            processes.len(),
            summed_hwm_kib / 1024
        ),
        outcome,
    })
}

/// The Markdown table of the sides that ran.
fn report(options: &Options, sides: &[(&str, &Side)], bytes: usize, load: (&str, &str)) -> String {
    let n = options.messages as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "inbound-load: {} messages of {bytes} bytes on the wire (average), {} connections; load average before / after: {} / {}\n",
        options.messages, options.connections, load.0, load.1
    );
    let header: Vec<&str> = sides.iter().map(|(name, _)| *name).collect();
    let _ = writeln!(out, "| | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(sides.len()));
    let row = |out: &mut String, label: &str, f: &dyn Fn(&Side) -> String| {
        let cells: Vec<String> = sides.iter().map(|(_, s)| f(s)).collect();
        let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
    };
    let ms = |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3));
    row(&mut out, "**accepted/s** (first connect → last 250)", &|s| {
        format!("**{:.0}**", s.outcome.accepted as f64 / s.outcome.elapsed.as_secs_f64())
    });
    row(&mut out, "stored/s (→ N listed / N in the Maildir)", &|s| {
        format!("{:.0}", n / s.stored_after.as_secs_f64())
    });
    row(&mut out, "end of data → 250 p50", &|s| ms(percentile(&s.outcome.latencies, 50.0)));
    row(&mut out, "end of data → 250 p99", &|s| ms(percentile(&s.outcome.latencies, 99.0)));
    row(&mut out, "end of data → 250 max", &|s| ms(s.outcome.latencies.last().copied()));
    row(&mut out, "not 250", &|s| format!("{}", s.outcome.refused.values().sum::<u64>()));
    row(&mut out, "**CPU ms per message**: receiver", &|s| format!("**{:.2}**", s.cpu[0] * 1e3 / n));
    row(&mut out, "CPU ms per message: PostgreSQL", &|s| {
        if s.cpu[1] > 0.0 { format!("{:.2}", s.cpu[1] * 1e3 / n) } else { "-".into() }
    });
    row(&mut out, "CPU ms per message: clients (this process)", &|s| format!("{:.2}", s.cpu[2] * 1e3 / n));
    row(&mut out, "memory MiB (Tidings peak RSS / Postfix Σ PSS)", &|s| format!("{}", s.memory_kib / 1024));
    for (name, side) in sides {
        let _ = writeln!(out, "\n{name}: {}", side.note);
        if !side.outcome.refused.is_empty() {
            let _ = writeln!(out, "{name} refusals: {:?}", side.outcome.refused);
        }
    }
    out
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = parse_options()?;
    if options.postfix && procstat::euid() != Some(0) {
        return Err("run inbound-load as root: Postfix's master must be started by root (or pass --no-postfix)".into());
    }
    let messages: Arc<Vec<Vec<u8>>> =
        Arc::new((0..options.messages).map(|i| client::message(i, RECIPIENT, options.size)).collect());
    let bytes = messages.iter().map(Vec::len).sum::<usize>() / messages.len();
    let load_before = procstat::load_average();
    let on_interrupt = OnInterrupt::install()?;
    let tidings = match options.tidings {
        true => Some(run_tidings(&options, &messages, &on_interrupt).await?),
        false => None,
    };
    let postfix = match options.postfix {
        true => Some(run_postfix(&options, &messages, &on_interrupt).await?),
        false => None,
    };
    let sides: Vec<(&str, &Side)> = [("Tidings", tidings.as_ref()), ("Postfix", postfix.as_ref())]
        .into_iter()
        .filter_map(|(n, s)| Some((n, s?)))
        .collect();
    println!("{}", report(&options, &sides, bytes, (&load_before, &procstat::load_average())));
    Ok(())
}
