//! `HttpFileFetcher`: a file fetched from a real server on loopback when private targets are
//! allowed; refused by the SSRF guard (no connection made) when they are not; and every other
//! way a fetch can go wrong answered as the port's error, never more than the limit held.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use tidings_core::ports::{FetchError, FileFetcher};
use tidings_dns::HickoryDns;
use tidings_dns::testing::TestDnsServer;
use tidings_webhook_http::{FetcherSettings, HttpFileFetcher};
use tokio::net::TcpListener;

use crate::common::{Receiver, TestResult, assert_no_connection, dns, reply};

fn fetcher(dns: &TestDnsServer, allow_private: bool, timeout: Duration) -> HttpFileFetcher {
    let resolver = HickoryDns::with_server(dns.addr()).expect("resolver");
    let settings = FetcherSettings { allow_private, timeout, ..FetcherSettings::default() };
    HttpFileFetcher::new(Arc::new(resolver), settings).expect("fetcher")
}

#[tokio::test]
async fn a_file_on_loopback_is_fetched_when_private_targets_are_allowed() -> TestResult {
    let dns = dns().await?;
    let server = Receiver::start(|| reply(200, &[("content-type", "text/plain; charset=utf-8")], "the file\n")).await?;
    let fetched = fetcher(&dns, true, Duration::from_secs(5))
        .fetch(&format!("http://hooks.test:{}/files/a.txt", server.port()), 1024)
        .await?;
    assert_eq!(fetched.bytes, b"the file\n");
    assert_eq!(fetched.content_type.as_deref(), Some("text/plain"));
    let seen = server.requests();
    assert_eq!((seen[0].method.as_str(), seen[0].path.as_str()), ("GET", "/files/a.txt"));
    Ok(())
}

#[tokio::test]
async fn a_private_address_is_refused_without_a_connection_unless_allowed() -> TestResult {
    let dns = dns().await?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    let guarded = fetcher(&dns, false, Duration::from_secs(5));
    for url in [format!("https://hooks.test:{port}/a.pdf"), format!("https://127.0.0.1:{port}/a.pdf")] {
        match guarded.fetch(&url, 1024).await {
            Err(FetchError::Refused(why)) => assert!(why.contains("127.0.0.1 is not public"), "{why}"),
            other => panic!("{url}: {other:?}"),
        }
    }
    assert_no_connection(&listener).await;
    let plain = guarded.fetch(&format!("http://hooks.test:{port}/a.pdf"), 1024).await;
    assert!(matches!(plain, Err(FetchError::Refused(ref why)) if why.contains("https")), "{plain:?}");
    for bad in ["ftp://hooks.test/a", "not a url", "/relative/path"] {
        assert!(matches!(guarded.fetch(bad, 1024).await, Err(FetchError::Refused(_))), "{bad}");
    }
    Ok(())
}

#[tokio::test]
async fn over_the_limit_a_status_or_a_redirect_is_refused() -> TestResult {
    let dns = dns().await?;
    let open = fetcher(&dns, true, Duration::from_secs(5));
    let big = Receiver::start(|| reply(200, &[], &"x".repeat(4096))).await?;
    let too_large = open.fetch(&format!("http://hooks.test:{}/big", big.port()), 100).await;
    assert_eq!(too_large, Err(FetchError::TooLarge { limit: 100 }));
    let missing = Receiver::start(|| reply(404, &[], "no")).await?;
    assert_eq!(
        open.fetch(&format!("http://hooks.test:{}/gone", missing.port()), 100).await,
        Err(FetchError::Status(404))
    );
    let moved = Receiver::start(|| reply(302, &[("location", "http://10.0.0.1/secret")], "")).await?;
    assert_eq!(
        open.fetch(&format!("http://hooks.test:{}/moved", moved.port()), 100).await,
        Err(FetchError::Status(302))
    );
    Ok(())
}

#[tokio::test]
async fn a_server_that_never_answers_costs_the_time_limit_only() -> TestResult {
    let dns = dns().await?;
    let silent = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = silent.local_addr()?.port();
    let slow = fetcher(&dns, true, Duration::from_millis(300));
    match slow.fetch(&format!("http://hooks.test:{port}/a"), 100).await {
        Err(FetchError::Failed(why)) => assert!(why.contains("300ms"), "{why}"),
        other => panic!("{other:?}"),
    }
    drop(silent);
    Ok(())
}
