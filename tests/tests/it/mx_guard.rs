//! SSRF through direct MX delivery, against the real binary: a tenant sends to a domain whose
//! MX points at an internal server (here an SMTP sink on loopback, standing for anything on
//! 127.0.0.1 or a private network). Without `TIDINGS_MX_ALLOW_PRIVATE` the server never
//! connects to it, and the recipient fails naming why; the internal server's reply never
//! reaches the tenant's timeline.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::common::mail::{plain_mail, send_ok, timeline, types, wait_for_status};
use crate::common::{server_with_dns, verified_domain};
use tidings_dns::testing::TestRecord;
use tidings_transport_smtp::testing::{Rule, SmtpSink, Stage};

const DOMAIN: &str = "tenant.example";
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn an_mx_on_loopback_or_private_addresses_is_never_connected_to_and_the_recipient_fails() {
    // The "internal server" answers every greeting with something a tenant must not read.
    let internal = SmtpSink::start().await.expect("the sink starts");
    internal.add_rule(Rule::reply(Stage::Greeting, 554, "internal-banner secret-build-42"));
    let port = internal.port().to_string();
    let (server, dns) = server_with_dns(&[
        ("TIDINGS_DELIVERY", "mx"),
        ("TIDINGS_MX_PORT", &port),
        ("TIDINGS_SMTP_TIMEOUT", "5s"),
        ("TIDINGS_RETRY_SCHEDULE", "1s"),
    ])
    .await;
    verified_domain(&server, &dns, server.key(), DOMAIN).await;
    dns.set_mx("internal.example", &[(10, "mx1.internal.example"), (20, "mx2.internal.example")]).await;
    dns.add(TestRecord::a("mx1.internal.example", Ipv4Addr::LOCALHOST)).await;
    dns.add(TestRecord::a("mx2.internal.example", Ipv4Addr::new(10, 0, 0, 25))).await;
    dns.add(TestRecord::aaaa("mx2.internal.example", Ipv6Addr::LOCALHOST)).await;
    // A domain without MX records whose own address is loopback (the implicit MX).
    dns.add(TestRecord::a("bare.example", Ipv4Addr::new(127, 0, 0, 2))).await;

    for to in ["probe@internal.example", "probe@bare.example"] {
        let id = send_ok(&server, server.key(), plain_mail(DOMAIN, to)).await;
        wait_for_status(&server, server.key(), &id, "Bounced", WAIT).await;
        let events = timeline(&server, server.key(), &id).await;
        let bounced = &events.last().expect("events")["details"];
        let response = bounced["response"].as_str().unwrap_or_default();
        println!("{to}: {:?}, response: {response}", types(&events));

        assert_eq!(types(&events), ["Queued", "Sent", "Bounced"], "failed at once, not retried: {events:#?}");
        assert_eq!(bounced["bounceType"], "Hard", "{events:#?}");
        assert!(response.contains("is not public") && response.contains("TIDINGS_MX_ALLOW_PRIVATE"), "{response}");
        let rendered = serde_json::to_string(&events).unwrap();
        assert!(!rendered.contains("secret-build-42"), "the internal server's reply leaked: {rendered}");
    }
    assert!(response_names_every_address(&server).await, "the reason names each refused address");
    assert_eq!(internal.connection_count(), 0, "the internal server was never connected to");
}

/// Whether the bounce for internal.example names its three refused addresses.
async fn response_names_every_address(server: &tidings_e2e::TestServer) -> bool {
    let (_, body) = server.get("/v1/messages?to=probe@internal.example", server.key()).await;
    let id = body["data"][0]["id"].as_str().expect("the message").to_owned();
    let events = timeline(server, server.key(), &id).await;
    let response = events.last().expect("events")["details"]["response"].as_str().unwrap_or_default().to_owned();
    ["127.0.0.1", "10.0.0.25", "::1"].iter().all(|ip| response.contains(&format!("address {ip} ")))
}
