//! The disk fills up under the embedded store:
//! the data dir is a small tmpfs of its own. Sends then answer 503 `unavailable` (never a
//! 500, never a hang), the server stops by itself with exit code 75 so that its supervisor
//! restarts it (docs/decisions.md, "Storage failures"), a refused send left nothing behind,
//! and once space is back the restarted server has every acknowledged message and takes new
//! ones. Mounting needs root, which CI has; elsewhere the test fails and says so.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{assert_error, assert_ok, create_key, start_with_dns, verified_domain};
use reqwest::Method;
use serde_json::{Value, json};
use tidings_e2e::{DataDir, Options, TestServer, fresh_key};

const DOMAIN: &str = "full.example";

/// A tmpfs mounted over a directory, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Self {
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("run mount");
        assert!(
            output.status.success(),
            "this test mounts a small tmpfs as the data dir, which needs root (CI runs as root): {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Self(at.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes a file of zeros until the file system is full.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).expect("create the filler");
    let chunk = vec![0u8; 64 * 1024];
    loop {
        if file.write_all(&chunk).and_then(|()| file.sync_data()).is_err() {
            return;
        }
    }
}

fn mail(n: u32) -> Value {
    // Some bulk, so that the store needs fresh space soon.
    json!({"to": format!("f{n}@inbox.example"), "from": format!("hello@{DOMAIN}"), "subject": "Full", "text": "x".repeat(8 * 1024)})
}

/// A send of mail `n` with Idempotency-Key `full-n`: status, replayed, body; `None` when no
/// answer came (the server is gone).
async fn send(server: &TestServer, key: &str, n: u32) -> Option<(u16, bool, Value)> {
    let response = server
        .request(Method::POST, "/v1/messages")
        .bearer_auth(key)
        .header("idempotency-key", format!("full-{n}"))
        .json(&mail(n))
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    let replayed = response.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
    Some((status, replayed, response.json().await.ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_503_stops_the_server_and_loses_nothing_acknowledged() {
    if tidings_e2e::skip_on_postgres("the data dir holds no store on PostgreSQL") {
        return;
    }
    let data_dir = DataDir::new();
    let _tmpfs = Tmpfs::mount(data_dir.path(), "32m");
    let bootstrap = fresh_key();
    let mut env = vec![("TIDINGS_DELIVERY".to_owned(), "hold".to_owned())];
    let options = Options {
        data_dir: Some(data_dir.clone()),
        bootstrap_key: Some(bootstrap.clone()),
        env: env.clone(),
        ..Options::default()
    };
    let (server, dns) = start_with_dns(options).await;
    env.push(("TIDINGS_DNS_SERVER".to_owned(), dns.addr().to_string()));
    verified_domain(&server, &dns, &bootstrap, DOMAIN).await;
    let (_, key) = create_key(&server, &bootstrap, json!({"rateLimitPerSec": 10_000})).await;
    let mut acked = Vec::new();
    for n in 0..20 {
        let (status, _, body) = send(&server, &key, n).await.expect("an answer");
        assert_ok(status, &body, 201, "a send with room on the disk");
        acked.push((n, body["data"]["id"].as_str().unwrap().to_owned()));
    }

    let filler = data_dir.path().join("filler");
    fill(&filler);
    let mut refused = None;
    for n in 20..2_000 {
        let (status, _, body) = send(&server, &key, n).await.expect("an answer while the server is up");
        if status == 201 {
            // What sled had room for in space it had already taken.
            acked.push((n, body["data"]["id"].as_str().unwrap().to_owned()));
            continue;
        }
        assert_error(status, &body, 503, "unavailable", "a send on a full disk");
        refused = Some(n);
        break;
    }
    let refused = refused.expect("a send was refused once the disk was full");
    // Whatever still reaches it is refused the same way, reads included: its memory may
    // hold writes that never reached the disk.
    if let Some((status, _, body)) = send(&server, &key, refused + 1).await {
        assert_error(status, &body, 503, "unavailable", "a later send");
    }
    let (status, exit_dir) = server.exited(Duration::from_secs(30)).await.expect("the server stops by itself");
    assert_eq!(status.code(), Some(75), "exit code 75 (EX_TEMPFAIL) asks the supervisor for a restart");

    // Space is back; the supervisor starts it again.
    std::fs::remove_file(&filler).expect("remove the filler");
    let options =
        Options { data_dir: Some(exit_dir), bootstrap_key: Some(bootstrap.clone()), env, ..Options::default() };
    let server = TestServer::start_with(options).await;
    let (status, body) = server.get("/readyz", &bootstrap).await;
    assert_ok(status, &body, 200, "ready again");
    for (n, id) in &acked {
        let (status, body) = server.get(&format!("/v1/messages/{id}"), &bootstrap).await;
        assert_ok(status, &body, 200, &format!("acknowledged send {n} survived"));
    }
    for n in [refused, refused + 1] {
        let (status, replayed, body) = send(&server, &key, n).await.expect("an answer");
        assert_ok(status, &body, 201, &format!("refused send {n} sent again"));
        assert!(!replayed, "send {n} was refused, so nothing of it may have been kept: {body}");
    }
    let (status, body) = server.get("/v1/messages?limit=200", &bootstrap).await;
    assert_ok(status, &body, 200, "list");
    assert_eq!(body["data"].as_array().map(Vec::len), Some(acked.len() + 2), "{body}");
}
