//! The SSRF guard: which addresses it refuses, and that a refused target never sees a
//! connection, whether it is named literally or through DNS.

use std::net::{IpAddr, Ipv4Addr};

use crate::common::{TestResult, assert_no_connection, dns, reply, request, sender, settings};
use tidings_core::ports::{WebhookResponse, WebhookSender};
use tidings_webhook_http::{NotPublic, check_address};
use tokio::net::TcpListener;

fn failed(response: WebhookResponse) -> String {
    match response {
        WebhookResponse::Failed { reason } => reason,
        answered => panic!("expected a failure, got {answered:?}"),
    }
}

#[test]
fn the_guard_refuses_every_non_public_address_unless_private_targets_are_allowed() {
    let non_public = [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "0.0.0.0",
        "100.64.0.1",
        "169.254.169.254",
        "224.0.0.1",
        "255.255.255.255",
        "192.0.2.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "::127.0.0.1",
        "2002:7f00:1::",
        "2002:c0a8::1",
        "2002:a9fe:a9fe::",
        "64:ff9b::a00:1",
        "64:ff9b::7f00:1",
        "2001:db8::1",
    ];
    for text in non_public {
        let ip: IpAddr = text.parse().unwrap();
        assert_eq!(check_address(ip, false), Err(NotPublic(ip)), "{text} passed the guard");
        assert_eq!(check_address(ip, true), Ok(()), "{text} refused with private targets allowed");
    }
    for text in ["1.1.1.1", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::"] {
        let ip: IpAddr = text.parse().unwrap();
        assert_eq!(check_address(ip, false), Ok(()), "{text} refused");
    }
}

#[test]
fn a_refusal_names_the_address_and_the_setting_that_allows_it() {
    let refusal = check_address(IpAddr::V4(Ipv4Addr::LOCALHOST), false).unwrap_err();
    assert_eq!(refusal.to_string(), "address 127.0.0.1 is not public (set TIDINGS_WEBHOOK_ALLOW_PRIVATE to allow it)");
}

#[tokio::test]
async fn a_host_name_resolving_to_loopback_is_refused_without_connecting() -> TestResult {
    let dns = dns().await?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();

    let response = sender(&dns, settings(false)).post(&request(&format!("https://hooks.test:{port}/hook"))).await;

    assert_eq!(failed(response), "address 127.0.0.1 is not public (set TIDINGS_WEBHOOK_ALLOW_PRIVATE to allow it)");
    assert_no_connection(&listener).await;
    Ok(())
}

#[tokio::test]
async fn a_host_name_resolving_to_loopback_is_reached_when_private_targets_are_allowed() -> TestResult {
    let dns = dns().await?;
    let receiver = crate::common::Receiver::start(|| reply(204, &[], "")).await?;

    let url = format!("http://hooks.test:{}/hook", receiver.port());
    let response = sender(&dns, settings(true)).post(&request(&url)).await;

    assert!(matches!(response, WebhookResponse::Answered { status: 204, .. }), "{response:?}");
    assert_eq!(receiver.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn literal_non_public_addresses_are_refused_without_connecting() -> TestResult {
    let dns = dns().await?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    let sender = sender(&dns, settings(false));

    let plain = sender.post(&request(&format!("https://127.0.0.1:{port}/hook"))).await;
    // The IPv4-mapped form would reach the same listener through a dual-stack socket.
    let mapped = sender.post(&request(&format!("https://[::ffff:127.0.0.1]:{port}/hook"))).await;

    assert_eq!(failed(plain), "address 127.0.0.1 is not public (set TIDINGS_WEBHOOK_ALLOW_PRIVATE to allow it)");
    assert!(failed(mapped).starts_with("address ::ffff:127.0.0.1 is not public"));
    assert_no_connection(&listener).await;
    Ok(())
}

#[tokio::test]
async fn plain_http_is_refused_without_connecting_unless_private_targets_are_allowed() -> TestResult {
    let dns = dns().await?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();

    let response = sender(&dns, settings(false)).post(&request(&format!("http://hooks.test:{port}/hook"))).await;

    assert!(failed(response).starts_with("plain http is not allowed"));
    assert_no_connection(&listener).await;
    Ok(())
}

#[tokio::test]
async fn an_unknown_host_name_fails_with_the_dns_error() -> TestResult {
    let dns = dns().await?;

    let response = sender(&dns, settings(false)).post(&request("https://missing.test/hook")).await;

    let reason = failed(response);
    assert!(reason.starts_with("DNS lookup failed for missing.test: "), "{reason}");
    Ok(())
}
