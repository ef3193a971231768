//! Real receivers on loopback: what is sent, and how each kind of answer is reported.

use std::time::{Duration, SystemTime};

use crate::common::{BODY, Receiver, TestResult, dns, reply, request, sender, settings};
use tidings_core::ports::{MAX_BODY_PREFIX, WebhookResponse, WebhookSender};

#[tokio::test]
async fn a_2xx_is_answered_and_the_receiver_gets_the_exact_body_and_headers() -> TestResult {
    let dns = dns().await?;
    let receiver = Receiver::start(|| reply(200, &[], "thanks")).await?;
    let url = format!("http://127.0.0.1:{}/hooks/tidings?team=7", receiver.port());
    let sent = request(&url);

    let response = sender(&dns, settings(true)).post(&sent).await;

    assert_eq!(response, WebhookResponse::Answered { status: 200, retry_after: None, body_prefix: "thanks".into() });
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let seen = &requests[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/hooks/tidings?team=7");
    assert_eq!(seen.body, BODY.as_bytes());
    for (name, value) in sent.headers() {
        assert_eq!(seen.headers.get(name).and_then(|v| v.to_str().ok()), Some(value.as_str()), "header {name}");
    }
    let user_agent = seen.headers.get("user-agent").and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert_eq!(user_agent, concat!("Tidings-Webhooks/", env!("CARGO_PKG_VERSION")));
    Ok(())
}

#[tokio::test]
async fn a_long_error_body_is_cut_to_the_prefix() -> TestResult {
    let dns = dns().await?;
    let receiver = Receiver::start(|| reply(500, &[], &"x".repeat(5000))).await?;

    let response = sender(&dns, settings(true)).post(&request(&format!("http://127.0.0.1:{}/", receiver.port()))).await;

    let WebhookResponse::Answered { status, body_prefix, .. } = response else { panic!("{response:?}") };
    assert_eq!(status, 500);
    assert_eq!(body_prefix.len(), MAX_BODY_PREFIX);
    assert_eq!(body_prefix, "x".repeat(MAX_BODY_PREFIX));
    Ok(())
}

#[tokio::test]
async fn a_redirect_is_reported_and_not_followed() -> TestResult {
    let dns = dns().await?;
    let target = Receiver::start(|| reply(200, &[], "")).await?;
    let location = format!("http://127.0.0.1:{}/elsewhere", target.port());
    let receiver = Receiver::start(move || reply(302, &[("location", location.as_str())], "")).await?;

    let response = sender(&dns, settings(true)).post(&request(&format!("http://127.0.0.1:{}/", receiver.port()))).await;

    assert!(matches!(response, WebhookResponse::Answered { status: 302, .. }), "{response:?}");
    assert_eq!(target.accepts(), 0);
    assert!(target.requests().is_empty());
    Ok(())
}

#[tokio::test]
async fn retry_after_in_seconds_is_reported() -> TestResult {
    let dns = dns().await?;
    let receiver = Receiver::start(|| reply(429, &[("retry-after", "120")], "slow down")).await?;

    let response = sender(&dns, settings(true)).post(&request(&format!("http://127.0.0.1:{}/", receiver.port()))).await;

    let WebhookResponse::Answered { status, retry_after, .. } = response else { panic!("{response:?}") };
    assert_eq!(status, 429);
    assert_eq!(retry_after, Some(Duration::from_secs(120)));
    Ok(())
}

#[tokio::test]
async fn retry_after_as_a_date_becomes_a_delay_from_now() -> TestResult {
    let dns = dns().await?;
    let receiver = Receiver::start(|| {
        let when = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        reply(503, &[("retry-after", when.as_str())], "")
    })
    .await?;

    let response = sender(&dns, settings(true)).post(&request(&format!("http://127.0.0.1:{}/", receiver.port()))).await;

    let WebhookResponse::Answered { status, retry_after, .. } = response else { panic!("{response:?}") };
    assert_eq!(status, 503);
    let delay = retry_after.expect("a readable Retry-After");
    assert!((Duration::from_secs(55)..=Duration::from_secs(60)).contains(&delay), "{delay:?}");
    Ok(())
}

#[tokio::test]
async fn gone_is_answered() -> TestResult {
    let dns = dns().await?;
    let receiver = Receiver::start(|| reply(410, &[], "")).await?;

    let response = sender(&dns, settings(true)).post(&request(&format!("http://127.0.0.1:{}/", receiver.port()))).await;

    assert_eq!(response, WebhookResponse::Answered { status: 410, retry_after: None, body_prefix: String::new() });
    Ok(())
}

#[tokio::test]
async fn two_posts_to_one_receiver_share_a_connection() -> TestResult {
    let dns = dns().await?;
    let receiver = Receiver::start(|| reply(200, &[], "ok")).await?;
    let sender = sender(&dns, settings(true));
    let url = format!("http://127.0.0.1:{}/", receiver.port());

    let first = sender.post(&request(&url)).await;
    let second = sender.post(&request(&url)).await;

    assert!(matches!(first, WebhookResponse::Answered { status: 200, .. }), "{first:?}");
    assert!(matches!(second, WebhookResponse::Answered { status: 200, .. }), "{second:?}");
    assert_eq!(receiver.requests().len(), 2);
    assert_eq!(receiver.accepts(), 1);
    Ok(())
}
