//! A real SMTP client (lettre) delivers a bounce report: the handler gets the exact bytes
//! and the envelope, null sender included.

use crate::common::{RETURN_PATH, TestServer, dsn, settings};
use lettre::address::Envelope as LettreEnvelope;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use tidings_core::email::EmailAddress;

fn transport(server: &TestServer) -> AsyncSmtpTransport<Tokio1Executor> {
    AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(server.addr.ip().to_string())
        .port(server.addr.port())
        .build()
}

#[tokio::test]
async fn a_bounce_from_the_null_sender_reaches_the_handler_byte_for_byte() {
    let server = TestServer::start(settings()).await;
    let envelope = LettreEnvelope::new(None, vec![RETURN_PATH.parse().unwrap()]).unwrap();
    let report = dsn();

    let response = transport(&server).send_raw(&envelope, report.as_bytes()).await.unwrap();

    assert_eq!(response.code().to_string(), "250");
    let received = server.handler.received();
    assert_eq!(received.len(), 1);
    let (got, raw) = &received[0];
    assert_eq!(got.mail_from, None);
    assert_eq!(got.recipients, vec![EmailAddress::parse(RETURN_PATH).unwrap()]);
    assert_eq!(got.peer.ip(), server.addr.ip());
    assert!(!got.helo.is_empty());
    // lettre ends the data with CRLF . CRLF; the CRLF belongs to the message (RFC 5321 §4.1.1.4).
    assert_eq!(String::from_utf8(raw.clone()).unwrap(), format!("{report}\r\n"));
    assert!(raw.windows(3).any(|w| w == b"\n.T"), "the leading dot was unstuffed once, not removed");
    assert_eq!(server.stats.snapshot().messages_accepted, 1);
}

#[tokio::test]
async fn a_complaint_with_a_sender_and_a_mixed_case_domain_is_accepted() {
    let server = TestServer::start(settings()).await;
    let to = "bounces+01hzxq5ab3kjv7m2c9d8e6f4g0@Bounces.EXAMPLE";
    let envelope = LettreEnvelope::new(Some("fbl@isp.example".parse().unwrap()), vec![to.parse().unwrap()]).unwrap();
    let report = "Content-Type: multipart/report; report-type=feedback-report\r\n\r\nFeedback-Type: abuse";

    transport(&server).send_raw(&envelope, report.as_bytes()).await.unwrap();

    let (got, raw) = server.handler.received().remove(0);
    assert_eq!(got.mail_from, Some(EmailAddress::parse("fbl@isp.example").unwrap()));
    assert_eq!(got.recipients[0].domain().as_str(), "bounces.example");
    assert_eq!(raw, format!("{report}\r\n").into_bytes());
}
