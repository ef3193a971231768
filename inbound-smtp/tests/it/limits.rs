//! Every limit in `InboundSettings`, enforced with the reply the settings document.

use std::net::IpAddr;
use std::time::Duration;

use tidings_inbound_smtp::HandlerError;

use crate::common::{Client, RETURN_PATH, Reply, TestServer, settings};

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

/// A whole report from `MAIL` to the final dot: the code of the reply to `MAIL` if it is not
/// `250`, else the reply to the data.
async fn try_report(client: &mut Client) -> Reply {
    let reply = client.command_reply("MAIL FROM:<>").await;
    if reply.code != 250 {
        return reply;
    }
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;
    client.command("DATA", 354).await;
    client.send("Subject: report\r\n\r\nbody\r\n.\r\n").await;
    client.reply().await
}

async fn greeted_from(server: &TestServer, source: IpAddr) -> Client {
    let mut client = Client::connect_from(source, server.addr).await;
    client.expect(220).await;
    client.command("EHLO client.example", 250).await;
    client
}

fn assert_too_many_messages(reply: &Reply) {
    assert_eq!(reply.code, 450, "{reply:?}");
    assert_eq!(reply.lines, ["4.7.1 Too many messages from your address, try again later"]);
}

#[tokio::test]
async fn a_client_over_its_messages_per_window_gets_450_at_mail_on_a_new_connection_too() {
    let mut settings = settings();
    settings.max_messages_per_client = 2;
    // Long enough that no stall of the test can let the window pass.
    settings.message_window = Duration::from_secs(3600);
    settings.max_errors = 2;
    let server = TestServer::start(settings).await;
    let mut first = greeted_from(&server, loopback(1)).await;
    assert_eq!(try_report(&mut first).await.code, 250);
    assert_eq!(try_report(&mut first).await.code, 250);

    assert_too_many_messages(&try_report(&mut first).await);

    let mut again = greeted_from(&server, loopback(1)).await;
    assert_too_many_messages(&again.command_reply("MAIL FROM:<bounces@remote.example>").await);
    // Each refusal is a failed command: the second (max_errors) ends the session.
    assert_too_many_messages(&again.command_reply("MAIL FROM:<>").await);
    let reply = again.expect(421).await;
    assert!(reply.lines[0].starts_with("4.7.0"), "{reply:?}");
    again.expect_closed().await;
    let mut other = greeted_from(&server, loopback(2)).await;
    assert_eq!(try_report(&mut other).await.code, 250, "another client address is unaffected");
    first.command("NOOP", 250).await;
    assert_eq!(server.handler.received().len(), 3);
    let stats = server.stats.snapshot();
    assert_eq!((stats.too_many_messages, stats.messages_accepted), (3, 3));
}

#[tokio::test]
async fn only_accepted_messages_use_up_the_allowance() {
    let mut settings = settings();
    settings.max_messages_per_client = 2;
    settings.message_window = Duration::from_secs(3600);
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;
    for _ in 0..3 {
        client.command("MAIL FROM:<>", 250).await;
        client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;
        client.command("RSET", 250).await;
    }
    server.handler.fail_with(HandlerError::Temporary("store down".into()));
    assert_eq!(try_report(&mut client).await.code, 451);
    *server.handler.answer.lock().unwrap() = None;

    assert_eq!(try_report(&mut client).await.code, 250);
    assert_eq!(try_report(&mut client).await.code, 250);
    assert_too_many_messages(&try_report(&mut client).await);
}

#[tokio::test]
async fn after_the_window_a_limited_client_is_accepted_again() {
    let mut settings = settings();
    settings.max_messages_per_client = 2;
    let window = Duration::from_millis(300);
    settings.message_window = window;
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;

    // The limit binds: a refusal comes within a few messages (unless the machine stalls for
    // a whole window between every two of them, which only delays it).
    let mut refused = false;
    for _ in 0..20 {
        let reply = try_report(&mut client).await;
        if reply.code != 250 {
            assert_too_many_messages(&reply);
            refused = true;
            break;
        }
    }
    assert!(refused, "never refused");
    tokio::time::sleep(2 * window).await;

    assert_eq!(try_report(&mut client).await.code, 250);
}

fn assert_session_time(reply: &Reply) {
    assert_eq!(reply.code, 421, "{reply:?}");
    assert_eq!(reply.lines, ["4.4.2 Session time limit reached, closing connection"]);
}

#[tokio::test]
async fn a_session_past_its_time_gets_421_at_its_next_command() {
    let mut settings = settings();
    settings.max_session_time = Duration::from_millis(500);
    let server = TestServer::start(settings).await;
    let mut client = server.client().await;
    tokio::time::sleep(Duration::from_millis(800)).await;

    // The server may have said it already, at the deadline; the reply is the same.
    let _ = client.try_send(b"NOOP\r\n").await;

    assert_session_time(&client.reply().await);
    client.expect_closed().await;
    let stats = server.stats.snapshot();
    assert_eq!((stats.session_time_exceeded, stats.timeouts), (1, 0));
}

#[tokio::test]
async fn a_client_busy_with_commands_is_still_closed_at_its_time() {
    let mut settings = settings();
    settings.max_session_time = Duration::from_millis(500);
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;

    let mut closed = false;
    for _ in 0..200 {
        if !client.try_send(b"NOOP\r\n").await {
            break;
        }
        let reply = client.reply().await;
        if reply.code != 250 {
            assert_session_time(&reply);
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert!(closed, "still served after 10 s");
    client.expect_closed().await;
    assert_eq!(server.stats.snapshot().session_time_exceeded, 1);
}

#[tokio::test]
async fn message_data_trickled_past_the_session_time_is_closed() {
    let mut settings = settings();
    settings.max_session_time = Duration::from_millis(500);
    let server = TestServer::start(settings).await;
    let mut client = in_transaction(&server).await;
    client.command("DATA", 354).await;

    // A byte every 50 ms: well within the 10 min data timeout, forever.
    let mut reply = None;
    for _ in 0..200 {
        if !client.try_send(b"x").await {
            break;
        }
        if let Ok(answer) = tokio::time::timeout(Duration::from_millis(50), client.try_reply()).await {
            reply = answer;
            break;
        }
    }
    let reply = match reply {
        Some(reply) => reply,
        None => client.reply().await,
    };

    assert_session_time(&reply);
    client.expect_closed().await;
    assert!(server.handler.received().is_empty());
    let stats = server.stats.snapshot();
    assert_eq!((stats.session_time_exceeded, stats.timeouts), (1, 0));
}
