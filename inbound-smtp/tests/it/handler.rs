//! What the sender is told follows what the handler did, and only the accepted domain is
//! taken; the counters follow both.

use crate::common::{Client, RETURN_PATH, TestServer, VOUCHED, settings};
use tidings_core::email::EmailAddress;
use tidings_inbound_smtp::{HandlerError, InboundSettings, StatsSnapshot};

async fn send_report(client: &mut Client) -> u16 {
    client.command("MAIL FROM:<>", 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;
    client.command("DATA", 354).await;
    client.send("Subject: report\r\n\r\nbody\r\n.\r\n").await;
    client.reply().await.code
}

#[tokio::test]
async fn a_temporary_handler_failure_is_451_so_the_sender_retries() {
    let server = TestServer::start(settings()).await;
    server.handler.fail_with(HandlerError::Temporary("store down".into()));
    let mut client = server.greeted_client().await;

    assert_eq!(send_report(&mut client).await, 451);
    // The transaction is over either way; the session is not.
    client.command("DATA", 503).await;
    assert_eq!(server.stats.snapshot().handler_errors, 1);
}

#[tokio::test]
async fn a_permanent_handler_failure_is_554() {
    let server = TestServer::start(settings()).await;
    server.handler.fail_with(HandlerError::Permanent("not a report".into()));
    let mut client = server.greeted_client().await;

    assert_eq!(send_report(&mut client).await, 554);
    assert_eq!(server.stats.snapshot().messages_accepted, 0);
}

#[tokio::test]
async fn another_domain_is_relaying_denied_while_ours_works_in_the_same_session() {
    let server = TestServer::start(settings()).await;
    let mut client = server.greeted_client().await;
    client.command("MAIL FROM:<>", 250).await;

    let reply = client.command("RCPT TO:<victim@elsewhere.example>", 550).await;
    assert!(reply.lines[0].starts_with("5.7.1"));
    client.command("RCPT TO:<someone@sub.bounces.example>", 550).await;
    client.command("RCPT TO:<bounces+01ABC@BOUNCES.example>", 250).await;
    client.command("DATA", 354).await;
    client.send("x\r\n.\r\n").await;
    client.expect(250).await;

    let (envelope, _) = server.handler.received().remove(0);
    assert_eq!(envelope.recipients, vec![EmailAddress::parse("bounces+01ABC@bounces.example").unwrap()]);
}

#[tokio::test]
async fn an_address_off_the_domain_is_taken_only_when_the_handler_vouches_for_it() {
    // A sending domain's own return path (`bounces.<domain>`): the handler proves it is ours.
    let server = TestServer::start(settings()).await;
    let mut client = server.greeted_client().await;
    client.command("MAIL FROM:<>", 250).await;
    let reply = client.command("RCPT TO:<other@bounces.acme.example>", 550).await;
    assert!(reply.lines[0].starts_with("5.7.1"), "{reply:?}");
    client.command("RCPT TO:<down@bounces.acme.example>", 451).await;
    client.command(&format!("RCPT TO:<{VOUCHED}>"), 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;
    client.command("DATA", 354).await;
    client.send("x\r\n.\r\n").await;
    client.expect(250).await;

    let (envelope, _) = server.handler.received().remove(0);
    let expected: Vec<EmailAddress> = [VOUCHED, RETURN_PATH].iter().map(|a| EmailAddress::parse(a).unwrap()).collect();
    assert_eq!(envelope.recipients, expected);
    // Its own domain is taken whole without asking.
    let asked: Vec<String> = server.handler.asked.lock().unwrap().iter().map(ToString::to_string).collect();
    assert_eq!(asked, ["other@bounces.acme.example", "down@bounces.acme.example", VOUCHED]);
}

#[tokio::test]
async fn without_a_domain_of_its_own_only_vouched_addresses_are_taken() {
    let mut settings = InboundSettings::reports(None);
    settings.hostname = "mx.test".to_owned();
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;
    client.command("MAIL FROM:<>", 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 550).await;
    client.command("RCPT TO:<Postmaster>", 550).await;
    client.command(&format!("RCPT TO:<{VOUCHED}>"), 250).await;
}

#[tokio::test]
async fn the_counters_add_up_over_several_sessions() {
    let server = TestServer::start(settings()).await;
    for _ in 0..2 {
        let mut client = server.greeted_client().await;
        assert_eq!(send_report(&mut client).await, 250);
        client.command("MAIL FROM:<>", 250).await;
        client.command("RCPT TO:<x@elsewhere.example>", 550).await;
        client.command("QUIT", 221).await;
    }
    server.handler.fail_with(HandlerError::Temporary("busy".into()));
    let mut client = server.greeted_client().await;
    assert_eq!(send_report(&mut client).await, 451);

    assert_eq!(
        server.stats.snapshot(),
        StatsSnapshot {
            connections: 3,
            messages_accepted: 2,
            rejected_recipients: 2,
            handler_errors: 1,
            ..StatsSnapshot::default()
        }
    );
}
