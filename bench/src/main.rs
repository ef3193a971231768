//! tidings-bench: durable message creation on the sled store.
//!
//! For each writer count, opens a fresh store in a temp dir, runs that many tokio tasks that
//! each call `create_message` in a loop for a fixed time (every call returns only once the
//! message is durable), and prints creates per second and latency percentiles as a Markdown
//! table. See bench/README.md for figures and how to run it.
//!
//! ```text
//! cargo run --release -p tidings-bench -- [--seconds 5] [--writers 1,16,64,256] [--html-bytes 1024] [--dir PATH]
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tidings_bench::{html_body, percentile_ms};
use tidings_core::ports::{CreateOutcome, MessageStore};
use tidings_storage_sled::SledStore;
use tidings_testing::fixtures::{api_key, domain, idempotency, message, new_message, now, plus_secs, workspace};

/// Errors end the run with a message; a benchmark has nothing to recover.
type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// What to run.
#[derive(Debug)]
struct Options {
    seconds: u64,
    writers: Vec<usize>,
    html_bytes: usize,
    dir: Option<PathBuf>,
}

fn parse_options() -> Result<Options> {
    let mut options = Options { seconds: 5, writers: vec![1, 16, 64, 256], html_bytes: 1024, dir: None };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => options.seconds = value()?.parse()?,
            "--writers" => {
                options.writers = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?;
            }
            "--html-bytes" => options.html_bytes = value()?.parse()?,
            "--dir" => options.dir = Some(value()?.into()),
            "--help" | "-h" => {
                println!("usage: tidings-bench [--seconds N] [--writers 1,16,64,256] [--html-bytes N] [--dir PATH]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    Ok(options)
}

/// One run's figures.
struct Figures {
    creates: usize,
    elapsed: Duration,
    /// Sorted latencies in microseconds.
    latencies: Vec<u32>,
    disk_bytes: u64,
}

async fn run(
    store: SledStore,
    writers: usize,
    duration: Duration,
    html: String,
) -> Result<(usize, Duration, Vec<u32>)> {
    let ws = workspace();
    let key = api_key(ws.id);
    let dom = domain(ws.id, "acme.example.com");
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(writers);
    for writer in 0..writers {
        let (store, html) = (store.clone(), html.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let mut m = message(ws.id, key.id, dom.id);
                m.html = Some(html.clone());
                let mut new = new_message(&m);
                // Every request carries an Idempotency-Key, as careful API clients do.
                let idem = format!("bench-{writer}-{n}");
                new.idempotency = Some(idempotency(ws.id, &idem, m.id, now(), plus_secs(now(), 86_400)));
                let began = Instant::now();
                let outcome = store.create_message(&new).await?;
                latencies.push(u32::try_from(began.elapsed().as_micros()).unwrap_or(u32::MAX));
                if outcome != CreateOutcome::Created {
                    return Err(format!("unexpected outcome {outcome:?}").into());
                }
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    Ok((latencies.len(), elapsed, latencies))
}

fn main() -> Result<()> {
    let options = parse_options()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let html = html_body(options.html_bytes);
    println!(
        "durable create_message on sled, {} s per run, html {} bytes, idempotency key on every message",
        options.seconds,
        html.len()
    );
    println!();
    println!("| writers | creates | creates/s | p50 ms | p99 ms | max ms | disk MiB |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for &writers in &options.writers {
        let parent = match &options.dir {
            Some(dir) => tempfile::tempdir_in(dir)?,
            None => tempfile::tempdir()?,
        };
        let store = SledStore::open(parent.path(), tidings_testing::fixtures::sealer())?;
        let (creates, elapsed, latencies) =
            runtime.block_on(run(store.clone(), writers, Duration::from_secs(options.seconds), html.clone()))?;
        let figures = Figures { creates, elapsed, latencies, disk_bytes: store.size_on_disk()? };
        println!(
            "| {writers} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.1} |",
            figures.creates,
            figures.creates as f64 / figures.elapsed.as_secs_f64(),
            percentile_ms(&figures.latencies, 50.0),
            percentile_ms(&figures.latencies, 99.0),
            figures.latencies.last().map_or(f64::NAN, |us| f64::from(*us) / 1000.0),
            figures.disk_bytes as f64 / (1024.0 * 1024.0),
        );
        drop(store);
    }
    Ok(())
}
