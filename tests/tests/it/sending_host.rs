//! The sending host's name (`TIDINGS_EHLO_NAME`, README configuration; contract §12): what
//! the relay and an MX host see after EHLO, the line that names it at start, and in `mx`
//! mode the start-up check that it resolves, through the server's DNS server, to an address
//! of this host.

use std::net::Ipv4Addr;
use std::time::Duration;

use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_e2e::{Options, TestServer, fresh_key};
use tidings_transport_smtp::testing::SmtpSink;

use crate::common::mail::{plain_mail, send_ok, wait_for_status};
use crate::common::{server_with_dns, verified_domain};

const EHLO_NAME: &str = "mail.sender.test";
const WAIT: Duration = Duration::from_secs(20);

/// The line with every one of `needles`, waiting for it; fails with the whole log if none.
fn logged(server: &TestServer, needles: &[&str]) -> String {
    server
        .wait_for_log(needles)
        .unwrap_or_else(|| panic!("no log line with {needles:?} in:\n{}", server.stderr_lines().join("\n")))
}

/// A server delivering straight to MX hosts on loopback (the sink's port), with
/// `TIDINGS_EHLO_NAME` and a DNS server that already holds `records` when it starts (the
/// check runs at start).
async fn mx_server(sink: &SmtpSink, records: Vec<TestRecord>) -> (TestServer, TestDnsServer) {
    let dns = TestDnsServer::start(records).await.expect("DNS server starts");
    let env = [
        ("TIDINGS_DNS_SERVER", dns.addr().to_string()),
        ("TIDINGS_DELIVERY", "mx".to_owned()),
        ("TIDINGS_MX_PORT", sink.port().to_string()),
        ("TIDINGS_MX_ALLOW_PRIVATE", "true".to_owned()),
        ("TIDINGS_EHLO_NAME", EHLO_NAME.to_owned()),
    ];
    let env = env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    let server = TestServer::start_with(Options { bootstrap_key: Some(fresh_key()), env, ..Options::default() }).await;
    (server, dns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_sees_the_configured_ehlo_name_and_the_start_names_it() {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let relay = format!("smtp://{}", sink.addr());
    let (server, dns) = server_with_dns(&[
        ("TIDINGS_DELIVERY", "relay"),
        ("TIDINGS_SMTP_RELAY", &relay),
        ("TIDINGS_EHLO_NAME", EHLO_NAME),
    ])
    .await;
    let line = logged(&server, &["EHLO name: mail.sender.test (TIDINGS_EHLO_NAME)"]);
    assert!(line.contains(" INFO "), "{line}");

    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "ehlo.example").await;
    let id = send_ok(&server, &key, plain_mail("ehlo.example", "ann@example.net")).await;
    wait_for_status(&server, &key, &id, "Delivered", WAIT).await;
    let received = sink.wait_for(1, WAIT).await.expect("the relay receives the message");
    assert_eq!(received[0].helo, EHLO_NAME, "the EHLO argument the relay saw");
    // Relay mode only names the host; whether it resolves here is no concern of the relay's.
    assert!(server.wait_for_log(&["the EHLO name"]).is_none(), "{:#?}", server.stderr_lines());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_mx_mode_a_name_that_resolves_elsewhere_is_warned_about_at_start_and_still_sent() {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    // 192.0.2.10 (TEST-NET-1) is never an address of this host.
    let records = vec![
        TestRecord::a(EHLO_NAME, Ipv4Addr::new(192, 0, 2, 10)),
        TestRecord::mx("inbox.example", 10, "mx1.inbox.example"),
        TestRecord::a("mx1.inbox.example", Ipv4Addr::LOCALHOST),
    ];
    let (server, dns) = mx_server(&sink, records).await;
    logged(&server, &["EHLO name: mail.sender.test (TIDINGS_EHLO_NAME)"]);
    let line = logged(
        &server,
        &["the EHLO name mail.sender.test (TIDINGS_EHLO_NAME) resolves to 192.0.2.10, not to an address of this host"],
    );
    assert!(line.contains(" WARN ") && line.contains("reverse DNS"), "{line}");

    // A warning, not a refusal: mail flows, under that name.
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "direct.example").await;
    let id = send_ok(&server, &key, plain_mail("direct.example", "carol@inbox.example")).await;
    wait_for_status(&server, &key, &id, "Delivered", WAIT).await;
    let received = sink.wait_for(1, WAIT).await.expect("the MX host receives the message");
    assert_eq!(received[0].helo, EHLO_NAME, "the EHLO argument the MX host saw");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_mx_mode_a_name_of_this_host_passes_the_check_and_a_missing_one_is_warned_about() {
    let sink = SmtpSink::start().await.expect("the SMTP sink starts");
    let (server, _dns) = mx_server(&sink, vec![TestRecord::a(EHLO_NAME, Ipv4Addr::LOCALHOST)]).await;
    let line = logged(&server, &["the EHLO name mail.sender.test resolves to 127.0.0.1, an address of this host"]);
    assert!(line.contains(" INFO "), "{line}");
    assert!(server.wait_for_log(&["WARN", "the EHLO name"]).is_none(), "{:#?}", server.stderr_lines());

    // Not in DNS at all (NXDOMAIN): warned about too. (A lookup that fails is, in the unit
    // tests of examples/server/src/sending_host.rs: waiting out the resolver takes 15 s.)
    let (server, _dns) = mx_server(&sink, vec![]).await;
    logged(&server, &["WARN", "the EHLO name mail.sender.test (TIDINGS_EHLO_NAME) does not exist in DNS"]);
}
