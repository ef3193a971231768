//! One SMTP session: the command loop, the transaction state and the replies; on a
//! submission listener also STARTTLS and AUTH.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tidings_core::client_group::client_group;
use tidings_core::email::EmailAddress;
use tidings_core::usecases::Principal;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_rustls::TlsAcceptor;

use crate::activity::{Activity, Registry};
use crate::budget::{DataBudget, Shortage};
use crate::command::{Command, ForwardPath, parse_command};
use crate::data::{Data, read_data};
use crate::handler::{AuthFailure, Credentials, Envelope, InboundHandler};
use crate::line::{Line, read_line};
use crate::message_budget::MessageBudget;
use crate::message_rate::{MessageRate, MessageSlot};
use crate::places::Place;
use crate::reply;
use crate::sasl::{self, Mechanism, SaslError};
use crate::settings::{InboundSettings, Role};
use crate::stats::{Counter, InboundStats};
use crate::stream::Stream;

/// What the listener shares with every session.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) settings: Arc<InboundSettings>,
    pub(crate) handler: Arc<dyn InboundHandler>,
    pub(crate) stats: Arc<InboundStats>,
    /// Turns true when the listener shuts down.
    pub(crate) stopping: watch::Receiver<bool>,
    /// Every session's activity, to evict the idlest.
    pub(crate) registry: Arc<Registry>,
    /// The message data budget.
    pub(crate) budget: Arc<DataBudget>,
    /// Messages per client and window.
    pub(crate) rate: Arc<MessageRate>,
}

/// Whether the session goes on after a command.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

/// A mail transaction: from `MAIL` to the end of `DATA` (or `RSET`).
struct Transaction {
    from: Option<EmailAddress>,
    recipients: Vec<EmailAddress>,
    /// The message's place in the client's allowance: spent when it is accepted, given back
    /// when the transaction ends otherwise.
    slot: MessageSlot,
}

/// Which limit ends a wait for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    /// The wait's own timeout (command, data).
    Timeout,
    /// The session's `max_session_time`.
    SessionTime,
}

struct Session {
    shared: Shared,
    peer: SocketAddr,
    /// What the session is doing, for evictions.
    activity: Arc<Activity>,
    /// The connection; writes go through the reader to the stream underneath.
    conn: BufReader<Stream>,
    /// Replies not yet written: flushed when the client has nothing more pipelined.
    out: Vec<u8>,
    helo: Option<String>,
    /// Who authenticated (submission only); cleared by STARTTLS as RFC 3207 requires.
    principal: Option<Principal>,
    transaction: Option<Transaction>,
    errors: usize,
    /// When the session must end (`max_session_time` after the connection).
    deadline: Instant,
}

/// How long an evicted session, or one over its time, may take to send its last replies
/// and close: its place must come free even if its client does not read.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// A session time longer than any listener runs, in place of one too large for a deadline.
const UNLIMITED: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Serves one connection in `place` to its end. I/O errors just end it: the peer went away.
/// Whatever the session is waiting for, an eviction ends it with `421`.
pub(crate) async fn run(stream: TcpStream, peer: SocketAddr, shared: Shared, place: Place) {
    let entry = shared.registry.register();
    let deadline = Instant::now() + shared.settings.max_session_time.min(UNLIMITED);
    let mut session = Session {
        peer,
        activity: Arc::clone(entry.activity()),
        conn: BufReader::new(Stream::Plain(stream)),
        out: reply::greeting(&shared.settings.hostname, &shared.settings.role).into_bytes(),
        shared,
        helo: None,
        principal: None,
        transaction: None,
        errors: 0,
        deadline,
    };
    tracing::debug!(%peer, "inbound session started");
    // The eviction branch can only win while the session waits for its client: the
    // activity refuses to evict a busy session, so no handler call is ever cut short.
    let result = tokio::select! {
        biased;
        () = entry.activity().evicted() => Ok(()),
        result = session.open_and_serve() => result,
    };
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "inbound session ended by an I/O error");
    }
    let evicted = entry.activity().is_evicted();
    if evicted {
        session.shared.stats.bump(Counter::Evicted);
        tracing::debug!(%peer, "inbound session evicted to make room");
        session.out.clear();
        session.say(reply::EVICTED);
    }
    let grace = if evicted || Instant::now() >= session.deadline {
        CLOSE_GRACE
    } else {
        session.shared.settings.command_timeout
    };
    let _ = timeout(grace, async {
        let out = std::mem::take(&mut session.out);
        let _ = session.conn.write_all(&out).await;
        let _ = session.conn.shutdown().await;
    })
    .await;
    drop(place);
    tracing::debug!(%peer, "inbound session closed");
}

impl Session {
    /// The implicit TLS handshake where there is one, then the commands.
    async fn open_and_serve(&mut self) -> std::io::Result<()> {
        if let Role::Submission { tls, implicit_tls: true } = &self.shared.settings.role {
            let acceptor = TlsAcceptor::from(Arc::clone(tls));
            let Stream::Plain(tcp) = std::mem::replace(&mut self.conn, BufReader::new(Stream::Closed)).into_inner()
            else {
                return Ok(());
            };
            let (until, limit) = self.wait_until(self.shared.settings.command_timeout);
            match timeout_at(until, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => self.conn = BufReader::new(Stream::Tls(Box::new(tls))),
                Ok(Err(error)) => {
                    self.out.clear();
                    tracing::debug!(peer = %self.peer, %error, "TLS handshake failed");
                    return Ok(());
                }
                Err(_elapsed) => {
                    self.out.clear();
                    self.count_out(limit);
                    return Ok(());
                }
            }
        }
        self.serve().await
    }

    async fn serve(&mut self) -> std::io::Result<()> {
        let mut stopping = self.shared.stopping.clone();
        loop {
            // From here the session waits for its client: it may be evicted if that takes long.
            if !self.activity.progress() {
                return Ok(());
            }
            // RFC 2920: answer a pipelined batch in one write, once its last command is read.
            if self.conn.buffer().is_empty() {
                self.flush().await?;
            }
            // The command boundary: a session over its time takes no further command, even
            // one already pipelined.
            if Instant::now() >= self.deadline {
                self.ran_out(Limit::SessionTime);
                return Ok(());
            }
            let (until, limit) = self.wait_until(self.shared.settings.command_timeout);
            let settings = &self.shared.settings;
            let line = tokio::select! {
                biased;
                _ = stopping.wait_for(|stop| *stop) => {
                    self.say(reply::SHUTTING_DOWN);
                    return Ok(());
                }
                line = timeout_at(until, read_line(&mut self.conn, settings.max_line_bytes)) => line,
            };
            if !self.activity.busy() {
                return Ok(());
            }
            let flow = match line {
                Err(_elapsed) => {
                    self.ran_out(limit);
                    Flow::Close
                }
                Ok(line) => match line? {
                    Line::Eof => Flow::Close,
                    Line::TooLong => self.fail(reply::LINE_TOO_LONG),
                    Line::Complete(bytes) => self.command(&bytes).await?,
                },
            };
            if flow == Flow::Close {
                return Ok(());
            }
        }
    }

    async fn command(&mut self, line: &[u8]) -> std::io::Result<Flow> {
        let command = match parse_command(line) {
            Ok(command) => command,
            Err(error) => return Ok(self.fail(reply::for_error(error))),
        };
        let settings = Arc::clone(&self.shared.settings);
        Ok(match command {
            Command::Ehlo(name) => {
                self.greet(name);
                // Under TLS (after STARTTLS, or implicit) AUTH replaces STARTTLS.
                let extension = match (&settings.role, self.conn.get_ref().is_tls()) {
                    (Role::Reports { .. }, _) => None,
                    (Role::Submission { .. }, false) => Some("STARTTLS"),
                    (Role::Submission { .. }, true) => Some("AUTH PLAIN LOGIN"),
                };
                self.say(&reply::ehlo(&settings.hostname, settings.max_message_bytes, extension))
            }
            Command::Helo(name) => {
                self.greet(name);
                self.say(&reply::helo(&settings.hostname))
            }
            Command::Mail { from, size } => self.mail(from, size),
            Command::Rcpt(path) => self.rcpt(path).await,
            Command::Data => return self.data().await,
            Command::Rset => {
                self.transaction = None;
                self.say(reply::OK)
            }
            Command::Noop => self.say(reply::OK),
            Command::Vrfy => self.say(reply::VRFY),
            Command::Help => self.say(reply::help(&settings.role)),
            Command::StartTls => return self.start_tls().await,
            Command::Auth(args) => return self.auth(&args).await,
            Command::Quit => {
                self.say(reply::BYE);
                Flow::Close
            }
            Command::NotImplemented => self.fail(reply::NOT_IMPLEMENTED),
        })
    }

    fn greet(&mut self, name: String) {
        self.helo = Some(name);
        self.transaction = None;
    }

    fn mail(&mut self, from: Option<EmailAddress>, size: Option<u64>) -> Flow {
        if self.helo.is_none() {
            return self.fail(reply::NEED_HELO);
        }
        if self.transaction.is_some() {
            return self.fail(reply::NESTED_MAIL);
        }
        if let Role::Submission { .. } = self.shared.settings.role {
            // The envelope sender is taken as given: the message's From header is what core
            // checks, and delivery uses Tidings' own return path.
            if !self.conn.get_ref().is_tls() {
                return self.fail(reply::NEED_STARTTLS);
            }
            if self.principal.is_none() {
                return self.fail(reply::NEED_AUTH);
            }
        }
        let max = u64::try_from(self.shared.settings.max_message_bytes).unwrap_or(u64::MAX);
        if size.is_some_and(|size| size > max) {
            self.shared.stats.bump(Counter::TooBig);
            return self.say(reply::SIZE_EXCEEDED);
        }
        // Last, so that only a transaction that may go ahead takes a place.
        let Some(slot) = self.shared.rate.take(self.peer.ip(), std::time::Instant::now()) else {
            self.shared.stats.bump(Counter::TooManyMessages);
            tracing::debug!(peer = %self.peer, "MAIL refused: too many messages from the client");
            return self.fail(reply::TOO_MANY_MESSAGES);
        };
        self.transaction = Some(Transaction { from, recipients: Vec::new(), slot });
        self.say(reply::SENDER_OK)
    }

    async fn rcpt(&mut self, path: ForwardPath) -> Flow {
        let settings = Arc::clone(&self.shared.settings);
        let Some(transaction) = self.transaction.as_ref() else {
            return self.fail(reply::NEED_MAIL);
        };
        let count = transaction.recipients.len();
        let address = match (&settings.role, path) {
            (_, ForwardPath::Address(address)) => address,
            (Role::Reports { accept_domain: Some(accept_domain) }, ForwardPath::Postmaster) => {
                match EmailAddress::from_parts("postmaster", accept_domain) {
                    Ok(address) => address,
                    Err(_) => return self.fail(reply::RELAY_DENIED),
                }
            }
            // No domain of its own: no postmaster to deliver to.
            (Role::Reports { accept_domain: None }, ForwardPath::Postmaster) => {
                return self.refuse_recipient(reply::RELAY_DENIED);
            }
            // Submission relays to anyone but has no postmaster of its own to deliver to.
            (Role::Submission { .. }, ForwardPath::Postmaster) => return self.refuse_recipient(reply::RELAY_DENIED),
        };
        if let Role::Reports { accept_domain } = &settings.role
            && accept_domain.as_ref() != Some(address.domain())
        {
            // Asked only once the address is well formed and off the whole domain: a
            // sending domain's own return path, which the handler proves is ours.
            match self.shared.handler.accepts_report_to(&address).await {
                Ok(true) => {}
                Ok(false) => return self.refuse_recipient(reply::RELAY_DENIED),
                Err(error) => {
                    tracing::debug!(peer = %self.peer, %error, "recipient not checked");
                    return self.refuse_recipient(&reply::for_handler(&error));
                }
            }
        }
        if count >= settings.max_recipients {
            self.shared.stats.bump(Counter::RejectedRecipients);
            return self.say(reply::TOO_MANY_RECIPIENTS);
        }
        if let Some(principal) = &self.principal
            && let Err(error) = self.shared.handler.check_recipient(principal, &address).await
        {
            tracing::debug!(peer = %self.peer, %error, "recipient refused");
            return self.refuse_recipient(&reply::for_handler(&error));
        }
        if let Some(transaction) = self.transaction.as_mut() {
            transaction.recipients.push(address);
        }
        self.say(reply::RECIPIENT_OK)
    }

    fn refuse_recipient(&mut self, reply: &str) -> Flow {
        self.shared.stats.bump(Counter::RejectedRecipients);
        self.fail(reply)
    }

    async fn data(&mut self) -> std::io::Result<Flow> {
        match &self.transaction {
            None => return Ok(self.fail(reply::NEED_MAIL)),
            Some(transaction) if transaction.recipients.is_empty() => return Ok(self.fail(reply::NEED_RCPT)),
            Some(_) => {}
        }
        self.say(reply::START_DATA);
        if !self.activity.progress() {
            return Ok(Flow::Close);
        }
        self.flush().await?;
        let settings = Arc::clone(&self.shared.settings);
        // Held until the handler is done with the message: it works on this very buffer.
        let mut budget = MessageBudget {
            reservation: self.shared.budget.reservation(client_group(self.peer.ip())),
            activity: Arc::clone(&self.activity),
            registry: Arc::clone(&self.shared.registry),
        };
        let (until, limit) = self.wait_until(settings.data_timeout);
        let reading = read_data(&mut self.conn, settings.max_message_bytes, &mut budget);
        let data = match timeout_at(until, reading).await {
            Ok(data) => data?,
            Err(_elapsed) => {
                self.ran_out(limit);
                return Ok(Flow::Close);
            }
        };
        if !self.activity.busy() {
            return Ok(Flow::Close);
        }
        let Some(Transaction { from, recipients, slot }) = self.transaction.take() else {
            return Ok(Flow::Close);
        };
        let raw = match data {
            Data::Eof => return Ok(Flow::Close),
            Data::TooBig => {
                self.shared.stats.bump(Counter::TooBig);
                return Ok(self.say(reply::SIZE_EXCEEDED));
            }
            Data::NoBudget(shortage) => {
                // The rest of the message is still on its way: the session cannot go on. Debug
                // only, like refused connections: a line per refusal is what a flood wants.
                self.shared.stats.bump(Counter::DataRefused);
                tracing::debug!(peer = %self.peer, %shortage, "inbound message refused for lack of memory budget");
                self.say(match shortage {
                    Shortage::ClientShare => reply::DATA_SHARE_SPENT,
                    Shortage::Spent => reply::DATA_BUDGET_SPENT,
                });
                return Ok(Flow::Close);
            }
            Data::Complete(raw) => raw,
        };
        let (peer, size, count) = (self.peer, raw.len(), recipients.len());
        let helo = self.helo.clone().unwrap_or_default();
        let envelope = Envelope { mail_from: from, recipients, helo, peer, principal: self.principal.clone() };
        Ok(match self.shared.handler.receive(envelope, raw).await {
            Ok(()) => {
                slot.spend(std::time::Instant::now());
                self.shared.stats.bump(Counter::MessagesAccepted);
                tracing::info!(%peer, size, recipients = count, "inbound message accepted");
                self.say(reply::queued(&settings.role))
            }
            Err(error) => {
                self.shared.stats.bump(Counter::HandlerErrors);
                tracing::warn!(%peer, %error, "inbound message not taken");
                self.say(&reply::for_handler(&error))
            }
        })
    }

    /// `STARTTLS` (RFC 3207): `220`, the handshake, then a fresh session: the client must
    /// greet again and nothing learnt in plaintext (EHLO name, AUTH) carries over.
    async fn start_tls(&mut self) -> std::io::Result<Flow> {
        let tls = match &self.shared.settings.role {
            Role::Reports { .. } => return Ok(self.fail(reply::NOT_IMPLEMENTED)),
            Role::Submission { tls, .. } => Arc::clone(tls),
        };
        if self.conn.get_ref().is_tls() {
            return Ok(self.fail(reply::TLS_ACTIVE));
        }
        self.say(reply::READY_FOR_TLS);
        if !self.activity.progress() {
            return Ok(Flow::Close);
        }
        self.flush().await?;
        // Dropping the reader drops whatever the client pipelined after STARTTLS in
        // plaintext: it must not be read as if it had come over TLS (CVE-2011-0411).
        let Stream::Plain(tcp) = std::mem::replace(&mut self.conn, BufReader::new(Stream::Closed)).into_inner() else {
            return Ok(Flow::Close);
        };
        let handshake = TlsAcceptor::from(tls).accept(tcp);
        let (until, limit) = self.wait_until(self.shared.settings.command_timeout);
        match timeout_at(until, handshake).await {
            Ok(Ok(tls)) => {
                self.conn = BufReader::new(Stream::Tls(Box::new(tls)));
                self.helo = None;
                self.principal = None;
                self.transaction = None;
                Ok(Flow::Continue)
            }
            Ok(Err(error)) => {
                tracing::debug!(peer = %self.peer, %error, "TLS handshake failed");
                Ok(Flow::Close)
            }
            Err(_elapsed) => {
                self.count_out(limit);
                Ok(Flow::Close)
            }
        }
    }

    /// `AUTH PLAIN` / `AUTH LOGIN` (RFC 4954), only on a submission session under TLS.
    async fn auth(&mut self, args: &str) -> std::io::Result<Flow> {
        if let Role::Reports { .. } = self.shared.settings.role {
            return Ok(self.fail(reply::NOT_IMPLEMENTED));
        }
        if !self.conn.get_ref().is_tls() {
            return Ok(self.fail(reply::NEED_STARTTLS));
        }
        if self.helo.is_none() {
            return Ok(self.fail(reply::NEED_HELO));
        }
        if self.principal.is_some() {
            return Ok(self.fail(reply::ALREADY_AUTHENTICATED));
        }
        if self.transaction.is_some() {
            return Ok(self.fail(reply::AUTH_IN_TRANSACTION));
        }
        let credentials = match self.sasl_exchange(args).await? {
            Some(Ok(credentials)) => credentials,
            Some(Err(error)) => return Ok(self.fail(reply::for_sasl(error))),
            None => return Ok(Flow::Close),
        };
        match self.shared.handler.authenticate(self.peer.ip(), credentials).await {
            Ok(principal) => {
                tracing::info!(peer = %self.peer, key = %principal.key_id, "submission client authenticated");
                self.principal = Some(principal);
                Ok(self.say(reply::AUTH_OK))
            }
            Err(failure) => {
                self.shared.stats.bump(Counter::AuthFailures);
                // Not the user name: some clients put the key there too.
                tracing::info!(peer = %self.peer, %failure, "AUTH failed");
                Ok(self.fail(match failure {
                    AuthFailure::Invalid => reply::AUTH_INVALID,
                    AuthFailure::Throttled => reply::AUTH_THROTTLED,
                    AuthFailure::Unavailable => reply::AUTH_UNAVAILABLE,
                }))
            }
        }
    }

    /// Runs the mechanism's challenges; `None` when the client went away or idled out.
    async fn sasl_exchange(&mut self, args: &str) -> std::io::Result<Option<Result<Credentials, SaslError>>> {
        let (mechanism, initial) = match sasl::parse_auth(args) {
            Ok(parsed) => parsed,
            Err(error) => return Ok(Some(Err(error))),
        };
        Ok(Some(match mechanism {
            Mechanism::Plain => {
                let response = match initial {
                    Some(initial) => initial.to_owned(),
                    None => match self.challenge(reply::PLAIN_CHALLENGE.to_owned()).await? {
                        Some(response) => response,
                        None => return Ok(None),
                    },
                };
                sasl::decode_plain(&response)
            }
            Mechanism::Login => {
                let username = match initial {
                    Some(initial) => initial.to_owned(),
                    None => match self.challenge(format!("334 {}\r\n", sasl::encode("Username:"))).await? {
                        Some(response) => response,
                        None => return Ok(None),
                    },
                };
                let username = match sasl::decode_text(&username) {
                    Ok(username) => username,
                    Err(error) => return Ok(Some(Err(error))),
                };
                let Some(password) = self.challenge(format!("334 {}\r\n", sasl::encode("Password:"))).await? else {
                    return Ok(None);
                };
                sasl::decode_text(&password).map(|password| Credentials { username, password })
            }
        }))
    }

    /// Sends a `334` challenge and reads the client's response line. A line over the limit
    /// is an undecodable response; `None` at EOF or after the command timeout.
    async fn challenge(&mut self, challenge: String) -> std::io::Result<Option<String>> {
        self.say(&challenge);
        if !self.activity.progress() {
            return Ok(None);
        }
        self.flush().await?;
        let settings = Arc::clone(&self.shared.settings);
        let (until, limit) = self.wait_until(settings.command_timeout);
        let line = timeout_at(until, read_line(&mut self.conn, settings.max_line_bytes)).await;
        if !self.activity.busy() {
            return Ok(None);
        }
        match line {
            Err(_elapsed) => {
                self.ran_out(limit);
                Ok(None)
            }
            Ok(line) => Ok(match line? {
                Line::Eof => None,
                Line::TooLong => Some("!".to_owned()),
                Line::Complete(bytes) => Some(String::from_utf8(bytes).unwrap_or_else(|_| "!".to_owned())),
            }),
        }
    }

    /// Queues a reply.
    fn say(&mut self, reply: &str) -> Flow {
        self.out.extend_from_slice(reply.as_bytes());
        Flow::Continue
    }

    /// Queues an error reply and counts it; too many end the session.
    fn fail(&mut self, reply: &str) -> Flow {
        self.say(reply);
        self.errors += 1;
        if self.errors >= self.shared.settings.max_errors {
            tracing::debug!(peer = %self.peer, "inbound session closed after too many errors");
            self.say(reply::TOO_MANY_ERRORS);
            return Flow::Close;
        }
        Flow::Continue
    }

    /// Writes the queued replies; a client that does not read them is as idle as one that
    /// does not write.
    async fn flush(&mut self) -> std::io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.out);
        let (until, limit) = self.wait_until(self.shared.settings.command_timeout);
        match timeout_at(until, self.conn.write_all(&out)).await {
            Ok(result) => result,
            Err(_elapsed) => {
                self.count_out(limit);
                Err(std::io::ErrorKind::TimedOut.into())
            }
        }
    }

    /// When a wait for the client that may take `timeout` must end: after `timeout`, or at
    /// the session's deadline if that comes first.
    fn wait_until(&self, timeout: Duration) -> (Instant, Limit) {
        match Instant::now().checked_add(timeout) {
            Some(end) if end < self.deadline => (end, Limit::Timeout),
            _ => (self.deadline, Limit::SessionTime),
        }
    }

    /// Counts a wait that ran out.
    fn count_out(&self, limit: Limit) {
        self.shared.stats.bump(match limit {
            Limit::Timeout => Counter::Timeouts,
            Limit::SessionTime => Counter::SessionTimeExceeded,
        });
    }

    /// Counts a wait that ran out and queues its `421`.
    fn ran_out(&mut self, limit: Limit) {
        self.count_out(limit);
        if limit == Limit::SessionTime {
            tracing::debug!(peer = %self.peer, "inbound session closed at its time limit");
        }
        self.say(match limit {
            Limit::Timeout => reply::TIMEOUT,
            Limit::SessionTime => reply::SESSION_TIME,
        });
    }
}
