//! search: is `GET /v1/messages?q=` fast with millions of messages, and what does its index
//! cost the writes?
//!
//! Fills a store (sled in a temp dir, or a scratch PostgreSQL database) with `--messages`
//! messages through `Store::create_messages` in batches (realistic subjects and addresses,
//! created over the last 30 days, 98 % `Delivered`, 1 % `Bounced`, 1 % `Deferred`), prints the
//! messages stored per second, then times `Store::list_messages` — the call behind `GET
//! /v1/messages` — for searches: a common term, a rare one, one that matches nothing, each
//! with and without a week's date range, with a status filter, part of an address, and a
//! page back (`endingBefore`) from the middle. `--without-search-index` (PostgreSQL only)
//! drops migration 0013's trigram index before filling, for the cost on writes (the
//! generated column it indexes is still computed).
//!
//! ```text
//! cargo run --release -p tidings-bench --bin search -- --store sled|postgres [--messages 1000000]
//!     [--batch 500] [--repeat 50] [--dir /data] [--url postgres://postgres@127.0.0.1:5432/postgres]
//!     [--without-search-index] [--keep]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tidings_core::email::EmailAddress;
use tidings_core::ids::{ApiKeyId, DomainId, MessageId, WorkspaceId};
use tidings_core::message_search::{CreatedRange, SearchText};
use tidings_core::model::MessageStatus;
use tidings_core::ports::{MessageQuery, NewBatch, PageRequest, Store};
use tidings_storage_postgres::{PgOptions, PgStore};
use tidings_storage_sled::SledStore;
use tidings_testing::fixtures::{api_key, domain, message, new_message, sealer, workspace};
use tokio_postgres::NoTls;
use ulid::Ulid;

type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

const FIRST: &[&str] = &[
    "maria", "james", "wei", "fatima", "olga", "john", "aiko", "carlos", "priya", "lukas", "emma", "noah", "sofia",
    "ahmed", "chloe", "mateo", "hana", "ivan", "leila", "tom",
];
const LAST: &[&str] =
    &["garcia", "smith", "chen", "khan", "ivanova", "brown", "sato", "lopez", "patel", "muller", "martin", "rossi"];
const DOMAINS: &[&str] = &["gmail.com", "outlook.com", "yahoo.com", "icloud.com", "fastmail.com", "acme-corp.example"];
const PRODUCTS: &[&str] = &["headphones", "desk lamp", "backpack", "coffee grinder", "yoga mat", "keyboard"];

/// The subject of the `n`-th message: a few shapes of transactional mail; one in 100,000
/// carries the rare word.
fn subject(n: u64) -> String {
    if n % 100_000 == 77 {
        return format!("Zephyrine subscription renewal #{n}");
    }
    let name = FIRST[(n % 20) as usize];
    let product = PRODUCTS[(n / 7 % 6) as usize];
    match n % 8 {
        0 | 1 => format!("Your order #{} has shipped", 100_000 + n),
        2 => format!("Receipt for your {product} purchase"),
        3 => format!("Welcome to Acme, {}!", capitalized(name)),
        4 => format!("Reset your password, {}", capitalized(name)),
        5 => format!("Invoice INV-{:07} is available", n),
        6 => format!("Your {product} is out for delivery"),
        _ => format!("{}, your verification code is {:06}", capitalized(name), n * 7919 % 1_000_000),
    }
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// The recipient of the `n`-th message: about 24,000 distinct addresses.
fn recipient(n: u64) -> String {
    let (first, last) = (FIRST[(n % 20) as usize], LAST[(n / 20 % 12) as usize]);
    format!("{first}.{last}{}@{}", n / 240 % 100, DOMAINS[(n / 3 % 6) as usize])
}

#[derive(Debug)]
struct Options {
    store: String,
    messages: u64,
    batch: u64,
    repeat: usize,
    dir: Option<String>,
    url: String,
    without_index: bool,
    sql_fill: bool,
    keep: bool,
}

fn parse_options() -> Result<Options> {
    let mut o = Options {
        store: "sled".into(),
        messages: 1_000_000,
        batch: 500,
        repeat: 50,
        dir: None,
        url: "postgres://postgres@127.0.0.1:5432/postgres".into(),
        without_index: false,
        sql_fill: false,
        keep: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--store" => o.store = value()?,
            "--messages" => o.messages = value()?.parse()?,
            "--batch" => o.batch = value()?.parse()?,
            "--repeat" => o.repeat = value()?.parse()?,
            "--dir" => o.dir = Some(value()?),
            "--url" => o.url = value()?,
            "--without-search-index" => o.without_index = true,
            "--sql-fill" => o.sql_fill = true,
            "--keep" => o.keep = true,
            other => return Err(format!("unknown argument {other:?} (see the module doc)").into()),
        }
    }
    if (o.without_index || o.sql_fill) && o.store != "postgres" {
        return Err("--without-search-index is for --store postgres (on sled, compare with main's build)".into());
    }
    Ok(o)
}

/// What the queries need to know about the fill.
struct Filled {
    ws: WorkspaceId,
    /// The creation time of the first and of the last message.
    first_ms: u64,
    last_ms: u64,
    /// The id of the message in the middle.
    middle: MessageId,
}

/// Fills `store` with `o.messages` messages, oldest first, in batches; prints the rate.
async fn fill(store: &Arc<dyn Store>, o: &Options) -> Result<Filled> {
    let ws = workspace();
    let key = api_key(ws.id);
    store.create_workspace(&ws, &key).await?;
    let dom = domain(ws.id, "shop.example");
    store.insert_domain(&dom).await?;
    let now_ms = u64::try_from(Utc::now().timestamp_millis())?;
    let span_ms: u64 = 30 * 24 * 3600 * 1000;
    let first_ms = now_ms - span_ms;
    let at = |n: u64| first_ms + n * span_ms / o.messages.max(1);
    let started = Instant::now();
    let mut report = Instant::now();
    let mut n = 0;
    let template = message(ws.id, key.id, dom.id);
    while n < o.messages {
        let end = (n + o.batch).min(o.messages);
        let mut messages = Vec::with_capacity(usize::try_from(end - n)?);
        for i in n..end {
            messages.push(new_message(&one(&template, ws.id, key.id, dom.id, i, at(i))?));
        }
        store.create_messages(&NewBatch { messages, idempotency: None, accepted_at: Utc::now() }).await?;
        n = end;
        if report.elapsed() > Duration::from_secs(10) {
            eprintln!("  {n} messages, {:.0}/s", n as f64 / started.elapsed().as_secs_f64());
            report = Instant::now();
        }
    }
    let took = started.elapsed().as_secs_f64();
    println!("filled {} messages in {took:.1} s: {:.0} messages/s", o.messages, o.messages as f64 / took);
    Ok(Filled { ws: ws.id, first_ms, last_ms: at(o.messages - 1), middle: id_at(at(o.messages / 2), 0) })
}

fn id_at(ms: u64, random: u128) -> MessageId {
    MessageId(Ulid::from_parts(ms, random))
}

/// The `n`-th message, created at `ms`.
fn one(
    template: &tidings_core::model::Message,
    ws: WorkspaceId,
    key: ApiKeyId,
    dom: DomainId,
    n: u64,
    ms: u64,
) -> Result<tidings_core::model::Message> {
    let mut m = template.clone();
    (m.workspace_id, m.api_key_id, m.domain_id) = (ws, key, dom);
    m.id = id_at(ms, u128::from(n) + 1);
    let created = DateTime::<Utc>::from_timestamp_millis(i64::try_from(ms)?).ok_or("a time")?;
    (m.created_at, m.updated_at) = (created, created);
    m.subject = subject(n);
    m.to = EmailAddress::parse(&recipient(n))?;
    (m.status, m.next_attempt_at) = match n % 100 {
        13 => (MessageStatus::Bounced, None),
        42 => (MessageStatus::Deferred, Some(created + chrono::Duration::days(40))),
        _ => (MessageStatus::Delivered, None),
    };
    Ok(m)
}

/// One timed query.
struct Shape {
    name: &'static str,
    q: Option<&'static str>,
    status: Option<MessageStatus>,
    /// A week in the middle of the 30 days.
    week: bool,
    /// A page newer than the middle message.
    back: bool,
}

const SHAPES: &[Shape] = &[
    Shape { name: "q=order (common: 1 in 4)", q: Some("order"), status: None, week: false, back: false },
    Shape { name: "q=order, a week", q: Some("order"), status: None, week: true, back: false },
    Shape { name: "q=zephyrine (rare: 1 in 100,000)", q: Some("zephyrine"), status: None, week: false, back: false },
    Shape { name: "q=zephyrine, a week", q: Some("zephyrine"), status: None, week: true, back: false },
    Shape { name: "q=qxzvw (no match)", q: Some("qxzvw"), status: None, week: false, back: false },
    Shape { name: "q=qxzvw, a week", q: Some("qxzvw"), status: None, week: true, back: false },
    Shape { name: "q=priya.patel (address part)", q: Some("priya.patel"), status: None, week: false, back: false },
    Shape {
        name: "q=order + status=Bounced",
        q: Some("order"),
        status: Some(MessageStatus::Bounced),
        week: false,
        back: false,
    },
    Shape { name: "status=Bounced (1 %)", q: None, status: Some(MessageStatus::Bounced), week: false, back: false },
    Shape { name: "q=order, endingBefore the middle", q: Some("order"), status: None, week: false, back: true },
];

/// Drops migration 0013's trigram index.
const DROP_INDEX: &str = "DROP INDEX messages_by_search_trgm";

fn percentile(sorted: &[u64], p: usize) -> f64 {
    let index = (sorted.len() * p / 100).min(sorted.len().saturating_sub(1));
    sorted.get(index).map_or(0.0, |&us| us as f64 / 1000.0)
}

async fn time_shapes(store: &Arc<dyn Store>, filled: &Filled, o: &Options) -> Result<String> {
    let day: u64 = 24 * 3600 * 1000;
    let week_start = filled.first_ms + 12 * day;
    let mut table =
        String::from("| store | messages | shape | items | p50 ms | p99 ms |\n|---|---:|---|---:|---:|---:|\n");
    for shape in SHAPES {
        let mut query = MessageQuery::page(PageRequest::first(50));
        query.text = shape.q.map(SearchText::parse).transpose()?;
        query.status = shape.status;
        if shape.week {
            let ms = |ms: u64| DateTime::<Utc>::from_timestamp_millis(i64::try_from(ms).unwrap_or(0));
            query.created = CreatedRange::between(ms(week_start), ms(week_start + 7 * day));
        }
        if shape.back {
            query.ending_before = Some(filled.middle);
        }
        let mut latencies = Vec::with_capacity(o.repeat);
        let mut items = 0;
        for _ in 0..o.repeat {
            let started = Instant::now();
            let page = store.list_messages(filled.ws, &query).await?;
            latencies.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
            items = page.items.len();
        }
        latencies.sort_unstable();
        table.push_str(&format!(
            "| {} | {} | {} | {items} | {:.2} | {:.2} |\n",
            o.store,
            o.messages,
            shape.name,
            percentile(&latencies, 50),
            percentile(&latencies, 99)
        ));
    }
    let _ = filled.last_ms;
    Ok(table)
}

/// PostgreSQL only: grows `messages` with SQL to `o.messages` rows (pg-lists does the same):
/// the subjects, recipients, statuses and creation times of [`fill`], computed by the
/// database, each row a copy of one stored message's document with them set (the document's
/// own id stays the template's; the `id` column is the row's own, time-ordered). Much faster
/// than the API; what the API's writes cost is measured apart ([`write_rate`]).
async fn grow_with_sql(store: &Arc<dyn Store>, db: &tokio_postgres::Client, o: &Options) -> Result<Filled> {
    let ws = workspace();
    let key = api_key(ws.id);
    store.create_workspace(&ws, &key).await?;
    let dom = domain(ws.id, "shop.example");
    store.insert_domain(&dom).await?;
    let template = message(ws.id, key.id, dom.id);
    store
        .create_messages(&NewBatch {
            messages: vec![new_message(&template)],
            idempotency: None,
            accepted_at: Utc::now(),
        })
        .await?;
    let now_ms = u64::try_from(Utc::now().timestamp_millis())?;
    let span_ms: u64 = 30 * 24 * 3600 * 1000;
    let first_ms = now_ms - span_ms - 3_600_000;
    let (first, last, domains, products): (Vec<String>, Vec<String>, Vec<String>, Vec<String>) = (
        FIRST.iter().map(|s| (*s).to_owned()).collect(),
        LAST.iter().map(|s| (*s).to_owned()).collect(),
        DOMAINS.iter().map(|s| (*s).to_owned()).collect(),
        PRODUCTS.iter().map(|s| (*s).to_owned()).collect(),
    );
    let sql = "INSERT INTO messages (id, workspace_id, status, to_norm, api_key_id, next_attempt_at, doc)
        SELECT (lpad(to_hex($3::bigint + g * $4::bigint / $5::bigint), 12, '0') || lpad(to_hex(g + 1), 20, '0'))::uuid,
               m.workspace_id,
               CASE g % 100 WHEN 13 THEN 'Bounced' WHEN 42 THEN 'Deferred' ELSE 'Delivered' END,
               r.address, m.api_key_id, NULL,
               jsonb_set(jsonb_set(m.doc, '{subject}', to_jsonb(
                 CASE WHEN g % 100000 = 77 THEN 'Zephyrine subscription renewal #' || g
                 ELSE CASE g % 8
                   WHEN 0 THEN 'Your order #' || (100000 + g) || ' has shipped'
                   WHEN 1 THEN 'Your order #' || (100000 + g) || ' has shipped'
                   WHEN 2 THEN 'Receipt for your ' || ($9::text[])[(g / 7) % 6 + 1] || ' purchase'
                   WHEN 3 THEN 'Welcome to Acme, ' || initcap(($6::text[])[g % 20 + 1]) || '!'
                   WHEN 4 THEN 'Reset your password, ' || initcap(($6::text[])[g % 20 + 1])
                   WHEN 5 THEN 'Invoice INV-' || lpad(g::text, 7, '0') || ' is available'
                   WHEN 6 THEN 'Your ' || ($9::text[])[(g / 7) % 6 + 1] || ' is out for delivery'
                   ELSE initcap(($6::text[])[g % 20 + 1]) || ', your verification code is '
                        || lpad(((g * 7919) % 1000000)::text, 6, '0')
                 END END)), '{to}', to_jsonb(r.address))
        FROM messages m, generate_series($1::bigint, $2::bigint) g,
             LATERAL (SELECT ($6::text[])[g % 20 + 1] || '.' || ($7::text[])[(g / 20) % 12 + 1] || ((g / 240) % 100)
                             || '@' || ($8::text[])[(g / 3) % 6 + 1] AS address) r
        WHERE m.id = $10";
    let template_id = uuid::Uuid::from_bytes(template.id.to_bytes());
    let (first_ms_i, span_i, n_i) = (i64::try_from(first_ms)?, i64::try_from(span_ms)?, i64::try_from(o.messages)?);
    let started = Instant::now();
    let mut done: i64 = 0;
    while done < n_i {
        let end = (done + 200_000).min(n_i) - 1;
        db.execute(sql, &[&done, &end, &first_ms_i, &span_i, &n_i, &first, &last, &domains, &products, &template_id])
            .await?;
        done = end + 1;
        eprintln!("  {done} rows, {:.0} s", started.elapsed().as_secs_f64());
    }
    println!("grew to {} rows with SQL in {:.1} s", o.messages, started.elapsed().as_secs_f64());
    let at = |g: u64| first_ms + g * span_ms / o.messages.max(1);
    let middle = at(o.messages / 2);
    Ok(Filled {
        ws: ws.id,
        first_ms,
        last_ms: at(o.messages - 1),
        middle: id_at(middle, u128::from(o.messages / 2) + 2),
    })
}

/// Messages stored per second through `Store::create_messages`, `count` of them in batches of
/// `o.batch`, created after every message already there (the last hour).
async fn write_rate(store: &Arc<dyn Store>, ws: WorkspaceId, count: u64, o: &Options, offset: u64) -> Result<f64> {
    let key = api_key(ws);
    store.insert_api_key(&key).await?;
    let dom = domain(ws, &format!("w{offset}.example"));
    store.insert_domain(&dom).await?;
    let template = message(ws, key.id, dom.id);
    let now_ms = u64::try_from(Utc::now().timestamp_millis())?;
    let started = Instant::now();
    let mut n = 0;
    while n < count {
        let end = (n + o.batch).min(count);
        let mut messages = Vec::new();
        for i in n..end {
            let mut m = one(&template, ws, key.id, dom.id, offset + i, now_ms)?;
            m.id = MessageId(Ulid::from_parts(now_ms, u128::from(offset + i) + 1_000_000_000));
            messages.push(new_message(&m));
        }
        store.create_messages(&NewBatch { messages, idempotency: None, accepted_at: Utc::now() }).await?;
        n = end;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
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

#[tokio::main]
async fn main() -> Result<()> {
    let o = parse_options()?;
    match o.store.as_str() {
        "sled" => {
            let dir = match &o.dir {
                Some(dir) => tempfile::tempdir_in(dir)?,
                None => tempfile::tempdir()?,
            };
            let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path(), sealer())?);
            let filled = fill(&store, &o).await?;
            let size = fs_size(dir.path());
            println!("sled directory: {} MiB", size >> 20);
            println!("{}", time_shapes(&store, &filled, &o).await?);
        }
        "postgres" => {
            let name = format!("tidings_bench_search_{}", std::process::id());
            let admin = connect(&o.url).await?;
            admin.batch_execute(&format!("CREATE DATABASE \"{name}\"")).await?;
            let url = database_url(&o.url, &name);
            let pg = PgStore::connect(&url, PgOptions::default(), sealer()).await?;
            let db = connect(&url).await?;
            if o.without_index {
                db.batch_execute(DROP_INDEX).await?;
                println!("without the trigram index (the write path without it)");
            }
            let store: Arc<dyn Store> = Arc::new(pg);
            let filled = if o.sql_fill { grow_with_sql(&store, &db, &o).await? } else { fill(&store, &o).await? };
            db.batch_execute("VACUUM ANALYZE messages").await?;
            let bytes: i64 = db.query_one("SELECT pg_total_relation_size('messages')", &[]).await?.get(0);
            println!("messages table with its indexes: {} MiB", bytes >> 20);
            for index in ["messages_by_search_trgm"] {
                let sql = "SELECT pg_relation_size(to_regclass($1)::oid)";
                if let Ok(row) = db.query_one(sql, &[&index]).await {
                    let size: Option<i64> = row.get(0);
                    println!("  {index}: {} MiB", size.unwrap_or(0) >> 20);
                }
            }
            println!("{}", time_shapes(&store, &filled, &o).await?);
            if o.sql_fill {
                // The API's writes on the grown table: with the trigram index, then without it
                // (the column is still computed), then with it again.
                let count = 20_000;
                let with = write_rate(&store, filled.ws, count, &o, 0).await?;
                db.batch_execute(DROP_INDEX).await?;
                let without = write_rate(&store, filled.ws, count, &o, count).await?;
                db.batch_execute(
                    "CREATE INDEX messages_by_search_trgm ON messages USING GIN (search_text public.gin_trgm_ops)",
                )
                .await?;
                let again = write_rate(&store, filled.ws, count, &o, 2 * count).await?;
                println!(
                    "create_messages on the grown table, {count} messages in batches of {}: {with:.0}/s with the \
                     trigram index, {without:.0}/s without, {again:.0}/s with it again",
                    o.batch
                );
            }
            drop((store, db));
            if o.keep {
                eprintln!("kept database {name}");
            } else {
                admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await?;
            }
        }
        other => return Err(format!("--store sled or postgres, not {other:?}").into()),
    }
    Ok(())
}

/// Bytes of the files under `dir`.
fn fs_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => fs_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
