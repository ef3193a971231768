//! The submission role over real sockets and real TLS: STARTTLS, AUTH PLAIN and LOGIN only
//! under TLS, MAIL only after AUTH, recipients vetted by the handler, and the handler's
//! refusals as replies.

use std::sync::Arc;

use crate::common::{Client, KEY, SUPPRESSED, TestServer, principal};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use tidings_inbound_smtp::{HandlerError, InboundSettings, Refusal};
use tokio_rustls::rustls::crypto::aws_lc_rs;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};

/// A submission listener with a fresh self-signed certificate, and a client TLS
/// configuration that trusts it.
struct Server {
    smtp: TestServer,
    client_tls: Arc<ClientConfig>,
}

impl std::ops::Deref for Server {
    type Target = TestServer;
    fn deref(&self) -> &TestServer {
        &self.smtp
    }
}

impl Server {
    async fn start() -> Self {
        Self::start_with(InboundSettings::submission).await
    }

    /// A listener with the settings `role` makes from the server's TLS configuration.
    async fn start_with(role: fn(Arc<ServerConfig>) -> InboundSettings) -> Self {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let cert = CertificateDer::from(made.cert.der().to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
        let provider = Arc::new(aws_lc_rs::default_provider());
        let server_tls = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert).unwrap();
        let client_tls = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut settings = role(Arc::new(server_tls));
        settings.hostname = "submit.test".to_owned();
        Self { smtp: TestServer::start(settings).await, client_tls: Arc::new(client_tls) }
    }

    /// A client greeted in plaintext.
    async fn client(&self) -> Client {
        let mut client = Client::connect(self.addr).await;
        client.expect(220).await;
        client.command("EHLO app.example", 250).await;
        client
    }

    /// A client after STARTTLS and a second EHLO.
    async fn tls_client(&self) -> Client {
        let mut client = self.client().await;
        start_tls(&mut client, &self.client_tls).await;
        client.command("EHLO app.example", 250).await;
        client
    }

    /// A client after STARTTLS and a good AUTH PLAIN.
    async fn authenticated_client(&self) -> Client {
        let mut client = self.tls_client().await;
        client.command(&format!("AUTH PLAIN {}", plain("tidings", KEY)), 235).await;
        client
    }
}

fn plain(user: &str, password: &str) -> String {
    STANDARD.encode(format!("\0{user}\0{password}"))
}

/// `STARTTLS` and the handshake, trusting the test certificate.
async fn start_tls(client: &mut Client, tls: &Arc<ClientConfig>) {
    client.command("STARTTLS", 220).await;
    client.handshake(tls.clone()).await;
}

#[tokio::test]
async fn plaintext_offers_starttls_but_refuses_auth_and_mail() {
    let server = Server::start().await;
    let mut client = Client::connect(server.addr).await;
    let greeting = client.expect(220).await;
    assert!(greeting.lines[0].starts_with("submit.test "));

    let ehlo = client.command("EHLO app.example", 250).await;

    assert!(ehlo.lines.iter().any(|l| l == "STARTTLS"), "{ehlo:?}");
    assert!(!ehlo.lines.iter().any(|l| l.starts_with("AUTH")), "{ehlo:?}");
    let refused = client.command(&format!("AUTH PLAIN {}", plain("tidings", KEY)), 530).await;
    assert!(refused.lines[0].starts_with("5.7.0"));
    client.command("MAIL FROM:<app@acme.example>", 530).await;
    assert!(server.handler.logins.lock().unwrap().is_empty(), "the key never reached the handler in clear");
}

#[tokio::test]
async fn after_starttls_auth_is_offered_and_the_session_starts_over() {
    let server = Server::start().await;
    let mut client = server.client().await;
    start_tls(&mut client, &server.client_tls).await;

    // RFC 3207: the EHLO before STARTTLS no longer counts.
    client.command(&format!("AUTH PLAIN {}", plain("tidings", KEY)), 503).await;
    let ehlo = client.command("EHLO app.example", 250).await;

    assert!(ehlo.lines.iter().any(|l| l == "AUTH PLAIN LOGIN"), "{ehlo:?}");
    assert!(!ehlo.lines.iter().any(|l| l == "STARTTLS"), "{ehlo:?}");
    client.command("STARTTLS", 503).await;
    client.command("MAIL FROM:<app@acme.example>", 530).await;
}

#[tokio::test]
async fn plaintext_pipelined_after_starttls_is_discarded() {
    let server = Server::start().await;
    let mut client = server.client().await;

    client.send("STARTTLS\r\nMAIL FROM:<injected@evil.example>\r\n").await;
    client.expect(220).await;
    client.handshake(server.client_tls.clone()).await;

    // The first reply over TLS answers this EHLO, not the injected MAIL.
    let ehlo = client.command("EHLO app.example", 250).await;
    assert_eq!(ehlo.lines[0], "submit.test");
    client.command("NOOP", 250).await;
}

#[tokio::test]
async fn an_authenticated_client_submits_and_the_handler_gets_its_principal() {
    let server = Server::start().await;
    let mut client = server.authenticated_client().await;

    client.command("MAIL FROM:<bounce@acme.example>", 250).await;
    client.command("RCPT TO:<a@dest.example>", 250).await;
    let refused = client.command(&format!("RCPT TO:<{SUPPRESSED}>"), 550).await;
    client.command("RCPT TO:<b@dest.example>", 250).await;
    client.command("DATA", 354).await;
    client.send("Subject: hi\r\n\r\nbody\r\n.\r\n").await;
    let queued = client.expect(250).await;

    assert_eq!(refused.lines[0], "5.1.1 Recipient is on the suppression list");
    assert_eq!(queued.lines[0], "2.0.0 Message queued");
    let (envelope, raw) = server.handler.received.lock().unwrap().remove(0);
    assert_eq!(envelope.principal, Some(principal()));
    let recipients: Vec<String> = envelope.recipients.iter().map(ToString::to_string).collect();
    assert_eq!(recipients, ["a@dest.example", "b@dest.example"]);
    assert_eq!(raw, b"Subject: hi\r\n\r\nbody\r\n");
    assert_eq!(server.handler.logins.lock().unwrap()[0].username, "tidings");
    assert_eq!(server.stats.snapshot().rejected_recipients, 1);
}

#[tokio::test]
async fn auth_login_answers_both_prompts() {
    let server = Server::start().await;
    let mut client = server.tls_client().await;

    let username = client.command("AUTH LOGIN", 334).await;
    assert_eq!(username.lines[0], "VXNlcm5hbWU6");
    let password = client.command(&STANDARD.encode("anyone"), 334).await;
    assert_eq!(password.lines[0], "UGFzc3dvcmQ6");
    client.command(&STANDARD.encode(KEY), 235).await;

    client.command(&format!("AUTH PLAIN {}", plain("tidings", KEY)), 503).await;
    client.command("MAIL FROM:<>", 250).await;
    assert_eq!(server.handler.logins.lock().unwrap()[0].username, "anyone");
}

#[tokio::test]
async fn auth_plain_without_an_initial_response_gets_an_empty_challenge() {
    let server = Server::start().await;
    let mut client = server.tls_client().await;

    client.command("AUTH PLAIN", 334).await;
    client.command(&plain("tidings", KEY), 235).await;
}

#[tokio::test]
async fn a_wrong_key_is_535_and_counted() {
    let server = Server::start().await;
    let mut client = server.tls_client().await;

    let reply = client.command(&format!("AUTH PLAIN {}", plain("tidings", "wrong")), 535).await;

    assert!(reply.lines[0].starts_with("5.7.8"));
    client.command("MAIL FROM:<>", 530).await;
    assert_eq!(server.stats.snapshot().auth_failures, 1);
}

#[tokio::test]
async fn a_throttled_client_or_an_unreachable_store_is_454_so_the_client_retries_later() {
    let server = Server::start().await;
    let mut client = server.tls_client().await;

    let throttled = client.command(&format!("AUTH PLAIN {}", plain("tidings", "throttled")), 454).await;
    let unavailable = client.command(&format!("AUTH PLAIN {}", plain("tidings", "store-down")), 454).await;

    assert!(throttled.lines[0].starts_with("4.7.0 Too many failed"), "{throttled:?}");
    assert!(unavailable.lines[0].starts_with("4.7.0 Temporary"), "{unavailable:?}");
    client.command(&format!("AUTH PLAIN {}", plain("tidings", KEY)), 235).await;
}

#[tokio::test]
async fn malformed_auth_exchanges_get_their_own_replies() {
    let server = Server::start().await;
    let mut client = server.tls_client().await;

    client.command("AUTH PLAIN not*base64", 501).await;
    client.command(&format!("AUTH PLAIN {}", STANDARD.encode("no-nul-separators")), 501).await;
    client.command("AUTH CRAM-MD5", 504).await;
    client.command("AUTH", 501).await;
    client.command("AUTH LOGIN", 334).await;
    let cancelled = client.command("*", 501).await;
    assert!(cancelled.lines[0].starts_with("5.0.0"));
    client.command("AUTH LOGIN", 334).await;
    client.command("%%%", 501).await;
    // Still able to authenticate afterwards.
    client.command(&format!("AUTH PLAIN {}", plain("", KEY)), 235).await;
}

#[tokio::test]
async fn a_handler_refusal_after_data_is_its_reply() {
    let server = Server::start().await;
    server.handler.fail_with(HandlerError::Refused(Refusal::new(451, "4.7.1", "Rate limit exceeded\r\n250 injected")));
    let mut client = server.authenticated_client().await;
    client.command("MAIL FROM:<>", 250).await;
    client.command("RCPT TO:<a@dest.example>", 250).await;
    client.command("DATA", 354).await;

    client.send("Subject: hi\r\n\r\nbody\r\n.\r\n").await;

    let reply = client.expect(451).await;
    assert_eq!(reply.lines, ["4.7.1 Rate limit exceeded??250 injected"]);
    client.command("NOOP", 250).await;
}

#[tokio::test]
async fn with_implicit_tls_the_handshake_comes_first_and_auth_is_offered_at_once() {
    let server = Server::start_with(InboundSettings::submission_implicit_tls).await;
    let mut client = Client::connect(server.addr).await;

    client.handshake(server.client_tls.clone()).await;

    client.expect(220).await;
    let ehlo = client.command("EHLO app.example", 250).await;
    assert!(ehlo.lines.iter().any(|l| l == "AUTH PLAIN LOGIN"), "{ehlo:?}");
    assert!(!ehlo.lines.iter().any(|l| l == "STARTTLS"), "{ehlo:?}");
    client.command("STARTTLS", 503).await;
    client.command(&format!("AUTH PLAIN {}", plain("tidings", KEY)), 235).await;
    client.command("MAIL FROM:<app@acme.example>", 250).await;
}

#[tokio::test]
async fn with_implicit_tls_a_plaintext_client_gets_no_smtp_at_all() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start_with(InboundSettings::submission_implicit_tls).await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();

    tcp.write_all(b"EHLO app.example\r\n").await.unwrap();

    let mut answer = Vec::new();
    let read = tokio::time::timeout(crate::common::WAIT, tcp.read_to_end(&mut answer)).await.expect("closed in time");
    // A TLS alert at most, then the connection ends; never a greeting or a reply.
    assert!(read.is_err() || !answer.windows(3).any(|w| w == b"220" || w == b"250"), "{answer:?}");
}
