//! The sink's own promises, which the server's end-to-end tests and benchmarks rely on.

use std::time::Duration;

use crate::common::{WAIT, email, relay_to};
use tidings_core::ports::Mailer;
use tidings_transport_smtp::testing::{Rule, SinkConfig, SmtpSink, Stage, WaitTimeout};

#[tokio::test]
async fn wait_for_says_what_it_saw_when_time_runs_out() {
    let sink = SmtpSink::start().await.unwrap();
    relay_to(&sink).send(&email(1)).await.unwrap();

    let error = sink.wait_for(2, Duration::from_millis(50)).await.unwrap_err();

    assert_eq!(error, WaitTimeout { what: "messages", wanted: 2, seen: 1, waited: Duration::from_millis(50) });
}

#[tokio::test]
async fn without_retention_messages_are_counted_but_not_kept() {
    let sink = SmtpSink::start_with(SinkConfig { retain_messages: false, ..SinkConfig::default() }).await.unwrap();
    let mailer = relay_to(&sink);

    for n in 1..=3 {
        mailer.send(&email(n)).await.unwrap();
    }

    assert_eq!(sink.wait_for(3, WAIT).await.unwrap(), []);
    assert_eq!(sink.message_count(), 3);
}

#[tokio::test]
async fn rules_for_one_recipient_leave_the_others_alone() {
    let sink = SmtpSink::start().await.unwrap();
    sink.add_rule(Rule::reply(Stage::Rcpt, 550, "5.1.1 user unknown").for_recipient("gone@example.com"));
    let mailer = relay_to(&sink);

    assert!(mailer.send(&crate::common::email_to(1, "gone@example.com")).await.is_err());
    mailer.send(&crate::common::email_to(2, "here@example.com")).await.unwrap();
    assert!(mailer.send(&crate::common::email_to(3, "gone@example.com")).await.is_err(), "the rule holds for good");

    let received = sink.wait_for(1, WAIT).await.unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].recipients, ["here@example.com"]);
}

#[tokio::test]
async fn cleared_rules_stop_applying() {
    let sink = SmtpSink::start().await.unwrap();
    sink.add_rule(Rule::reply(Stage::Mail, 451, "4.3.0 not now"));
    let mailer = relay_to(&sink);
    assert!(mailer.send(&email(1)).await.is_err());

    sink.clear_rules();

    mailer.send(&email(2)).await.unwrap();
}

#[tokio::test]
async fn a_stopped_sink_has_closed_its_port() {
    let sink = SmtpSink::start().await.unwrap();
    let mailer = relay_to(&sink);
    sink.stop().await;

    let error = mailer.send(&email(1)).await.unwrap_err();

    assert!(error.to_string().starts_with("connection refused"), "{error}");
}
