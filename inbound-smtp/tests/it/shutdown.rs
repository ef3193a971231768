//! Stopping the listener: idle sessions are told 421, new connections are refused, and a
//! session stuck past the grace period does not keep `serve` alive.

use std::time::Duration;

use crate::common::{TestServer, settings};
use tokio::net::TcpStream;

#[tokio::test]
async fn shutdown_tells_idle_sessions_421_and_stops_accepting() {
    let server = TestServer::start(settings()).await;
    let mut client = server.greeted_client().await;
    let addr = server.addr;

    server.shut_down().await;

    let reply = client.expect(421).await;
    assert!(reply.lines[0].starts_with("4.3.2"));
    client.expect_closed().await;
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting after shutdown");
}

#[tokio::test]
async fn a_session_stuck_in_data_is_dropped_after_the_grace_period() {
    let mut settings = settings();
    settings.shutdown_grace = Duration::from_millis(200);
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;
    client.command("MAIL FROM:<>", 250).await;
    client.command("RCPT TO:<bounces+x@bounces.example>", 250).await;
    client.command("DATA", 354).await;
    client.send("half a message").await;

    server.shut_down().await;

    assert!(client.try_reply().await.is_none(), "no 250 for a message that never ended");
}
