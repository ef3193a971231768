//! The submission role over real sockets and real TLS: STARTTLS, AUTH PLAIN and LOGIN only
//! under TLS, MAIL only after AUTH, recipients vetted by the handler, and the handler's
//! refusals as replies.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{ApiKeyId, WorkspaceId};
use tidings_core::model::{KeyScope, RateLimit};
use tidings_core::usecases::Principal;
use tidings_inbound_smtp::{
    AuthFailure, Credentials, Envelope, HandlerError, InboundHandler, InboundListener, InboundSettings, InboundStats,
    Refusal,
};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::crypto::aws_lc_rs;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};

const WAIT: Duration = Duration::from_secs(10);
const KEY: &str = "good-key";
const SUPPRESSED: &str = "gone@dest.example";

fn principal() -> Principal {
    Principal {
        workspace_id: WorkspaceId::from_bytes([1; 16]),
        key_id: ApiKeyId::from_bytes([2; 16]),
        scope: KeyScope::Send,
        sending_domain_id: None,
        rate_limit: RateLimit::new(10).unwrap(),
    }
}

/// Takes `good-key` as the only password, refuses `gone@dest.example`, records messages.
#[derive(Default)]
struct Handler {
    received: Mutex<Vec<(Envelope, Vec<u8>)>>,
    logins: Mutex<Vec<Credentials>>,
    refuse_data: Mutex<Option<HandlerError>>,
}

#[async_trait]
impl InboundHandler for Handler {
    async fn receive(&self, envelope: Envelope, raw: Vec<u8>) -> Result<(), HandlerError> {
        if let Some(error) = self.refuse_data.lock().unwrap().clone() {
            return Err(error);
        }
        self.received.lock().unwrap().push((envelope, raw));
        Ok(())
    }

    async fn authenticate(&self, _client: IpAddr, credentials: Credentials) -> Result<Principal, AuthFailure> {
        let answer = match credentials.password.as_str() {
            KEY => Ok(principal()),
            "throttled" => Err(AuthFailure::Throttled),
            "store-down" => Err(AuthFailure::Unavailable),
            _ => Err(AuthFailure::Invalid),
        };
        self.logins.lock().unwrap().push(credentials);
        answer
    }

    async fn check_recipient(&self, _who: &Principal, recipient: &EmailAddress) -> Result<(), HandlerError> {
        if recipient.to_string() == SUPPRESSED {
            return Err(HandlerError::Refused(Refusal::new(550, "5.1.1", "Recipient is on the suppression list")));
        }
        Ok(())
    }
}

struct Server {
    addr: SocketAddr,
    handler: Arc<Handler>,
    stats: Arc<InboundStats>,
    client_tls: Arc<ClientConfig>,
    _stop: oneshot::Sender<()>,
}

impl Server {
    async fn start() -> Self {
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

        let mut settings = InboundSettings::submission(Arc::new(server_tls));
        settings.hostname = "submit.test".to_owned();
        let handler = Arc::new(Handler::default());
        let listener = InboundListener::bind("127.0.0.1:0".parse().unwrap(), settings, handler.clone()).await.unwrap();
        let (addr, stats) = (listener.local_addr(), listener.stats());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(listener.serve(async move {
            let _ = stopped.await;
        }));
        Self { addr, handler, stats, client_tls: Arc::new(client_tls), _stop: stop }
    }

    /// A client greeted in plaintext.
    async fn client(&self) -> Client {
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        let mut client = Client { conn: BufReader::new(Box::new(tcp)), tls: self.client_tls.clone() };
        client.expect(220).await;
        client.command("EHLO app.example", 250).await;
        client
    }

    /// A client after STARTTLS and a second EHLO.
    async fn tls_client(&self) -> Client {
        let mut client = self.client().await;
        client.start_tls().await;
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

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

struct Client {
    conn: BufReader<Box<dyn Io>>,
    tls: Arc<ClientConfig>,
}

#[derive(Debug)]
struct Reply {
    code: u16,
    lines: Vec<String>,
}

impl Client {
    async fn send(&mut self, text: &str) {
        self.conn.get_mut().write_all(text.as_bytes()).await.unwrap();
    }

    async fn try_reply(&mut self) -> Option<Reply> {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = tokio::time::timeout(WAIT, self.conn.read_line(&mut line)).await.expect("no reply").ok()?;
            if n == 0 {
                return None;
            }
            let code = line[..3].parse().unwrap();
            lines.push(line[4..].trim_end().to_owned());
            if line.as_bytes()[3] == b' ' {
                return Some(Reply { code, lines });
            }
        }
    }

    async fn expect(&mut self, code: u16) -> Reply {
        let reply = self.try_reply().await.expect("connection closed");
        assert_eq!(reply.code, code, "{reply:?}");
        reply
    }

    async fn command(&mut self, line: &str, code: u16) -> Reply {
        self.send(&format!("{line}\r\n")).await;
        self.expect(code).await
    }

    async fn start_tls(&mut self) {
        self.command("STARTTLS", 220).await;
        self.handshake().await;
    }

    async fn handshake(&mut self) {
        // A placeholder stream while the TCP one is in the handshake.
        let plain = std::mem::replace(&mut self.conn, BufReader::new(Box::new(tokio::io::duplex(1).0)));
        let connector = TlsConnector::from(self.tls.clone());
        let name = ServerName::try_from("localhost").unwrap();
        let tls = connector.connect(name, plain.into_inner()).await.unwrap();
        self.conn = BufReader::new(Box::new(tls));
    }
}

#[tokio::test]
async fn plaintext_offers_starttls_but_refuses_auth_and_mail() {
    let server = Server::start().await;
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let mut client = Client { conn: BufReader::new(Box::new(tcp)), tls: server.client_tls.clone() };
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
    client.start_tls().await;

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
    client.handshake().await;

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
    *server.handler.refuse_data.lock().unwrap() =
        Some(HandlerError::Refused(Refusal::new(451, "4.7.1", "Rate limit exceeded\r\n250 injected")));
    let mut client = server.authenticated_client().await;
    client.command("MAIL FROM:<>", 250).await;
    client.command("RCPT TO:<a@dest.example>", 250).await;
    client.command("DATA", 354).await;

    client.send("Subject: hi\r\n\r\nbody\r\n.\r\n").await;

    let reply = client.expect(451).await;
    assert_eq!(reply.lines, ["4.7.1 Rate limit exceeded??250 injected"]);
    client.command("NOOP", 250).await;
}
