//! The first email in one minute through the real binary: a fresh data dir
//! with no configuration sends with only `to`, `subject` and `text`, from the workspace's
//! sandbox sending domain, into `<data>/outbox/` with both DKIM signatures verifying against
//! the records the API shows. The same data dir served through a relay does not list the
//! sandbox, refuses to send from it saying why, and fails (never relays) a message the outbox
//! left waiting. And the README's first screen, run by `sh` as written.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::dkim::assert_signed_with_records;
use crate::common::{assert_error, assert_invalid, assert_ok, block_on};
use serde_json::{Value, json};
use tidings_e2e::{Options, TestServer, fresh_key};
use tidings_transport_smtp::testing::SmtpSink;

const SANDBOX: &str = "sandbox.tidings.invalid";
/// How long a test waits for a state it polls for.
const WAIT: Duration = Duration::from_secs(15);
/// How often it asks.
const POLL: Duration = Duration::from_millis(100);

/// Polls `GET /v1/messages/{id}` until its status is `status`; the message.
async fn wait_for_status(server: &TestServer, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, body) = server.get(&format!("/v1/messages/{id}"), server.key()).await;
        assert_ok(code, &body, 200, "GET the message");
        if body["data"]["status"] == status {
            return body["data"].clone();
        }
        assert!(Instant::now() < deadline, "not {status} within {WAIT:?}: {body}");
        tokio::time::sleep(POLL).await;
    }
}

/// The names of the files in `dir`.
fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_fresh_server_sends_the_first_email_with_only_to_subject_and_text() {
    block_on(async {
        let server = TestServer::start().await;

        let (status, body) = server
            .post(
                "/v1/messages",
                server.key(),
                json!({"to": "ann@example.com", "subject": "Hello", "text": "It works."}),
            )
            .await;

        assert_ok(status, &body, 201, "the first send");
        assert_eq!(body["data"]["fromAddress"], format!("noreply@{SANDBOX}"), "{body}");
        let id = body["data"]["id"].as_str().expect("id").to_owned();
        let message = wait_for_status(&server, &id, "Delivered").await;
        let provider_id = message["providerMessageId"].as_str().expect("providerMessageId").to_owned();

        let (status, domains) = server.get("/v1/domains", server.key()).await;
        assert_ok(status, &domains, 200, "GET /v1/domains");
        let listed = domains["data"].as_array().expect("a list");
        assert_eq!(listed.len(), 1, "the sandbox only: {domains}");
        let sandbox = &listed[0];
        assert_eq!((sandbox["domain"].as_str(), sandbox["sandbox"].as_bool()), (Some(SANDBOX), Some(true)));
        assert_eq!(sandbox["overallStatus"], "Verified");
        for record in sandbox["dnsRecords"].as_array().expect("dnsRecords") {
            assert_eq!(record["status"], "Verified", "{record}");
            let note = record["note"].as_str().unwrap_or_else(|| panic!("a note on {record}"));
            assert!(note.starts_with("nothing to publish"), "{note}");
        }
        let sandbox_id = sandbox["id"].as_str().expect("id");
        let (status, by_id) = server.get(&format!("/v1/domains/{sandbox_id}"), server.key()).await;
        assert_ok(status, &by_id, 200, "GET the sandbox by id");
        assert_eq!(&by_id["data"], sandbox);

        let outbox = server.data_dir().path().join("outbox");
        assert_eq!(files_in(&outbox), [format!("{provider_id}.eml")]);
        let raw = std::fs::read(outbox.join(format!("{provider_id}.eml"))).expect("the .eml file");
        assert_signed_with_records(&raw, &sandbox["dnsRecords"], SANDBOX).await;

        // It is Tidings' own: it cannot be deleted, and its name cannot be added.
        let (status, body) = server.delete(&format!("/v1/domains/{sandbox_id}"), server.key()).await;
        assert_invalid(status, &body, &["id"], "deleting the sandbox");
        let (status, body) = server.post("/v1/domains", server.key(), json!({"domain": SANDBOX})).await;
        assert_invalid(status, &body, &["domain"], "adding the sandbox's name");
        // A customer domain says it is not the sandbox.
        let (status, body) = server.post("/v1/domains", server.key(), json!({"domain": "acme.example"})).await;
        assert_ok(status, &body, 201, "add a domain");
        assert_eq!(body["data"]["sandbox"], false);
        assert!(body["data"]["dnsRecords"].as_array().unwrap().iter().all(|r| r["note"].is_null()), "{body}");
    });
}

#[test]
fn with_a_relay_the_sandbox_is_unlisted_refused_and_never_relayed() {
    block_on(async {
        // Under the outbox: a message from the sandbox, scheduled an hour ahead so that it is
        // still waiting when the server stops.
        let key = fresh_key();
        let outbox = TestServer::start_with(Options { bootstrap_key: Some(key.clone()), ..Options::default() }).await;
        let later = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
        let send = json!({"to": "ann@example.com", "subject": "Hello", "text": "It works.", "scheduledAt": later});
        let (status, body) = outbox.post("/v1/messages", &key, send).await;
        assert_ok(status, &body, 201, "a scheduled send from the sandbox");
        let waiting = body["data"]["id"].as_str().expect("id").to_owned();
        let (_, domains) = outbox.get("/v1/domains", &key).await;
        let sandbox_id = domains["data"][0]["id"].as_str().expect("the sandbox's id").to_owned();
        let (_, data_dir) = outbox.stop().await;

        // The same data, served through a relay.
        let sink = SmtpSink::start().await.expect("the SMTP sink starts");
        let env = vec![
            ("TIDINGS_DELIVERY".to_owned(), "relay".to_owned()),
            ("TIDINGS_SMTP_RELAY".to_owned(), format!("smtp://{}", sink.addr())),
        ];
        let options = Options { data_dir: Some(data_dir), bootstrap_key: Some(key.clone()), env, ..Options::default() };
        let relay = TestServer::start_with(options).await;

        let (status, body) = relay.get("/v1/domains", &key).await;
        assert_ok(status, &body, 200, "GET /v1/domains");
        assert_eq!(body["data"], json!([]), "the sandbox is not listed");
        let (status, body) = relay.get(&format!("/v1/domains/{sandbox_id}"), &key).await;
        assert_error(status, &body, 404, "not_found", "the sandbox by id");

        let plain = json!({"to": "ann@example.com", "subject": "Hello", "text": "It works."});
        let (status, body) = relay.post("/v1/messages", &key, plain.clone()).await;
        assert_invalid(status, &body, &["from"], "no from and no verified domain, as before the sandbox");
        let from_sandbox =
            json!({"from": format!("noreply@{SANDBOX}"), "to": "ann@example.com", "subject": "Hello", "text": "x"});
        let (status, body) = relay.post("/v1/messages", &key, from_sandbox).await;
        assert_error(status, &body, 422, "domain_not_verified", "a send from the sandbox");
        let message = body["error"]["message"].as_str().expect("a message");
        for part in [
            "sandbox.tidings.invalid is the sandbox sending domain",
            "TIDINGS_DELIVERY=outbox",
            "add and verify your own domain (POST /v1/domains)",
        ] {
            assert!(message.contains(part), "the message says {part:?}: {message}");
        }

        // The waiting message, sent now, fails on this node and never reaches the relay.
        let (status, body) = relay.patch(&format!("/v1/messages/{waiting}"), &key, json!({"scheduledAt": null})).await;
        assert_ok(status, &body, 200, "send the waiting message now");
        wait_for_status(&relay, &waiting, "Failed").await;
        let (_, events) = relay.get(&format!("/v1/messages/{waiting}/events"), &key).await;
        let last = events["data"].as_array().and_then(|e| e.last()).cloned().expect("events");
        assert_eq!(last["type"], "Failed", "{events}");
        let reason = last["details"]["response"].as_str().unwrap_or_default();
        assert!(reason.contains("sandbox sending domain") && reason.contains("outbox"), "{reason}");
        assert_eq!(sink.message_count(), 0, "nothing was relayed");
    });
}

/// The README's code blocks, in order, with their info strings.
fn readme_blocks() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_owned(), String::new())),
            (Some(_), Some("")) => blocks.extend(open.take()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// Runs `script` with `sh`, after putting the server's address, its key and its data dir in
/// place of the README's `https://127.0.0.1:8443`, `tid_...` and `data/`; its stdout.
fn run_as_written(script: &str, server: &TestServer) -> String {
    let script = script
        .replace("https://127.0.0.1:8443", &server.url(""))
        .replace("tid_...", server.key())
        .replace("data/", &format!("{}/", server.data_dir().path().display()));
    let output = Command::new("sh").arg("-c").arg(&script).output().expect("sh runs (and curl is installed)");
    assert!(output.status.success(), "{script}\nfailed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_readme_first_screen_sends_one_email_and_shows_it_delivered_in_the_outbox() {
    block_on(async {
        let blocks = readme_blocks();
        // The opening commands, then the first email: one curl, then what to look at.
        assert!(blocks[0].1.starts_with("cargo run --release -p tidings-server"), "{:?}", blocks[0]);
        let (send, check) = (&blocks[1], &blocks[2]);
        assert_eq!((send.0.as_str(), check.0.as_str()), ("sh", "sh"));
        assert_eq!(send.1.matches("curl ").count(), 1, "one curl: {}", send.1);
        assert!(
            send.1.contains("/v1/messages") && !send.1.contains("\"from\""),
            "to, subject and text only: {}",
            send.1
        );

        let server = TestServer::start_with(Options::default()).await; // the key it prints, as a new user has
        let sent: Value = serde_json::from_str(&run_as_written(&send.1, &server)).expect("the send prints JSON");
        assert_eq!(sent["statusCode"], 201, "{sent}");
        assert_eq!(sent["data"]["fromAddress"], format!("noreply@{SANDBOX}"), "{sent}");
        let id = sent["data"]["id"].as_str().expect("id");
        let delivered = wait_for_status(&server, id, "Delivered").await;

        let shown = run_as_written(&check.1, &server);
        assert!(shown.contains(r#""status":"Delivered""#), "{shown}");
        // curl prints no final newline, so the file name may follow the JSON on its line.
        let eml = format!("{}.eml", delivered["providerMessageId"].as_str().expect("providerMessageId"));
        assert!(shown.contains(&eml), "the check lists {eml}: {shown}");
    });
}
