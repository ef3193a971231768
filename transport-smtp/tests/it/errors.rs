//! How each way an SMTP exchange can fail reaches the port, checked against the sink through
//! the relay transport: replies keep their code and text, silence and broken connections
//! become readable `Unreachable` reasons.

use std::time::{Duration, Instant};

use crate::common::{WAIT, email, relay_config, relay_to};
use tidings_core::ports::{Mailer, SendError, SmtpReply};
use tidings_transport_smtp::testing::{Rule, SinkConfig, SmtpSink, Stage};
use tidings_transport_smtp::{RelayMailer, Timeouts};

async fn rejection(rule: Rule) -> (SmtpReply, SmtpSink, RelayMailer) {
    let sink = SmtpSink::start().await.unwrap();
    sink.add_rule(rule.times(1));
    let mailer = relay_to(&sink);
    let error = mailer.send(&email(1)).await.unwrap_err();
    let SendError::Rejected { reply, remote } = error else { panic!("{error:?}") };
    assert_eq!(remote, format!("127.0.0.1:{}", sink.port()));
    (reply, sink, mailer)
}

#[tokio::test]
async fn a_recipient_refused_at_rcpt_carries_the_servers_code_and_text() {
    let (reply, sink, mailer) = rejection(Rule::reply(Stage::Rcpt, 550, "5.1.1 <to@example.com>: user unknown")).await;

    assert_eq!(reply.code, 550);
    assert_eq!(reply.enhanced.map(|e| e.to_string()).as_deref(), Some("5.1.1"));
    assert_eq!(reply.text, "<to@example.com>: user unknown");
    // The refused transaction was reset, and the connection carries the next message.
    mailer.send(&email(2)).await.unwrap();
    assert_eq!(sink.connection_count(), 1);
}

#[tokio::test]
async fn a_temporary_refusal_at_rcpt_is_a_4xx_rejection() {
    let (reply, ..) = rejection(Rule::reply(Stage::Rcpt, 451, "4.7.1 try again later")).await;
    assert_eq!(reply.to_string(), "451 4.7.1 try again later");
}

#[tokio::test]
async fn a_refused_data_command_is_a_rejection() {
    let (reply, ..) = rejection(Rule::reply(Stage::Data, 554, "5.5.1 no valid recipients")).await;
    assert_eq!(reply.to_string(), "554 5.5.1 no valid recipients");
}

#[tokio::test]
async fn a_message_refused_after_its_final_dot_is_a_rejection() {
    let (reply, sink, mailer) = rejection(Rule::reply(Stage::Message, 552, "5.2.2 mailbox full")).await;

    assert_eq!(reply.to_string(), "552 5.2.2 mailbox full");
    mailer.send(&email(2)).await.unwrap();
    assert_eq!((sink.message_count(), sink.connection_count()), (1, 1));
}

#[tokio::test]
async fn a_multi_line_refusal_keeps_every_line() {
    let (reply, ..) = rejection(Rule::reply(Stage::Message, 550, "5.7.1 Message rejected\n5.7.1 see the policy")).await;
    assert_eq!(reply.to_string(), "550 5.7.1 Message rejected see the policy");
}

#[tokio::test]
async fn a_refusing_greeting_is_a_rejection() {
    let (reply, sink, _) = rejection(Rule::reply(Stage::Greeting, 554, "5.7.1 no service for you")).await;
    assert_eq!(reply.code, 554);
    assert_eq!(sink.message_count(), 0);
}

#[tokio::test]
async fn a_refused_ehlo_is_a_rejection() {
    let (reply, ..) = rejection(Rule::reply(Stage::Ehlo, 550, "5.7.1 not from your network")).await;
    assert_eq!(reply.to_string(), "550 5.7.1 not from your network");
}

#[tokio::test]
async fn a_connection_dropped_after_ehlo_is_unreachable() {
    let sink = SmtpSink::start().await.unwrap();
    sink.add_rule(Rule::disconnect(Stage::Ehlo));

    let error = relay_to(&sink).send(&email(1)).await.unwrap_err();

    let expected =
        format!("connection closed by 127.0.0.1:{} while waiting for the greeting and EHLO reply", sink.port());
    assert_eq!(error, SendError::Unreachable { reason: expected });
}

#[tokio::test]
async fn a_connection_dropped_in_the_middle_of_the_message_is_unreachable() {
    let sink = SmtpSink::start().await.unwrap();
    sink.add_rule(Rule::disconnect(Stage::Message).times(1));
    let mailer = relay_to(&sink);

    let error = mailer.send(&email(1)).await.unwrap_err();

    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    let remote = format!("127.0.0.1:{}", sink.port());
    assert!(reason.starts_with(&format!("connection closed by {remote}")), "{reason}");
    assert!(reason.contains("the reply to the message"), "{reason}");
    // The broken connection is not reused: the next message opens a new one.
    mailer.send(&email(2)).await.unwrap();
    assert_eq!((sink.message_count(), sink.connection_count()), (1, 2));
}

#[tokio::test]
async fn a_connection_dropped_at_rcpt_is_unreachable() {
    let sink = SmtpSink::start().await.unwrap();
    sink.add_rule(Rule::disconnect(Stage::Rcpt).times(1));

    let error = relay_to(&sink).send(&email(1)).await.unwrap_err();

    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    assert!(reason.contains("while waiting for the RCPT TO reply"), "{reason}");
}

#[tokio::test]
async fn a_server_that_never_greets_times_out() {
    let sink = SmtpSink::start().await.unwrap();
    sink.add_rule(Rule::hang(Stage::Greeting));
    let mut config = relay_config(&format!("smtp://127.0.0.1:{}", sink.port()));
    config.timeouts =
        Timeouts { connect: Duration::from_millis(200), command: Duration::from_millis(300), ..config.timeouts };
    let started = Instant::now();

    let error = RelayMailer::new(&config).unwrap().send(&email(1)).await.unwrap_err();

    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    let expected =
        format!("timed out after 300ms waiting for the greeting and EHLO reply from 127.0.0.1:{}", sink.port());
    assert_eq!(reason, &expected);
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_server_silent_after_the_message_times_out_waiting_for_the_reply() {
    let sink = SmtpSink::start().await.unwrap();
    sink.add_rule(Rule::hang(Stage::Message).times(1));
    let mut config = relay_config(&format!("smtp://127.0.0.1:{}", sink.port()));
    config.timeouts.message = Duration::from_millis(300);
    let mailer = RelayMailer::new(&config).unwrap();

    let error = mailer.send(&email(1)).await.unwrap_err();

    let expected = format!("timed out after 300ms waiting for the reply to the message from 127.0.0.1:{}", sink.port());
    assert_eq!(error, SendError::Unreachable { reason: expected });
    // The silent connection is abandoned, not reused.
    mailer.send(&email(2)).await.unwrap();
    assert_eq!(sink.connection_count(), 2);
}

#[tokio::test]
async fn a_refused_connection_names_the_address() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mailer = RelayMailer::new(&relay_config(&format!("smtp://127.0.0.1:{port}"))).unwrap();

    let error = mailer.send(&email(1)).await.unwrap_err();

    assert_eq!(error, SendError::Unreachable { reason: format!("connection refused by 127.0.0.1:{port}") });
}

#[tokio::test]
async fn a_message_over_the_servers_size_limit_is_refused_with_552() {
    let sink = SmtpSink::start_with(SinkConfig { max_message_bytes: 64, ..SinkConfig::default() }).await.unwrap();

    let error = relay_to(&sink).send(&email(1)).await.unwrap_err();

    assert!(matches!(&error, SendError::Rejected { reply, .. } if reply.code == 552), "{error:?}");
    assert_eq!(sink.message_count(), 0);
}

#[tokio::test]
async fn a_line_over_the_servers_limit_is_refused_with_500() {
    let sink = SmtpSink::start().await.unwrap();
    let mut message = email(1);
    message.raw = format!("Subject: long\r\n\r\n{}\r\n", "x".repeat(2000)).into_bytes().into();

    let mailer = relay_to(&sink);

    let error = mailer.send(&message).await.unwrap_err();

    assert!(matches!(&error, SendError::Rejected { reply, .. } if reply.code == 500), "{error:?}");
    // Client and sink stayed in step: the same connection takes the next message.
    mailer.send(&email(2)).await.unwrap();
    assert_eq!(sink.wait_for(1, WAIT).await.unwrap()[0].connection, 1);
    assert_eq!(sink.connection_count(), 1);
}
