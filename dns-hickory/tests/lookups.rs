//! `HickoryDns` against a real DNS server on loopback (`TestDnsServer`), and against servers
//! that answer badly or not at all.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use tidings_core::domain_name::{DnsName, DomainName};
use tidings_core::ports::{DnsCheck, DnsError};
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_dns::{HickoryDns, Settings, Upstream};
use tokio::net::UdpSocket;

/// A real RSA-2048 public key, as a DKIM record carries it: 410 characters, more than one
/// TXT string can hold.
const DKIM_RSA_2048: &str = "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEArsb9GJWCmyOscaIa9HfA6V9H+mVQwKQxG/sgZepf17DzxhNPVU4bymaalMSpZ1rrLooH/RcpQvO9tSFqNn7OsxVamz+kstk+LDFsmxGbVw021BcIs2Sc/AsnwKI/z6sRU+fNoWBYcEYpnZg3l1EssoLA/evQh7BfJSkzAm7UdJBvx06xbgECINqm/zrEx/kd7fCBsQwdt67mHwPxFFx9z+tsntLP1BN4J8Hc71fIANVi8yq6mLq+xdO1bOX+x6RDSzx5c786bG/I6GUCvVutO+9fmSa5DZBEE0GqsZHZRZgCXRJOJUeYX8R2D7hK3XKQBv5n2PjGI+R0hA7OsrdAoQIDAQAB";

/// Short enough that the failure tests finish quickly, long enough for a loaded CI machine.
const TEST_SETTINGS: Settings = Settings { timeout: Duration::from_millis(500), attempts: 2 };

/// How late a test may see a deadline pass on a busy machine.
const SCHEDULING_SLACK: Duration = Duration::from_millis(500);

fn resolver_for(addr: SocketAddr) -> HickoryDns {
    HickoryDns::new(Upstream::Server(addr), TEST_SETTINGS).expect("resolver")
}

fn name(text: &str) -> DnsName {
    DnsName::parse(text).expect("valid name")
}

fn domain(text: &str) -> DomainName {
    DomainName::parse(text).expect("valid domain")
}

async fn example_zone() -> TestDnsServer {
    TestDnsServer::start([
        TestRecord::txt("example.com", "v=spf1 ip4:127.0.0.1 ~all"),
        TestRecord::txt("example.com", "google-site-verification=abc123"),
        TestRecord::txt("sel._domainkey.example.com", DKIM_RSA_2048),
        TestRecord::txt("_dmarc.example.com", "v=DMARC1; p=none;"),
        TestRecord::txt("single.example.com", "hello"),
        TestRecord::a("www.example.com", Ipv4Addr::new(192, 0, 2, 10)),
        TestRecord::mx("example.com", 20, "mx2.example.com"),
        TestRecord::mx("example.com", 10, "MX1.example.com"),
        TestRecord::mx("example.com", 30, "backup.example.net"),
        TestRecord::a("mx1.example.com", Ipv4Addr::new(127, 0, 0, 1)),
        TestRecord::aaaa("mx1.example.com", Ipv6Addr::LOCALHOST),
    ])
    .await
    .expect("test DNS server")
}

#[tokio::test]
async fn a_txt_record_with_one_string_comes_back_as_is() {
    let server = example_zone().await;
    let txts = resolver_for(server.addr()).txt_records(&name("single.example.com")).await;
    assert_eq!(txts, Ok(vec!["hello".to_owned()]));
}

#[tokio::test]
async fn a_dkim_key_split_into_255_byte_strings_comes_back_joined() {
    assert!(DKIM_RSA_2048.len() > 255, "the key must need more than one string");
    let server = example_zone().await;
    let txts = resolver_for(server.addr()).txt_records(&name("sel._domainkey.example.com")).await;
    assert_eq!(txts, Ok(vec![DKIM_RSA_2048.to_owned()]));
}

#[tokio::test]
async fn strings_of_uneven_length_are_joined_without_separators() {
    let (head, tail) = DKIM_RSA_2048.split_at(100);
    let (middle, tail) = tail.split_at(200);
    let server = TestDnsServer::start([TestRecord::txt_strings("s1._domainkey.acme.test", &[head, middle, tail])])
        .await
        .unwrap();
    let txts = resolver_for(server.addr()).txt_records(&name("s1._domainkey.acme.test")).await;
    assert_eq!(txts, Ok(vec![DKIM_RSA_2048.to_owned()]));
}

#[tokio::test]
async fn several_txt_records_at_one_name_come_back_as_several_values() {
    let server = example_zone().await;
    let mut txts = resolver_for(server.addr()).txt_records(&name("example.com")).await.unwrap();
    txts.sort();
    assert_eq!(txts, ["google-site-verification=abc123", "v=spf1 ip4:127.0.0.1 ~all"]);
}

#[tokio::test]
async fn the_dmarc_name_with_its_underscore_label_is_looked_up() {
    let server = example_zone().await;
    let txts = resolver_for(server.addr()).txt_records(&name("_dmarc.example.com")).await;
    assert_eq!(txts, Ok(vec!["v=DMARC1; p=none;".to_owned()]));
}

#[tokio::test]
async fn a_name_with_only_an_a_record_has_no_txt_records() {
    let server = example_zone().await;
    let txts = resolver_for(server.addr()).txt_records(&name("www.example.com")).await;
    assert_eq!(txts, Ok(vec![]));
}

#[tokio::test]
async fn a_name_that_does_not_exist_is_nxdomain() {
    let server = example_zone().await;
    let txts = resolver_for(server.addr()).txt_records(&name("_dmarc.nowhere.example.com")).await;
    assert_eq!(txts, Err(DnsError::NxDomain("_dmarc.nowhere.example.com".to_owned())));
}

#[tokio::test]
async fn records_published_after_a_failed_check_are_seen_on_the_next_check() {
    let server = TestDnsServer::start([]).await.unwrap();
    let dns = resolver_for(server.addr());
    let dmarc = name("_dmarc.acme.test");
    assert_eq!(dns.txt_records(&dmarc).await, Err(DnsError::NxDomain("_dmarc.acme.test".to_owned())));

    server.set_txt("_dmarc.acme.test", &["v=DMARC1; p=none;"]).await;
    assert_eq!(dns.txt_records(&dmarc).await, Ok(vec!["v=DMARC1; p=none;".to_owned()]));

    server.set_txt("_dmarc.acme.test", &["v=DMARC1; p=reject;"]).await;
    assert_eq!(dns.txt_records(&dmarc).await, Ok(vec!["v=DMARC1; p=reject;".to_owned()]));

    server.set_txt("_dmarc.acme.test", &[]).await;
    assert_eq!(dns.txt_records(&dmarc).await, Err(DnsError::NxDomain("_dmarc.acme.test".to_owned())));
}

#[tokio::test]
async fn a_domain_published_after_startup_can_gain_and_lose_records() {
    let server = TestDnsServer::start([]).await.unwrap();
    let dns = resolver_for(server.addr());

    server.add(TestRecord::txt("acme.test", "v=spf1 ip4:127.0.0.1 ~all")).await;
    server.add(TestRecord::txt("acme.test", "other")).await;
    server.set_mx("acme.test", &[(5, "mx.acme.test")]).await;
    let mut txts = dns.txt_records(&name("acme.test")).await.unwrap();
    txts.sort();
    assert_eq!(txts, ["other", "v=spf1 ip4:127.0.0.1 ~all"]);
    assert_eq!(dns.mx_hosts(&domain("acme.test")).await, Ok(vec![(5, "mx.acme.test".to_owned())]));

    server.set_mx("acme.test", &[]).await;
    assert_eq!(dns.mx_hosts(&domain("acme.test")).await, Ok(vec![]));

    server.remove_name("acme.test").await;
    assert_eq!(dns.txt_records(&name("acme.test")).await, Err(DnsError::NxDomain("acme.test".to_owned())));
}

#[tokio::test]
async fn an_answer_too_large_for_udp_arrives_over_tcp() {
    let server = TestDnsServer::start([]).await.unwrap();
    let values: Vec<String> = (0..20).map(|i| format!("{i:02} {DKIM_RSA_2048}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    server.set_txt("big.acme.test", &refs).await;

    let mut txts = resolver_for(server.addr()).txt_records(&name("big.acme.test")).await.unwrap();
    txts.sort();
    assert_eq!(txts, values);
}

#[tokio::test]
async fn mx_hosts_come_sorted_by_preference_without_trailing_dots() {
    let server = example_zone().await;
    let hosts = resolver_for(server.addr()).mx_hosts(&domain("example.com")).await;
    assert_eq!(
        hosts,
        Ok(vec![
            (10, "mx1.example.com".to_owned()),
            (20, "mx2.example.com".to_owned()),
            (30, "backup.example.net".to_owned())
        ])
    );
}

#[tokio::test]
async fn a_domain_without_mx_has_no_mx_hosts_and_a_missing_domain_is_nxdomain() {
    let server = example_zone().await;
    let dns = resolver_for(server.addr());
    assert_eq!(dns.mx_hosts(&domain("www.example.com")).await, Ok(vec![]));
    assert_eq!(
        dns.mx_hosts(&domain("nowhere.example.com")).await,
        Err(DnsError::NxDomain("nowhere.example.com".into()))
    );
}

#[tokio::test]
async fn a_null_mx_comes_back_as_an_empty_host() {
    let server = TestDnsServer::start([TestRecord::mx("nomail.test", 0, ".")]).await.unwrap();
    let hosts = resolver_for(server.addr()).mx_hosts(&domain("nomail.test")).await;
    assert_eq!(hosts, Ok(vec![(0, String::new())]));
}

#[tokio::test]
async fn host_addrs_gives_ipv4_then_ipv6() {
    let server = example_zone().await;
    let dns = resolver_for(server.addr());
    let addrs = dns.host_addrs("mx1.example.com").await.unwrap();
    assert_eq!(addrs, [Ipv4Addr::new(127, 0, 0, 1).into(), std::net::IpAddr::from(Ipv6Addr::LOCALHOST)]);
    assert_eq!(
        dns.host_addrs("www.example.com").await.unwrap(),
        [std::net::IpAddr::from(Ipv4Addr::new(192, 0, 2, 10))]
    );
    assert_eq!(dns.host_addrs("192.0.2.7").await.unwrap(), [std::net::IpAddr::from(Ipv4Addr::new(192, 0, 2, 7))]);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_within_the_configured_bound() {
    // Bound but never read: queries vanish, as with a firewalled resolver.
    let silent = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let dns = resolver_for(silent.local_addr().unwrap());

    let started = Instant::now();
    let txts = dns.txt_records(&name("example.com")).await;
    let elapsed = started.elapsed();

    assert_eq!(txts, Err(DnsError::Timeout("example.com".to_owned())));
    assert!(elapsed < TEST_SETTINGS.deadline() + SCHEDULING_SLACK, "took {elapsed:?}");
}

#[tokio::test]
async fn a_port_where_nothing_listens_fails_within_the_configured_bound() {
    let addr = {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        socket.local_addr().unwrap()
    };
    let started = Instant::now();
    let txts = resolver_for(addr).txt_records(&name("example.com")).await;
    // Timeout or Failed depending on whether the OS reports the ICMP "port unreachable".
    assert!(matches!(txts, Err(DnsError::Timeout(_) | DnsError::Failed { .. })), "got {txts:?}");
    assert!(started.elapsed() < TEST_SETTINGS.deadline() + SCHEDULING_SLACK, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn servfail_is_a_failure_that_points_at_the_domains_name_servers() {
    let addr = answer_everything_with(RCODE_SERVFAIL).await;
    let txts = resolver_for(addr).txt_records(&name("example.com")).await;
    match txts {
        Err(DnsError::Failed { name, reason }) => {
            assert_eq!(name, "example.com");
            assert!(reason.contains("SERVFAIL") && reason.contains("NS records"), "{reason}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn refused_is_a_failure_that_is_not_the_customers_fault() {
    let addr = answer_everything_with(RCODE_REFUSED).await;
    let txts = resolver_for(addr).txt_records(&name("example.com")).await;
    match txts {
        Err(DnsError::Failed { reason, .. }) => {
            assert!(reason.contains("REFUSED") && reason.contains("not with your records"), "{reason}")
        }
        other => panic!("expected Failed, got {other:?}"),
    }
}

const RCODE_SERVFAIL: u8 = 2;
const RCODE_REFUSED: u8 = 5;

/// A UDP "server" that answers every query with `rcode` and nothing else: the query echoed
/// back with QR set and the RCODE replaced (its EDNS OPT record stays, which is valid in a
/// response). The task ends with the test's runtime.
async fn answer_everything_with(rcode: u8) -> SocketAddr {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((len, peer)) = socket.recv_from(&mut buf).await {
            if len < 12 {
                continue;
            }
            let mut reply = buf[..len].to_vec();
            reply[2] |= 0x80; // QR: this is a response
            reply[3] = (reply[3] & 0xf0) | rcode;
            let _ = socket.send_to(&reply, peer).await;
        }
    });
    addr
}
