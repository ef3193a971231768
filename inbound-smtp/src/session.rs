//! One SMTP session: the command loop, the transaction state and the replies.

use std::net::SocketAddr;
use std::sync::Arc;

use tidings_core::email::EmailAddress;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::watch;
use tokio::time::timeout;

use crate::command::{Command, ForwardPath, parse_command};
use crate::data::{Data, read_data};
use crate::handler::{Envelope, HandlerError, InboundHandler};
use crate::line::{Line, read_line};
use crate::reply;
use crate::settings::InboundSettings;
use crate::stats::{Counter, InboundStats};

/// What the listener shares with every session.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) settings: Arc<InboundSettings>,
    pub(crate) handler: Arc<dyn InboundHandler>,
    pub(crate) stats: Arc<InboundStats>,
    /// Turns true when the listener shuts down.
    pub(crate) stopping: watch::Receiver<bool>,
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
}

struct Session {
    shared: Shared,
    peer: SocketAddr,
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    /// Replies not yet written: flushed when the client has nothing more pipelined.
    out: Vec<u8>,
    helo: Option<String>,
    transaction: Option<Transaction>,
    errors: usize,
}

/// Serves one connection to its end. I/O errors just end it: the peer went away.
pub(crate) async fn run(stream: TcpStream, peer: SocketAddr, shared: Shared) {
    let (read, writer) = stream.into_split();
    let mut session = Session {
        peer,
        reader: BufReader::new(read),
        writer,
        out: reply::greeting(&shared.settings.hostname).into_bytes(),
        shared,
        helo: None,
        transaction: None,
        errors: 0,
    };
    tracing::debug!(%peer, "inbound session started");
    if let Err(error) = session.serve().await {
        tracing::debug!(%peer, %error, "inbound session ended by an I/O error");
    }
    let _ = session.flush().await;
    let _ = session.writer.shutdown().await;
    tracing::debug!(%peer, "inbound session closed");
}

impl Session {
    async fn serve(&mut self) -> std::io::Result<()> {
        let mut stopping = self.shared.stopping.clone();
        loop {
            // RFC 2920: answer a pipelined batch in one write, once its last command is read.
            if self.reader.buffer().is_empty() {
                self.flush().await?;
            }
            let settings = &self.shared.settings;
            let line = tokio::select! {
                biased;
                _ = stopping.wait_for(|stop| *stop) => {
                    self.say(reply::SHUTTING_DOWN);
                    return Ok(());
                }
                line = timeout(settings.command_timeout, read_line(&mut self.reader, settings.max_line_bytes)) => line,
            };
            let flow = match line {
                Err(_elapsed) => {
                    self.shared.stats.bump(Counter::Timeouts);
                    self.say(reply::TIMEOUT);
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
                self.say(&reply::ehlo(&settings.hostname, settings.max_message_bytes))
            }
            Command::Helo(name) => {
                self.greet(name);
                self.say(&reply::helo(&settings.hostname))
            }
            Command::Mail { from, size } => self.mail(from, size),
            Command::Rcpt(path) => self.rcpt(path),
            Command::Data => return self.data().await,
            Command::Rset => {
                self.transaction = None;
                self.say(reply::OK)
            }
            Command::Noop => self.say(reply::OK),
            Command::Vrfy => self.say(reply::VRFY),
            Command::Help => self.say(reply::HELP),
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
        let max = u64::try_from(self.shared.settings.max_message_bytes).unwrap_or(u64::MAX);
        if size.is_some_and(|size| size > max) {
            self.shared.stats.bump(Counter::TooBig);
            return self.say(reply::SIZE_EXCEEDED);
        }
        self.transaction = Some(Transaction { from, recipients: Vec::new() });
        self.say(reply::SENDER_OK)
    }

    fn rcpt(&mut self, path: ForwardPath) -> Flow {
        let settings = Arc::clone(&self.shared.settings);
        let Some(transaction) = self.transaction.as_mut() else {
            return self.fail(reply::NEED_MAIL);
        };
        let address = match path {
            ForwardPath::Address(address) => address,
            ForwardPath::Postmaster => match EmailAddress::from_parts("postmaster", &settings.accept_domain) {
                Ok(address) => address,
                Err(_) => return self.fail(reply::RELAY_DENIED),
            },
        };
        if address.domain() != &settings.accept_domain {
            self.shared.stats.bump(Counter::RejectedRecipients);
            return self.fail(reply::RELAY_DENIED);
        }
        if transaction.recipients.len() >= settings.max_recipients {
            self.shared.stats.bump(Counter::RejectedRecipients);
            return self.say(reply::TOO_MANY_RECIPIENTS);
        }
        transaction.recipients.push(address);
        self.say(reply::RECIPIENT_OK)
    }

    async fn data(&mut self) -> std::io::Result<Flow> {
        match &self.transaction {
            None => return Ok(self.fail(reply::NEED_MAIL)),
            Some(transaction) if transaction.recipients.is_empty() => return Ok(self.fail(reply::NEED_RCPT)),
            Some(_) => {}
        }
        self.say(reply::START_DATA);
        self.flush().await?;
        let settings = Arc::clone(&self.shared.settings);
        let data = match timeout(settings.data_timeout, read_data(&mut self.reader, settings.max_message_bytes)).await {
            Ok(data) => data?,
            Err(_elapsed) => {
                self.shared.stats.bump(Counter::Timeouts);
                self.say(reply::TIMEOUT);
                return Ok(Flow::Close);
            }
        };
        let Some(Transaction { from, recipients }) = self.transaction.take() else {
            return Ok(Flow::Close);
        };
        let raw = match data {
            Data::Eof => return Ok(Flow::Close),
            Data::TooBig => {
                self.shared.stats.bump(Counter::TooBig);
                return Ok(self.say(reply::SIZE_EXCEEDED));
            }
            Data::Complete(raw) => raw,
        };
        let (peer, size, count) = (self.peer, raw.len(), recipients.len());
        let helo = self.helo.clone().unwrap_or_default();
        let envelope = Envelope { mail_from: from, recipients, helo, peer };
        Ok(match self.shared.handler.receive(envelope, raw).await {
            Ok(()) => {
                self.shared.stats.bump(Counter::MessagesAccepted);
                tracing::info!(%peer, size, recipients = count, "inbound report received");
                self.say(reply::QUEUED)
            }
            Err(error) => {
                self.shared.stats.bump(Counter::HandlerErrors);
                tracing::warn!(%peer, %error, "inbound report not taken");
                match error {
                    HandlerError::Temporary(_) => self.say(reply::HANDLER_TEMPORARY),
                    HandlerError::Permanent(_) => self.say(reply::HANDLER_PERMANENT),
                }
            }
        })
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
        match timeout(self.shared.settings.command_timeout, self.writer.write_all(&out)).await {
            Ok(result) => result,
            Err(_elapsed) => Err(std::io::ErrorKind::TimedOut.into()),
        }
    }
}
