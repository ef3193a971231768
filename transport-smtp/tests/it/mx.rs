//! `MxMailer` against a real DNS server on loopback (`TestDnsServer`) whose MX records point
//! at SMTP sinks on 127.0.0.x, all on one port as `TIDINGS_MX_PORT` would make them. Loopback
//! is not public, so these mailers allow private targets (`TIDINGS_MX_ALLOW_PRIVATE`).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{WAIT, email_to, quick_timeouts};
use tidings_core::model::{CertificateCheck, ConnectionTls, TlsVersion};
use tidings_core::ports::{Mailer, SendError};
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_dns::{HickoryDns, Settings, Upstream};
use tidings_transport_smtp::testing::{Rule, SinkConfig, SinkTls, SmtpSink, Stage};
use tidings_transport_smtp::{MxConfig, MxMailer, PoolSettings};

const TO: &str = "to@acme.test";

fn mailer_with(dns: &TestDnsServer, config: MxConfig) -> MxMailer {
    let settings = Settings { timeout: Duration::from_millis(500), attempts: 2 };
    let resolver = HickoryDns::new(Upstream::Server(dns.addr()), settings).unwrap();
    MxMailer::new(Arc::new(resolver), config).unwrap()
}

fn mailer(dns: &TestDnsServer, port: u16) -> MxMailer {
    mailer_with(dns, MxConfig { port, timeouts: quick_timeouts(), allow_private: true, ..MxConfig::default() })
}

fn loopback(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, last)
}

async fn sink_at(ip: Ipv4Addr, port: u16, tls: SinkTls) -> std::io::Result<SmtpSink> {
    SmtpSink::start_with(SinkConfig { bind: SocketAddr::from((ip, port)), tls, ..SinkConfig::default() }).await
}

/// Two sinks on one port: 127.0.0.1 and 127.0.0.2.
async fn two_sinks() -> (SmtpSink, SmtpSink) {
    for _ in 0..20 {
        let first = sink_at(loopback(1), 0, SinkTls::None).await.unwrap();
        if let Ok(second) = sink_at(loopback(2), first.port(), SinkTls::None).await {
            return (first, second);
        }
    }
    panic!("no port free on both 127.0.0.1 and 127.0.0.2");
}

#[tokio::test]
async fn a_message_goes_to_the_recipient_domains_mx() {
    let sink = SmtpSink::start().await.unwrap();
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 10, "mx1.acme.test"),
        TestRecord::a("mx1.acme.test", loopback(1)),
    ])
    .await
    .unwrap();

    let receipt = mailer(&dns, sink.port()).send(&email_to(1, TO)).await.unwrap();

    assert_eq!(receipt.reply.code, 250);
    assert_eq!(receipt.remote, format!("mx1.acme.test[127.0.0.1]:{}", sink.port()));
    assert_eq!(receipt.tls, Some(ConnectionTls::Plaintext), "the sink offers no STARTTLS");
    assert_eq!(sink.wait_for(1, WAIT).await.unwrap()[0].recipients, [TO]);
}

#[tokio::test]
async fn the_most_preferred_mx_gets_the_message_and_the_next_takes_over_when_it_is_down() {
    let (backup, primary) = two_sinks().await;
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 20, "backup.acme.test"),
        TestRecord::mx("acme.test", 10, "primary.acme.test"),
        TestRecord::a("backup.acme.test", loopback(1)),
        TestRecord::a("primary.acme.test", loopback(2)),
    ])
    .await
    .unwrap();
    let port = primary.port();
    let mailer = mailer(&dns, port);

    let first = mailer.send(&email_to(1, TO)).await.unwrap();
    primary.stop().await;
    let second = mailer.send(&email_to(2, TO)).await.unwrap();

    assert_eq!(first.remote, format!("primary.acme.test[127.0.0.2]:{port}"));
    assert_eq!(second.remote, format!("backup.acme.test[127.0.0.1]:{port}"));
    assert_eq!(backup.wait_for(1, WAIT).await.unwrap()[0].text().lines().nth(2), Some("Subject: Test 2"));
}

#[tokio::test]
async fn a_dead_first_mx_is_passed_over() {
    let sink = SmtpSink::start().await.unwrap();
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 10, "dead.acme.test"),
        TestRecord::mx("acme.test", 20, "live.acme.test"),
        // Nothing listens on 127.0.0.3.
        TestRecord::a("dead.acme.test", loopback(3)),
        TestRecord::a("live.acme.test", loopback(1)),
    ])
    .await
    .unwrap();

    let receipt = mailer(&dns, sink.port()).send(&email_to(1, TO)).await.unwrap();

    assert_eq!(receipt.remote, format!("live.acme.test[127.0.0.1]:{}", sink.port()));
}

#[tokio::test]
async fn an_mx_that_greets_with_4xx_is_passed_over() {
    let (second, first) = two_sinks().await;
    first.add_rule(Rule::reply(Stage::Greeting, 421, "4.3.2 too busy, try later"));
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 10, "mx1.acme.test"),
        TestRecord::mx("acme.test", 20, "mx2.acme.test"),
        TestRecord::a("mx1.acme.test", loopback(2)),
        TestRecord::a("mx2.acme.test", loopback(1)),
    ])
    .await
    .unwrap();

    let receipt = mailer(&dns, first.port()).send(&email_to(1, TO)).await.unwrap();

    assert!(receipt.remote.starts_with("mx2.acme.test"), "{}", receipt.remote);
    assert_eq!((first.message_count(), second.message_count()), (0, 1));
}

#[tokio::test]
async fn a_5xx_at_rcpt_is_final_and_no_other_mx_is_tried() {
    let (second, first) = two_sinks().await;
    first.add_rule(Rule::reply(Stage::Rcpt, 550, "5.1.1 user unknown"));
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 10, "mx1.acme.test"),
        TestRecord::mx("acme.test", 20, "mx2.acme.test"),
        TestRecord::a("mx1.acme.test", loopback(2)),
        TestRecord::a("mx2.acme.test", loopback(1)),
    ])
    .await
    .unwrap();

    let error = mailer(&dns, first.port()).send(&email_to(1, TO)).await.unwrap_err();

    let SendError::Rejected { reply, remote } = &error else { panic!("{error:?}") };
    assert_eq!(reply.to_string(), "550 5.1.1 user unknown");
    assert_eq!(remote, &format!("mx1.acme.test[127.0.0.2]:{}", first.port()));
    assert_eq!(second.connection_count(), 0);
}

#[tokio::test]
async fn when_every_mx_is_down_the_reason_names_each() {
    let sink = SmtpSink::start().await.unwrap();
    let port = sink.port();
    sink.stop().await; // nothing listens on this port on 127.0.0.3 or .4 anyway
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 10, "mx1.acme.test"),
        TestRecord::mx("acme.test", 20, "mx2.acme.test"),
        TestRecord::a("mx1.acme.test", loopback(3)),
        TestRecord::a("mx2.acme.test", loopback(4)),
    ])
    .await
    .unwrap();

    let error = mailer(&dns, port).send(&email_to(1, TO)).await.unwrap_err();

    let expected = format!(
        "no mail server of acme.test took the message: connection refused by mx1.acme.test[127.0.0.3]:{port}; \
         connection refused by mx2.acme.test[127.0.0.4]:{port}"
    );
    assert_eq!(error, SendError::Unreachable { reason: expected });
}

#[tokio::test]
async fn without_mx_records_the_domains_own_address_is_used() {
    let sink = SmtpSink::start().await.unwrap();
    let dns = TestDnsServer::start([TestRecord::a("acme.test", loopback(1))]).await.unwrap();

    let receipt = mailer(&dns, sink.port()).send(&email_to(1, TO)).await.unwrap();

    assert_eq!(receipt.remote, format!("acme.test[127.0.0.1]:{}", sink.port()));
}

#[tokio::test]
async fn a_null_mx_means_the_domain_takes_no_mail() {
    let sink = SmtpSink::start().await.unwrap();
    let dns = TestDnsServer::start([TestRecord::mx("acme.test", 0, "."), TestRecord::a("acme.test", loopback(1))])
        .await
        .unwrap();

    let error = mailer(&dns, sink.port()).send(&email_to(1, TO)).await.unwrap_err();

    assert!(matches!(&error, SendError::NoMailServer { reason } if reason.contains("null MX")), "{error:?}");
    assert_eq!(sink.connection_count(), 0);
}

#[tokio::test]
async fn a_domain_that_does_not_exist_takes_no_mail() {
    let dns = TestDnsServer::start([TestRecord::a("other.test", loopback(1))]).await.unwrap();

    let error = mailer(&dns, 2525).send(&email_to(1, TO)).await.unwrap_err();

    let expected = "the recipient domain acme.test does not exist (NXDOMAIN)";
    assert_eq!(error, SendError::NoMailServer { reason: expected.to_owned() });
}

#[tokio::test]
async fn a_domain_with_neither_mx_nor_address_takes_no_mail() {
    let dns = TestDnsServer::start([TestRecord::txt("acme.test", "v=spf1 -all")]).await.unwrap();

    let error = mailer(&dns, 2525).send(&email_to(1, TO)).await.unwrap_err();

    assert!(matches!(&error, SendError::NoMailServer { reason } if reason.contains("no MX records")), "{error:?}");
}

#[tokio::test]
async fn an_unanswered_dns_query_is_worth_retrying() {
    // A UDP socket that never answers, and no TCP listener on its port.
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let settings = Settings { timeout: Duration::from_millis(200), attempts: 1 };
    let resolver = HickoryDns::new(Upstream::Server(silent.local_addr().unwrap()), settings).unwrap();
    let mailer = MxMailer::new(Arc::new(resolver), MxConfig { port: 2525, ..MxConfig::default() }).unwrap();

    let error = mailer.send(&email_to(1, TO)).await.unwrap_err();

    let SendError::Unreachable { reason } = &error else { panic!("{error:?}") };
    assert!(reason.starts_with("cannot look up the mail servers of acme.test"), "{reason}");
}

/// A sink with `tls` on 127.0.0.1 as acme.test's one MX host, and the DNS server saying so.
async fn acme_mx(tls: SinkTls) -> (SmtpSink, TestDnsServer) {
    let sink = sink_at(loopback(1), 0, tls).await.unwrap();
    let records = [TestRecord::mx("acme.test", 10, "mx.acme.test"), TestRecord::a("mx.acme.test", loopback(1))];
    (sink, TestDnsServer::start(records).await.unwrap())
}

#[tokio::test]
async fn starttls_is_used_whatever_the_certificate() {
    let (sink, dns) = acme_mx(SinkTls::StartTls).await;

    // The sink's certificate is for sink.tidings.test, from a CA nobody trusts.
    let receipt = mailer(&dns, sink.port()).send(&email_to(1, TO)).await.unwrap();

    assert!(sink.wait_for(1, WAIT).await.unwrap()[0].tls);
    assert_eq!(
        receipt.tls,
        Some(ConnectionTls::Tls { certificate: CertificateCheck::NotVerified, version: Some(TlsVersion::Tls1_3) }),
        "accepted unchecked"
    );
}

#[tokio::test]
async fn a_failed_starttls_is_retried_in_plaintext() {
    let (sink, dns) = acme_mx(SinkTls::BrokenStartTls).await;

    let receipt = mailer(&dns, sink.port()).send(&email_to(1, TO)).await.unwrap();

    assert!(!sink.wait_for(1, WAIT).await.unwrap()[0].tls);
    assert_eq!(sink.connection_count(), 2);
    assert_eq!(receipt.tls, Some(ConnectionTls::Plaintext));
}

#[tokio::test]
async fn a_host_whose_handshake_failed_gets_plaintext_without_starttls_for_a_while() {
    let (sink, dns) = acme_mx(SinkTls::BrokenStartTls).await;
    // One message per connection, so that each delivery opens its own.
    let pool = PoolSettings { max_messages_per_connection: 1, ..PoolSettings::default() };
    let config =
        MxConfig { port: sink.port(), timeouts: quick_timeouts(), allow_private: true, pool, ..MxConfig::default() };
    let mailer = mailer_with(&dns, config);

    mailer.send(&email_to(1, TO)).await.unwrap();
    assert_eq!(sink.connection_count(), 2, "the failed handshake, then plaintext");
    let receipt = mailer.send(&email_to(2, TO)).await.unwrap();

    assert_eq!(sink.connection_count(), 3, "one plaintext connection, no STARTTLS attempt");
    assert_eq!(receipt.tls, Some(ConnectionTls::Plaintext));
    assert_eq!(sink.wait_for(2, WAIT).await.unwrap().len(), 2);
}

#[tokio::test]
async fn connections_to_one_mx_are_capped_and_reused() {
    let sink = SmtpSink::start().await.unwrap();
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 10, "mx.acme.test"),
        TestRecord::a("mx.acme.test", loopback(1)),
    ])
    .await
    .unwrap();
    let pool = PoolSettings { max_connections: 2, ..PoolSettings::default() };
    let mailer = Arc::new(mailer_with(
        &dns,
        MxConfig { port: sink.port(), timeouts: quick_timeouts(), pool, allow_private: true, ..MxConfig::default() },
    ));
    sink.hold(Stage::Message);

    let sends: Vec<_> = (1..=6)
        .map(|n| {
            let mailer = Arc::clone(&mailer);
            tokio::spawn(async move { mailer.send(&email_to(n, TO)).await })
        })
        .collect();
    sink.wait_for_held(2, WAIT).await.unwrap();
    assert_eq!(sink.open_connections(), 2, "two deliveries in flight, the other four waiting for a slot");
    sink.release();
    for send in sends {
        send.await.unwrap().unwrap();
    }

    assert_eq!(sink.wait_for(6, WAIT).await.unwrap().len(), 6);
    assert_eq!((sink.connection_count(), sink.max_concurrent_connections()), (2, 2));
}

#[tokio::test]
async fn one_connection_to_an_mx_carries_several_messages() {
    let sink = SmtpSink::start().await.unwrap();
    let dns = TestDnsServer::start([
        TestRecord::mx("acme.test", 10, "mx.acme.test"),
        TestRecord::a("mx.acme.test", loopback(1)),
    ])
    .await
    .unwrap();
    let mailer = mailer(&dns, sink.port());

    for n in 1..=3 {
        mailer.send(&email_to(n, TO)).await.unwrap();
    }

    assert_eq!((sink.message_count(), sink.connection_count()), (3, 1));
}
