//! [`SmtpSink`]'s public face: starting it, scripting it, and reading what it received;
//! and the state its sessions share.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::CertificateDer;

use super::certs;
use super::script::{Action, Rule, Stage, take_action};
use super::server;

/// Whether and how the sink speaks TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SinkTls {
    /// Plain SMTP; STARTTLS is not offered.
    #[default]
    None,
    /// STARTTLS is offered, with a certificate signed by the sink's own CA
    /// ([`SmtpSink::ca_pem`]).
    StartTls,
    /// STARTTLS is offered and accepted with 220, then garbage is sent instead of a TLS
    /// handshake and the connection is closed.
    BrokenStartTls,
    /// TLS from the first byte (`smtps://`), same certificate as `StartTls`.
    Implicit,
}

/// How a sink behaves. `Default` is plain SMTP on a free port of 127.0.0.1, no AUTH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkConfig {
    /// Address to listen on. Default `127.0.0.1:0` (a free port).
    pub bind: SocketAddr,
    /// TLS.
    pub tls: SinkTls,
    /// When set, AUTH PLAIN and LOGIN are offered and MAIL is refused (530) until the
    /// client authenticates with exactly this user name and password.
    pub auth: Option<(String, String)>,
    /// Largest message accepted; a larger one is read to its end, discarded and refused
    /// with 552. Advertised as SIZE. Default 10 MiB.
    pub max_message_bytes: usize,
    /// Longest line, CRLF included, of a command or of the message (RFC 5321 §4.5.3.1:
    /// 1000); a longer one is refused with 500. Default 1000.
    pub max_line_bytes: usize,
    /// Keep each accepted message for [`SmtpSink::messages`]. Turn off for benchmarks,
    /// where only the counts matter. Default `true`.
    pub retain_messages: bool,
    /// The name in the greeting and the certificate. Default `sink.tidings.test`.
    pub hostname: String,
    /// Also counts this sink's open connections in a tally shared with other sinks, for a
    /// cap that spans several servers (a delivery site's). Default `None`.
    pub tally: Option<ConnectionTally>,
}

/// Open connections counted over every sink given it ([`SinkConfig::tally`]), and the most
/// that were open at once. As in a sink's own count, a connection counts as closed once
/// the client has sent QUIT, before the sink answers it: a client that opens its next
/// connection after the 221 is then never seen over its cap.
#[derive(Debug, Clone, Default)]
pub struct ConnectionTally(Arc<Mutex<TallyCounts>>);

#[derive(Debug, Default)]
struct TallyCounts {
    open: usize,
    max_open: usize,
}

impl ConnectionTally {
    /// Connections open right now, over every sink.
    pub fn open(&self) -> usize {
        self.counts().open
    }

    /// The most connections that were open at once, over every sink.
    pub fn max_open(&self) -> usize {
        self.counts().max_open
    }

    fn opened(&self) {
        let mut counts = self.counts();
        counts.open += 1;
        counts.max_open = counts.max_open.max(counts.open);
    }

    fn closed(&self) {
        self.counts().open -= 1;
    }

    fn counts(&self) -> MutexGuard<'_, TallyCounts> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Tallies are equal when they are the same tally.
impl PartialEq for ConnectionTally {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ConnectionTally {}

impl Default for SinkConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            tls: SinkTls::None,
            auth: None,
            max_message_bytes: 10 * 1024 * 1024,
            max_line_bytes: 1000,
            retain_messages: true,
            hostname: "sink.tidings.test".to_owned(),
            tally: None,
        }
    }
}

/// A message the sink accepted (it answered 250 to the final dot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// Which connection carried it (1 for the first accepted connection, and so on).
    pub connection: u64,
    /// The EHLO/HELO argument.
    pub helo: String,
    /// MAIL FROM address, without angle brackets.
    pub mail_from: String,
    /// RCPT TO addresses, in order.
    pub recipients: Vec<String>,
    /// The message as received, dot-unstuffed, CRLF line ends, without the final dot line.
    pub data: Vec<u8>,
    /// Whether the connection was encrypted.
    pub tls: bool,
    /// The user name the client authenticated as.
    pub auth_identity: Option<String>,
    /// The client's address, as a receiver's SPF check would take it.
    pub peer: Option<std::net::IpAddr>,
}

impl ReceivedMessage {
    /// The data as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

/// A wait ran out before the sink saw what was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("waited {waited:?} for {wanted} {what}, saw {seen}")]
pub struct WaitTimeout {
    /// What was awaited.
    pub what: &'static str,
    /// How many were wanted.
    pub wanted: usize,
    /// How many there were when the wait ended.
    pub seen: usize,
    /// How long it waited.
    pub waited: Duration,
}

/// A real SMTP server on loopback that records what it receives and misbehaves on demand.
/// Stops (closing every connection) when dropped, or at once with [`SmtpSink::stop`]. Must
/// be started inside a Tokio runtime.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use tidings_transport_smtp::testing::{Rule, SmtpSink, Stage};
///
/// let sink = SmtpSink::start().await?;
/// sink.add_rule(Rule::reply(Stage::Rcpt, 451, "4.7.1 try again later").times(1));
/// // ... point a mailer at sink.addr() and send two messages ...
/// let received = sink.wait_for(1, Duration::from_secs(5)).await?;
/// assert_eq!(received[0].recipients, ["to@example.com"]);
/// # Ok(()) }
/// ```
pub struct SmtpSink {
    addr: SocketAddr,
    shared: Arc<Shared>,
    ca_pem: Option<String>,
    ca_der: Option<CertificateDer<'static>>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for SmtpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpSink").field("addr", &self.addr).field("tls", &self.shared.config.tls).finish()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        // Dropping the accept task drops its JoinSet, which aborts every session.
        self.accept.abort();
    }
}

impl SmtpSink {
    /// A plain sink on a free loopback port.
    pub async fn start() -> io::Result<Self> {
        Self::start_with(SinkConfig::default()).await
    }

    /// A sink configured by `config`.
    pub async fn start_with(config: SinkConfig) -> io::Result<Self> {
        let listener = TcpListener::bind(config.bind).await?;
        let addr = listener.local_addr()?;
        let certificates = match config.tls {
            SinkTls::None => None,
            SinkTls::StartTls | SinkTls::BrokenStartTls | SinkTls::Implicit => {
                let mut names = vec![config.hostname.clone(), "localhost".into(), "127.0.0.1".into(), "::1".into()];
                let ip = addr.ip().to_string();
                if !names.contains(&ip) {
                    names.push(ip);
                }
                Some(certs::generate(names)?)
            }
        };
        let (ca_pem, ca_der, acceptor) = match certificates {
            Some(certificates) => (Some(certificates.ca_pem), Some(certificates.ca_der), Some(certificates.acceptor)),
            None => (None, None, None),
        };
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(State::default()),
            counters: watch::Sender::new(Counters::default()),
            hold: watch::Sender::new(None),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared), acceptor));
        Ok(Self { addr, shared, ca_pem, ca_der, accept })
    }

    /// Stops accepting, closes the port and every connection, and returns once the port is
    /// closed (dropping the sink does the same, but in the background).
    pub async fn stop(mut self) {
        self.accept.abort();
        let _ = (&mut self.accept).await;
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The PEM of the CA that signed its certificate, when it speaks TLS: what a client
    /// must trust to verify it.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The same CA certificate, DER (for a trust store).
    pub fn ca_der(&self) -> Option<CertificateDer<'static>> {
        self.ca_der.clone()
    }

    /// Adds a scripted deviation, matched after those added before it.
    pub fn add_rule(&self, rule: Rule) {
        self.shared.state().rules.push(rule);
    }

    /// Removes every rule.
    pub fn clear_rules(&self) {
        self.shared.state().rules.clear();
    }

    /// From now on, sessions reaching `stage` wait there (before answering) until
    /// [`SmtpSink::release`]. With [`Stage::Message`] they wait after reading the whole
    /// message, before the 250. For tests that need deliveries in flight at once.
    pub fn hold(&self, stage: Stage) {
        self.shared.hold.send_replace(Some(stage));
    }

    /// Lets held sessions go on, and stops holding.
    pub fn release(&self) {
        self.shared.hold.send_replace(None);
    }

    /// Waits until `n` sessions are held (see [`SmtpSink::hold`]).
    pub async fn wait_for_held(&self, n: usize, timeout: Duration) -> Result<(), WaitTimeout> {
        self.wait_until("held sessions", n, timeout, |counters| counters.held, |seen| seen >= n).await
    }

    /// Waits until exactly `n` connections are open (e.g. 0: the client closed them all).
    pub async fn wait_for_open_connections(&self, n: usize, timeout: Duration) -> Result<(), WaitTimeout> {
        self.wait_until("open connections", n, timeout, |counters| counters.open, |seen| seen == n).await
    }

    /// Waits until `n` messages have been accepted in all, then returns those retained.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Result<Vec<ReceivedMessage>, WaitTimeout> {
        self.wait_until("messages", n, timeout, |counters| counters.accepted, |seen| seen >= n).await?;
        Ok(self.messages())
    }

    /// The messages accepted so far, in order (empty when not retained).
    pub fn messages(&self) -> Vec<ReceivedMessage> {
        self.shared.state().messages.clone()
    }

    /// Messages accepted so far (retained or not).
    pub fn message_count(&self) -> usize {
        self.shared.counters.borrow().accepted
    }

    /// Connections accepted so far.
    pub fn connection_count(&self) -> usize {
        self.shared.counters.borrow().connections
    }

    /// Connections open right now (one that sent QUIT is closed).
    pub fn open_connections(&self) -> usize {
        self.shared.counters.borrow().open
    }

    /// The most connections that were open at once.
    pub fn max_concurrent_connections(&self) -> usize {
        self.shared.counters.borrow().max_open
    }

    async fn wait_until(
        &self,
        what: &'static str,
        wanted: usize,
        timeout: Duration,
        count: impl Fn(&Counters) -> usize,
        done: impl Fn(usize) -> bool,
    ) -> Result<(), WaitTimeout> {
        let mut counters = self.shared.counters.subscribe();
        let reached = tokio::time::timeout(timeout, counters.wait_for(|c| done(count(c)))).await;
        match reached {
            Ok(Ok(_)) => Ok(()),
            _ => Err(WaitTimeout { what, wanted, seen: count(&self.shared.counters.borrow()), waited: timeout }),
        }
    }
}

/// Accepts connections until aborted; each session runs in the JoinSet, so it ends with it.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, acceptor: Option<TlsAcceptor>) {
    let mut sessions = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    sessions.spawn(server::serve(stream, Arc::clone(&shared), acceptor.clone()));
                }
                // Out of file descriptors and the like: let sessions finish, then go on.
                Err(_) => tokio::task::yield_now().await,
            },
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
        }
    }
}

/// What the sessions of one sink share.
pub(super) struct Shared {
    pub(super) config: SinkConfig,
    state: Mutex<State>,
    counters: watch::Sender<Counters>,
    hold: watch::Sender<Option<Stage>>,
}

#[derive(Default)]
struct State {
    messages: Vec<ReceivedMessage>,
    rules: Vec<Rule>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    accepted: usize,
    connections: usize,
    open: usize,
    max_open: usize,
    held: usize,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a new connection until the guard is dropped; the guard knows its number.
    pub(super) fn open_connection(self: &Arc<Self>) -> ConnectionGuard {
        let mut id = 0;
        self.counters.send_modify(|c| {
            c.connections += 1;
            c.open += 1;
            c.max_open = c.max_open.max(c.open);
            id = c.connections as u64;
        });
        if let Some(tally) = &self.config.tally {
            tally.opened();
        }
        ConnectionGuard { shared: Arc::clone(self), id, closed: AtomicBool::new(false) }
    }

    /// The scripted action at `stage`, if a rule matches.
    pub(super) fn action(&self, stage: Stage, recipients: &[String]) -> Option<Action> {
        take_action(&mut self.state().rules, stage, recipients)
    }

    /// Waits while the sink holds `stage`.
    pub(super) async fn hold_point(&self, stage: Stage) {
        let mut hold = self.hold.subscribe();
        if *hold.borrow_and_update() != Some(stage) {
            return;
        }
        let _held = HeldGuard::new(&self.counters);
        let _ = hold.wait_for(|held| *held != Some(stage)).await;
    }

    /// Records an accepted message; returns how many have been accepted.
    pub(super) fn record(&self, message: ReceivedMessage) -> usize {
        if self.config.retain_messages {
            self.state().messages.push(message);
        }
        let mut accepted = 0;
        self.counters.send_modify(|c| {
            c.accepted += 1;
            accepted = c.accepted;
        });
        accepted
    }
}

/// Keeps a connection counted as open until [`ConnectionGuard::close`] or its drop.
pub(super) struct ConnectionGuard {
    shared: Arc<Shared>,
    pub(super) id: u64,
    closed: AtomicBool,
}

impl ConnectionGuard {
    /// Counts the connection as closed (the client sent QUIT), once.
    pub(super) fn close(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            self.shared.counters.send_modify(|c| c.open -= 1);
            if let Some(tally) = &self.shared.config.tally {
                tally.closed();
            }
        }
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.close();
    }
}

/// Keeps a session counted as held, even if it is aborted while waiting.
struct HeldGuard<'a> {
    counters: &'a watch::Sender<Counters>,
}

impl<'a> HeldGuard<'a> {
    fn new(counters: &'a watch::Sender<Counters>) -> Self {
        counters.send_modify(|c| c.held += 1);
        Self { counters }
    }
}

impl Drop for HeldGuard<'_> {
    fn drop(&mut self) {
        self.counters.send_modify(|c| c.held -= 1);
    }
}
