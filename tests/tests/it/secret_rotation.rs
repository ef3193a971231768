//! Rotating the key that seals the store's secrets, against the real binary, on sled and on
//! PostgreSQL (`TIDINGS_E2E_STORE=postgres`), following the README's "Rotating the secret
//! key": a store with every kind of secret (a verified domain's DKIM keys, a webhook whose
//! secret was rotated so that it has a previous one, the tracking key) sealed with one key;
//! `secret-key rotate` killed with `kill -9` after two records (at a point the test chooses
//! with a hidden flag, so the cut is the same every run), then run again to the end. On
//! PostgreSQL a node with both keys serves, and sends, all along.
//!
//! Afterwards the server starts with the new key alone, and what was sealed before still
//! works from outside: a new message carries DKIM signatures that mail-auth verifies against
//! the records published before the rotation (the same keys), a webhook delivery verifies
//! with both of the endpoint's secrets (the `standardwebhooks` crate), and a click-tracking
//! link from a message sent before the rotation still redirects. The old key alone is
//! refused, as the new key alone was while the rotation was unfinished.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::dkim::assert_signed_by;
use crate::common::receiver::{Hit, Receiver};
use crate::common::{assert_ok, block_on, publish};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use mail_parser::MessageParser;
use serde_json::json;
use standardwebhooks::Webhook;
use tidings_dns::testing::TestDnsServer;
use tidings_e2e::{DataDir, Options, TestServer, fresh_key, on_postgres, server_binary};
use tidings_transport_smtp::testing::SmtpSink;

const WAIT: Duration = Duration::from_secs(60);
const DOMAIN: &str = "rotate.example";

/// The old and new keys, as an operator makes them (`openssl rand -base64 32`).
fn keys() -> (String, String) {
    (BASE64.encode([0x11u8; 32]), BASE64.encode([0x22u8; 32]))
}

/// The environment every process on the store gets: relay to the sink, the DNS server,
/// private webhook targets allowed, and `keys` (name, value).
fn env(sink: &SmtpSink, dns: &TestDnsServer, keys: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = vec![
        ("TIDINGS_DELIVERY".to_owned(), "relay".to_owned()),
        ("TIDINGS_SMTP_RELAY".to_owned(), format!("smtp://{}", sink.addr())),
        ("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()),
        ("TIDINGS_WEBHOOK_ALLOW_PRIVATE".to_owned(), "true".to_owned()),
    ];
    env.extend(keys.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    env
}

async fn start(data_dir: &DataDir, api_key: &str, env: Vec<(String, String)>) -> TestServer {
    let options = Options {
        data_dir: Some(data_dir.clone()),
        bootstrap_key: Some(api_key.to_owned()),
        env,
        ..Options::default()
    };
    TestServer::start_with(options).await
}

/// `tidings-server ARGS` on the data dir (and its database) with `env`, not yet waited for.
fn spawn(data_dir: &DataDir, args: &[&str], env: &[(String, String)]) -> std::process::Child {
    let mut command = Command::new(server_binary());
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TIDINGS_DATA_DIR", data_dir.path())
        .env("TIDINGS_LISTEN", "127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(url) = data_dir.database_url() {
        command.env("TIDINGS_DATABASE_URL", url);
    }
    command.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    command.spawn().expect("start tidings-server")
}

/// Runs `tidings-server ARGS` to its exit (killed, and the test failed, after 60 s).
fn run(data_dir: &DataDir, args: &[&str], env: &[(String, String)]) -> Output {
    let mut child = spawn(data_dir, args, env);
    let deadline = Instant::now() + WAIT;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!("tidings-server {args:?} did not exit: {}", String::from_utf8_lossy(&output.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("its output")
}

/// The rotation report's numbers for `kind`: (re-sealed, already under the new key).
fn counts(stdout: &str, kind: &str) -> (usize, usize) {
    let line = stdout.lines().find(|l| l.starts_with(kind)).unwrap_or_else(|| panic!("no {kind} line: {stdout}"));
    let numbers: Vec<usize> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    (numbers[0], numbers[1])
}

/// Asserts the start was refused for a key that does not open the store.
fn assert_refused(output: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{what}: exit code 2: {stderr}");
    assert!(stderr.contains("sealed with another key than"), "{what}: {stderr}");
}

/// Sends a tracked message from the domain; returns its id.
async fn send(server: &TestServer, key: &str, to: &str) -> String {
    let html = r#"<html><body><p>Shipped.</p><a href="https://rotate.example/orders/7">Track it</a></body></html>"#;
    let body = json!({
        "from": format!("orders@{DOMAIN}"), "to": to, "subject": "Shipped", "html": html, "text": "Shipped.",
        "tracking": {"clicks": true},
    });
    let (status, body) = server.post("/v1/messages", key, body).await;
    assert_ok(status, &body, 201, "send");
    body["data"]["id"].as_str().unwrap().to_owned()
}

/// The raw message the sink received for `to`.
async fn received(sink: &SmtpSink, to: &str) -> Vec<u8> {
    let deadline = Instant::now() + WAIT;
    loop {
        let all = sink.wait_for(1, WAIT).await.expect("mail reaches the sink");
        if let Some(m) = all.iter().find(|m| m.recipients.iter().any(|r| r == to)) {
            return m.data.clone();
        }
        assert!(Instant::now() < deadline, "no message to {to} reached the sink");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Verifies a webhook delivery with `secret` by the `standardwebhooks` crate.
fn verifies(hit: &Hit, secret: &str) -> bool {
    Webhook::new(secret).expect("a whsec_ secret").verify(&hit.body, &hit.headers).is_ok()
}

#[test]
fn an_interrupted_rotation_resumes_and_every_secret_works_under_the_new_key_alone() {
    block_on(async {
        let (old, new) = keys();
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let dns = TestDnsServer::start([]).await.expect("DNS server starts");
        let receiver = Receiver::start().await;
        let data_dir = DataDir::new();
        let api_key = fresh_key();
        let only_old = env(&sink, &dns, &[("TIDINGS_SECRET_KEY", &old)]);
        let only_new = env(&sink, &dns, &[("TIDINGS_SECRET_KEY", &new)]);
        let both = env(&sink, &dns, &[("TIDINGS_SECRET_KEY", &new), ("TIDINGS_PREVIOUS_SECRET_KEY", &old)]);

        // Every kind of secret, sealed with the old key.
        let server = start(&data_dir, &api_key, only_old.clone()).await;
        let (status, body) = server.post("/v1/domains", &api_key, json!({"domain": DOMAIN})).await;
        assert_ok(status, &body, 201, "add the domain");
        let domain_id = body["data"]["id"].as_str().unwrap().to_owned();
        publish(&dns, &body["data"], &["SPF", "DKIM", "DMARC"]).await;
        let (status, body) = server.post(&format!("/v1/domains/{domain_id}/verify"), &api_key, json!({})).await;
        assert_ok(status, &body, 200, "verify");
        let hook = json!({"url": receiver.url("/hook"), "eventTypes": ["Delivered"]});
        let (status, body) = server.post("/v1/webhooks", &api_key, hook).await;
        assert_ok(status, &body, 201, "create a webhook");
        let webhook = body["data"]["id"].as_str().unwrap().to_owned();
        let first_secret = body["data"]["secret"].as_str().unwrap().to_owned();
        let path = format!("/v1/webhooks/{webhook}/rotate-secret");
        let (status, body) = server.post(&path, &api_key, json!({})).await;
        assert_ok(status, &body, 200, "rotate the webhook secret");
        let second_secret = body["data"]["secret"].as_str().unwrap().to_owned();
        send(&server, &api_key, "before@example.com").await;
        let before = received(&sink, "before@example.com").await;
        assert_signed_by(&before, dns.addr(), DOMAIN).await;
        let html = MessageParser::default().parse(&before).unwrap().body_html(0).unwrap().into_owned();
        let prefix = server.url("/t/c/");
        let at = html.find(&prefix).unwrap_or_else(|| panic!("a tracked link: {html}"));
        let click = html[at + server.url("").len()..].split('"').next().unwrap().replace("&amp;", "&");
        receiver.wait_for("/hook", 1, WAIT).await;
        let (status, _) = server.stop().await;
        assert!(status.success(), "{status}");

        // PostgreSQL: a node with both keys serves all along. sled: the server is stopped.
        let node = if on_postgres() { Some(start(&data_dir, &api_key, both.clone()).await) } else { None };

        // The rotation, killed (SIGKILL) once two records are re-sealed.
        let mut child = spawn(&data_dir, &["secret-key", "rotate", "--batch-size", "1", "--pause-after", "2"], &both);
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let mut seen = Vec::new();
        for line in stderr.lines() {
            let line = line.expect("stderr");
            let paused = line.contains("paused after 2 re-sealed records");
            seen.push(line);
            if paused {
                break;
            }
        }
        assert!(seen.last().is_some_and(|l| l.contains("paused after")), "the command paused: {seen:#?}");
        child.kill().expect("kill -9 the rotation");
        child.wait().expect("wait for it");

        // Half done: the store still opens with the old key's check only, so the new key alone
        // is refused; a node with both keys reads and signs with either.
        assert_refused(&run(&data_dir, &[], &only_new), "the new key alone before the rotation finished");
        if let Some(node) = &node {
            send(node, &api_key, "during@example.com").await;
            assert_signed_by(&received(&sink, "during@example.com").await, dns.addr(), DOMAIN).await;
        }

        // Run again: it finishes what was left, skipping what was done.
        let output = run(&data_dir, &["secret-key", "rotate", "--batch-size", "1"], &both);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
        let kinds = ["domains", "webhooks", "store secrets"].map(|k| counts(&stdout, k));
        let resealed: usize = kinds.iter().map(|c| c.0).sum();
        let skipped: usize = kinds.iter().map(|c| c.1).sum();
        assert!(resealed >= 1, "what was left is re-sealed now: {stdout}");
        assert!(skipped >= 2, "the two records done before the kill are skipped: {stdout}");
        assert!(kinds[0].0 + kinds[0].1 >= 1 && kinds[1].0 + kinds[1].1 == 1, "{stdout}");
        assert!(kinds[2].0 + kinds[2].1 >= 1, "the tracking key at least: {stdout}");
        assert!(stdout.contains("the store now opens with the new key alone"), "{stdout}");
        let again = run(&data_dir, &["secret-key", "rotate"], &both);
        let again_out = String::from_utf8_lossy(&again.stdout).into_owned();
        assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
        for kind in ["domains", "webhooks", "store secrets"] {
            assert_eq!(counts(&again_out, kind).0, 0, "nothing left to re-seal: {again_out}");
        }
        if let Some(node) = node {
            let (status, _) = node.stop().await;
            assert!(status.success(), "{status}");
        }
        println!("rotation: killed after 2 re-sealed, resumed: {resealed} re-sealed, {skipped} skipped");

        // The new key alone: every secret sealed before still works.
        let server = start(&data_dir, &api_key, only_new.clone()).await;
        send(&server, &api_key, "after@example.com").await;
        let after = received(&sink, "after@example.com").await;
        assert_signed_by(&after, dns.addr(), DOMAIN).await;
        let response = server.request(reqwest::Method::GET, &click).send().await.unwrap();
        assert_eq!(response.status(), 302, "a link tracked before the rotation still redirects");
        assert_eq!(response.headers()["location"], "https://rotate.example/orders/7");
        let hits = receiver.wait_for("/hook", if on_postgres() { 3 } else { 2 }, WAIT).await;
        for hit in &hits {
            assert!(verifies(hit, &second_secret), "the webhook's secret verifies, before and after the rotation");
            assert!(verifies(hit, &first_secret), "and its previous secret too");
            assert!(!verifies(hit, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "an unrelated secret does not");
        }
        let (status, _) = server.stop().await;
        assert!(status.success(), "{status}");

        // The old key alone no longer opens the store.
        assert_refused(&run(&data_dir, &[], &only_old), "the old key alone after the rotation");
    });
}

#[test]
fn rotate_without_a_previous_key_says_what_it_needs() {
    let data_dir = DataDir::new();
    let output = run(&data_dir, &["secret-key", "rotate"], &[("TIDINGS_SECRET_KEY".to_owned(), keys().1)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("TIDINGS_PREVIOUS_SECRET_KEY"), "{stderr}");
}
