//! Every limit in `InboundSettings`, enforced with the reply the settings document.

use std::time::Duration;

use std::net::IpAddr;

use crate::common::{Client, RETURN_PATH, TestServer, settings};

async fn in_transaction(server: &TestServer) -> Client {
    let mut client = server.greeted_client().await;
    client.command("MAIL FROM:<>", 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;
    client
}

#[tokio::test]
async fn a_declared_size_over_the_limit_is_refused_at_mail() {
    let mut settings = settings();
    settings.max_message_bytes = 1000;
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;

    let reply = client.command("MAIL FROM:<> SIZE=1001", 552).await;

    assert!(reply.lines[0].starts_with("5.3.4"));
    client.command("MAIL FROM:<> SIZE=1000", 250).await;
    assert_eq!(server.stats.snapshot().too_big, 1);
}

#[tokio::test]
async fn data_over_the_limit_is_read_to_the_end_refused_and_the_session_goes_on() {
    let mut settings = settings();
    settings.max_message_bytes = 1000;
    let server = TestServer::start(settings).await;
    let mut client = in_transaction(&server).await;
    client.command("DATA", 354).await;

    // 2000 bytes, some in lines far over 1000 characters.
    client.send(format!("{}\r\n{}\r\n.\r\n", "a".repeat(1500), "b".repeat(496))).await;

    client.expect(552).await;
    client.command("RSET", 250).await;
    client.command("MAIL FROM:<>", 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;
    client.command("DATA", 354).await;
    client.send("small\r\n.\r\n").await;
    client.expect(250).await;
    let received = server.handler.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].1, b"small\r\n");
    assert_eq!(server.stats.snapshot().too_big, 1);
}

#[tokio::test]
async fn a_long_line_in_data_under_the_size_limit_is_kept() {
    let server = TestServer::start(settings()).await;
    let mut client = in_transaction(&server).await;
    client.command("DATA", 354).await;
    let long = "x".repeat(20_000);

    client.send(format!("{long}\r\n.\r\n")).await;

    client.expect(250).await;
    assert_eq!(server.handler.received()[0].1, format!("{long}\r\n").into_bytes());
}

#[tokio::test]
async fn a_command_line_over_the_limit_gets_500_and_the_next_one_works() {
    let mut settings = settings();
    settings.max_line_bytes = 64;
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;

    let reply = client.command(&format!("NOOP {}", "x".repeat(100)), 500).await;

    assert!(reply.lines[0].starts_with("5.5.2"));
    client.command("NOOP", 250).await;
}

#[tokio::test]
async fn recipients_beyond_the_limit_get_452() {
    let mut settings = settings();
    settings.max_recipients = 2;
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;
    client.command("MAIL FROM:<>", 250).await;
    client.command("RCPT TO:<bounces+a@bounces.example>", 250).await;
    client.command("RCPT TO:<bounces+b@bounces.example>", 250).await;

    let reply = client.command("RCPT TO:<bounces+c@bounces.example>", 452).await;

    assert!(reply.lines[0].starts_with("4.5.3"));
    client.command("DATA", 354).await;
    client.send("x\r\n.\r\n").await;
    client.expect(250).await;
    assert_eq!(server.handler.received()[0].0.recipients.len(), 2);
    assert_eq!(server.stats.snapshot().rejected_recipients, 1);
}

#[tokio::test]
async fn too_many_bad_commands_close_the_session_with_421() {
    let mut settings = settings();
    settings.max_errors = 3;
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;
    client.command("FROB", 500).await;
    client.command("MAIL FROM:broken", 501).await;

    client.command("DATA", 503).await;

    client.expect(421).await;
    client.expect_closed().await;
}

#[tokio::test]
async fn an_idle_client_gets_421_and_is_closed() {
    let mut settings = settings();
    settings.command_timeout = Duration::from_millis(200);
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;

    let reply = client.expect(421).await;

    assert!(reply.lines[0].starts_with("4.4.2"));
    client.expect_closed().await;
    assert_eq!(server.stats.snapshot().timeouts, 1);
}

#[tokio::test]
async fn data_that_stalls_past_the_data_timeout_gets_421() {
    let mut settings = settings();
    settings.data_timeout = Duration::from_millis(200);
    let server = TestServer::start(settings).await;
    let mut client = in_transaction(&server).await;
    client.command("DATA", 354).await;

    client.send("partial line").await;

    client.expect(421).await;
    client.expect_closed().await;
    assert!(server.handler.received().is_empty());
    assert_eq!(server.stats.snapshot().timeouts, 1);
}

#[tokio::test]
async fn a_connection_beyond_the_limit_waits_for_a_place() {
    let mut settings = settings();
    settings.max_connections = 2;
    // Neither session is idle long enough to be evicted (see the eviction tests below).
    settings.evict_idle_after = Duration::from_secs(3600);
    let server = TestServer::start(settings).await;
    let mut first = server.client().await;
    let _second = server.client().await;

    let mut third = Client::connect(server.addr).await;
    let greeting = tokio::time::timeout(Duration::from_millis(300), third.try_reply()).await;
    assert!(greeting.is_err(), "no greeting while both places are taken: {greeting:?}");

    // A place frees up when a session ends, and goes to the waiting client.
    first.command("QUIT", 221).await;
    first.expect_closed().await;
    third.expect(220).await;
    third.command("NOOP", 250).await;
    assert_eq!(server.stats.snapshot().connections, 3);
}

fn loopback(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// A client from `source` in a transaction, having been sent `354` for its data.
async fn sending_data(server: &TestServer, source: IpAddr) -> Client {
    let mut client = Client::connect_from(source, server.addr).await;
    client.expect(220).await;
    client.command("EHLO client.example", 250).await;
    client.command("MAIL FROM:<>", 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;
    client.command("DATA", 354).await;
    client
}

#[tokio::test]
async fn one_client_gets_at_most_its_sessions_and_another_is_served() {
    let mut settings = settings();
    settings.max_connections_per_ip = 2;
    let server = TestServer::start(settings).await;
    let mut first = Client::connect_from(loopback(1), server.addr).await;
    first.expect(220).await;
    let mut second = Client::connect_from(loopback(1), server.addr).await;
    second.expect(220).await;

    let mut third = Client::connect_from(loopback(1), server.addr).await;
    let reply = third.expect(421).await;
    assert!(reply.lines[0].starts_with("4.7.0"), "{reply:?}");
    third.expect_closed().await;
    let mut other = Client::connect_from(loopback(2), server.addr).await;
    other.expect(220).await;

    second.command("QUIT", 221).await;
    second.expect_closed().await;
    let mut again = Client::connect_from(loopback(1), server.addr).await;
    again.expect(220).await;
    first.command("NOOP", 250).await;
    assert_eq!(server.stats.snapshot().refused_connections, 1);
}

#[tokio::test]
async fn at_the_cap_the_idlest_session_is_closed_to_make_room() {
    let mut settings = settings();
    settings.max_connections = 2;
    settings.evict_idle_after = Duration::from_millis(200);
    let server = TestServer::start(settings).await;
    let mut oldest = server.client().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut newer = server.client().await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut newcomer = Client::connect(server.addr).await;

    newcomer.expect(220).await;
    let reply = oldest.expect(421).await;
    assert!(reply.lines[0].starts_with("4.4.2"), "{reply:?}");
    oldest.expect_closed().await;
    newer.command("NOOP", 250).await;
    assert_eq!(server.stats.snapshot().evicted, 1);
}

#[tokio::test]
async fn a_client_holding_its_share_of_message_data_cannot_take_more() {
    let mut settings = settings();
    settings.max_message_bytes = 1024 * 1024;
    settings.max_data_bytes_in_flight = 4 * 1024 * 1024;
    assert_eq!(settings.data_share(), 1024 * 1024, "a quarter of the budget");
    let server = TestServer::start(settings).await;
    let mut first = sending_data(&server, loopback(1)).await;
    assert!(first.try_send(&[b'x'; 900_000]).await);
    let mut second = sending_data(&server, loopback(1)).await;

    // The second message of the same client passes its share of 1 MiB part-way.
    let mut refused = false;
    for _ in 0..4 {
        if !second.try_send(&[b'y'; 100_000]).await {
            break;
        }
        if let Some(reply) = tokio::time::timeout(Duration::from_millis(100), second.try_reply()).await.ok().flatten() {
            assert_eq!(reply.code, 421, "{reply:?}");
            assert!(reply.lines[0].contains("from your address"), "{reply:?}");
            refused = true;
            break;
        }
    }
    if !refused {
        let reply = second.expect(421).await;
        assert!(reply.lines[0].contains("from your address"), "{reply:?}");
    }

    // Another client still has room, and the first client's message completes.
    let mut other = sending_data(&server, loopback(2)).await;
    other.send("small\r\n.\r\n").await;
    other.expect(250).await;
    first.send("\r\n.\r\n").await;
    first.expect(250).await;
    assert_eq!(server.stats.snapshot().data_refused, 1);
}

#[tokio::test]
async fn a_stalled_holder_of_message_data_is_closed_for_a_message_that_needs_the_budget() {
    let mut settings = settings();
    settings.max_message_bytes = 1024 * 1024;
    settings.max_data_bytes_in_flight = 1024 * 1024;
    settings.evict_idle_after = Duration::from_millis(200);
    let server = TestServer::start(settings).await;
    let mut stalled = sending_data(&server, loopback(1)).await;
    assert!(stalled.try_send(&[b'x'; 1_000_000]).await);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut report = sending_data(&server, loopback(2)).await;
    report.send(format!("{}\r\n.\r\n", "r".repeat(200_000))).await;

    report.expect(250).await;
    let reply = stalled.expect(421).await;
    assert!(reply.lines[0].starts_with("4.4.2"), "{reply:?}");
    let received = server.handler.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].1.len(), 200_002);
    assert_eq!(server.stats.snapshot().evicted, 1);
}
