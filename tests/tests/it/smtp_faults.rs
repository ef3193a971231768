//! The receiving SMTP server misbehaves: a 421
//! greeting, a 451 after the data, a connection dropped in the middle of the data, a server
//! that accepts the connection and never answers, silence after the final dot, and a broken
//! STARTTLS. Each message ends in the state docs/api.md#retry-schedule gives it (Deferred then
//! Delivered when the fault passes, Bounced `Soft` when it never does), nothing waits forever,
//! and a message refused or cut off before the sink's 250 arrives exactly once.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::common::mail::{plain_mail, send_ok, timeline, types, wait_for_status};
use crate::common::{server_relaying_to, server_with_dns, verified_domain};
use serde_json::Value;
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_e2e::TestServer;
use tidings_transport_smtp::testing::{Rule, SinkConfig, SinkTls, SmtpSink, Stage};

const DOMAIN: &str = "faults.example";
/// Long enough for three attempts with the 1 s schedule and 2 s timeouts.
const WAIT: Duration = Duration::from_secs(30);

/// A server relaying to `sink` with 2 s SMTP timeouts and the schedule `1s,1s` (three
/// attempts), and its verified domain.
async fn relaying_to(sink: &SmtpSink) -> (TestServer, TestDnsServer) {
    let (server, dns) =
        server_relaying_to(sink, &[("TIDINGS_SMTP_TIMEOUT", "2s"), ("TIDINGS_RETRY_SCHEDULE", "1s,1s")]).await;
    verified_domain(&server, &dns, server.key(), DOMAIN).await;
    (server, dns)
}

/// Sends one message to `to` through a sink scripted with `rule` (if any), and waits for
/// `status`; returns the server, the message and its timeline.
async fn through_fault(sink: &SmtpSink, rule: Option<Rule>, to: &str, status: &str) -> (TestServer, Value, Vec<Value>) {
    let (server, _dns) = relaying_to(sink).await;
    if let Some(rule) = rule {
        sink.add_rule(rule);
    }
    let id = send_ok(&server, server.key(), plain_mail(DOMAIN, to)).await;
    let message = wait_for_status(&server, server.key(), &id, status, WAIT).await;
    let events = timeline(&server, server.key(), &id).await;
    (server, message, events)
}

/// The copies of mail the sink accepted for `to`.
fn copies(sink: &SmtpSink, to: &str) -> usize {
    sink.messages().iter().filter(|m| m.recipients.iter().any(|r| r == to)).count()
}

#[tokio::test]
async fn a_421_greeting_defers_and_the_next_attempt_delivers() {
    let sink = SmtpSink::start().await.expect("the sink starts");
    let rule = Rule::reply(Stage::Greeting, 421, "4.3.2 service not available, closing channel").times(1);
    let (_server, message, events) = through_fault(&sink, Some(rule), "greeting@inbox.example", "Delivered").await;

    assert_eq!(types(&events), ["Queued", "Sent", "Deferred", "Sent", "Delivered"], "{events:#?}");
    assert_eq!(events[2]["details"]["smtpCode"], 421, "{events:#?}");
    assert!(events[2]["details"]["nextAttemptAt"].is_string(), "{events:#?}");
    assert_eq!(message["attempts"], 2, "{message}");
    assert_eq!(copies(&sink, "greeting@inbox.example"), 1);
}

#[tokio::test]
async fn a_451_after_the_data_defers_and_the_message_arrives_once() {
    let sink = SmtpSink::start().await.expect("the sink starts");
    let to = "after-data@inbox.example";
    let rule = Rule::reply(Stage::Message, 451, "4.3.0 queue file write error").times(1).for_recipient(to);
    let (_server, _message, events) = through_fault(&sink, Some(rule), to, "Delivered").await;

    assert_eq!(types(&events), ["Queued", "Sent", "Deferred", "Sent", "Delivered"], "{events:#?}");
    assert_eq!(events[2]["details"]["smtpCode"], 451, "{events:#?}");
    assert_eq!(events[2]["details"]["enhancedCode"], "4.3.0", "{events:#?}");
    assert_eq!(copies(&sink, to), 1, "the refused copy is not kept; the retry's is");
}

#[tokio::test]
async fn a_connection_dropped_in_the_middle_of_the_data_defers_and_the_message_arrives_once() {
    let sink = SmtpSink::start().await.expect("the sink starts");
    let to = "dropped@inbox.example";
    let rule = Rule::disconnect(Stage::Message).times(1).for_recipient(to);
    let (_server, _message, events) = through_fault(&sink, Some(rule), to, "Delivered").await;

    assert_eq!(types(&events), ["Queued", "Sent", "Deferred", "Sent", "Delivered"], "{events:#?}");
    assert!(events[2]["details"]["smtpCode"].is_null(), "no reply was received: {events:#?}");
    assert_eq!(copies(&sink, to), 1);
}

#[tokio::test]
async fn silence_after_the_final_dot_times_out_defers_and_the_message_arrives_once() {
    let sink = SmtpSink::start().await.expect("the sink starts");
    let to = "silent@inbox.example";
    let rule = Rule::hang(Stage::Message).times(1).for_recipient(to);
    let (_server, _message, events) = through_fault(&sink, Some(rule), to, "Delivered").await;

    assert_eq!(types(&events), ["Queued", "Sent", "Deferred", "Sent", "Delivered"], "{events:#?}");
    assert_eq!(copies(&sink, to), 1, "the sink never accepted the first copy");
}

#[tokio::test]
async fn a_server_that_never_answers_ends_in_a_soft_bounce_and_later_mail_still_goes() {
    let sink = SmtpSink::start().await.expect("the sink starts");
    let to = "never@inbox.example";
    let (server, message, events) = through_fault(&sink, Some(Rule::hang(Stage::Greeting)), to, "Bounced").await;

    assert_eq!(
        types(&events),
        ["Queued", "Sent", "Deferred", "Sent", "Deferred", "Sent", "Bounced"],
        "three attempts, each timed out: {events:#?}"
    );
    assert_eq!(events[6]["details"]["bounceType"], "Soft", "{events:#?}");
    assert_eq!(message["attempts"], 3, "{message}");
    assert_eq!(copies(&sink, to), 0);

    // The worker is not wedged on the silent server: once it answers, mail flows again,
    // to the same address (a soft bounce does not suppress it).
    sink.clear_rules();
    let id = send_ok(&server, server.key(), plain_mail(DOMAIN, to)).await;
    wait_for_status(&server, server.key(), &id, "Delivered", WAIT).await;
    assert_eq!(copies(&sink, to), 1);
}

#[tokio::test]
async fn a_relay_whose_starttls_breaks_is_never_used_in_plaintext_and_the_message_bounces_soft() {
    let config = SinkConfig { tls: SinkTls::BrokenStartTls, ..SinkConfig::default() };
    let sink = SmtpSink::start_with(config).await.expect("the sink starts");
    let to = "tls@inbox.example";
    let (_server, _message, events) = through_fault(&sink, None, to, "Bounced").await;

    assert_eq!(types(&events).iter().filter(|t| **t == "Deferred").count(), 2, "{events:#?}");
    let last = events.last().expect("events");
    assert_eq!(last["details"]["bounceType"], "Soft", "{events:#?}");
    assert!(
        last["details"]["response"].as_str().is_some_and(|r| r.contains("TLS")),
        "the reason names TLS: {events:#?}"
    );
    assert_eq!(sink.message_count(), 0, "no plaintext fallback to a relay that offered STARTTLS");
}

#[tokio::test]
async fn an_mx_whose_starttls_breaks_gets_the_message_in_plaintext() {
    // Opportunistic TLS to an MX (RFC 3207 §4.1, RFC 7435): a broken handshake is retried
    // without TLS on a new connection rather than bouncing mail the receiver would take.
    let config = SinkConfig { tls: SinkTls::BrokenStartTls, ..SinkConfig::default() };
    let sink = SmtpSink::start_with(config).await.expect("the sink starts");
    let port = sink.port().to_string();
    let (server, dns) = server_with_dns(&[
        ("TIDINGS_DELIVERY", "mx"),
        ("TIDINGS_MX_PORT", &port),
        ("TIDINGS_MX_ALLOW_PRIVATE", "true"),
    ])
    .await;
    dns.set_mx("inbox.example", &[(10, "mx1.inbox.example")]).await;
    dns.add(TestRecord::a("mx1.inbox.example", Ipv4Addr::LOCALHOST)).await;
    verified_domain(&server, &dns, server.key(), DOMAIN).await;
    let to = "mx-tls@inbox.example";

    let id = send_ok(&server, server.key(), plain_mail(DOMAIN, to)).await;
    wait_for_status(&server, server.key(), &id, "Delivered", WAIT).await;

    let received = sink.messages();
    assert_eq!(received.len(), 1, "{received:#?}");
    assert!(!received[0].tls, "delivered over the plaintext connection");
    assert_eq!(sink.connection_count(), 2, "the broken TLS connection, then a plaintext one");
}
