//! The command grammar and sequencing over a raw socket: pipelining, dot-stuffing, RSET,
//! out-of-order commands, QUIT, VRFY, HELP and the EHLO extensions.

use crate::common::{RETURN_PATH, TestServer, settings};

#[tokio::test]
async fn the_greeting_and_ehlo_name_our_host_and_extensions() {
    let server = TestServer::start(settings()).await;
    let mut client = crate::common::Client::connect(server.addr).await;
    let greeting = client.expect(220).await;
    assert!(greeting.lines[0].starts_with("mx.test "));

    let ehlo = client.command("EHLO client.example", 250).await;

    assert_eq!(ehlo.lines[0], "mx.test");
    for extension in ["PIPELINING", "8BITMIME", "SIZE 10485760", "ENHANCEDSTATUSCODES"] {
        assert!(ehlo.lines.iter().any(|l| l == extension), "{extension} missing from {ehlo:?}");
    }
    assert!(!ehlo.lines.iter().any(|l| l.starts_with("STARTTLS") || l.starts_with("AUTH")));
    client.command("HELO client.example", 250).await;
}

#[tokio::test]
async fn a_pipelined_transaction_in_one_write_gets_every_reply_in_order() {
    let server = TestServer::start(settings()).await;
    let mut client = server.client().await;

    client
        .send(format!(
            "EHLO a.example\r\nMAIL FROM:<>\r\nRCPT TO:<{RETURN_PATH}>\r\nRCPT TO:<x@other.example>\r\nDATA\r\n"
        ))
        .await;
    for code in [250, 250, 250, 550, 354] {
        client.expect(code).await;
    }
    client.send("Subject: hi\r\n\r\nbody\r\n.\r\nNOOP\r\nQUIT\r\n").await;
    for code in [250, 250, 221] {
        client.expect(code).await;
    }
    client.expect_closed().await;

    let (envelope, raw) = server.handler.received().remove(0);
    assert_eq!(envelope.helo, "a.example");
    assert_eq!(envelope.recipients.len(), 1);
    assert_eq!(raw, b"Subject: hi\r\n\r\nbody\r\n");
}

#[tokio::test]
async fn dot_stuffed_lines_lose_exactly_one_dot() {
    let server = TestServer::start(settings()).await;
    let mut client = server.greeted_client().await;
    client.command("MAIL FROM:<>", 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;
    client.command("DATA", 354).await;

    client.send("..x\r\n...\r\nmiddle..dots\r\n..\r\n.\r\n").await;

    client.expect(250).await;
    assert_eq!(server.handler.received()[0].1, b".x\r\n..\r\nmiddle..dots\r\n.\r\n");
}

#[tokio::test]
async fn rset_clears_the_transaction() {
    let server = TestServer::start(settings()).await;
    let mut client = server.greeted_client().await;
    client.command("MAIL FROM:<a@remote.example>", 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;

    client.command("RSET", 250).await;

    client.command("DATA", 503).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 503).await;
    client.command("MAIL FROM:<b@remote.example>", 250).await;
}

#[tokio::test]
async fn commands_out_of_order_get_503() {
    let server = TestServer::start(settings()).await;
    let mut client = server.client().await;
    client.command("MAIL FROM:<>", 503).await; // before EHLO
    client.command("EHLO a.example", 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 503).await;
    client.command("DATA", 503).await;
    client.command("MAIL FROM:<>", 250).await;
    client.command("MAIL FROM:<>", 503).await; // nested
    client.command("DATA", 503).await; // no recipient yet
    client.command(&format!("RCPT TO:<{RETURN_PATH}>"), 250).await;
    client.command("DATA", 354).await;
}

#[tokio::test]
async fn quit_says_goodbye_and_closes() {
    let server = TestServer::start(settings()).await;
    let mut client = server.client().await;

    client.command("QUIT", 221).await;

    client.expect_closed().await;
}

#[tokio::test]
async fn vrfy_help_noop_and_unoffered_verbs() {
    let server = TestServer::start(settings()).await;
    let mut client = server.greeted_client().await;
    client.command("VRFY postmaster", 252).await;
    client.command("HELP", 214).await;
    client.command("NOOP", 250).await;
    client.command("STARTTLS", 502).await;
    client.command("AUTH PLAIN AGFiYwBkZWY=", 502).await;
    client.command("FROB", 500).await;
}

#[tokio::test]
async fn malformed_paths_get_501_without_echoing_them() {
    let server = TestServer::start(settings()).await;
    let mut client = server.greeted_client().await;

    let reply = client.command("MAIL FROM:no-brackets@remote.example", 501).await;
    assert!(reply.lines[0].starts_with("5.1.3"));
    assert!(!reply.lines[0].contains("no-brackets"));
    client.command("MAIL FROM: <@relay.example:a@remote.example>", 250).await;
    client.command("RCPT TO:<not an address>", 501).await;
    client.command("RCPT TO:<Postmaster>", 250).await;
    client.command(&format!("RCPT TO:<{RETURN_PATH}> NOTIFY=NEVER"), 555).await;
}
