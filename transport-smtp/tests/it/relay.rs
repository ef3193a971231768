//! `RelayMailer` against the SMTP sink: delivery, TLS (STARTTLS verified, implicit TLS),
//! AUTH and connection reuse.

use crate::common::{WAIT, email, relay_config, relay_to};
use tidings_core::model::{CertificateCheck, ConnectionTls, TlsVersion};
use tidings_core::ports::{Mailer, SendError};
use tidings_transport_smtp::RelayMailer;
use tidings_transport_smtp::testing::{Rule, SinkConfig, SinkTls, SmtpSink, Stage};

async fn sink_with(tls: SinkTls, auth: Option<(&str, &str)>) -> SmtpSink {
    let auth = auth.map(|(user, password)| (user.to_owned(), password.to_owned()));
    SmtpSink::start_with(SinkConfig { tls, auth, ..SinkConfig::default() }).await.unwrap()
}

#[tokio::test]
async fn a_message_through_a_plain_relay_arrives_byte_for_byte() {
    let sink = SmtpSink::start().await.unwrap();
    let message = email(1);

    let receipt = relay_to(&sink).send(&message).await.unwrap();

    assert_eq!(receipt.reply.code, 250);
    assert_eq!(receipt.reply.enhanced.map(|e| e.to_string()).as_deref(), Some("2.0.0"));
    assert_eq!(receipt.remote, format!("127.0.0.1:{}", sink.port()));
    assert_eq!(receipt.tls, Some(ConnectionTls::Plaintext), "the sink offers no STARTTLS");
    let received = sink.wait_for(1, WAIT).await.unwrap();
    assert_eq!(received[0].mail_from, "bounces@acme.test");
    assert_eq!(received[0].recipients, ["to@example.com"]);
    assert_eq!(received[0].data, &message.raw[..], "no byte added, lost or changed, dot line included");
    assert!(!received[0].tls);
}

#[tokio::test]
async fn starttls_is_used_when_offered_with_the_certificate_verified_against_the_given_ca_and_its_version_seen() {
    let sink = sink_with(SinkTls::StartTls, None).await;

    let receipt = relay_to(&sink).send(&email(1)).await.unwrap();

    assert!(sink.wait_for(1, WAIT).await.unwrap()[0].tls);
    // Both ends are rustls with its defaults, which prefer TLS 1.3.
    assert_eq!(
        receipt.tls,
        Some(ConnectionTls::Tls { certificate: CertificateCheck::Verified, version: Some(TlsVersion::Tls1_3) })
    );
}

#[tokio::test]
async fn a_relay_certificate_from_an_unknown_ca_fails_the_delivery() {
    let sink = sink_with(SinkTls::StartTls, None).await;
    let mailer = RelayMailer::new(&relay_config(&format!("smtp://127.0.0.1:{}", sink.port()))).unwrap();

    let error = mailer.send(&email(1)).await.unwrap_err();

    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    assert!(reason.starts_with(&format!("TLS handshake with 127.0.0.1:{} failed", sink.port())), "{reason}");
    assert_eq!(sink.message_count(), 0);
}

#[tokio::test]
async fn a_failed_starttls_handshake_is_not_retried_in_plaintext() {
    let sink = sink_with(SinkTls::BrokenStartTls, None).await;

    let error = relay_to(&sink).send(&email(1)).await.unwrap_err();

    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    assert!(reason.contains("TLS handshake"), "{reason}");
    assert_eq!(sink.connection_count(), 1, "no second, plaintext connection");
    assert_eq!(sink.message_count(), 0);
}

#[tokio::test]
async fn smtps_speaks_tls_from_the_first_byte() {
    let sink = sink_with(SinkTls::Implicit, None).await;
    let mut config = relay_config(&format!("smtps://127.0.0.1:{}", sink.port()));
    config.trusted_ca_pem = sink.ca_pem().map(str::to_owned);

    let receipt = RelayMailer::new(&config).unwrap().send(&email(1)).await.unwrap();

    assert!(sink.wait_for(1, WAIT).await.unwrap()[0].tls);
    // lettre opens this socket itself, so the handshake is not seen.
    assert_eq!(receipt.tls, Some(ConnectionTls::Tls { certificate: CertificateCheck::Verified, version: None }));
}

#[tokio::test]
async fn percent_encoded_credentials_authenticate_over_starttls() {
    let sink = sink_with(SinkTls::StartTls, Some(("me@acme.test", "p@ss:word/1"))).await;
    let mut config = relay_config(&format!("smtp://me%40acme.test:p%40ss%3Aword%2F1@127.0.0.1:{}", sink.port()));
    config.trusted_ca_pem = sink.ca_pem().map(str::to_owned);

    RelayMailer::new(&config).unwrap().send(&email(1)).await.unwrap();

    let received = sink.wait_for(1, WAIT).await.unwrap();
    assert_eq!(received[0].auth_identity.as_deref(), Some("me@acme.test"));
    assert!(received[0].tls);
}

#[tokio::test]
async fn a_loopback_relay_may_take_credentials_without_tls() {
    let sink = sink_with(SinkTls::None, Some(("me", "secret"))).await;
    let mailer = RelayMailer::new(&relay_config(&format!("smtp://me:secret@127.0.0.1:{}", sink.port()))).unwrap();

    mailer.send(&email(1)).await.unwrap();

    assert_eq!(sink.wait_for(1, WAIT).await.unwrap()[0].auth_identity.as_deref(), Some("me"));
}

#[tokio::test]
async fn wrong_credentials_are_rejected_with_the_relays_535() {
    let sink = sink_with(SinkTls::None, Some(("me", "secret"))).await;
    let mailer = RelayMailer::new(&relay_config(&format!("smtp://me:wrong@127.0.0.1:{}", sink.port()))).unwrap();

    let error = mailer.send(&email(1)).await.unwrap_err();

    let SendError::Rejected { reply, remote } = &error else { panic!("{error:?}") };
    assert_eq!((reply.code, reply.to_string().as_str()), (535, "535 5.7.8 Authentication credentials invalid"));
    assert_eq!(remote, &format!("127.0.0.1:{}", sink.port()));
    assert_eq!(sink.message_count(), 0);
}

#[tokio::test]
async fn without_credentials_a_relay_that_requires_auth_refuses_mail() {
    let sink = sink_with(SinkTls::None, Some(("me", "secret"))).await;

    let error = relay_to(&sink).send(&email(1)).await.unwrap_err();

    assert!(matches!(&error, SendError::Rejected { reply, .. } if reply.code == 530), "{error:?}");
}

#[tokio::test]
async fn one_connection_carries_message_after_message() {
    let sink = SmtpSink::start().await.unwrap();
    let mailer = relay_to(&sink);

    for n in 1..=3 {
        mailer.send(&email(n)).await.unwrap();
    }

    let received = sink.wait_for(3, WAIT).await.unwrap();
    assert_eq!(sink.connection_count(), 1);
    assert!(received.iter().all(|message| message.connection == 1));
}

#[tokio::test]
async fn a_connection_reaching_its_message_limit_is_replaced() {
    let sink = SmtpSink::start().await.unwrap();
    let mut config = relay_config(&format!("smtp://127.0.0.1:{}", sink.port()));
    config.pool.max_messages_per_connection = 2;
    let mailer = RelayMailer::new(&config).unwrap();

    for n in 1..=3 {
        mailer.send(&email(n)).await.unwrap();
    }

    let connections: Vec<u64> = sink.wait_for(3, WAIT).await.unwrap().iter().map(|m| m.connection).collect();
    assert_eq!(connections, [1, 1, 2]);
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let sink = SmtpSink::start().await.unwrap();
    let mut config = relay_config(&format!("smtp://127.0.0.1:{}", sink.port()));
    config.pool.idle_timeout = std::time::Duration::from_millis(100);
    let mailer = RelayMailer::new(&config).unwrap();
    mailer.send(&email(1)).await.unwrap();

    sink.wait_for_open_connections(0, WAIT).await.unwrap();

    mailer.send(&email(2)).await.unwrap();
    assert_eq!(sink.connection_count(), 2);
}

#[tokio::test]
async fn a_reused_connection_the_server_dropped_is_replaced_without_failing_the_message() {
    let sink = SmtpSink::start().await.unwrap();
    let mailer = relay_to(&sink);
    mailer.send(&email(1)).await.unwrap();
    // As if the server had timed the idle connection out: it drops it at the next command.
    sink.add_rule(Rule::disconnect(Stage::Mail).times(1));

    mailer.send(&email(2)).await.unwrap();

    assert_eq!((sink.message_count(), sink.connection_count()), (2, 2));
}

#[tokio::test]
async fn a_new_connection_dropped_at_mail_is_not_retried() {
    let sink = SmtpSink::start().await.unwrap();
    sink.add_rule(Rule::disconnect(Stage::Mail).times(1));

    let error = relay_to(&sink).send(&email(1)).await.unwrap_err();

    assert!(matches!(&error, SendError::Unreachable { reason } if reason.contains("MAIL FROM")), "{error:?}");
    assert_eq!(sink.connection_count(), 1);
}

#[tokio::test]
async fn eight_bit_content_goes_to_a_server_offering_8bitmime_intact() {
    let sink = SmtpSink::start().await.unwrap();
    let mut message = email(1);
    message.raw = "Subject: caf\u{e9}\r\n\r\nGr\u{fc}\u{df}e\r\n".as_bytes().into();

    relay_to(&sink).send(&message).await.unwrap();

    assert_eq!(sink.wait_for(1, WAIT).await.unwrap()[0].data, &message.raw[..]);
}
