//! What an operator reads in the server's log (stderr): a line per delivery outcome, bounce,
//! suppression, failed webhook attempt and disabled endpoint, naming its ids; the error code
//! on a refused request's line; risky settings warned about at start; nothing in Rust's
//! `Debug` form; and a log filter that would silently log nothing refused at start.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use tidings_e2e::{DataDir, server_binary};
use tidings_transport_smtp::testing::{Rule, SmtpSink, Stage};

use crate::common::mail::{plain_mail, send_ok, wait_for_status};
use crate::common::receiver::{Receiver, Reply};
use crate::common::{assert_ok, server_relaying_to, verified_domain};

/// The line with every one of `needles`, waiting for it; fails with the whole log if none.
fn logged(server: &tidings_e2e::TestServer, needles: &[&str]) -> String {
    server
        .wait_for_log(needles)
        .unwrap_or_else(|| panic!("no log line with {needles:?} in:\n{}", server.stderr_lines().join("\n")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_bounces_suppressions_and_webhook_failures_are_logged_with_their_ids() {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let receiver = Receiver::start().await;
    let (server, dns) = server_relaying_to(
        &sink,
        &[
            ("TIDINGS_RETRY_SCHEDULE", "1s,1s"),
            ("TIDINGS_WEBHOOK_RETRY_SCHEDULE", "1s,1s"),
            ("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true"),
            ("TIDINGS_MX_ALLOW_PRIVATE", "true"),
        ],
    )
    .await;
    let key = server.key().to_owned();

    // Risky settings: a warning each, at start.
    logged(&server, &["WARN", "TIDINGS_WEBHOOK_ALLOW_PRIVATE is on"]);
    logged(&server, &["WARN", "TIDINGS_MX_ALLOW_PRIVATE is on"]);

    // Two endpoints that fail: one answers 500 (retried), one 410 (disabled at once).
    receiver.script("/failing", std::iter::repeat_n(Reply::Status(500), 10));
    receiver.script("/gone", [Reply::Status(410)]);
    let mut endpoints = Vec::new();
    for path in ["/failing", "/gone"] {
        let body = json!({"url": receiver.url(path), "eventTypes": ["Delivered"]});
        let (status, reply) = server.post("/v1/webhooks", &key, body).await;
        assert_ok(status, &reply, 201, "create a webhook");
        endpoints.push(reply["data"]["id"].as_str().unwrap().to_owned());
    }

    verified_domain(&server, &dns, &key, "ops.example").await;
    sink.add_rule(Rule::reply(Stage::Rcpt, 550, "5.1.1 user unknown").for_recipient("gone@example.net"));
    sink.add_rule(Rule::reply(Stage::Rcpt, 451, "4.2.1 mailbox busy").times(1).for_recipient("busy@example.net"));
    let delivered = send_ok(&server, &key, plain_mail("ops.example", "ann@example.net")).await;
    let bounced = send_ok(&server, &key, plain_mail("ops.example", "gone@example.net")).await;
    let deferred = send_ok(&server, &key, plain_mail("ops.example", "busy@example.net")).await;
    let wait = Duration::from_secs(20);
    wait_for_status(&server, &key, &delivered, "Delivered", wait).await;
    wait_for_status(&server, &key, &bounced, "Bounced", wait).await;
    wait_for_status(&server, &key, &deferred, "Delivered", wait).await;

    let line = logged(&server, &["tidings::ops", "message delivered", &format!("message_id={delivered}")]);
    assert!(line.contains(" INFO ") && line.contains("workspace="), "{line}");
    let line = logged(&server, &["message bounced", &format!("message_id={bounced}")]);
    assert!(line.contains(" WARN ") && line.contains("hard") && line.contains("5.1.1"), "{line}");
    let line = logged(&server, &["message deferred", &format!("message_id={deferred}")]);
    assert!(line.contains(" WARN ") && line.contains("4.2.1") && line.contains("next_attempt_at="), "{line}");
    let line = logged(&server, &["address suppressed", &format!("message_id={bounced}")]);
    assert!(line.contains("suppression=") && line.contains("HardBounce"), "{line}");
    assert!(!line.contains("gone@example.net"), "ids, not addresses: {line}");
    let line = logged(&server, &["webhook attempt failed; retrying", &format!("endpoint={}", endpoints[0])]);
    assert!(line.contains(" WARN ") && line.contains("delivery=") && line.contains("response_code=500"), "{line}");
    let line = logged(&server, &["webhook endpoint disabled", &format!("endpoint={}", endpoints[1])]);
    assert!(line.contains(" WARN ") && line.contains("410"), "{line}");

    // A refused request's line names its error code, and its client as an address.
    let (status, _) = server.post("/v1/messages", &key, plain_mail("unverified.example", "ann@example.net")).await;
    assert_eq!(status, 422);
    let line = logged(&server, &["tidings::request", "status=422", "domain_not_verified"]);
    assert!(line.contains("peer=127.0.0.1"), "{line}");

    let debug_text: Vec<String> = server
        .stderr_lines()
        .into_iter()
        .filter(|l| ["Some(", "Os {", "Error {"].iter().any(|d| l.contains(d)))
        .collect();
    assert!(debug_text.is_empty(), "Rust Debug text in the log:\n{}", debug_text.join("\n"));
}

#[test]
fn a_log_filter_that_is_no_level_stops_the_start() {
    let data_dir = DataDir::new();
    for filter in ["verbose", "info,tidings", "info,tidings=loud"] {
        let output = Command::new(server_binary())
            .env_clear()
            .env("TIDINGS_DATA_DIR", data_dir.path())
            .env("TIDINGS_DNS_SERVER", "127.0.0.1:53")
            .env("TIDINGS_LOG", filter)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{filter}: {stderr}");
        assert!(stderr.contains("TIDINGS_LOG") && stderr.contains("is not a log filter"), "{filter}: {stderr}");
        assert!(!stderr.contains("listening on"), "{filter}: {stderr}");
    }
}
