//! Receivers that misbehave: silent, slow, endless or absent. The sender always returns.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::common::{TestResult, dns, request, sender};
use tidings_core::ports::{MAX_BODY_PREFIX, WebhookResponse, WebhookSender};
use tidings_webhook_http::SenderSettings;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

fn with_timeout(timeout: Duration) -> SenderSettings {
    SenderSettings { allow_private: true, timeout, ..SenderSettings::default() }
}

/// Reads the request head (and whatever came with it) so the answer follows the request.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut seen = Vec::new();
    let mut buffer = [0; 4096];
    while !seen.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        seen.extend_from_slice(&buffer[..read]);
    }
    Ok(())
}

/// A raw receiver on 127.0.0.1 that answers its first connection with a chunked 200 whose
/// chunks (`chunk`, every `pause`) never end.
async fn endless_body(chunk: &'static [u8], pause: Duration) -> std::io::Result<(u16, JoinHandle<()>)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    let task = tokio::spawn(async move {
        let Ok((mut stream, _)) = listener.accept().await else { return };
        if read_head(&mut stream).await.is_err() {
            return;
        }
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
        if stream.write_all(head).await.is_err() {
            return;
        }
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
        while stream.write_all(&framed).await.is_ok() {
            tokio::time::sleep(pause).await;
        }
    });
    Ok((port, task))
}

#[tokio::test]
async fn a_receiver_that_never_answers_times_out() -> TestResult {
    let dns = dns().await?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });

    let started = Instant::now();
    let response = sender(&dns, with_timeout(Duration::from_millis(300)))
        .post(&request(&format!("http://127.0.0.1:{port}/")))
        .await;

    assert_eq!(response, WebhookResponse::Failed { reason: "timeout after 300ms".into() });
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    silent.abort();
    Ok(())
}

/// Decision: the head arrived in time, so the status is reported with the prefix read before
/// the deadline (see the crate docs).
#[tokio::test]
async fn a_body_that_trickles_forever_is_answered_with_what_arrived_by_the_deadline() -> TestResult {
    let dns = dns().await?;
    let (port, server) = endless_body(b"a", Duration::from_millis(50)).await?;

    let started = Instant::now();
    let response = sender(&dns, with_timeout(Duration::from_millis(500)))
        .post(&request(&format!("http://127.0.0.1:{port}/")))
        .await;

    let WebhookResponse::Answered { status, body_prefix, .. } = response else { panic!("{response:?}") };
    assert_eq!(status, 200);
    assert!(!body_prefix.is_empty() && body_prefix.len() < MAX_BODY_PREFIX, "{} bytes", body_prefix.len());
    assert!(body_prefix.bytes().all(|byte| byte == b'a'));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    server.abort();
    Ok(())
}

#[tokio::test]
async fn an_endless_body_is_read_only_up_to_the_prefix() -> TestResult {
    let dns = dns().await?;
    let (port, server) = endless_body(&[b'z'; 700], Duration::ZERO).await?;

    let started = Instant::now();
    // A long timeout: the sender must stop at the prefix, not at the deadline.
    let response =
        sender(&dns, with_timeout(Duration::from_secs(30))).post(&request(&format!("http://127.0.0.1:{port}/"))).await;

    let WebhookResponse::Answered { status, body_prefix, .. } = response else { panic!("{response:?}") };
    assert_eq!(status, 200);
    assert_eq!(body_prefix, "z".repeat(MAX_BODY_PREFIX));
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    server.abort();
    Ok(())
}

#[tokio::test]
async fn a_closed_port_is_connection_refused() -> TestResult {
    let dns = dns().await?;
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?.local_addr()?.port();

    let response =
        sender(&dns, with_timeout(Duration::from_secs(5))).post(&request(&format!("http://127.0.0.1:{port}/"))).await;

    assert_eq!(response, WebhookResponse::Failed { reason: format!("connection refused (127.0.0.1:{port})") });
    Ok(())
}

#[tokio::test]
async fn a_receiver_that_hangs_up_without_answering_fails_readably() -> TestResult {
    let dns = dns().await?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    let rude = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = read_head(&mut stream).await;
            drop(stream);
        }
    });

    let response =
        sender(&dns, with_timeout(Duration::from_secs(5))).post(&request(&format!("http://127.0.0.1:{port}/"))).await;

    let WebhookResponse::Failed { reason } = response else { panic!("{response:?}") };
    assert!(reason.contains("connection closed"), "{reason}");
    rude.abort();
    Ok(())
}
