//! pg-lists: do message lists on PostgreSQL stay O(limit) as the table grows to 10 million?
//!
//! Makes a scratch database, stores one real message through `PgStore`, then grows the
//! `messages` table with SQL (`generate_series`, copies of that row's document with their own
//! id, status, recipient and key) to each size asked for, `ANALYZE`s it, and times
//! `Store::list_messages` — the call behind `GET /v1/messages` — for each filter shape: the
//! first page and a page deep in the middle (cursor), unfiltered, by status, by recipient, by
//! key, and status + recipient. Latency flat across sizes means each page reads O(limit) rows.
//!
//! ```text
//! cargo run --release -p tidings-bench --bin pg-lists -- [--sizes 10000,1000000,10000000]
//!     [--repeat 200] [--limit 50] [--url postgres://postgres@127.0.0.1:5432/postgres] [--keep]
//! ```

use std::time::{Duration, Instant};

use tidings_core::email::EmailAddress;
use tidings_core::ids::{ApiKeyId, MessageId, WorkspaceId};
use tidings_core::model::MessageStatus;
use tidings_core::ports::{DomainStore, KeyStore, MessageQuery, MessageStore, PageRequest, WorkspaceStore};
use tidings_storage_postgres::{PgOptions, PgStore};
use tidings_testing::fixtures::{api_key, message, new_message, workspace};
use tokio_postgres::NoTls;

type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// Distinct recipients in the seeded rows: each has `size / RECIPIENTS` messages.
const RECIPIENTS: i64 = 100_000;
/// Rows inserted per statement while growing the table.
const BATCH: i64 = 500_000;

#[derive(Debug)]
struct Options {
    sizes: Vec<i64>,
    repeat: usize,
    limit: usize,
    url: String,
    keep: bool,
}

fn parse_options() -> Result<Options> {
    let mut options = Options {
        sizes: vec![10_000, 1_000_000, 10_000_000],
        repeat: 200,
        limit: 50,
        url: "postgres://postgres@127.0.0.1:5432/postgres".to_owned(),
        keep: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--sizes" => options.sizes = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--repeat" => options.repeat = value()?.parse()?,
            "--limit" => options.limit = value()?.parse()?,
            "--url" => options.url = value()?,
            "--keep" => options.keep = true,
            "--help" | "-h" => {
                println!(
                    "usage: pg-lists [--sizes 10000,1000000,10000000] [--repeat N] [--limit N] [--url URL] [--keep]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    options.sizes.sort_unstable();
    Ok(options)
}

/// The id of the `g`-th seeded row: ascending in `g`, so `ORDER BY id DESC` is newest first.
fn seeded_id(g: i64) -> MessageId {
    MessageId(ulid::Ulid(u128::try_from(g).unwrap_or(0)))
}

/// One list shape to time.
struct Shape {
    name: &'static str,
    status: Option<MessageStatus>,
    to: Option<&'static str>,
    by_other_key: bool,
    /// Start in the middle of the table instead of at the newest row.
    deep: bool,
}

const SHAPES: &[Shape] = &[
    Shape { name: "newest page", status: None, to: None, by_other_key: false, deep: false },
    Shape { name: "page in the middle (cursor)", status: None, to: None, by_other_key: false, deep: true },
    Shape {
        name: "status=Bounced (1 %)",
        status: Some(MessageStatus::Bounced),
        to: None,
        by_other_key: false,
        deep: false,
    },
    Shape {
        name: "status=Bounced, middle",
        status: Some(MessageStatus::Bounced),
        to: None,
        by_other_key: false,
        deep: true,
    },
    Shape { name: "to=one recipient", status: None, to: Some("user42@example.com"), by_other_key: false, deep: false },
    Shape { name: "sent by a key (10 %)", status: None, to: None, by_other_key: true, deep: false },
    Shape { name: "sent by a key, middle", status: None, to: None, by_other_key: true, deep: true },
    Shape {
        name: "status=Delivered + to",
        status: Some(MessageStatus::Delivered),
        to: Some("user42@example.com"),
        by_other_key: false,
        deep: false,
    },
];

struct Seeded {
    store: PgStore,
    admin: tokio_postgres::Client,
    db: tokio_postgres::Client,
    workspace: WorkspaceId,
    other_key: ApiKeyId,
    template: MessageId,
    rows: i64,
}

impl Seeded {
    /// Grows `messages` to `size` seeded rows and refreshes the planner's statistics.
    async fn grow_to(&mut self, size: i64) -> Result<Duration> {
        let started = Instant::now();
        let (delivered, bounced, deferred) =
            (MessageStatus::Delivered.as_str(), MessageStatus::Bounced.as_str(), MessageStatus::Deferred.as_str());
        let other_key = uuid::Uuid::from_bytes(self.other_key.to_bytes());
        let template = uuid::Uuid::from_bytes(self.template.to_bytes());
        while self.rows < size {
            let end = (self.rows + BATCH).min(size);
            self.db
                .execute(
                    "INSERT INTO messages (id, workspace_id, status, to_norm, api_key_id, next_attempt_at, doc)
                     SELECT lpad(to_hex(g), 32, '0')::uuid, m.workspace_id,
                            CASE WHEN g % 100 = 0 THEN $4 WHEN g % 100 = 1 THEN $5 ELSE $3 END,
                            'user' || (g % $6) || '@example.com',
                            CASE WHEN g % 10 = 0 THEN $7 ELSE m.api_key_id END,
                            NULL, m.doc
                     FROM messages m, generate_series($1::bigint, $2::bigint) g
                     WHERE m.id = $8",
                    &[&(self.rows + 1), &end, &delivered, &bounced, &deferred, &RECIPIENTS, &other_key, &template],
                )
                .await?;
            self.rows = end;
            eprintln!("  {} rows", self.rows);
        }
        self.db.batch_execute("VACUUM ANALYZE messages").await?;
        Ok(started.elapsed())
    }

    /// Latencies (µs, sorted) of `repeat` calls of one shape, and the items of the last page.
    async fn time(&self, shape: &Shape, repeat: usize, limit: usize) -> Result<(Vec<u64>, usize)> {
        let query = MessageQuery {
            status: shape.status,
            to: shape.to.map(EmailAddress::parse).transpose()?,
            sent_by: shape.by_other_key.then_some(self.other_key),
            tags: Vec::new(),
            metadata: Vec::new(),
            ..MessageQuery::page(PageRequest { limit, cursor: shape.deep.then(|| seeded_id(self.rows / 2)) })
        };
        let mut latencies = Vec::with_capacity(repeat);
        let mut items = 0;
        for _ in 0..repeat {
            let started = Instant::now();
            let page = self.store.list_messages(self.workspace, &query).await?;
            latencies.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
            items = page.items.len();
        }
        latencies.sort_unstable();
        Ok((latencies, items))
    }
}

fn percentile(sorted: &[u64], p: usize) -> f64 {
    let index = (sorted.len() * p / 100).min(sorted.len().saturating_sub(1));
    sorted.get(index).map_or(0.0, |&us| us as f64 / 1000.0)
}

async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

fn database_url(admin_url: &str, name: &str) -> String {
    let base = admin_url.split('?').next().unwrap_or(admin_url);
    let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
    format!("{server}/{name}")
}

async fn seed(options: &Options, name: &str) -> Result<Seeded> {
    let admin = connect(&options.url).await?;
    admin.batch_execute(&format!("CREATE DATABASE \"{name}\"")).await?;
    let url = database_url(&options.url, name);
    let store = PgStore::connect(&url, PgOptions::default(), tidings_testing::fixtures::sealer()).await?;
    let ws = workspace();
    let key = api_key(ws.id);
    store.create_workspace(&ws, &key).await?;
    let other = api_key(ws.id);
    store.insert_api_key(&other).await?;
    let domain = tidings_testing::fixtures::domain(ws.id, "lists.example");
    store.insert_domain(&domain).await?;
    let template = message(ws.id, key.id, domain.id);
    store.create_message(&new_message(&template)).await?;
    let db = connect(&url).await?;
    // The template row sorts above every seeded one (its ULID has a timestamp); it is one row.
    Ok(Seeded { store, admin, db, workspace: ws.id, other_key: other.id, template: template.id, rows: 0 })
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = parse_options()?;
    let name = format!("tidings_bench_lists_{}", std::process::id());
    let mut seeded = seed(&options, &name).await?;
    let mut table = String::from("| rows | shape | items | p50 ms | p99 ms |\n|---:|---|---:|---:|---:|\n");
    for &size in &options.sizes {
        eprintln!("growing to {size} rows");
        let took = seeded.grow_to(size).await?;
        let bytes: i64 = seeded.db.query_one("SELECT pg_total_relation_size('messages')", &[]).await?.get(0);
        eprintln!("  grown in {:.1} s; messages table with indexes: {} MiB", took.as_secs_f64(), bytes >> 20);
        for shape in SHAPES {
            let (latencies, items) = seeded.time(shape, options.repeat, options.limit).await?;
            table.push_str(&format!(
                "| {size} | {} | {items} | {:.2} | {:.2} |\n",
                shape.name,
                percentile(&latencies, 50),
                percentile(&latencies, 99)
            ));
        }
    }
    println!("{table}");
    let Seeded { store, admin, db, .. } = seeded;
    drop((store, db));
    if options.keep {
        eprintln!("kept database {name}");
    } else {
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await?;
    }
    Ok(())
}
