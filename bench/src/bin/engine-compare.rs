//! engine-compare: the writes of one durable `create_message`, on sled as our store makes
//! them and on an LSM engine (fjall) as one atomic batch, with the same group commit.
//!
//! Why: acceptance on sled stops at what the store alone does (`tidings-bench`), and the
//! profile puts most of that in sled's inserts. This asks what the same bytes cost on an
//! engine whose atomic batch is one journal append, so that the design question ("would
//! another engine remove the ceiling?") has a measured answer. The store keeps sled.
//!
//! Each create writes what `storage-sled` writes for a message with an Idempotency-Key and
//! no webhooks (see `storage-sled/src/messages.rs`): the message record, its content, its
//! `Queued` event, three index entries, the id and retention entries, the queue entry, the
//! idempotency record and its expiry entry. The record bytes are the serde JSON of the same
//! fixtures `tidings-bench` stores; the keys follow `storage-sled/src/layout.rs`. Under one
//! writer lock (as the store's check-then-write needs) each writer first reads the message
//! key and the idempotency key, then writes:
//! - **sled**: the redo record (all operations, encoded) and then each key, as
//!   `storage-sled/src/db.rs` does (sled's own atomic batch would turn on its global
//!   read-write lock for every operation);
//! - **fjall**: one `WriteBatch` of the same keys and values, committed (atomic by itself).
//!
//! Then the writer waits for its group commit: one thread makes every write issued so far
//! durable (sled: `Db::flush`; fjall: `Database::persist(SyncData)`), at least 1 ms after the
//! previous flush started, and answers each waiter once, as `storage-sled/src/flusher.rs`.
//! Writers are OS threads. Prints creates/s, latency and the process's CPU per create; the
//! engine `none` writes nothing and flushes nothing, which shows what building the
//! operations and the group commit cost alone.
//!
//! ```text
//! cargo build --release -p tidings-bench
//! target/release/engine-compare [--seconds 5] [--writers 16,64] [--html-bytes 1024] [--dir PATH]
//! ```

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tidings_bench::{Result, html_body, percentile_ms};
use tidings_testing::fixtures::{api_key, domain, idempotency, message, new_message, now, plus_secs, workspace};

/// Least time between the starts of two flushes, as the store's flusher.
const FLUSH_PACE: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct Options {
    seconds: u64,
    writers: Vec<usize>,
    html_bytes: usize,
    dir: Option<PathBuf>,
}

fn parse_options() -> Result<Options> {
    let mut options = Options { seconds: 5, writers: vec![16, 64], html_bytes: 1024, dir: None };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => options.seconds = value()?.parse()?,
            "--writers" => options.writers = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--html-bytes" => options.html_bytes = value()?.parse()?,
            "--dir" => options.dir = Some(value()?.into()),
            "--help" | "-h" => {
                println!("usage: engine-compare [--seconds N] [--writers 16,64] [--html-bytes N] [--dir PATH]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    Ok(options)
}

/// One create's operations: `(key, value)`, in the order the store writes them.
type Ops = Vec<(Vec<u8>, Vec<u8>)>;

/// The keys and values of one create, from fresh fixtures (new ids every time, so keys grow
/// at the right end of each index as the store's do).
fn create_ops(html: &str, writer: usize, n: u64) -> Result<(Ops, Vec<u8>, Vec<u8>)> {
    let ws = workspace();
    let key = api_key(ws.id);
    let dom = domain(ws.id, "acme.example.com");
    let mut m = message(ws.id, key.id, dom.id);
    m.html = Some(html.to_owned());
    let new = new_message(&m);
    let idem_text = format!("bench-{writer}-{n}");
    let expires = plus_secs(now(), 86_400);
    let idem = idempotency(ws.id, &idem_text, m.id, now(), expires);
    let (ws, id) = (ws.id.to_bytes(), m.id.to_bytes());
    let time = |at: chrono::DateTime<chrono::Utc>| (at.timestamp_micros().cast_unsigned() ^ (1 << 63)).to_be_bytes();
    let cat = |parts: &[&[u8]]| parts.concat();
    // The content apart from the record, as `storage-sled/src/content.rs` keeps it.
    let content = serde_json::to_vec(&(m.html.take(), m.text.take()))?;
    let message_key = cat(&[&[0x10], &ws, &id]);
    let idem_key = cat(&[&[0x20], &ws, idem_text.as_bytes()]);
    let to = m.to.normalized();
    let to_len = u16::try_from(to.len()).unwrap_or(u16::MAX).to_be_bytes();
    let ops = vec![
        (cat(&[&[0x11], &ws, &id, &new.event.id.to_bytes()]), serde_json::to_vec(&new.event)?),
        (cat(&[&[0x17], &id]), ws.to_vec()),
        (cat(&[&[0x18], &id]), ws.to_vec()),
        (cat(&[&[0x12], &ws, &[0], &id]), Vec::new()),
        (cat(&[&[0x13], &ws, &to_len, to.as_bytes(), &id]), Vec::new()),
        (cat(&[&[0x14], &ws, &m.api_key_id.to_bytes(), &id]), Vec::new()),
        (cat(&[&[0x16], &time(m.created_at), &id, &ws]), Vec::new()),
        (cat(&[&[0x19], &ws, &id]), content),
        (message_key.clone(), serde_json::to_vec(&m)?),
        (cat(&[&[0x21], &time(expires), &ws, idem_text.as_bytes()]), Vec::new()),
        (idem_key.clone(), serde_json::to_vec(&idem)?),
    ];
    Ok((ops, message_key, idem_key))
}

/// The redo record of `ops`, encoded as `storage-sled/src/db.rs` does.
fn intent(ops: &Ops) -> Vec<u8> {
    let mut out = Vec::with_capacity(ops.iter().map(|(k, v)| 9 + k.len() + v.len()).sum());
    for (key, value) in ops {
        out.extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(key);
        out.push(1);
        out.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(value);
    }
    out
}

/// An engine under test: reads, an atomic write, and a flush of everything written.
trait Engine: Send + Sync + 'static {
    fn read(&self, key: &[u8]) -> Result<bool>;
    fn write(&self, ops: Ops) -> Result<()>;
    fn flush(&self) -> Result<()>;
}

struct Sled {
    db: sled::Db,
    tree: sled::Tree,
}

impl Engine for Sled {
    fn read(&self, key: &[u8]) -> Result<bool> {
        Ok(self.tree.get(key)?.is_some())
    }

    fn write(&self, ops: Ops) -> Result<()> {
        self.tree.insert([0x00], intent(&ops))?;
        for (key, value) in ops {
            self.tree.insert(key, value)?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }
}

/// No engine: what building a create's operations and the group commit cost alone.
struct Nothing;

impl Engine for Nothing {
    fn read(&self, _key: &[u8]) -> Result<bool> {
        Ok(false)
    }

    fn write(&self, ops: Ops) -> Result<()> {
        drop(std::hint::black_box(ops));
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

struct Fjall {
    db: fjall::Database,
    keyspace: fjall::Keyspace,
}

impl Engine for Fjall {
    fn read(&self, key: &[u8]) -> Result<bool> {
        Ok(self.keyspace.get(key)?.is_some())
    }

    fn write(&self, ops: Ops) -> Result<()> {
        let mut batch = self.db.batch();
        for (key, value) in ops {
            batch.insert(&self.keyspace, key, value);
        }
        batch.commit()?;
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.db.persist(fjall::PersistMode::SyncData)?;
        Ok(())
    }
}

/// Tickets issued and the writers waiting for theirs, in ticket order.
#[derive(Default)]
struct Waiting {
    issued: u64,
    queue: VecDeque<(u64, SyncSender<bool>)>,
}

/// The group commit shared by the writers and the flusher thread.
struct Group<E> {
    engine: E,
    writer_lock: Mutex<()>,
    waiting: Mutex<Waiting>,
    flusher: OnceLock<std::thread::Thread>,
    stop: AtomicBool,
}

impl<E: Engine> Group<E> {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One create: checks under the writer lock, writes, then waits until it is durable.
    fn create(&self, ops: Ops, message_key: &[u8], idem_key: &[u8]) -> Result<()> {
        {
            let _lock = self.writer_lock.lock().unwrap_or_else(PoisonError::into_inner);
            if self.engine.read(message_key)? || self.engine.read(idem_key)? {
                return Err("a fresh key was found".into());
            }
            self.engine.write(ops)?;
        }
        let (reply, answer) = sync_channel(1);
        {
            let mut waiting = self.waiting();
            waiting.issued += 1;
            let ticket = waiting.issued;
            waiting.queue.push_back((ticket, reply));
        }
        if let Some(flusher) = self.flusher.get() {
            flusher.unpark();
        }
        if answer.recv()? { Ok(()) } else { Err("a flush failed".into()) }
    }

    fn run_flusher(&self) {
        let mut covered = 0;
        let mut last_start: Option<Instant> = None;
        loop {
            let mut target = self.waiting().issued;
            if target > covered {
                if let Some(wait) = last_start.and_then(|at| FLUSH_PACE.checked_sub(at.elapsed())) {
                    std::thread::sleep(wait);
                    target = self.waiting().issued;
                }
                last_start = Some(Instant::now());
                let ok = self.engine.flush().is_ok();
                let mut waiting = self.waiting();
                while waiting.queue.front().is_some_and(|(ticket, _)| *ticket <= target) {
                    if let Some((_, reply)) = waiting.queue.pop_front() {
                        let _ = reply.send(ok);
                    }
                }
                covered = target;
                continue;
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }
}

/// This process's CPU time so far (user + system), from `/proc/self/stat`.
fn process_cpu() -> Result<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name (which ends with the last ')'): utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').ok_or("malformed /proc/self/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        fields.get(11).ok_or("no utime")?.parse::<u64>()? + fields.get(12).ok_or("no stime")?.parse::<u64>()?;
    // Linux reports these in USER_HZ, 100 on every platform it supports.
    Ok(Duration::from_millis(ticks * 10))
}

struct Figures {
    creates: usize,
    elapsed: Duration,
    cpu: Duration,
    latencies: Vec<u32>,
}

fn run<E: Engine>(engine: E, writers: usize, duration: Duration, html: &str) -> Result<Figures> {
    let group = Arc::new(Group {
        engine,
        writer_lock: Mutex::new(()),
        waiting: Mutex::new(Waiting::default()),
        flusher: OnceLock::new(),
        stop: AtomicBool::new(false),
    });
    let flusher = {
        let group = Arc::clone(&group);
        std::thread::spawn(move || group.run_flusher())
    };
    let _ = group.flusher.set(flusher.thread().clone());
    let cpu_before = process_cpu()?;
    let start = Instant::now();
    let deadline = start + duration;
    let threads: Vec<_> = (0..writers)
        .map(|writer| {
            let (group, html) = (Arc::clone(&group), html.to_owned());
            std::thread::spawn(move || -> Result<Vec<u32>> {
                let mut latencies = Vec::new();
                let mut n = 0;
                while Instant::now() < deadline {
                    n += 1;
                    // Built before the clock starts, as the store encodes before its lock.
                    let (ops, message_key, idem_key) = create_ops(&html, writer, n)?;
                    let began = Instant::now();
                    group.create(ops, &message_key, &idem_key)?;
                    latencies.push(u32::try_from(began.elapsed().as_micros()).unwrap_or(u32::MAX));
                }
                Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for thread in threads {
        latencies.extend(thread.join().map_err(|_| "a writer panicked")??);
    }
    let elapsed = start.elapsed();
    let cpu = process_cpu()?.saturating_sub(cpu_before);
    group.stop.store(true, Ordering::SeqCst);
    flusher.thread().unpark();
    flusher.join().map_err(|_| "the flusher panicked")?;
    latencies.sort_unstable();
    Ok(Figures { creates: latencies.len(), elapsed, cpu, latencies })
}

fn open_sled(dir: &Path) -> Result<Sled> {
    // As `storage-sled` opens it: its own flusher thread, not sled's periodic one.
    let db = sled::Config::new().path(dir).flush_every_ms(None).open()?;
    let tree = db.open_tree("bench")?;
    Ok(Sled { db, tree })
}

fn open_fjall(dir: &Path) -> Result<Fjall> {
    let db = fjall::Database::builder(dir).open()?;
    let keyspace = db.keyspace("bench", fjall::KeyspaceCreateOptions::default)?;
    Ok(Fjall { db, keyspace })
}

fn main() -> Result<()> {
    let options = parse_options()?;
    let html = html_body(options.html_bytes);
    let (ops, _, _) = create_ops(&html, 0, 0)?;
    let bytes: usize = ops.iter().map(|(k, v)| k.len() + v.len()).sum();
    println!(
        "one durable create = {} keys, {bytes} bytes of keys and values (html {} bytes); {} s per run",
        ops.len(),
        html.len(),
        options.seconds
    );
    println!();
    println!("| engine | writers | creates/s | CPU ms per create | p50 ms | p99 ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    let duration = Duration::from_secs(options.seconds);
    for &writers in &options.writers {
        for name in ["none", "sled", "fjall"] {
            let dir = match &options.dir {
                Some(dir) => tempfile::tempdir_in(dir)?,
                None => tempfile::tempdir()?,
            };
            let figures = match name {
                "none" => run(Nothing, writers, duration, &html)?,
                "sled" => run(open_sled(dir.path())?, writers, duration, &html)?,
                _ => run(open_fjall(dir.path())?, writers, duration, &html)?,
            };
            let per_s = figures.creates as f64 / figures.elapsed.as_secs_f64();
            let cpu_ms = figures.cpu.as_secs_f64() * 1000.0 / figures.creates.max(1) as f64;
            println!(
                "| {name} | {writers} | {per_s:.0} | {cpu_ms:.3} | {:.2} | {:.2} |",
                percentile_ms(&figures.latencies, 50.0),
                percentile_ms(&figures.latencies, 99.0)
            );
        }
    }
    Ok(())
}
