//! The sink's SMTP server side: one session per connection, following RFC 5321 closely
//! enough for real clients, with the scripted deviations applied at each stage.

use std::io;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::conn::{Conn, Data, Line};
use super::script::{Action, Stage};
use super::sink::{ConnectionGuard, ReceivedMessage, Shared, SinkTls};

/// What a session knows about its client.
#[derive(Default)]
struct Client {
    helo: String,
    auth: Option<String>,
    mail_from: Option<String>,
    recipients: Vec<String>,
}

impl Client {
    fn reset_transaction(&mut self) {
        self.mail_from = None;
        self.recipients.clear();
    }
}

/// Whether a scripted action took over.
enum Scripted {
    /// No rule matched: answer normally.
    No,
    /// A reply was sent instead of the normal one.
    Replied,
    /// The session is over.
    End,
}

/// Serves one connection until the client quits or the script ends it; I/O errors end it.
pub(super) async fn serve(stream: TcpStream, shared: Arc<Shared>, acceptor: Option<TlsAcceptor>) {
    let guard = shared.open_connection();
    // What an SPF check of the message would take as the sending address.
    let peer = stream.peer_addr().map(|addr| addr.ip()).ok();
    let session = Session { shared: &shared, acceptor: acceptor.as_ref(), id: guard.id, guard: &guard, peer };
    let _ = session.run(stream).await;
}

struct Session<'a> {
    shared: &'a Shared,
    acceptor: Option<&'a TlsAcceptor>,
    id: u64,
    guard: &'a ConnectionGuard,
    peer: Option<std::net::IpAddr>,
}

impl Session<'_> {
    async fn run(&self, stream: TcpStream) -> io::Result<()> {
        let config = &self.shared.config;
        let mut conn = match (config.tls, self.acceptor) {
            (SinkTls::Implicit, Some(acceptor)) => {
                let stream = acceptor.accept(stream).await?;
                Conn::new(Box::new(stream), true, config.max_line_bytes, config.max_message_bytes)
            }
            _ => Conn::new(Box::new(stream), false, config.max_line_bytes, config.max_message_bytes),
        };
        match self.scripted(&mut conn, Stage::Greeting, &[]).await? {
            Scripted::End => return Ok(()),
            Scripted::Replied => return refuse_everything(&mut conn).await,
            Scripted::No => conn.reply(220, &format!("{} ESMTP Tidings test sink", config.hostname)).await?,
        }
        let mut client = Client::default();
        loop {
            let line = match conn.line().await? {
                Line::Closed => return Ok(()),
                Line::TooLong => {
                    conn.reply(500, "5.5.2 Line too long").await?;
                    continue;
                }
                Line::Text(line) => line,
            };
            let (verb, argument) = line.split_once(' ').unwrap_or((&line, ""));
            let argument = argument.trim();
            match verb.to_ascii_uppercase().as_str() {
                "EHLO" | "HELO" => {
                    client = Client { helo: argument.to_owned(), auth: client.auth.take(), ..Client::default() };
                    if !self.hello(&mut conn, verb.eq_ignore_ascii_case("EHLO"), argument).await? {
                        return Ok(());
                    }
                }
                "STARTTLS" => match self.start_tls(conn, argument).await? {
                    Some(upgraded) => {
                        conn = upgraded;
                        // RFC 3207 §4.2: forget everything learnt before TLS.
                        client = Client::default();
                    }
                    None => return Ok(()),
                },
                "AUTH" => self.auth(&mut conn, &mut client, argument).await?,
                "MAIL" => {
                    if !self.mail(&mut conn, &mut client, argument).await? {
                        return Ok(());
                    }
                }
                "RCPT" => {
                    if !self.rcpt(&mut conn, &mut client, argument).await? {
                        return Ok(());
                    }
                }
                "DATA" => {
                    if !self.data(&mut conn, &mut client).await? {
                        return Ok(());
                    }
                }
                "RSET" => {
                    client.reset_transaction();
                    conn.reply(250, "2.0.0 Ok").await?;
                }
                "NOOP" => conn.reply(250, "2.0.0 Ok").await?,
                "QUIT" => {
                    // The client is closing; counted so before it hears the 221.
                    self.guard.close();
                    return conn.reply(221, "2.0.0 Bye").await;
                }
                _ => conn.reply(502, "5.5.2 Command not recognized").await?,
            }
        }
    }

    /// Applies the scripted action at `stage`, if any.
    async fn scripted(&self, conn: &mut Conn, stage: Stage, recipients: &[String]) -> io::Result<Scripted> {
        match self.shared.action(stage, recipients) {
            None => Ok(Scripted::No),
            Some(action) => perform(conn, action).await,
        }
    }

    /// EHLO or HELO; `false` when the session ends.
    async fn hello(&self, conn: &mut Conn, extended: bool, argument: &str) -> io::Result<bool> {
        match self.scripted(conn, Stage::Ehlo, &[]).await? {
            Scripted::End => return Ok(false),
            Scripted::Replied => return Ok(true),
            Scripted::No => {}
        }
        self.shared.hold_point(Stage::Ehlo).await;
        let config = &self.shared.config;
        let greeting = format!("{} greets {argument}", config.hostname);
        if !extended {
            return conn.reply(250, &greeting).await.map(|()| true);
        }
        let size = format!("SIZE {}", config.max_message_bytes);
        let mut lines = vec![greeting.as_str(), "8BITMIME", "ENHANCEDSTATUSCODES", size.as_str()];
        if matches!(config.tls, SinkTls::StartTls | SinkTls::BrokenStartTls) && !conn.tls {
            lines.push("STARTTLS");
        }
        if config.auth.is_some() {
            lines.push("AUTH PLAIN LOGIN");
        }
        conn.reply_lines(250, &lines).await.map(|()| true)
    }

    /// STARTTLS: `None` when the session ends here.
    async fn start_tls(&self, mut conn: Conn, argument: &str) -> io::Result<Option<Conn>> {
        let offered = matches!(self.shared.config.tls, SinkTls::StartTls | SinkTls::BrokenStartTls) && !conn.tls;
        let Some(acceptor) = self.acceptor.filter(|_| offered) else {
            conn.reply(502, "5.5.1 STARTTLS not offered").await?;
            return Ok(Some(conn));
        };
        if !argument.is_empty() {
            conn.reply(501, "5.5.4 STARTTLS takes no argument").await?;
            return Ok(Some(conn));
        }
        conn.reply(220, "2.0.0 Ready to start TLS").await?;
        if self.shared.config.tls == SinkTls::BrokenStartTls {
            conn.write_raw(b"this is not a TLS handshake\r\n").await?;
            return Ok(None);
        }
        conn.start_tls(acceptor).await.map(Some)
    }

    async fn auth(&self, conn: &mut Conn, client: &mut Client, argument: &str) -> io::Result<()> {
        let Some((user, password)) = &self.shared.config.auth else {
            return conn.reply(502, "5.5.1 AUTH not offered").await;
        };
        if client.auth.is_some() || client.mail_from.is_some() {
            return conn.reply(503, "5.5.1 AUTH not allowed now").await;
        }
        let (mechanism, initial) = argument.split_once(' ').unwrap_or((argument, ""));
        let offered = match mechanism.to_ascii_uppercase().as_str() {
            "PLAIN" => {
                let Some(response) = challenge(conn, initial, "").await? else { return Ok(()) };
                // authzid NUL authcid NUL password
                let mut parts = response.splitn(3, |&b| b == 0).skip(1);
                (parts.next().unwrap_or_default().to_vec(), parts.next().unwrap_or_default().to_vec())
            }
            "LOGIN" => {
                let Some(name) = challenge(conn, initial, "VXNlcm5hbWU6").await? else { return Ok(()) };
                let Some(secret) = challenge(conn, "", "UGFzc3dvcmQ6").await? else { return Ok(()) };
                (name, secret)
            }
            _ => return conn.reply(504, "5.5.4 Unrecognized authentication mechanism").await,
        };
        if offered.0 == user.as_bytes() && offered.1 == password.as_bytes() {
            client.auth = Some(user.clone());
            conn.reply(235, "2.7.0 Authentication successful").await
        } else {
            conn.reply(535, "5.7.8 Authentication credentials invalid").await
        }
    }

    /// MAIL FROM; `false` when the session ends.
    async fn mail(&self, conn: &mut Conn, client: &mut Client, argument: &str) -> io::Result<bool> {
        if client.helo.is_empty() {
            return conn.reply(503, "5.5.1 Send EHLO first").await.map(|()| true);
        }
        if self.shared.config.auth.is_some() && client.auth.is_none() {
            return conn.reply(530, "5.7.0 Authentication required").await.map(|()| true);
        }
        if client.mail_from.is_some() {
            return conn.reply(503, "5.5.1 Nested MAIL command").await.map(|()| true);
        }
        let Some(address) = path_argument(argument, "FROM:") else {
            return conn.reply(501, "5.5.4 Syntax: MAIL FROM:<address>").await.map(|()| true);
        };
        match self.scripted(conn, Stage::Mail, &[]).await? {
            Scripted::End => return Ok(false),
            Scripted::Replied => return Ok(true),
            Scripted::No => {}
        }
        self.shared.hold_point(Stage::Mail).await;
        client.mail_from = Some(address);
        conn.reply(250, "2.1.0 Ok").await.map(|()| true)
    }

    /// RCPT TO; `false` when the session ends.
    async fn rcpt(&self, conn: &mut Conn, client: &mut Client, argument: &str) -> io::Result<bool> {
        if client.mail_from.is_none() {
            return conn.reply(503, "5.5.1 Need MAIL before RCPT").await.map(|()| true);
        }
        let Some(address) = path_argument(argument, "TO:") else {
            return conn.reply(501, "5.5.4 Syntax: RCPT TO:<address>").await.map(|()| true);
        };
        match self.scripted(conn, Stage::Rcpt, std::slice::from_ref(&address)).await? {
            Scripted::End => return Ok(false),
            Scripted::Replied => return Ok(true),
            Scripted::No => {}
        }
        self.shared.hold_point(Stage::Rcpt).await;
        client.recipients.push(address);
        conn.reply(250, "2.1.5 Ok").await.map(|()| true)
    }

    /// DATA and the message; `false` when the session ends.
    async fn data(&self, conn: &mut Conn, client: &mut Client) -> io::Result<bool> {
        if client.recipients.is_empty() {
            return conn.reply(503, "5.5.1 Need RCPT before DATA").await.map(|()| true);
        }
        match self.scripted(conn, Stage::Data, &client.recipients).await? {
            Scripted::End => return Ok(false),
            Scripted::Replied => return Ok(true),
            Scripted::No => {}
        }
        self.shared.hold_point(Stage::Data).await;
        conn.reply(354, "End data with <CR><LF>.<CR><LF>").await?;
        let action = self.shared.action(Stage::Message, &client.recipients);
        if action == Some(Action::Disconnect) {
            conn.skip_line().await?;
            return Ok(false);
        }
        let data = match conn.data().await? {
            Data::Closed => return Ok(false),
            Data::TooBig => {
                client.reset_transaction();
                return conn.reply(552, "5.3.4 Message too big").await.map(|()| true);
            }
            Data::LineTooLong => {
                client.reset_transaction();
                return conn.reply(500, "5.5.2 Line too long").await.map(|()| true);
            }
            Data::Complete(data) => data,
        };
        if let Some(action) = action {
            client.reset_transaction();
            return Ok(matches!(perform(conn, action).await?, Scripted::Replied));
        }
        self.shared.hold_point(Stage::Message).await;
        let message = ReceivedMessage {
            connection: self.id,
            helo: client.helo.clone(),
            mail_from: client.mail_from.take().unwrap_or_default(),
            recipients: std::mem::take(&mut client.recipients),
            data,
            tls: conn.tls,
            auth_identity: client.auth.clone(),
            peer: self.peer,
        };
        // Recorded before the 250, so a client that got its 250 finds the message here.
        let number = self.shared.record(message);
        conn.reply(250, &format!("2.0.0 Ok: queued as {number}")).await.map(|()| true)
    }
}

/// Carries out a scripted action.
async fn perform(conn: &mut Conn, action: Action) -> io::Result<Scripted> {
    match action {
        Action::Reply { code, text } => conn.reply(code, &text).await.map(|()| Scripted::Replied),
        Action::Disconnect => Ok(Scripted::End),
        Action::Hang => conn.drain().await.map(|()| Scripted::End),
    }
}

/// After a refusing greeting, answers every command with 503 until QUIT (RFC 5321 §3.1).
async fn refuse_everything(conn: &mut Conn) -> io::Result<()> {
    loop {
        match conn.line().await? {
            Line::Closed => return Ok(()),
            Line::Text(line) if line.eq_ignore_ascii_case("QUIT") => return conn.reply(221, "2.0.0 Bye").await,
            Line::Text(_) | Line::TooLong => conn.reply(503, "5.5.1 No service").await?,
        }
    }
}

/// One AUTH exchange step: the initial response if the client gave one, else a 334
/// challenge and the client's answer; decoded. `None` (after a 501) when it is not base64
/// or the client cancelled.
async fn challenge(conn: &mut Conn, initial: &str, prompt: &str) -> io::Result<Option<Vec<u8>>> {
    let answer = if initial.is_empty() {
        conn.reply(334, prompt).await?;
        match conn.line().await? {
            Line::Text(answer) => answer,
            Line::TooLong | Line::Closed => String::new(),
        }
    } else {
        initial.to_owned()
    };
    match STANDARD.decode(answer.trim()) {
        Ok(decoded) if answer.trim() != "*" => Ok(Some(decoded)),
        _ => conn.reply(501, "5.5.2 Cannot decode the response").await.map(|()| None),
    }
}

/// The address in `FROM:<address> params` / `TO:<address>`, without brackets.
fn path_argument(argument: &str, keyword: &str) -> Option<String> {
    let head = argument.get(..keyword.len())?;
    if !head.eq_ignore_ascii_case(keyword) {
        return None;
    }
    let rest = argument[keyword.len()..].trim_start();
    let path = rest.strip_prefix('<')?;
    let end = path.find('>')?;
    Some(path[..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_taken_from_between_the_brackets() {
        assert_eq!(path_argument("FROM:<a@b.test> BODY=8BITMIME", "FROM:"), Some("a@b.test".into()));
        assert_eq!(path_argument("from: <a@b.test>", "FROM:"), Some("a@b.test".into()));
        assert_eq!(path_argument("TO:<>", "TO:"), Some(String::new()));
        assert_eq!(path_argument("TO:a@b.test", "TO:"), None);
        assert_eq!(path_argument("FROM:<a@b.test>", "TO:"), None);
    }
}
