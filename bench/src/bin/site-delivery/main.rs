//! site-delivery: delivered/s to four sites at once, each with its own limits, through the
//! built server in `mx` mode; and what the scheduler (admission by site) costs a message.
//!
//! Four fake providers on 127.0.0.2-5 (one port, `TIDINGS_MX_PORT`), named by MX records on a
//! loopback DNS server, accept mail and note the connections open at once and the messages
//! on each connection. Each pass starts a fresh `tidings-server`, verifies a sending domain,
//! idles a few seconds (its CPU then is the idle baseline), then sends `--messages` messages
//! spread evenly over the four sites' domains through the API, `--senders` at a time, and
//! waits until every provider has its share. Passes (see `passes.rs`):
//! - `shaped`: a shaping file gives each site its own limits (one at 50 a second), so the
//!   worker's admissions are refused and messages wait;
//! - `open`: `mx` mode with limits no delivery reaches (admission on, never refusing);
//! - `relay`: the same load to one smart host (the first provider): no sites, no admission.
//!
//! The server's CPU per 1,000 messages in each pass is the scheduler's cost: `open` against
//! `relay` is admission that admits, `shaped` against `open` is what refusals and waiting add.
//!
//! ```text
//! cargo build --release -p tidings-server && cargo build --release -p tidings-bench --bin site-delivery
//! target/release/site-delivery [--messages 8000] [--senders 16] [--passes shaped,open,relay]
//!     [--idle 3] [--stall 60] [--log warn] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
//! ```

mod passes;
mod providers;
mod report;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidings_bench::{Result, create_keys, procstat, receipt, release_server_binary, verified_domain};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{DataDir, Options as ServerOptions, ScratchDatabase, TestServer, fresh_key};

use crate::passes::Pass;
use crate::providers::{Providers, SITES, Seen, SiteNames};
use crate::report::{Outcome, SiteOutcome};

/// The operator's token: the bench reads `/v1/operator/sites` for the waiting messages.
const OPERATOR_TOKEN: &str = "operator-bench-0123456789abcdef";
/// The sending domain.
const FROM_DOMAIN: &str = "load.example";

/// What to run.
#[derive(Debug)]
pub struct Options {
    messages: usize,
    senders: usize,
    passes: Vec<Pass>,
    idle: Duration,
    stall: Duration,
    log: String,
    /// Admin URL of the PostgreSQL server to make each pass's database on; sled when `None`.
    database_url: Option<String>,
}

const USAGE: &str = "usage: site-delivery [--messages N] [--senders N] [--passes shaped,open,relay] \
                     [--idle SECONDS] [--stall SECONDS] [--log LEVEL] [--database-url ADMIN_URL]";

fn parse_options() -> Result<Options> {
    let mut options = Options {
        messages: 8_000,
        senders: 16,
        passes: Pass::ALL.to_vec(),
        idle: Duration::from_secs(3),
        stall: Duration::from_secs(60),
        log: "warn".into(),
        database_url: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--messages" => options.messages = value()?.parse()?,
            "--senders" => options.senders = value()?.parse()?,
            "--passes" => {
                options.passes = value()?
                    .split(',')
                    .map(|name| Pass::parse(name).ok_or_else(|| format!("no pass {name:?} (shaped, open, relay)")))
                    .collect::<Result<_, _>>()?;
            }
            "--idle" => options.idle = Duration::from_secs(value()?.parse()?),
            "--stall" => options.stall = Duration::from_secs(value()?.parse()?),
            "--log" => options.log = value()?,
            "--database-url" => options.database_url = Some(value()?),
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    if options.messages < SITES || options.senders == 0 || options.passes.is_empty() {
        return Err(format!("--messages must be at least {SITES}, --senders and --passes not empty").into());
    }
    Ok(options)
}

/// The run's PostgreSQL database, and the postmaster whose children serve it.
struct Database {
    scratch: ScratchDatabase,
    postmaster: Option<u32>,
}

impl Database {
    fn create(admin_url: &str) -> Result<Self> {
        let scratch = ScratchDatabase::create_on(admin_url, "tidings_bench")
            .map_err(|e| format!("making a database through {admin_url}: {e}"))?;
        Ok(Self { scratch, postmaster: procstat::postmaster() })
    }

    /// CPU ticks so far of each backend connected to this database.
    fn ticks(&self) -> BTreeMap<u32, u64> {
        let Some(postmaster) = self.postmaster else { return BTreeMap::new() };
        let backends = procstat::backends_of(postmaster, self.scratch.name());
        backends.into_iter().map(|pid| (pid, procstat::own_ticks(pid))).collect()
    }
}

/// CPU seconds the backends used between two [`Database::ticks`]; a backend that came in
/// between counts whole.
fn backend_seconds(before: &BTreeMap<u32, u64>, after: &BTreeMap<u32, u64>) -> f64 {
    let ticks: u64 = after.iter().map(|(pid, &a)| a.saturating_sub(before.get(pid).copied().unwrap_or(0))).sum();
    ticks as f64 / procstat::ticks_per_second()
}

/// The server's settings for `pass` over `providers`, with its shaping file in `dir`.
fn server_env(
    pass: Pass,
    providers: &Providers,
    dns: &TestDnsServer,
    dir: &DataDir,
    log: &str,
) -> Result<Vec<(String, String)>> {
    let mut env = vec![
        ("TIDINGS_DNS_SERVER", dns.addr().to_string()),
        ("TIDINGS_LOG", log.to_owned()),
        ("TIDINGS_OPERATOR_TOKEN", OPERATOR_TOKEN.to_owned()),
    ];
    match pass.shaping_file() {
        Some(shaping) => {
            let file = dir.path().join("shaping.toml");
            std::fs::write(&file, shaping)?;
            env.extend([
                ("TIDINGS_DELIVERY", "mx".to_owned()),
                ("TIDINGS_MX_PORT", providers.port().to_string()),
                ("TIDINGS_MX_ALLOW_PRIVATE", "true".to_owned()),
                ("TIDINGS_SHAPING_FILE", file.display().to_string()),
            ]);
        }
        None => env.extend([
            ("TIDINGS_DELIVERY", "relay".to_owned()),
            ("TIDINGS_SMTP_RELAY", format!("smtp://{}:{}", SiteNames::of(0).ip, providers.port())),
        ]),
    }
    Ok(env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Sends `count` receipts, the i-th to `user<i>@` the (i mod 4)-th site's domain, `senders`
/// at a time over `keys`; when the last was accepted.
async fn send_all(server: &Arc<TestServer>, keys: &[String], count: usize, senders: usize) -> Result<Instant> {
    let next = Arc::new(AtomicUsize::new(0));
    let domains: Arc<Vec<String>> = Arc::new((0..SITES).map(|n| SiteNames::of(n).domain).collect());
    let mut tasks = Vec::with_capacity(senders);
    for _ in 0..senders {
        let (server, next, domains, keys) = (server.clone(), next.clone(), domains.clone(), keys.to_vec());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return Ok::<Instant, String>(Instant::now());
                }
                let send = receipt(&format!("orders@{FROM_DOMAIN}"), &format!("user{i}@{}", domains[i % SITES]));
                let (status, body) = server.post("/v1/messages", &keys[i % keys.len()], send).await;
                if status != 201 {
                    return Err(format!("send {i}: {status} {body}"));
                }
            }
        }));
    }
    let mut last = Instant::now();
    for task in tasks {
        last = last.max(task.await??);
    }
    Ok(last)
}

/// Reads `/v1/operator/sites` every half second until aborted, keeping each site's largest
/// `waiting` (messages this node put back for their site's limits).
fn sample_waiting(server: Arc<TestServer>, most: Arc<Mutex<BTreeMap<String, u64>>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let (status, body) = server.get("/v1/operator/sites", OPERATOR_TOKEN).await;
            if status == 200 {
                for site in body["data"]["sites"].as_array().into_iter().flatten() {
                    if let (Some(name), Some(waiting)) = (site["site"].as_str(), site["waiting"].as_u64()) {
                        let mut most = most.lock().unwrap();
                        let entry = most.entry(name.to_owned()).or_default();
                        *entry = (*entry).max(waiting);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

/// How many messages of the workspace are in each status.
async fn statuses(server: &TestServer) -> Result<BTreeMap<String, usize>> {
    let mut tally = BTreeMap::new();
    for message in tidings_bench::all_messages(server).await? {
        *tally.entry(message["status"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
    }
    Ok(tally)
}

/// One pass: a fresh server, providers and database; the load; what each side saw.
async fn run_pass(options: &Options, pass: Pass) -> Result<Outcome> {
    // Declared first, so dropped after the server.
    let database = options.database_url.as_deref().map(Database::create).transpose()?;
    let providers = Providers::start().await?;
    let dns = TestDnsServer::start([]).await?;
    providers.publish(&dns).await;
    let dir = DataDir::new();
    let mut env = server_env(pass, &providers, &dns, &dir, &options.log)?;
    if let Some(database) = &database {
        env.push(("TIDINGS_DATABASE_URL".to_owned(), database.scratch.url()));
    }
    let server = TestServer::start_with(ServerOptions {
        data_dir: Some(dir),
        bootstrap_key: Some(fresh_key()),
        env,
        binary: Some(release_server_binary()?),
        ..ServerOptions::default()
    })
    .await;
    let pid = server.pid();
    eprintln!("{}: tidings-server pid {pid} on {}, providers on port {}", pass.name(), server.addr(), providers.port());
    verified_domain(&server, &dns, FROM_DOMAIN).await?;
    let keys = create_keys(&server, 4).await?;
    let server = Arc::new(server);

    // The idle baseline: what the server's loops cost with nothing to do.
    let idle_before = procstat::own_ticks(pid);
    tokio::time::sleep(options.idle).await;
    let idle_cpu_per_sec = procstat::own_ticks(pid).saturating_sub(idle_before) as f64
        / procstat::ticks_per_second()
        / options.idle.as_secs_f64();

    // Relay mode hands everything to the first provider.
    let targets: Vec<usize> = match pass {
        Pass::Relay => (0..SITES).map(|n| if n == 0 { options.messages } else { 0 }).collect(),
        Pass::Shaped | Pass::Open => (0..SITES).map(|n| (options.messages + SITES - 1 - n) / SITES).collect(),
    };
    let waiting = Arc::new(Mutex::new(BTreeMap::new()));
    let sampler = pass.limits().map(|_| sample_waiting(server.clone(), waiting.clone()));
    let cpu_before = procstat::own_ticks(pid);
    let db_before = database.as_ref().map(Database::ticks);
    eprintln!("{}: sending {} messages, {} at a time", pass.name(), options.messages, options.senders);
    let start = Instant::now();
    let sending = send_all(&server, &keys, options.messages, options.senders);
    let (accepted, arrived) = tokio::join!(sending, providers.wait_for(&targets, options.stall));
    let accepted = accepted?;
    let cpu_after = procstat::own_ticks(pid);
    let db_after = database.as_ref().map(Database::ticks);
    if let Some(sampler) = sampler {
        sampler.abort();
        let _ = sampler.await;
    }
    let arrived = arrived.map_err(|counts| {
        let log = server.stderr_lines();
        format!(
            "{}: the providers counted {counts:?} of {targets:?} and no more for {:?}; the server's log ends:\n{}",
            pass.name(),
            options.stall,
            log[log.len().saturating_sub(20)..].join("\n")
        )
    })?;
    let memory_kib = procstat::peak_rss_kib(pid).unwrap_or(0);
    let statuses = statuses(&server).await?;
    // Anything past the targets a moment later is a duplicate.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen: Vec<Seen> = providers.seen();
    let server = Arc::try_unwrap(server).map_err(|_| "the server is still shared")?;
    let (status, _) = server.stop().await;
    if !status.success() {
        return Err(format!("tidings-server exited with {status}").into());
    }
    let waiting = waiting.lock().unwrap().clone();
    let sites = seen
        .into_iter()
        .zip(&arrived)
        .zip(&targets)
        .enumerate()
        .map(|(n, ((seen, at), &target))| SiteOutcome {
            target,
            seen,
            done_after: at.duration_since(start).as_secs_f64(),
            max_waiting: waiting.get(&SiteNames::of(n).suffix).copied(),
        })
        .collect();
    let last = arrived.iter().max().copied().unwrap_or(start);
    Ok(Outcome {
        pass,
        messages: options.messages,
        accepted_after: accepted.duration_since(start).as_secs_f64(),
        delivered_after: last.duration_since(start).as_secs_f64(),
        sites,
        server_cpu: cpu_after.saturating_sub(cpu_before) as f64 / procstat::ticks_per_second(),
        idle_cpu_per_sec,
        database_cpu: db_before.zip(db_after).map(|(b, a)| backend_seconds(&b, &a)),
        memory_kib,
        statuses,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = parse_options()?;
    let load_before = procstat::load_average();
    let mut outcomes = Vec::with_capacity(options.passes.len());
    for &pass in &options.passes {
        let outcome = run_pass(&options, pass).await?;
        eprintln!("{}", report::pass(&outcome));
        outcomes.push(outcome);
    }
    let store = if options.database_url.is_some() { "PostgreSQL" } else { "sled" };
    println!(
        "{} messages over {SITES} sites, {} senders, Tidings on {store}; load average before {load_before} / after {}\n",
        options.messages,
        options.senders,
        procstat::load_average()
    );
    for outcome in &outcomes {
        println!("{}", report::pass(outcome));
    }
    println!("{}", report::summary(&outcomes));
    Ok(())
}
