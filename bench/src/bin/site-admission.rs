//! site-admission: what admission by delivery site (issue #33, `Limits::admit_delivery` and
//! `release_delivery`) costs a delivery, in memory (`LocalLimits`, one node) and on
//! PostgreSQL (`PgLimits`, shared by every node).
//!
//! `--tasks` tokio tasks each admit and release deliveries in a loop for `--seconds`, spread
//! over `--sites` sites whose limits never refuse (a connection per task, 1,000,000 a
//! second), so that what is measured is the admission itself, not waiting. Each task holds
//! one lease id: it admits with it, releases it keeping it idle for a minute, and its next
//! admission takes it over, as the worker does with the lease of a connection it keeps open.
//! Prints admissions per second and the latency percentiles of one admit + release pair. A
//! second pass puts every task on one site: the hot row every node contends for on
//! PostgreSQL.
//!
//! ```sh
//! cargo run --release -p tidings-bench --bin site-admission -- --seconds 5 --tasks 16 --sites 4
//! cargo run --release -p tidings-bench --bin site-admission -- --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tidings_core::ids::SiteLeaseId;
use tidings_core::ports::{Limits, SiteLease, SiteQuota, SystemRandom};
use tidings_core::shaping::{MessageRate, RatePeriod, SiteKey};
use tidings_core::usecases::{AuthThrottleConfig, LocalLimits};
use tidings_storage_postgres::{PgOptions, PgStore};
use tokio_postgres::NoTls;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Options {
    seconds: u64,
    tasks: usize,
    sites: usize,
    database_url: Option<String>,
}

fn parse_options() -> Result<Options> {
    let mut options = Options { seconds: 5, tasks: 16, sites: 4, database_url: None };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => options.seconds = value()?.parse()?,
            "--tasks" => options.tasks = value()?.parse()?,
            "--sites" => options.sites = value()?.parse()?,
            "--database-url" => options.database_url = Some(value()?),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    Ok(options)
}

/// One pass: `tasks` tasks over `sites` sites for `seconds`; (pairs per second, p50, p99,
/// max in microseconds).
async fn pass(
    limits: Arc<dyn Limits>,
    label: &str,
    tasks: usize,
    sites: usize,
    seconds: u64,
) -> Result<(f64, u64, u64, u64)> {
    let quota = SiteQuota {
        connections: u32::try_from(tasks).unwrap_or(u32::MAX),
        rate: MessageRate::new(1_000_000, RatePeriod::Second).ok_or("a rate")?,
    };
    let keys: Arc<Vec<SiteKey>> = Arc::new(
        (0..sites)
            .map(|n| SiteKey::parse(&format!(".site{n}.{label}.example")).ok_or("a site key"))
            .collect::<std::result::Result<_, _>>()?,
    );
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (limits, keys) = (Arc::clone(&limits), Arc::clone(&keys));
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let site = &keys[task % keys.len()];
            let id = SiteLeaseId::new_at(Utc::now(), &SystemRandom);
            while Instant::now() < deadline {
                let now = Utc::now();
                let lease = SiteLease { id, until: now + chrono::Duration::minutes(5) };
                let t = Instant::now();
                let admitted = limits.admit_delivery(site, quota, lease, now).await?;
                if !admitted.is_admitted() {
                    // Only the memory limits outrun 1,000,000 a second (the most a rate
                    // may be); a refusal is not an admission and is not counted.
                    tokio::task::yield_now().await;
                    continue;
                }
                limits.release_delivery(site, lease.id, Some(now + chrono::Duration::minutes(1)), now).await?;
                latencies.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
                // The memory limits never wait: without this, a task would keep its thread
                // for the whole pass and the others would start after the deadline.
                tokio::task::yield_now().await;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(latencies)
        }));
    }
    let mut all = Vec::new();
    for handle in handles {
        all.extend(handle.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let at = |p: usize| all.get((all.len() * p / 100).min(all.len().saturating_sub(1))).copied().unwrap_or(0);
    Ok((all.len() as f64 / elapsed, at(50), at(99), all.last().copied().unwrap_or(0)))
}

async fn report(name: &str, limits: Arc<dyn Limits>, options: &Options) -> Result<()> {
    for (sites, label, name_part) in
        [(options.sites, format!("{} sites", options.sites), "spread"), (1, "one site".to_owned(), "hot")]
    {
        let (rate, p50, p99, max) = pass(Arc::clone(&limits), name_part, options.tasks, sites, options.seconds).await?;
        println!("| {name} | {label} | {} | {rate:.0} | {p50} | {p99} | {max} |", options.tasks);
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = parse_options()?;
    println!("| limits | sites | tasks | admit+release/s | p50 µs | p99 µs | max µs |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    report("memory", Arc::new(LocalLimits::default()), &options).await?;
    if let Some(admin_url) = &options.database_url {
        let name = format!("tidings_bench_sites_{}", std::process::id());
        let (admin, connection) = tokio_postgres::connect(admin_url, NoTls).await?;
        tokio::spawn(connection);
        admin.batch_execute(&format!("CREATE DATABASE \"{name}\"")).await?;
        let base = admin_url.split('?').next().unwrap_or(admin_url);
        let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
        let url = format!("{server}/{name}");
        let result = async {
            let store = PgStore::connect(&url, PgOptions::default(), tidings_testing::fixtures::sealer()).await?;
            report("PostgreSQL", Arc::new(store.limits(AuthThrottleConfig::default())), &options).await
        }
        .await;
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await?;
        result?;
    }
    Ok(())
}
