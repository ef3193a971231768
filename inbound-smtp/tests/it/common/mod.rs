//! Helpers shared by the listener tests: a recording handler, a listener on loopback, and
//! a raw SMTP client that reads whole (multi-line) replies and can do STARTTLS.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tidings_core::domain_name::DomainName;
use tidings_core::email::EmailAddress;
use tidings_core::ids::{ApiKeyId, WorkspaceId};
use tidings_core::model::{KeyScope, RateLimit};
use tidings_core::usecases::Principal;
use tidings_inbound_smtp::{
    AuthFailure, Credentials, Envelope, HandlerError, InboundHandler, InboundListener, InboundSettings, InboundStats,
    Refusal,
};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::rustls::pki_types::ServerName;

/// How long a test waits for something that should happen at once.
pub const WAIT: Duration = Duration::from_secs(10);

/// The accepted (return-path) domain.
pub const DOMAIN: &str = "bounces.example";

/// Settings accepting `bounces.example`, hostname `mx.test`.
pub fn settings() -> InboundSettings {
    let mut settings = InboundSettings::new(DomainName::parse(DOMAIN).unwrap());
    settings.hostname = "mx.test".to_owned();
    settings
}

/// The one password [`RecordingHandler`] takes (submission); `throttled` and `store-down`
/// get those failures, anything else is wrong.
pub const KEY: &str = "good-key";
/// The recipient [`RecordingHandler`] refuses at RCPT (submission).
pub const SUPPRESSED: &str = "gone@dest.example";
/// The one address off [`DOMAIN`] that [`RecordingHandler`] vouches for (reports): a sending
/// domain's own return path; "down@bounces.acme.example" fails the check.
pub const VOUCHED: &str = "bounces+x@bounces.acme.example";

/// Who [`KEY`] authenticates as.
pub fn principal() -> Principal {
    Principal {
        workspace_id: WorkspaceId::from_bytes([1; 16]),
        key_id: ApiKeyId::from_bytes([2; 16]),
        scope: KeyScope::Send,
        sending_domain_id: None,
        rate_limit: RateLimit::new(10).unwrap(),
    }
}

/// Records what it receives and answers with a scripted result; as a submission handler it
/// takes [`KEY`] and refuses [`SUPPRESSED`].
#[derive(Default)]
pub struct RecordingHandler {
    pub received: Mutex<Vec<(Envelope, Vec<u8>)>>,
    pub answer: Mutex<Option<HandlerError>>,
    pub logins: Mutex<Vec<Credentials>>,
    /// Every recipient `accepts_report_to` was asked about.
    pub asked: Mutex<Vec<EmailAddress>>,
}

impl RecordingHandler {
    pub fn received(&self) -> Vec<(Envelope, Vec<u8>)> {
        self.received.lock().unwrap().clone()
    }

    /// Makes every following `receive` fail with `error`.
    pub fn fail_with(&self, error: HandlerError) {
        *self.answer.lock().unwrap() = Some(error);
    }
}

#[async_trait]
impl InboundHandler for RecordingHandler {
    async fn receive(&self, envelope: Envelope, raw: Vec<u8>) -> Result<(), HandlerError> {
        if let Some(error) = self.answer.lock().unwrap().clone() {
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

    async fn accepts_report_to(&self, recipient: &EmailAddress) -> Result<bool, HandlerError> {
        self.asked.lock().unwrap().push(recipient.clone());
        match recipient.to_string().as_str() {
            VOUCHED => Ok(true),
            "down@bounces.acme.example" => Err(HandlerError::Temporary("store down".into())),
            _ => Ok(false),
        }
    }
}

/// A listener serving on loopback in a background task.
pub struct TestServer {
    pub addr: SocketAddr,
    pub handler: Arc<RecordingHandler>,
    pub stats: Arc<InboundStats>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl TestServer {
    pub async fn start(settings: InboundSettings) -> Self {
        let handler = Arc::new(RecordingHandler::default());
        let listener = InboundListener::bind("127.0.0.1:0".parse().unwrap(), settings, handler.clone()).await.unwrap();
        let (addr, stats) = (listener.local_addr(), listener.stats());
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(listener.serve(async move {
            let _ = stopped.await;
        }));
        Self { addr, handler, stats, stop: Some(stop), task }
    }

    /// A raw client, greeting already read and checked.
    pub async fn client(&self) -> Client {
        let mut client = Client::connect(self.addr).await;
        client.expect(220).await;
        client
    }

    /// A client that has sent `EHLO`.
    pub async fn greeted_client(&self) -> Client {
        let mut client = self.client().await;
        client.command("EHLO client.example", 250).await;
        client
    }

    /// Signals shutdown and waits until `serve` returns.
    pub async fn shut_down(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(WAIT, &mut self.task).await.expect("serve did not return").unwrap();
    }
}

/// One SMTP reply: its code and the text of each line.
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub lines: Vec<String>,
}

/// A connection, plain or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A byte-level SMTP client.
pub struct Client {
    conn: BufReader<Box<dyn Io>>,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Self {
        Self { conn: BufReader::new(Box::new(TcpStream::connect(addr).await.unwrap())) }
    }

    /// A connection from `source`, a loopback address of the client's choosing (loopback has
    /// all of 127.0.0.0/8), so that one test can play several clients.
    pub async fn connect_from(source: IpAddr, addr: SocketAddr) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(source, 0)).unwrap();
        Self { conn: BufReader::new(Box::new(socket.connect(addr).await.unwrap())) }
    }

    /// Sends `bytes`, `false` when the server no longer takes them (closed, or not reading
    /// within a second).
    pub async fn try_send(&mut self, bytes: &[u8]) -> bool {
        let writing = self.conn.get_mut().write_all(bytes);
        matches!(tokio::time::timeout(Duration::from_secs(1), writing).await, Ok(Ok(())))
    }

    pub async fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.conn.get_mut().write_all(bytes.as_ref()).await.unwrap();
    }

    /// The TLS handshake after the server's `220` to STARTTLS, as `localhost`; anything the
    /// client had buffered in plaintext is dropped.
    pub async fn handshake(&mut self, tls: Arc<ClientConfig>) {
        // A placeholder stream while the TCP one is in the handshake.
        let plain = std::mem::replace(&mut self.conn, BufReader::new(Box::new(tokio::io::duplex(1).0)));
        let name = ServerName::try_from("localhost").unwrap();
        let stream = TlsConnector::from(tls).connect(name, plain.into_inner()).await.unwrap();
        self.conn = BufReader::new(Box::new(stream));
    }

    /// Reads one reply; `None` when the server closed the connection first.
    pub async fn try_reply(&mut self) -> Option<Reply> {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = tokio::time::timeout(WAIT, self.conn.read_line(&mut line)).await.expect("no reply in time").ok()?;
            if n == 0 {
                return None;
            }
            assert!(line.ends_with("\r\n"), "reply line without CRLF: {line:?}");
            let code = line[..3].parse().expect("reply without a code");
            let last = line.as_bytes()[3] == b' ';
            lines.push(line[4..line.len() - 2].to_owned());
            if last {
                return Some(Reply { code, lines });
            }
        }
    }

    pub async fn reply(&mut self) -> Reply {
        self.try_reply().await.expect("connection closed instead of a reply")
    }

    /// Reads a reply and checks its code.
    pub async fn expect(&mut self, code: u16) -> Reply {
        let reply = self.reply().await;
        assert_eq!(reply.code, code, "unexpected reply {reply:?}");
        reply
    }

    /// Sends one command line and returns its reply, whatever the code.
    pub async fn command_reply(&mut self, line: &str) -> Reply {
        self.send(format!("{line}\r\n")).await;
        self.reply().await
    }

    /// Sends one command line and checks the reply code.
    pub async fn command(&mut self, line: &str, code: u16) -> Reply {
        self.send(format!("{line}\r\n")).await;
        self.expect(code).await
    }

    /// Asserts the server closed the connection (after any replies already read).
    pub async fn expect_closed(&mut self) {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(WAIT, self.conn.read_to_end(&mut rest)).await.expect("connection not closed");
        // A reset counts as closed too.
        if read.is_ok() {
            assert!(rest.is_empty(), "unexpected bytes before close: {:?}", String::from_utf8_lossy(&rest));
        }
    }
}

/// The return path of message `01abc...`.
pub const RETURN_PATH: &str = "bounces+01hzxq5ab3kjv7m2c9d8e6f4g0@bounces.example";

/// A small DSN-like report, CRLF line endings, with a line starting with a dot.
pub fn dsn() -> String {
    "From: MAILER-DAEMON@mx.remote.example\r\n\
     To: bounces+01hzxq5ab3kjv7m2c9d8e6f4g0@bounces.example\r\n\
     Subject: Delivery Status Notification (Failure)\r\n\
     MIME-Version: 1.0\r\n\
     Content-Type: multipart/report; report-type=delivery-status; boundary=\"b1\"\r\n\
     \r\n\
     --b1\r\n\
     Content-Type: text/plain\r\n\
     \r\n\
     .The message could not be delivered.\r\n\
     --b1\r\n\
     Content-Type: message/delivery-status\r\n\
     \r\n\
     Reporting-MTA: dns; mx.remote.example\r\n\
     \r\n\
     Final-Recipient: rfc822; nobody@remote.example\r\n\
     Action: failed\r\n\
     Status: 5.1.1\r\n\
     Diagnostic-Code: smtp; 550 5.1.1 User unknown\r\n\
     --b1--"
        .to_owned()
}
