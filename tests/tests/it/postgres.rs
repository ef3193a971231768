//! The server on PostgreSQL (`TIDINGS_DATABASE_URL`):
//! everything it stores outlives a restart, and two nodes on one database act as one service
//! (keys, Idempotency-Keys, revocations, rate limits, the failed-auth throttle and the tracking
//! key are shared; nodes starting together on a fresh database make one default workspace).
//!
//! Each test makes a database of its own, `tidings_e2e_<random>`, through
//! `TIDINGS_TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`) and
//! drops it afterwards, also when the test fails. Where no PostgreSQL answers, a test prints
//! `skipped: PostgreSQL not reachable at …` and passes.

use std::time::{Duration, Instant};

use crate::common::database::{Database, connect};
use crate::common::{assert_error, assert_ok, create_key, start_with_dns, verified_domain};
use mail_parser::MessageParser;
use serde_json::{Value, json};
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{DataDir, Options, TestServer, fresh_key};

/// How long a test waits for a state it polls for.
const WAIT: Duration = Duration::from_secs(15);

/// Start options for a node on `db`: `TIDINGS_DATABASE_URL`, the bootstrap key, and webhooks
/// to loopback allowed.
fn node_options(db: &Database, key: &str) -> Options {
    Options {
        bootstrap_key: Some(key.to_owned()),
        env: vec![
            ("TIDINGS_DATABASE_URL".to_owned(), db.url()),
            ("TIDINGS_WEBHOOK_ALLOW_PRIVATE".to_owned(), "true".to_owned()),
        ],
        ..Options::default()
    }
}

/// Sends a plain message from `domain` with `key`; returns its id.
async fn send(server: &TestServer, key: &str, domain: &str) -> String {
    let body = json!({"from": format!("app@{domain}"), "to": "ann@inbox.example", "subject": "Hi", "text": "Hello"});
    let (status, reply) = server.post("/v1/messages", key, body).await;
    assert_ok(status, &reply, 201, "send");
    reply["data"]["id"].as_str().expect("id").to_owned()
}

/// Polls `GET /v1/messages/{id}` until it has `status`; the message then.
async fn wait_for_status(server: &TestServer, key: &str, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, body) = server.get(&format!("/v1/messages/{id}"), key).await;
        assert_ok(code, &body, 200, "read the message");
        if body["data"]["status"] == status {
            return body["data"].clone();
        }
        assert!(Instant::now() < deadline, "message {id} not {status} within {WAIT:?}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A node on `db` using `dns` for its domain checks.
async fn node(db: &Database, key: &str, dns: &TestDnsServer) -> TestServer {
    let mut options = node_options(db, key);
    options.env.push(("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()));
    TestServer::start_with(options).await
}

#[tokio::test]
async fn everything_stored_on_postgres_survives_a_restart_on_a_fresh_data_dir() {
    let Some(db) = Database::create().await else { return };
    let key = fresh_key();
    let (server, dns) = start_with_dns(node_options(&db, &key)).await;
    let domain_id = verified_domain(&server, &dns, &key, "pg.example").await;
    let message_id = send(&server, &key, "pg.example").await;
    wait_for_status(&server, &key, &message_id, "Delivered").await;
    let (status, hook) =
        server.post("/v1/webhooks", &key, json!({"url": "http://127.0.0.1:9/hooks", "eventTypes": ["Bounced"]})).await;
    assert_ok(status, &hook, 201, "create a webhook endpoint");
    let hook_id = hook["data"]["id"].as_str().unwrap().to_owned();
    let (key_id, second_key) = create_key(&server, &key, json!({"name": "ci"})).await;
    assert!(!server.data_dir().path().join("store").exists(), "no sled store is made on PostgreSQL");

    let (exit, _) = server.stop().await;
    assert!(exit.success(), "{exit}");
    // Another data dir: whatever comes back can only have come from the database.
    let restarted = node(&db, &key, &dns).await;

    assert!(restarted.stdout_lines().is_empty(), "no new bootstrap key: {:?}", restarted.stdout_lines());
    let message = wait_for_status(&restarted, &key, &message_id, "Delivered").await;
    assert_eq!(message["attempts"], 1, "{message}");
    let (status, body) = restarted.get(&format!("/v1/messages/{message_id}/events"), &key).await;
    assert_ok(status, &body, 200, "the timeline");
    let types: Vec<&str> = body["data"].as_array().unwrap().iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["Queued", "Sent", "Delivered"], "{body}");
    let (status, body) = restarted.get(&format!("/v1/domains/{domain_id}"), &key).await;
    assert_ok(status, &body, 200, "the domain");
    assert_eq!(body["data"]["overallStatus"], "Verified", "{body}");
    let (status, body) = restarted.get(&format!("/v1/webhooks/{hook_id}"), &key).await;
    assert_ok(status, &body, 200, "the webhook endpoint");
    assert_eq!(body["data"]["eventTypes"], json!(["Bounced"]), "{body}");
    let (status, body) = restarted.get(&format!("/v1/keys/{key_id}"), &second_key).await;
    assert_ok(status, &body, 200, "the second key authenticates and reads itself");
    assert_eq!(body["data"]["name"], "ci", "{body}");
    let (exit, _) = restarted.stop().await;
    assert!(exit.success(), "{exit}");
}

#[tokio::test]
async fn two_nodes_on_one_database_share_keys_idempotency_and_revocations() {
    let Some(db) = Database::create().await else { return };
    let key = fresh_key();
    let dns = TestDnsServer::start([]).await.expect("DNS server starts");
    let a = node(&db, &key, &dns).await;
    let b = node(&db, &key, &dns).await;
    verified_domain(&a, &dns, &key, "pair.example").await;

    // A key made on A works on B.
    let (key_id, shared_key) = create_key(&a, &key, json!({"name": "shared"})).await;
    let (status, body) = b.get(&format!("/v1/keys/{key_id}"), &shared_key).await;
    assert_ok(status, &body, 200, "B knows A's new key");

    // The same Idempotency-Key on both nodes at once: one message, one replay.
    const ROUNDS: usize = 5;
    let body = json!({"from": "app@pair.example", "to": "bob@inbox.example", "subject": "Once", "text": "Only once"});
    for round in 0..ROUNDS {
        let idempotency_key = format!("race-{round}-{}", fresh_key());
        let ((status_a, replayed_a, reply_a), (status_b, replayed_b, reply_b)) =
            tokio::join!(a.send_with_key(&body, &idempotency_key), b.send_with_key(&body, &idempotency_key));
        assert_ok(status_a, &reply_a, 201, &format!("round {round} on A"));
        assert_ok(status_b, &reply_b, 201, &format!("round {round} on B"));
        assert_eq!(reply_a["data"]["id"], reply_b["data"]["id"], "round {round}: one message");
        let mut replays = [replayed_a.as_deref(), replayed_b.as_deref()];
        replays.sort();
        assert_eq!(replays, [None, Some("true")], "round {round}: exactly one answer is the replay");
    }
    let (status, listed) = b.get("/v1/messages?limit=100", &key).await;
    assert_ok(status, &listed, 200, "list the messages");
    assert_eq!(listed["data"].as_array().unwrap().len(), ROUNDS, "one message per round: {listed}");

    // A key revoked on A fails on B at its next request.
    let (status, body) = a.delete(&format!("/v1/keys/{key_id}"), &key).await;
    assert_ok(status, &body, 200, "revoke on A");
    let (status, body) = b.get("/v1/keys", &shared_key).await;
    assert_error(status, &body, 401, "invalid_api_key", "the revoked key on B");
    let (status, body) = a.get("/v1/keys", &shared_key).await;
    assert_error(status, &body, 401, "invalid_api_key", "the revoked key on A");

    for node in [a, b] {
        let (exit, _) = node.stop().await;
        assert!(exit.success(), "{exit}");
    }
}

#[tokio::test]
async fn two_nodes_share_each_keys_rate_limit_and_the_failed_auth_throttle() {
    let Some(db) = Database::create().await else { return };
    let key = fresh_key();
    let dns = TestDnsServer::start([]).await.expect("DNS server starts");
    let a = node(&db, &key, &dns).await;
    let b = node(&db, &key, &dns).await;
    verified_domain(&a, &dns, &key, "limits.example").await;
    let (_, slow_key) = create_key(&a, &key, json!({"scope": "send", "rateLimitPerSec": 1})).await;

    // One send per second for the key on both nodes together: a send on B right after one on
    // A is refused. A round where B's request starts a second or more after A's answer (a
    // loaded machine) proves nothing and is repeated.
    let body = json!({"from": "app@limits.example", "to": "bob@inbox.example", "subject": "Hi", "text": "Hello"});
    let mut refused = None;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let (status, reply) = a.post("/v1/messages", &slow_key, body.clone()).await;
        assert_ok(status, &reply, 201, "the key's one send this second, on A");
        let answered = Instant::now();
        let (status, reply) = b.post("/v1/messages", &slow_key, body.clone()).await;
        if answered.elapsed() < Duration::from_millis(900) {
            refused = Some((status, reply));
            break;
        }
    }
    let (status, reply) = refused.expect("B asked within a second of A's send in one of 5 rounds");
    assert_error(status, &reply, 429, "rate_limit_exceeded", "the key's second send this second, on B");

    // 20 failed authentications from this address, alternating nodes, block it on both.
    for i in 0..20 {
        let node = if i % 2 == 0 { &a } else { &b };
        let (status, reply) = node.get("/v1/keys", "tid_not_a_real_key").await;
        assert_error(status, &reply, 401, "invalid_api_key", &format!("bad key {i}"));
    }
    for (name, node) in [("A", &a), ("B", &b)] {
        let (status, reply) = node.get("/v1/keys", &key).await;
        assert_error(
            status,
            &reply,
            429,
            "too_many_auth_failures",
            &format!("a valid key on {name} after 20 failures"),
        );
    }

    for node in [a, b] {
        let (exit, _) = node.stop().await;
        assert!(exit.success(), "{exit}");
    }
}

/// Starts `count` nodes on `db` at the same moment, without a bootstrap key. Each start
/// blocks its thread until the node listens, so each gets a thread of the blocking pool.
async fn start_together(db: &Database, dns: &TestDnsServer, count: usize) -> Vec<TestServer> {
    let starts: Vec<_> = (0..count)
        .map(|_| {
            let mut options = Options { bootstrap_key: None, ..node_options(db, "unused") };
            options.env.push(("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()));
            tokio::task::spawn_blocking(move || {
                tokio::runtime::Handle::current().block_on(TestServer::start_with(options))
            })
        })
        .collect();
    let mut nodes = Vec::new();
    for start in starts {
        nodes.push(start.await.expect("a node starts"));
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_starting_together_on_a_fresh_database_make_one_workspace_and_share_tracking() {
    let Some(db) = Database::create().await else { return };
    let dns = TestDnsServer::start([]).await.expect("DNS server starts");
    let nodes = start_together(&db, &dns, 3).await;

    let keys: Vec<String> = nodes
        .iter()
        .flat_map(|n| n.stdout_lines())
        .filter_map(|line| line.strip_prefix("bootstrap key: ").map(str::to_owned))
        .collect();
    assert_eq!(keys.len(), 1, "exactly one node made the default workspace and printed its key: {keys:?}");
    let key = &keys[0];
    let client = connect(&db.url()).await.expect("connect to the scratch database");
    let workspaces: i64 = client.query_one("SELECT count(*) FROM workspaces", &[]).await.unwrap().get(0);
    assert_eq!(workspaces, 1, "one workspace in the database");
    for (i, node) in nodes.iter().enumerate() {
        let (status, body) = node.get("/v1/keys", key).await;
        assert_ok(status, &body, 200, &format!("the printed key on node {i}"));
    }

    // A tracked message sent through node 0 (and delivered by any): its pixel opens on every
    // node.
    verified_domain(&nodes[0], &dns, key, "track.example").await;
    let send = json!({
        "from": "app@track.example", "to": "ann@inbox.example", "subject": "Tracked",
        "html": "<p>Hello</p>", "tracking": {"opens": true},
    });
    let (status, reply) = nodes[0].post("/v1/messages", key, send).await;
    assert_ok(status, &reply, 201, "a tracked send");
    let id = reply["data"]["id"].as_str().expect("id").to_owned();
    wait_for_status(&nodes[0], key, &id, "Delivered").await;
    // Whichever node claimed it delivered it, into its own outbox.
    let eml = nodes
        .iter()
        .filter_map(|n| std::fs::read_dir(n.data_dir().path().join("outbox")).ok())
        .flat_map(|dir| dir.flatten().map(|entry| entry.path()))
        .find(|path| path.extension().is_some_and(|e| e == "eml"))
        .expect("the delivered message in an outbox");
    let raw = std::fs::read(&eml).expect("read the message");
    let html = MessageParser::default().parse(&raw).expect("MIME").body_html(0).expect("an HTML part").into_owned();
    let at = html.find("/t/o/").unwrap_or_else(|| panic!("a tracking pixel in {html}"));
    let pixel = html[at..].split(['"', '\'', ' ', '>']).next().expect("the pixel's path").to_owned();
    for (i, node) in nodes.iter().enumerate() {
        let response = node.request(reqwest::Method::GET, &pixel).send().await.expect("fetch the pixel");
        assert_eq!(response.status(), 200, "node {i} verifies the pixel node 0 signed");
    }
    let (status, body) = nodes[1].get(&format!("/v1/messages/{id}/events"), key).await;
    assert_ok(status, &body, 200, "the timeline");
    let opens = body["data"].as_array().unwrap().iter().filter(|e| e["type"] == "Opened").count();
    assert_eq!(opens, nodes.len(), "every node recorded its open: {body}");
    let secrets: i64 = client.query_one("SELECT count(*) FROM secrets", &[]).await.unwrap().get(0);
    assert_eq!(secrets, 1, "one tracking key in the database");

    for node in nodes {
        let (exit, _) = node.stop().await;
        assert!(exit.success(), "{exit}");
    }
}

#[test]
fn migrate_prepares_the_database_and_needs_the_variable() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some(db) = runtime.block_on(Database::create()) else { return };
    let data_dir = DataDir::new();

    // Not `run_cli`: with TIDINGS_E2E_STORE=postgres that names the data dir's database.
    let unset = std::process::Command::new(tidings_e2e::server_binary())
        .arg("migrate")
        .env_clear()
        .env("TIDINGS_DATA_DIR", data_dir.path())
        .output()
        .unwrap();
    let migrated = std::process::Command::new(tidings_e2e::server_binary())
        .arg("migrate")
        .env_clear()
        .env("TIDINGS_DATA_DIR", data_dir.path())
        .env("TIDINGS_DATABASE_URL", db.url())
        .output()
        .unwrap();

    let stderr = String::from_utf8_lossy(&unset.stderr);
    assert_eq!(unset.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("TIDINGS_DATABASE_URL"), "{stderr}");
    assert!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
    let tables = runtime.block_on(async {
        let client = connect(&db.url()).await.unwrap();
        let row = client
            .query_one("SELECT count(*) FROM information_schema.tables WHERE table_name = 'messages'", &[])
            .await
            .unwrap();
        row.get::<_, i64>(0)
    });
    assert_eq!(tables, 1, "the migrations made the tables");
}
