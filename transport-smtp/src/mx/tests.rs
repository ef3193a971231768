//! Routing against a fake resolver: which hosts, in which order, and which DNS answers
//! end a delivery before any connection.

use std::collections::HashMap;

use super::*;

/// Answers from tables; a name missing from `mx` is NXDOMAIN unless listed in `failing`.
#[derive(Default)]
struct FakeDns {
    mx: HashMap<String, Vec<(u16, String)>>,
    failing: Vec<String>,
    addrs: HashMap<String, Vec<IpAddr>>,
}

impl FakeDns {
    fn with_mx(domain: &str, records: &[(u16, &str)]) -> Self {
        let records = records.iter().map(|(preference, host)| (*preference, (*host).to_owned())).collect();
        Self { mx: HashMap::from([(domain.to_owned(), records)]), ..Self::default() }
    }
}

#[async_trait]
impl MxLookup for FakeDns {
    async fn mx_hosts(&self, domain: &DomainName) -> Result<Vec<(u16, String)>, DnsError> {
        let name = domain.as_str();
        if self.failing.iter().any(|failing| failing == name) {
            return Err(DnsError::Failed { name: name.to_owned(), reason: "SERVFAIL".to_owned() });
        }
        self.mx.get(name).cloned().ok_or_else(|| DnsError::NxDomain(name.to_owned()))
    }

    async fn host_addrs(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        Ok(self.addrs.get(host).cloned().unwrap_or_default())
    }
}

fn domain(text: &str) -> DomainName {
    DomainName::parse(text).unwrap()
}

#[tokio::test]
async fn hosts_come_in_preference_order() {
    let dns = FakeDns::with_mx("acme.test", &[(20, "b.acme.test"), (10, "a.acme.test"), (30, "c.acme.test")]);
    let route = route(&dns, &domain("acme.test"), 0).await.unwrap();
    assert_eq!(
        route,
        Route { hosts: vec!["a.acme.test".into(), "b.acme.test".into(), "c.acme.test".into()], implicit: false }
    );
}

#[test]
fn equal_preferences_rotate_with_the_seed_and_hosts_appear_once() {
    let records = || vec![(10, "x".to_owned()), (10, "y".to_owned()), (20, "z".to_owned()), (30, "x".to_owned())];
    assert_eq!(in_preference_order(records(), 0), ["x", "y", "z"]);
    assert_eq!(in_preference_order(records(), 1), ["y", "x", "z"]);
    assert_eq!(in_preference_order(records(), 2), ["x", "y", "z"]);
}

#[tokio::test]
async fn a_domain_without_mx_records_is_its_own_host() {
    let dns = FakeDns::with_mx("acme.test", &[]);
    let route = route(&dns, &domain("acme.test"), 0).await.unwrap();
    assert_eq!(route, Route { hosts: vec!["acme.test".into()], implicit: true });
}

#[tokio::test]
async fn a_null_mx_means_no_mail_server() {
    let dns = FakeDns::with_mx("acme.test", &[(0, "")]);
    let error = route(&dns, &domain("acme.test"), 0).await.unwrap_err();
    assert!(matches!(&error, SendError::NoMailServer { reason } if reason.contains("null MX")), "{error:?}");
}

#[tokio::test]
async fn a_domain_that_does_not_exist_means_no_mail_server() {
    let error = route(&FakeDns::default(), &domain("nowhere.test"), 0).await.unwrap_err();
    assert!(matches!(&error, SendError::NoMailServer { reason } if reason.contains("NXDOMAIN")), "{error:?}");
}

#[tokio::test]
async fn other_dns_failures_are_worth_retrying() {
    let dns = FakeDns { failing: vec!["acme.test".to_owned()], ..FakeDns::default() };
    let error = route(&dns, &domain("acme.test"), 0).await.unwrap_err();
    assert!(matches!(&error, SendError::Unreachable { reason } if reason.contains("SERVFAIL")), "{error:?}");
}

fn email_to_acme() -> OutboundEmail {
    OutboundEmail {
        message_id: tidings_core::ids::MessageId::from_bytes([1; 16]),
        provider_message_id: "id@acme.test".to_owned(),
        envelope_from: tidings_core::email::EmailAddress::parse("from@acme.test").unwrap(),
        envelope_to: tidings_core::email::EmailAddress::parse("to@acme.test").unwrap(),
        raw: (&b"\r\n"[..]).into(),
    }
}

#[tokio::test]
async fn mx_hosts_without_addresses_leave_the_message_undelivered_but_retryable() {
    let dns = FakeDns::with_mx("acme.test", &[(10, "mx1.acme.test"), (20, "mx2.acme.test")]);
    let mailer = MxMailer::new(Arc::new(dns), MxConfig::default()).unwrap();
    let error = mailer.send(&email_to_acme()).await.unwrap_err();
    let SendError::Unreachable { reason } = error else { panic!("{error:?}") };
    assert!(reason.contains("mx1.acme.test: no A or AAAA records"), "{reason}");
    assert!(reason.contains("mx2.acme.test: no A or AAAA records"), "{reason}");
}

/// MX hosts on loopback and a private address, with a listener on the loopback one.
async fn private_mx() -> (FakeDns, tokio::net::TcpListener) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut dns = FakeDns::with_mx("acme.test", &[(10, "mx1.acme.test"), (20, "mx2.acme.test")]);
    dns.addrs.insert("mx1.acme.test".to_owned(), vec!["127.0.0.1".parse().unwrap()]);
    dns.addrs.insert("mx2.acme.test".to_owned(), vec!["10.0.0.25".parse().unwrap(), "::1".parse().unwrap()]);
    (dns, listener)
}

#[tokio::test]
async fn mx_hosts_on_non_public_addresses_are_never_dialled_and_the_recipient_fails() {
    let (dns, listener) = private_mx().await;
    let port = listener.local_addr().unwrap().port();
    let mailer = MxMailer::new(Arc::new(dns), MxConfig { port, ..MxConfig::default() }).unwrap();

    let error = mailer.send(&email_to_acme()).await.unwrap_err();

    let SendError::NoMailServer { reason } = error else { panic!("{error:?}") };
    for refused in ["mx1.acme.test: address 127.0.0.1", "mx2.acme.test: address 10.0.0.25", "address ::1"] {
        assert!(reason.contains(refused), "{reason}");
    }
    assert!(reason.contains("TIDINGS_MX_ALLOW_PRIVATE"), "{reason}");
    let dialled = tokio::time::timeout(std::time::Duration::from_millis(300), listener.accept()).await;
    assert!(dialled.is_err(), "the guard let a connection through");
}

#[tokio::test]
async fn with_private_targets_allowed_a_loopback_mx_is_dialled() {
    let (dns, listener) = private_mx().await;
    let port = listener.local_addr().unwrap().port();
    let config = MxConfig {
        port,
        allow_private: true,
        timeouts: crate::Timeouts::capped(std::time::Duration::from_secs(2)),
        ..MxConfig::default()
    };
    let mailer = MxMailer::new(Arc::new(dns), config).unwrap();

    let sending = tokio::spawn(async move { mailer.send(&email_to_acme()).await });
    let accepted = tokio::time::timeout(std::time::Duration::from_secs(5), listener.accept()).await;

    assert!(matches!(accepted, Ok(Ok(_))), "no connection reached the loopback MX: {accepted:?}");
    drop(listener);
    let _ = sending.await;
}

#[tokio::test]
async fn a_public_peer_only_connector_refuses_a_loopback_peer() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connector = crate::session::Connector {
        target: crate::session::Target::Addr(addr),
        remote: format!("mx.acme.test[{}]:{}", addr.ip(), addr.port()),
        tls: crate::session::TlsPlan::Plain,
        credentials: None,
        plaintext_auth_allowed: false,
        hello: lettre::transport::smtp::extension::ClientId::default(),
        timeouts: crate::Timeouts::capped(std::time::Duration::from_secs(2)),
        public_peer_only: true,
        audit: None,
    };

    let Err(failure) = connector.open().await else { panic!("a session was opened") };

    let error = failure.to_send_error(&connector.remote);
    assert!(error.to_string().contains("address 127.0.0.1 is not public"), "{error}");
}
