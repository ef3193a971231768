//! The cluster test: three `tidings-server` nodes on one fresh PostgreSQL database
//! deliver through one relay (an [`SmtpSink`] on loopback) and post `Delivered` events to one
//! webhook receiver on loopback. A client sends 5,000 messages round-robin across the nodes,
//! each with its own Idempotency-Key, at most 32 requests in flight; every tenth key is sent a
//! second time to another node, half of those at the same moment as the original and half a
//! little later. After 2,000 acknowledged sends the sink holds its replies for a moment, so
//! that every node has deliveries in flight, and one node is killed with SIGKILL; whatever was
//! going to it, or failed at the transport level anywhere, the client sends again to the next
//! node with the same Idempotency-Key, as a real client does.
//!
//! Then, polling within a deadline, until the sink has every message, the API shows every
//! message `Delivered`, and the receiver has a `Delivered` event for each. Checked:
//! - one message per Idempotency-Key, whichever nodes it reached: both sends of a key got the
//!   same id, at most one of them was not a replay, and the API lists exactly 5,000 messages;
//! - every message reached the sink with its `providerMessageId` as Message-ID; a message
//!   arrived twice only if the killed node was sending it when it died: its timeline shows an
//!   attempt that never got an outcome, then a second one, and there are at most as many
//!   such messages as a node has sends in flight (and at least one: the killed node's leased
//!   work was taken over);
//! - every message's `Delivered` event reached the receiver, signed with the endpoint's
//!   secret; an event posted twice (same `webhook-id`) was in flight on the killed node, and
//!   there are at most as many as a node has POSTs to one endpoint in flight.
//!
//! The killed node's leases must run out within the test: the nodes run with
//! `TIDINGS_SMTP_TIMEOUT=5s` and `TIDINGS_LEASE_MARGIN=2s`, so its messages are taken over
//! after 2 × (5 s + 10 s) + 2 s = 32 s and its webhook deliveries after 15 s + 2 s = 17 s.
//! Nothing here is timed except the overall deadline; the figures are printed
//! (`--nocapture`). Skipped, saying why, where PostgreSQL is not reachable.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::database::Database;
use crate::common::receiver::{Hit, Receiver};
use crate::common::{assert_ok, create_key, verified_domain};
use futures::StreamExt;
use mail_parser::MessageParser;
use serde_json::{Value, json};
use standardwebhooks::Webhook;
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{Options, TestServer, fresh_key};
use tidings_transport_smtp::testing::{SmtpSink, Stage};

/// Messages sent, one Idempotency-Key each.
const MESSAGES: usize = 5_000;
/// Nodes started.
const NODES: usize = 3;
/// The node killed (the last one started).
const KILLED: usize = NODES - 1;
/// Client requests (or pairs of racing requests) in flight at once.
const IN_FLIGHT: usize = 32;
/// Acknowledged sends before the kill.
const KILL_AFTER: usize = 2_000;
/// How long everything may take to arrive once the client is done.
const DEADLINE: Duration = Duration::from_secs(240);
/// Sends a node has in flight at once: the delivery worker's concurrency (core's
/// `DeliverySettings::default().concurrency`), so at most this many can reach the sink
/// without their outcome being recorded when the node dies.
const NODE_SENDS_IN_FLIGHT: usize = 32;
/// Sessions held at the sink that prove every node has sends in flight: more than the
/// others can have together.
const HELD_BY_EVERY_NODE: usize = (NODES - 1) * NODE_SENDS_IN_FLIGHT + 1;
/// POSTs a node has in flight to one endpoint at once (core's
/// `DispatchSettings::default().per_endpoint_in_flight`).
const NODE_POSTS_IN_FLIGHT_PER_ENDPOINT: usize = 16;
/// The sending domain.
const DOMAIN: &str = "cluster.example";
/// The receiver's path for the endpoint.
const HOOK_PATH: &str = "/delivered";

/// The recipient of key `n`: what identifies its message at the sink.
fn recipient(n: usize) -> String {
    format!("m{n}@inbox.example")
}

/// The body sent with key `n` (the same every time it is sent, as a replay must be).
fn mail(n: usize) -> Value {
    json!({
        "from": format!("app@{DOMAIN}"),
        "to": recipient(n),
        "subject": format!("Cluster message {n}"),
        "text": format!("Message {n} of the cluster test."),
    })
}

/// What one client request was: key `n` sent once, twice at once to two nodes, or again to
/// another node after its first send.
#[derive(Debug, Clone, Copy)]
enum Job {
    Once(usize),
    Racing(usize),
    Again(usize),
}

/// Every send in order: each key once, racing pairs for every twentieth, and for the others
/// of every tenth a repeat queued 100 keys later.
fn jobs() -> Vec<Job> {
    const LATER: usize = 100;
    let mut jobs = Vec::with_capacity(MESSAGES + MESSAGES / 10);
    for n in 0..MESSAGES {
        jobs.push(if n % 20 == 0 { Job::Racing(n) } else { Job::Once(n) });
        if n >= LATER && (n - LATER) % 20 == 10 {
            jobs.push(Job::Again(n - LATER));
        }
    }
    jobs.extend((MESSAGES.saturating_sub(LATER)..MESSAGES).filter(|n| n % 20 == 10).map(Job::Again));
    jobs
}

/// An acknowledged send.
#[derive(Debug, Clone)]
struct Ack {
    key: usize,
    node: usize,
    id: String,
    replayed: bool,
}

/// The client: one HTTPS client trusting the three nodes' certificates, sending with one key.
struct Client {
    http: reqwest::Client,
    nodes: Vec<String>,
    key: String,
    /// Transport errors (no answer) per node.
    transport_errors: Vec<AtomicUsize>,
    /// Sends acknowledged so far.
    acknowledged: AtomicUsize,
    /// The node that acknowledged each key first.
    first_node: Mutex<HashMap<usize, usize>>,
}

impl Client {
    fn new(nodes: &[TestServer], key: String) -> Self {
        let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(60));
        let certs = nodes.iter().map(|node| {
            let pem = std::fs::read(node.data_dir().path().join("tls/cert.pem")).expect("the node's certificate");
            reqwest::Certificate::from_pem(&pem).expect("a PEM certificate")
        });
        builder = builder.tls_certs_only(certs);
        Self {
            http: builder.build().expect("an HTTPS client"),
            nodes: nodes.iter().map(|node| node.url("")).collect(),
            key,
            transport_errors: (0..nodes.len()).map(|_| AtomicUsize::new(0)).collect(),
            acknowledged: AtomicUsize::new(0),
            first_node: Mutex::new(HashMap::new()),
        }
    }

    /// Runs one job; its acknowledgements.
    async fn run(&self, job: Job) -> Vec<Ack> {
        match job {
            Job::Once(n) => vec![self.send(n, n % NODES).await],
            Job::Racing(n) => {
                let (a, b) = tokio::join!(self.send(n, n % NODES), self.send(n, (n + 1) % NODES));
                vec![a, b]
            }
            Job::Again(n) => {
                let first = self.first_node.lock().unwrap().get(&n).copied().unwrap_or(n % NODES);
                vec![self.send(n, (first + 1) % NODES).await]
            }
        }
    }

    /// Sends key `n` to node `start`, and on a transport error to the next node, and so on,
    /// with the same Idempotency-Key until a node answers. Any answer but 201 fails the test.
    async fn send(&self, n: usize, start: usize) -> Ack {
        let body = mail(n);
        let idempotency_key = format!("cluster-{n}");
        for attempt in 0..NODES * 20 {
            let node = (start + attempt) % NODES;
            let request = self
                .http
                .post(format!("{}/v1/messages", self.nodes[node]))
                .bearer_auth(&self.key)
                .header("idempotency-key", &idempotency_key)
                .json(&body);
            let response = match request.send().await {
                Ok(response) => response,
                Err(_) => {
                    self.transport_errors[node].fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            let status = response.status().as_u16();
            let replayed = response.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
            // The answer can be cut off too: that is a transport error like any other.
            let Ok(text) = response.text().await else {
                self.transport_errors[node].fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let reply: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("key {n} on node {node}: {e}: {text}"));
            assert_ok(status, &reply, 201, &format!("send key {n} to node {node}"));
            let id = reply["data"]["id"].as_str().expect("the message's id").to_owned();
            self.first_node.lock().unwrap().entry(n).or_insert(node);
            self.acknowledged.fetch_add(1, Ordering::Relaxed);
            return Ack { key: n, node, id, replayed };
        }
        panic!("key {n}: no node answered in {} tries", NODES * 20);
    }
}

/// Options for a node on `db`: the shared bootstrap key, relay delivery to `sink`, domain
/// checks against `dns`, webhooks to loopback allowed, fast retries, and leases short
/// enough to run out within the test.
fn node_options(db: &Database, key: &str, sink: &SmtpSink, dns: &TestDnsServer) -> Options {
    let env = [
        ("TIDINGS_DATABASE_URL", db.url()),
        ("TIDINGS_DNS_SERVER", dns.addr().to_string()),
        ("TIDINGS_DELIVERY", "relay".to_owned()),
        ("TIDINGS_SMTP_RELAY", format!("smtp://{}", sink.addr())),
        ("TIDINGS_SMTP_TIMEOUT", "5s".to_owned()),
        ("TIDINGS_LEASE_MARGIN", "2s".to_owned()),
        ("TIDINGS_RETRY_SCHEDULE", "1s,1s,1s,1s,1s".to_owned()),
        ("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true".to_owned()),
        ("TIDINGS_WEBHOOK_RETRY_SCHEDULE", "1s,1s,1s,1s,1s".to_owned()),
        // A line per request from three nodes is noise here; warnings and errors remain.
        ("TIDINGS_LOG", "warn".to_owned()),
    ];
    Options {
        bootstrap_key: Some(key.to_owned()),
        env: env.into_iter().map(|(name, value)| (name.to_owned(), value)).collect(),
        ..Options::default()
    }
}

/// Every message the API lists, walking all pages of 200.
async fn all_messages(node: &TestServer, key: &str) -> Vec<Value> {
    let mut messages = Vec::with_capacity(MESSAGES);
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            None => "/v1/messages?limit=200".to_owned(),
            Some(cursor) => format!("/v1/messages?limit=200&cursor={cursor}"),
        };
        let (status, body) = node.get(&path, key).await;
        assert_ok(status, &body, 200, &format!("GET {path}"));
        messages.extend(body["data"].as_array().expect("a list").iter().cloned());
        match body["pagination"]["nextCursor"].as_str() {
            Some(next) if body["pagination"]["hasMore"] == true => cursor = Some(next.to_owned()),
            _ => return messages,
        }
    }
}

/// How many messages have each status.
fn by_status(messages: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for message in messages {
        *counts.entry(message["status"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
    }
    counts
}

/// The recipients the sink has at least one message for, with how many copies.
fn copies_at_sink(sink: &SmtpSink) -> HashMap<String, Vec<Vec<u8>>> {
    let mut copies: HashMap<String, Vec<Vec<u8>>> = HashMap::new();
    for message in sink.messages() {
        for to in &message.recipients {
            copies.entry(to.to_ascii_lowercase()).or_default().push(message.data.clone());
        }
    }
    copies
}

/// The message id in a `Delivered` webhook.
fn hooked_message(hit: &Hit) -> String {
    let payload = hit.json();
    assert_eq!(payload["type"], "Delivered", "only Delivered is subscribed: {payload}");
    payload["data"]["messageId"].as_str().expect("data.messageId").to_owned()
}

/// The end of each live node's log, for a failure message.
fn logs(nodes: &[TestServer]) -> String {
    let mut out = String::new();
    for (n, node) in nodes.iter().enumerate() {
        let lines = node.stderr_lines();
        let tail = &lines[lines.len().saturating_sub(20)..];
        out.push_str(&format!("--- node {n}: {} lines, the last:\n{}\n", lines.len(), tail.join("\n")));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_deliver_every_message_once_through_a_crash_of_one() {
    let Some(db) = Database::create().await else { return };
    let started = Instant::now();
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let receiver = Receiver::start().await;
    let dns = TestDnsServer::start([]).await.expect("the DNS server starts");
    let admin = fresh_key();
    let mut nodes = Vec::new();
    for _ in 0..NODES {
        nodes.push(TestServer::start_with(node_options(&db, &admin, &sink, &dns)).await);
    }
    verified_domain(&nodes[0], &dns, &admin, DOMAIN).await;
    // Rate limits are not what this is about: the most a key may have.
    let (_, send_key) = create_key(&nodes[1], &admin, json!({"name": "cluster", "rateLimitPerSec": 10_000})).await;
    let (status, hook) = nodes[2]
        .post("/v1/webhooks", &admin, json!({"url": receiver.url(HOOK_PATH), "eventTypes": ["Delivered"]}))
        .await;
    assert_ok(status, &hook, 201, "create the webhook endpoint");
    let secret = hook["data"]["secret"].as_str().expect("the endpoint's secret").to_owned();
    let client = Client::new(&nodes, send_key);
    let victim = nodes.pop().expect("three nodes");
    let ready = started.elapsed();

    // Act: send everything, and kill a node on the way.
    let sending_started = Instant::now();
    let sending =
        futures::stream::iter(jobs()).map(|job| client.run(job)).buffer_unordered(IN_FLIGHT).collect::<Vec<_>>();
    let killing = async {
        while client.acknowledged.load(Ordering::Relaxed) < KILL_AFTER {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Catch the victim mid-delivery: the sink holds each message it has read whole before
        // its 250. More held sessions than two nodes can have means the victim has some; if
        // they do not come, 2 s is ten times the idle poll of a delivery loop, and sends keep
        // coming, so by then the victim has claimed and started some too. The wait stays well
        // inside the 5 s the other nodes give a reply.
        sink.hold(Stage::Message);
        let held = match sink.wait_for_held(HELD_BY_EVERY_NODE, Duration::from_secs(2)).await {
            Ok(()) => HELD_BY_EVERY_NODE,
            Err(e) => e.seen,
        };
        let acknowledged = client.acknowledged.load(Ordering::Relaxed);
        // SIGKILL: its requests, sends and POSTs in flight are cut off; its leases stay.
        let _ = victim.kill();
        // The sink keeps what it held, as a real receiver would: the victim's copies of those
        // messages arrived, but it never heard the 250 (the duplicate window).
        sink.release();
        (Instant::now(), acknowledged, held)
    };
    let (acks, (killed_at, acknowledged_at_kill, held_at_kill)) = tokio::join!(sending, killing);
    let acks: Vec<Ack> = acks.into_iter().flatten().collect();
    let sending_took = sending_started.elapsed();

    // Every key, whichever nodes it reached, is one message.
    let mut per_key: HashMap<usize, Vec<&Ack>> = HashMap::new();
    for ack in &acks {
        per_key.entry(ack.key).or_default().push(ack);
    }
    assert_eq!(per_key.len(), MESSAGES, "every key acknowledged");
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut lost_answers = 0;
    for (key, acks) in &per_key {
        let id = &acks[0].id;
        assert!(acks.iter().all(|a| a.id == *id), "key {key} made more than one message: {acks:#?}");
        let fresh = acks.iter().filter(|a| !a.replayed).count();
        assert!(fresh <= 1, "key {key}: more than one send was not a replay: {acks:#?}");
        if fresh == 0 {
            // Created by a send whose answer the kill cut off.
            lost_answers += 1;
        }
        assert!(ids.insert(id.clone(), *key).is_none(), "keys {key} and {} share message {id}", ids[id]);
    }
    let repeated = per_key.values().filter(|acks| acks.len() > 1).count();
    let across_nodes = per_key.values().filter(|acks| acks.iter().any(|a| a.node != acks[0].node)).count();
    let transport_errors: Vec<usize> = client.transport_errors.iter().map(|e| e.load(Ordering::Relaxed)).collect();
    for (node, errors) in transport_errors.iter().enumerate().filter(|(node, _)| *node != KILLED) {
        assert_eq!(*errors, 0, "node {node} is alive but did not answer {errors} times\n{}", logs(&nodes));
    }

    // Wait until everything has arrived.
    let wanted: HashSet<String> = (0..MESSAGES).map(recipient).collect();
    let deadline = Instant::now() + DEADLINE;
    let messages = loop {
        let at_sink = sink.message_count() >= MESSAGES && {
            let copies = copies_at_sink(&sink);
            wanted.iter().all(|to| copies.contains_key(to))
        };
        let hooked = at_sink && {
            let hits = receiver.hits(HOOK_PATH);
            hits.len() >= MESSAGES && hits.iter().map(hooked_message).collect::<HashSet<_>>().len() == MESSAGES
        };
        if hooked {
            let messages = all_messages(&nodes[0], &admin).await;
            if messages.iter().all(|m| m["status"] == "Delivered") {
                break messages;
            }
        }
        if Instant::now() >= deadline {
            let copies = copies_at_sink(&sink);
            let missing: Vec<&String> = wanted.iter().filter(|to| !copies.contains_key(*to)).take(10).collect();
            let messages = all_messages(&nodes[0], &admin).await;
            panic!(
                "not everything arrived within {DEADLINE:?}: the sink has {} of {MESSAGES} recipients (missing e.g. \
                 {missing:?}), the receiver {} requests; messages by status {:?}\n{}",
                copies.len(),
                receiver.hits(HOOK_PATH).len(),
                by_status(&messages),
                logs(&nodes)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let all_arrived = killed_at.elapsed();

    // The API: exactly the acknowledged messages, each Delivered.
    assert_eq!(messages.len(), MESSAGES, "one message per key, no more: {:?}", by_status(&messages));
    let listed: HashSet<&str> = messages.iter().map(|m| m["id"].as_str().expect("an id")).collect();
    assert!(ids.keys().all(|id| listed.contains(id.as_str())), "every acknowledged id is listed");
    let by_recipient: HashMap<String, &Value> =
        messages.iter().map(|m| (m["to"].as_str().expect("to").to_ascii_lowercase(), m)).collect();
    assert_eq!(by_recipient.len(), MESSAGES, "one message per recipient");

    // The sink: every message with its Message-ID; twice only what the killed node was sending.
    let copies = copies_at_sink(&sink);
    let mut duplicated = Vec::new();
    for (to, copies) in &copies {
        let message = by_recipient.get(to).unwrap_or_else(|| panic!("the sink got mail for {to}, which nobody sent"));
        for copy in copies {
            let parsed = MessageParser::default().parse(copy).expect("mail-parser parses the message");
            assert_eq!(parsed.message_id(), message["providerMessageId"].as_str(), "{to}: the Message-ID");
        }
        if copies.len() > 1 {
            duplicated.push(message["id"].as_str().expect("an id").to_owned());
        }
    }
    let retried: Vec<&Value> = messages.iter().filter(|m| m["attempts"] != 1).collect();
    for message in &retried {
        let id = message["id"].as_str().expect("an id");
        let (status, body) = nodes[0].get(&format!("/v1/messages/{id}/events"), &admin).await;
        assert_ok(status, &body, 200, "a retried message's timeline");
        let types: Vec<&str> = body["data"].as_array().unwrap().iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(
            types,
            ["Queued", "Sent", "Sent", "Delivered"],
            "a second attempt only after one cut off by the kill: {message}"
        );
        let copies = &copies[&message["to"].as_str().unwrap().to_ascii_lowercase()];
        assert!(copies.len() <= 2, "{id} arrived {} times in two attempts", copies.len());
    }
    assert!(
        retried.len() <= NODE_SENDS_IN_FLIGHT,
        "{} messages needed a second attempt; the killed node had at most {NODE_SENDS_IN_FLIGHT} in flight",
        retried.len()
    );
    let retried_ids: HashSet<&str> = retried.iter().filter_map(|m| m["id"].as_str()).collect();
    for id in &duplicated {
        assert!(retried_ids.contains(id.as_str()), "{id} arrived twice but was attempted once");
    }
    // The victim was sending when it died (see the kill): another node took those messages
    // over once their leases ran out, and the sink has the victim's copies too.
    assert!(!retried.is_empty(), "the killed node's sends in flight were never attempted again");
    assert!(!duplicated.is_empty(), "the sink kept the killed node's held messages, yet none arrived twice");

    // The receiver: one event per message, verified; twice only what the killed node was posting.
    let hits = receiver.hits(HOOK_PATH);
    let verifier = Webhook::new(&secret).expect("a whsec_ secret");
    let mut per_webhook_id: HashMap<String, (String, usize)> = HashMap::new();
    for hit in &hits {
        verifier.verify(&hit.body, &hit.headers).expect("the webhook verifies with the endpoint's secret");
        let message = hooked_message(hit);
        assert!(ids.contains_key(&message), "a webhook for a message nobody sent: {message}");
        let entry = per_webhook_id.entry(hit.header("webhook-id").to_owned()).or_insert((message.clone(), 0));
        assert_eq!(entry.0, message, "one webhook-id, one message");
        entry.1 += 1;
    }
    assert_eq!(per_webhook_id.len(), MESSAGES, "one Delivered event per message");
    let hooks_twice = per_webhook_id.values().filter(|(_, n)| *n > 1).count();
    assert!(per_webhook_id.values().all(|(_, n)| *n <= 2), "no webhook posted more than twice");
    assert!(
        hooks_twice <= NODE_POSTS_IN_FLIGHT_PER_ENDPOINT,
        "{hooks_twice} webhooks posted twice; the killed node had at most \
         {NODE_POSTS_IN_FLIGHT_PER_ENDPOINT} in flight to the endpoint"
    );

    println!(
        "cluster: {NODES} nodes ready in {ready:.1?}; {} requests for {MESSAGES} keys ({repeated} sent twice, \
         {across_nodes} of them acknowledged by two nodes) in {sending_took:.1?} ({:.0} acknowledged/s); \
         node {KILLED} killed after {acknowledged_at_kill} acknowledged sends with {held_at_kill} deliveries held \
         at the sink; \
         transport errors per node {transport_errors:?}; answers lost to the kill {lost_answers}; \
         everything delivered {all_arrived:.1?} after the kill; sink: {} messages, {} duplicates \
         (bound {NODE_SENDS_IN_FLIGHT}); second attempts {}; webhooks: {} requests, {hooks_twice} posted twice \
         (bound {NODE_POSTS_IN_FLIGHT_PER_ENDPOINT}); total {:.1?}",
        acks.len(),
        acks.len() as f64 / sending_took.as_secs_f64(),
        sink.message_count(),
        duplicated.len(),
        retried.len(),
        hits.len(),
        started.elapsed(),
    );
}
