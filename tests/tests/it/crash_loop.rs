//! Crashes and shutdowns under load:
//! clients send with Idempotency-Keys while the server is killed with SIGKILL, or stopped
//! with SIGTERM, at a random moment, round after round, on one data dir (or one database).
//! Checked at the end:
//! - **nothing acknowledged is lost**: every key that got a 201 has its message in the store
//!   and at the SMTP sink;
//! - **no key makes two messages**: every 201 for a key names the same message id, a retry of
//!   an acknowledged key is a replay, and the store holds exactly one message per key;
//! - a message that reached the sink more than once had at least as many attempts recorded
//!   (a copy is only repeated when a kill cut an attempt off after the sink took it);
//! - after SIGTERM, in addition: the server exits successfully, every answer is a 201 or a
//!   503 `unavailable`, and no request it stored went unanswered (a key whose request got
//!   no answer is never found stored when it is sent again).
//!
//! `TIDINGS_CRASH_ROUNDS` (default 20) sets the number of kills and `TIDINGS_CRASH_SEED` the
//! random kill points (printed, so a failing run can be repeated). Run with `--nocapture` for
//! the report: acknowledged, lost, duplicated at the sink.

use std::collections::{BTreeMap, HashMap};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{assert_ok, create_key, start_with_dns, verified_domain};
use reqwest::Method;
use serde_json::{Value, json};
use tidings_e2e::{DataDir, Options, TestServer, fresh_key};
use tidings_transport_smtp::testing::SmtpSink;

const DOMAIN: &str = "crash.example";
/// Clients sending at once.
const CLIENTS: usize = 8;
/// How long the final checks wait for the sink: on PostgreSQL a killed node's leases are not
/// released at start but run out (2 × (SMTP timeout + 10 s) + margin = 25 s here).
const DELIVERY_WAIT: Duration = Duration::from_secs(120);

/// A small, seedable generator (xorshift64*): the kill points must be repeatable from the
/// printed seed, and nothing else here needs randomness.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// What the clients know: which keys got which message, which are in doubt.
#[derive(Default)]
struct Ledger {
    /// The next fresh key number.
    next: u64,
    /// Keys whose request got no answer (the server died): sent again, with the same key.
    in_doubt: Vec<u64>,
    /// Keys with their message id, from the first 201.
    acked: BTreeMap<u64, String>,
    /// A 201 named another message than an earlier 201 for the same key.
    second_messages: Vec<String>,
    /// Answers that are never right here (5xx, 4xx other than 429).
    unexpected: Vec<String>,
    /// Requests sent, replays seen.
    requests: u64,
    replays: u64,
    /// Keys in doubt that turned out to be stored when sent again: the server took them but
    /// the client never heard (expected after SIGKILL, never after SIGTERM).
    unanswered_but_stored: u64,
    /// 503 `unavailable` answers (a server shutting down may give them).
    unavailable: u64,
}

impl Ledger {
    fn take(&mut self) -> u64 {
        self.in_doubt.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next
        })
    }

    fn ack(&mut self, n: u64, id: String, replayed: bool) {
        self.replays += u64::from(replayed);
        match self.acked.get(&n) {
            Some(first) if *first != id => self.second_messages.push(format!("key {n}: {first} then {id}")),
            Some(_) => {}
            None => {
                self.acked.insert(n, id);
            }
        }
    }
}

fn idempotency_key(n: u64) -> String {
    format!("crash-{n}")
}

fn recipient(n: u64) -> String {
    format!("c{n}@inbox.example")
}

fn mail(n: u64) -> Value {
    json!({"to": recipient(n), "from": format!("hello@{DOMAIN}"), "subject": format!("Crash {n}"), "text": "Hello"})
}

/// One send of key `n`: `Ok((status, message id, replayed))`, or `Err` when no answer came.
async fn send(server: &TestServer, key: &str, n: u64) -> Result<(u16, Option<String>, bool), String> {
    let response = server
        .request(Method::POST, "/v1/messages")
        .bearer_auth(key)
        .header("idempotency-key", idempotency_key(n))
        .json(&mail(n))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let replayed = response.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
    let body: Value = response.json().await.map_err(|e| e.to_string())?;
    Ok((status, body["data"]["id"].as_str().map(str::to_owned), replayed))
}

/// Sends until `stop` is set; a request cut off by the kill leaves its key in doubt.
async fn client(server: Arc<TestServer>, key: String, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let n = ledger.lock().unwrap().take();
        let answer = send(&server, &key, n).await;
        let refused = answer.is_err();
        {
            let mut ledger = ledger.lock().unwrap();
            ledger.requests += 1;
            match answer {
                Ok((201, Some(id), replayed)) => ledger.ack(n, id, replayed),
                Ok((429, _, _)) => ledger.in_doubt.push(n),
                Ok((503, _, _)) => {
                    ledger.unavailable += 1;
                    ledger.in_doubt.push(n);
                }
                Ok((status, _, _)) => ledger.unexpected.push(format!("key {n}: status {status}")),
                Err(_) => ledger.in_doubt.push(n),
            }
        }
        if refused {
            // The server is going away: no hot loop of refused connections.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Whether process `pid` has exited and waits to be reaped (`kill -0` still finds it).
fn is_zombie(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(true)
}

/// Sends every key in doubt until each is acknowledged (the server is up).
async fn settle(server: &TestServer, key: &str, ledger: &Mutex<Ledger>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let Some(n) = ledger.lock().unwrap().in_doubt.pop() else { return };
        assert!(Instant::now() < deadline, "keys in doubt were not acknowledged within a minute");
        match send(server, key, n).await {
            Ok((201, Some(id), replayed)) => {
                let mut ledger = ledger.lock().unwrap();
                ledger.unanswered_but_stored += u64::from(replayed);
                ledger.ack(n, id, replayed);
            }
            Ok((429, _, _)) | Err(_) => {
                ledger.lock().unwrap().in_doubt.push(n);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok((status, _, _)) => panic!("key {n} answered {status} after the restart"),
        }
    }
}

fn options(data_dir: Option<DataDir>, bootstrap: &str, env: &[(String, String)]) -> Options {
    Options { data_dir, bootstrap_key: Some(bootstrap.to_owned()), env: env.to_vec(), ..Options::default() }
}

/// How a round ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stop {
    Kill,
    Terminate,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_no_acknowledged_send_and_duplicates_no_key() {
    let rounds: u64 = std::env::var("TIDINGS_CRASH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(20);
    under_load(rounds, Stop::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_answers_every_request_it_took_and_loses_nothing() {
    under_load(3, Stop::Terminate).await;
}

async fn under_load(rounds: u64, how: Stop) {
    let seed: u64 = std::env::var("TIDINGS_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_nanos() as u64 | 1
    });
    println!("{how:?} under load: {rounds} rounds, TIDINGS_CRASH_SEED={seed}");
    let mut rng = Rng(seed);

    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let bootstrap = fresh_key();
    let mut env = vec![
        ("TIDINGS_DELIVERY".to_owned(), "relay".to_owned()),
        ("TIDINGS_SMTP_RELAY".to_owned(), format!("smtp://{}", sink.addr())),
        ("TIDINGS_SMTP_TIMEOUT".to_owned(), "2s".to_owned()),
        ("TIDINGS_LEASE_MARGIN".to_owned(), "1s".to_owned()),
    ];
    let (server, dns) = start_with_dns(options(None, &bootstrap, &env)).await;
    env.push(("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()));
    verified_domain(&server, &dns, &bootstrap, DOMAIN).await;
    // The bootstrap key's 10/s would make this a test of the rate limiter.
    let (_, key) = create_key(&server, &bootstrap, json!({"rateLimitPerSec": 10_000})).await;

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let data_dir = server.data_dir().clone();
    let mut first = Some(server);
    for round in 1..=rounds {
        let server = Arc::new(match first.take() {
            Some(server) => server,
            None => TestServer::start_with(options(Some(data_dir.clone()), &bootstrap, &env)).await,
        });
        if round > 1 {
            settle(&server, &key, &ledger).await;
            // Acknowledged keys sent again are replays of the same message.
            let sample: Vec<(u64, String)> = {
                let ledger = ledger.lock().unwrap();
                let acked: Vec<_> = ledger.acked.iter().map(|(n, id)| (*n, id.clone())).collect();
                (0..3.min(acked.len())).map(|_| acked[rng.below(acked.len() as u64) as usize].clone()).collect()
            };
            for (n, id) in sample {
                let (status, again, replayed) = send(&server, &key, n).await.expect("an answer");
                assert_eq!((status, again.as_deref(), replayed), (201, Some(id.as_str()), true), "key {n} again");
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| tokio::spawn(client(Arc::clone(&server), key.clone(), Arc::clone(&ledger), Arc::clone(&stop))))
            .collect();
        tokio::time::sleep(Duration::from_millis(100 + rng.below(900))).await;
        // The clients go on sending while the server dies or drains, until it is gone.
        let pid = server.pid().to_string();
        let signal = if how == Stop::Kill { "-KILL" } else { "-TERM" };
        let sent = Command::new("kill").args([signal, &pid]).status().expect("run kill");
        assert!(sent.success(), "kill {signal} failed");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Command::new("kill").args(["-0", &pid]).stderr(Stdio::null()).status().expect("run kill").success()
            && !is_zombie(&pid)
        {
            assert!(Instant::now() < deadline, "round {round}: the server did not exit within 30 s of {signal}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.store(true, Ordering::SeqCst);
        for client in clients {
            client.await.expect("a client task");
        }
        let server = Arc::try_unwrap(server).expect("the clients are done with the server");
        if how == Stop::Terminate {
            // `stop` sends SIGTERM again, which a server already stopping ignores.
            let (status, _) = server.stop().await;
            assert!(status.success(), "round {round}: the server exited with {status} after SIGTERM");
        }
        let ledger = ledger.lock().unwrap();
        println!(
            "round {round}: {} acknowledged so far, {} in doubt, {} requests",
            ledger.acked.len(),
            ledger.in_doubt.len(),
            ledger.requests
        );
    }

    let server = TestServer::start_with(options(Some(data_dir), &bootstrap, &env)).await;
    settle(&server, &key, &ledger).await;
    let ledger = Arc::try_unwrap(ledger).ok().expect("clients are done").into_inner().unwrap();
    assert!(ledger.unexpected.is_empty(), "answers that should never happen: {:?}", ledger.unexpected);
    assert!(ledger.second_messages.is_empty(), "a key made a second message: {:?}", ledger.second_messages);
    if how == Stop::Terminate {
        assert_eq!(ledger.unanswered_but_stored, 0, "a request the stopping server stored went unanswered");
    }

    // The store: exactly the acknowledged messages, one per key.
    let mut stored: HashMap<String, String> = HashMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/messages?limit=200&cursor={c}"),
            None => "/v1/messages?limit=200".to_owned(),
        };
        let (status, body) = server.get(&path, &bootstrap).await;
        assert_ok(status, &body, 200, &path);
        for m in body["data"].as_array().expect("a list") {
            let (id, to) = (m["id"].as_str().unwrap().to_owned(), m["to"].as_str().unwrap().to_owned());
            assert!(stored.insert(to.clone(), id).is_none(), "two messages to {to}");
        }
        cursor = body["pagination"]["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    for (n, id) in &ledger.acked {
        assert_eq!(stored.get(&recipient(*n)), Some(id), "acknowledged key {n} is stored as its message");
    }
    assert_eq!(stored.len(), ledger.acked.len(), "the store holds exactly the acknowledged messages");

    // The sink: every acknowledged message arrives.
    let deadline = Instant::now() + DELIVERY_WAIT;
    let received = loop {
        let mut copies: HashMap<String, usize> = HashMap::new();
        for message in sink.messages() {
            for to in message.recipients {
                *copies.entry(to.to_ascii_lowercase()).or_default() += 1;
            }
        }
        let missing = ledger.acked.keys().filter(|n| !copies.contains_key(&recipient(**n))).count();
        if missing == 0 {
            break copies;
        }
        assert!(Instant::now() < deadline, "{missing} acknowledged messages never reached the sink");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut duplicated = 0;
    for (to, copies) in received.iter().filter(|(_, c)| **c > 1) {
        duplicated += 1;
        let id = stored.get(to).unwrap_or_else(|| panic!("the sink got mail for {to}, which no message has"));
        let (status, body) = server.get(&format!("/v1/messages/{id}"), &bootstrap).await;
        assert_ok(status, &body, 200, "a duplicated message");
        let attempts = body["data"]["attempts"].as_u64().expect("attempts");
        assert!(attempts >= *copies as u64, "{to} arrived {copies} times in {attempts} recorded attempts");
    }
    println!(
        "{how:?} report: {rounds} rounds, {} requests, {} sends acknowledged, 0 lost (checked above), \
         {} stored but unanswered, {} answered 503, {duplicated} duplicated at the sink",
        ledger.requests,
        ledger.acked.len(),
        ledger.unanswered_but_stored,
        ledger.unavailable
    );
}
