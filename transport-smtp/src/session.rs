//! One SMTP session on lettre's [`AsyncSmtpConnection`]: connect, secure, authenticate, then
//! one transaction per message, every step under its own timeout.
//!
//! We drive lettre's connection rather than its `AsyncSmtpTransport` for two reasons found
//! in lettre 0.11's source. Its Tokio transport bounds only the TCP connect: a server that
//! accepts and never answers holds a delivery forever. And wrapping its `send_raw` in a
//! timeout is unsafe: the cancelled connection goes back into lettre's pool mid-command, and
//! the next message then reads the previous command's reply (it can even take a 354 for a
//! success). Here a connection whose step failed or timed out is dropped, never reused; a
//! connection is reused only after a complete transaction or a refused one followed by RSET.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lettre::Address;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt, Rset};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
use tidings_core::email::EmailAddress;
use tidings_core::model::{CertificateCheck, ConnectionTls, TlsVersion};
use tidings_core::ports::{OutboundEmail, SmtpReply};
use tokio::net::TcpStream;
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::client::danger::ServerCertVerifier;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use crate::config::Timeouts;
use crate::errors::{Failure, Stage, reply_from_response};
use crate::mx_guard;
use crate::site_connections::SiteSeat;
use crate::tls_version::{Negotiated, Watched};

/// Where to connect.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// A host name resolved by the system (the relay).
    Name {
        /// Host name or IP literal.
        host: String,
        /// Port.
        port: u16,
    },
    /// An address we resolved ourselves (an MX host).
    Addr(SocketAddr),
}

/// How the connection is secured.
#[derive(Clone)]
pub(crate) enum TlsPlan {
    /// Never (the plaintext retry after a failed opportunistic STARTTLS).
    Plain,
    /// STARTTLS when the server offers it.
    StartTls {
        /// How to secure it.
        parameters: TlsParameters,
        /// Whether the parameters verify the certificate (the relay's do; opportunistic
        /// TLS to an MX host accepts any).
        verifies: bool,
    },
    /// STARTTLS, or no session: a server that does not offer it fails at
    /// [`Stage::StartTls`] with a policy failure naming `required_by`. The parameters verify
    /// the certificate.
    RequireStartTls {
        /// How to secure it.
        parameters: TlsParameters,
        /// What requires it, for the error: "the MTA-STS policy of example.com (id 1)".
        required_by: String,
    },
    /// TLS from the first byte; the parameters verify the certificate (only the relay
    /// uses it).
    Implicit(TlsParameters),
}

/// Everything needed to open sessions to one server.
#[derive(Clone)]
pub(crate) struct Connector {
    /// Where.
    pub(crate) target: Target,
    /// How receipts and errors name the server.
    pub(crate) remote: String,
    /// TLS.
    pub(crate) tls: TlsPlan,
    /// AUTH credentials.
    pub(crate) credentials: Option<Credentials>,
    /// Whether credentials may go over an unencrypted connection.
    pub(crate) plaintext_auth_allowed: bool,
    /// EHLO name.
    pub(crate) hello: ClientId,
    /// Step timeouts.
    pub(crate) timeouts: Timeouts,
    /// Refuse a connection whose peer is not a public address (direct MX delivery without
    /// `TIDINGS_MX_ALLOW_PRIVATE`): the MX mailer checked the address it dialled, and this
    /// checks the socket it got.
    pub(crate) public_peer_only: bool,
    /// Judge each new session's TLS as an MTA-STS `enforce` policy would, without acting on
    /// it (a `testing` policy): the outcome is kept in [`Session::tls_outcome`].
    pub(crate) audit: Option<TlsAudit>,
}

/// What [`Connector::audit`] checks the server's certificate against.
#[derive(Clone)]
pub(crate) struct TlsAudit {
    /// The name the certificate must be valid for: the MX host's.
    pub(crate) name: String,
    /// The trusted roots; `None` when there are none (every certificate then fails).
    pub(crate) verifier: Option<Arc<WebPkiServerVerifier>>,
}

/// How a session's connection was secured, judged as an MTA-STS `enforce` policy would
/// (RFC 8461 §4.2: TLS, and a certificate valid for the MX host's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TlsOutcome {
    /// TLS with a certificate valid for the host's name.
    Verified,
    /// TLS, with a certificate that would have been refused: why.
    InvalidCertificate(String),
    /// Plaintext: the server does not offer STARTTLS.
    NoStartTls,
    /// Plaintext, after STARTTLS failed: why it failed.
    StartTlsFailed(String),
}

impl TlsAudit {
    /// The outcome for `conn`, freshly opened and secured as planned.
    fn judge(&self, conn: &AsyncSmtpConnection) -> TlsOutcome {
        if !conn.is_encrypted() {
            return TlsOutcome::NoStartTls;
        }
        let Some(verifier) = &self.verifier else {
            return TlsOutcome::InvalidCertificate("no trusted CA certificates to verify it with".to_owned());
        };
        let chain = match conn.certificate_chain() {
            Ok(chain) => chain,
            Err(error) => return TlsOutcome::InvalidCertificate(format!("cannot read it: {error}")),
        };
        let mut chain = chain.into_iter().map(CertificateDer::from);
        let Some(leaf) = chain.next() else {
            return TlsOutcome::InvalidCertificate("the server sent none".to_owned());
        };
        let intermediates: Vec<CertificateDer<'static>> = chain.collect();
        let name = match ServerName::try_from(self.name.clone()) {
            Ok(name) => name,
            Err(error) => {
                return TlsOutcome::InvalidCertificate(format!("{} is not a server name: {error}", self.name));
            }
        };
        match verifier.verify_server_cert(&leaf, &intermediates, &name, &[], UnixTime::now()) {
            Ok(_verified) => TlsOutcome::Verified,
            Err(error) => TlsOutcome::InvalidCertificate(error.to_string()),
        }
    }
}

impl Connector {
    /// Opens a session as planned.
    pub(crate) async fn open(&self) -> Result<Session, Failure> {
        self.open_with(&self.tls).await
    }

    /// Opens a session with `tls` instead of the planned TLS.
    pub(crate) async fn open_with(&self, tls: &TlsPlan) -> Result<Session, Failure> {
        let timeouts = &self.timeouts;
        let negotiated = Negotiated::default();
        let mut conn = match tls {
            TlsPlan::Implicit(parameters) => self.connect_implicit_tls(parameters.clone()).await?,
            TlsPlan::Plain | TlsPlan::StartTls { .. } | TlsPlan::RequireStartTls { .. } => {
                self.connect_plain(negotiated.clone()).await?
            }
        };
        match tls {
            TlsPlan::StartTls { parameters, .. } if conn.can_starttls() => {
                step(Stage::StartTls, timeouts.command, conn.starttls(parameters.clone(), &self.hello)).await?;
            }
            TlsPlan::RequireStartTls { parameters, required_by } => {
                if !conn.can_starttls() {
                    let reason = format!("{} does not offer STARTTLS, which {required_by} requires", self.remote);
                    return Err(Failure::policy(Stage::StartTls, reason));
                }
                step(Stage::StartTls, timeouts.command, conn.starttls(parameters.clone(), &self.hello)).await?;
            }
            TlsPlan::Plain | TlsPlan::StartTls { .. } | TlsPlan::Implicit(_) => {}
        }
        if let Some(credentials) = &self.credentials {
            if !conn.is_encrypted() && !self.plaintext_auth_allowed {
                return Err(Failure::local(
                    Stage::Auth,
                    format!(
                        "{} did not offer STARTTLS, so its password would cross the network in clear text; \
                         refusing to authenticate (use smtps://, a relay that offers STARTTLS, or allow \
                         plaintext AUTH explicitly)",
                        self.remote
                    ),
                ));
            }
            step(Stage::Auth, timeouts.command, conn.auth(&[Mechanism::Plain, Mechanism::Login], credentials)).await?;
        }
        let tls_outcome = match (&self.audit, tls) {
            // The plaintext retry: the caller knows why STARTTLS failed and says so.
            (Some(_), TlsPlan::Plain) | (None, _) => None,
            (Some(audit), _) => Some(audit.judge(&conn)),
        };
        let tls = connection_tls(conn.is_encrypted(), tls, tls_outcome.as_ref(), negotiated.version());
        Ok(Session {
            conn,
            tls,
            remote: self.remote.clone(),
            delivered: 0,
            idle_since: Instant::now(),
            seat: None,
            tls_outcome,
        })
    }
}

impl Connector {
    /// TCP with Nagle's algorithm off, then the greeting and EHLO. lettre writes a message's
    /// body and its final dot as two writes; with Nagle on, the dot waited for the receiver's
    /// delayed ACK of the body, ≈ 40 ms on every message (bench/README.md, delivery-load).
    /// The stream records the TLS version a later STARTTLS negotiates in `negotiated`.
    async fn connect_plain(&self, negotiated: Negotiated) -> Result<AsyncSmtpConnection, Failure> {
        let timeouts = &self.timeouts;
        let connecting = async {
            match &self.target {
                Target::Name { host, port } => TcpStream::connect((host.as_str(), *port)).await,
                Target::Addr(addr) => TcpStream::connect(*addr).await,
            }
        };
        let tcp = match tokio::time::timeout(timeouts.connect, connecting).await {
            Err(_elapsed) => return Err(Failure::timeout(Stage::Connect, timeouts.connect)),
            Ok(Err(error)) => return Err(Failure::connect(error)),
            Ok(Ok(tcp)) => tcp,
        };
        if self.public_peer_only {
            let peer = tcp.peer_addr().map_err(Failure::connect)?;
            mx_guard::check(peer.ip(), false).map_err(Failure::not_public)?;
        }
        // Only a latency optimisation: a socket that refuses it still works.
        let _ = tcp.set_nodelay(true);
        let stream = Watched::new(tcp, negotiated);
        let greeting = AsyncSmtpConnection::connect_with_transport(Box::new(stream), &self.hello);
        match tokio::time::timeout(timeouts.command, greeting).await {
            Err(_elapsed) => Err(Failure::timeout(Stage::Greeting, timeouts.command)),
            Ok(Err(error)) => Err(Failure::smtp(Stage::Greeting, error)),
            Ok(Ok(conn)) => Ok(conn),
        }
    }

    /// lettre's own connect with TLS from the first byte; it bounds only the TCP connect, so
    /// the handshake, greeting and EHLO are bounded here. Only the relay uses it; lettre does
    /// not hand over the socket, so a public-only connector checks the address it dials.
    async fn connect_implicit_tls(&self, parameters: TlsParameters) -> Result<AsyncSmtpConnection, Failure> {
        let timeouts = &self.timeouts;
        if let (true, Target::Addr(addr)) = (self.public_peer_only, &self.target) {
            mx_guard::check(addr.ip(), false).map_err(Failure::not_public)?;
        }
        let budget = timeouts.connect + timeouts.command;
        let connecting = async {
            match &self.target {
                Target::Name { host, port } => {
                    AsyncSmtpConnection::connect_tokio1(
                        (host.as_str(), *port),
                        Some(timeouts.connect),
                        &self.hello,
                        Some(parameters),
                        None,
                    )
                    .await
                }
                Target::Addr(addr) => {
                    AsyncSmtpConnection::connect_tokio1(
                        *addr,
                        Some(timeouts.connect),
                        &self.hello,
                        Some(parameters),
                        None,
                    )
                    .await
                }
            }
        };
        match tokio::time::timeout(budget, connecting).await {
            Err(_elapsed) => Err(Failure::timeout(Stage::Greeting, budget)),
            Ok(Err(error)) if error.is_timeout() => Err(Failure::timeout(Stage::Connect, timeouts.connect)),
            Ok(Err(error)) => {
                // lettre does not say which part of connecting failed; a reply, or the lack
                // of a complete one, can only be the greeting or EHLO.
                let replied = error.is_transient() || error.is_permanent() || error.is_response();
                let stage = if replied { Stage::Greeting } else { Stage::Connect };
                Err(Failure::smtp(stage, error))
            }
            Ok(Ok(conn)) => Ok(conn),
        }
    }
}

/// An open, ready connection: greeted, secured and authenticated as planned, and between
/// transactions.
pub(crate) struct Session {
    conn: AsyncSmtpConnection,
    /// How receipts and errors name the server.
    pub(crate) remote: String,
    /// Messages accepted over this connection.
    pub(crate) delivered: u32,
    /// When it was last parked in a pool.
    pub(crate) idle_since: Instant,
    /// Its place in its site's connection cap, with shaping: given back when the session
    /// is dropped, that is when the connection is closed.
    pub(crate) seat: Option<SiteSeat>,
    /// How it was secured, when its connector audits TLS ([`Connector::audit`]).
    pub(crate) tls_outcome: Option<TlsOutcome>,
    /// How it was secured, for the receipts of what it carries.
    pub(crate) tls: ConnectionTls,
}

/// How a session opened with `plan` was secured: plaintext unless `encrypted`; with TLS,
/// the certificate is verified when the plan's parameters verify it, and otherwise as the
/// audit judged it (`outcome`), or not verified at all; `version` is what the handshake
/// was seen to negotiate (STARTTLS only).
fn connection_tls(
    encrypted: bool,
    plan: &TlsPlan,
    outcome: Option<&TlsOutcome>,
    version: Option<TlsVersion>,
) -> ConnectionTls {
    if !encrypted {
        return ConnectionTls::Plaintext;
    }
    let verified_by_handshake = match plan {
        TlsPlan::StartTls { verifies, .. } => *verifies,
        TlsPlan::RequireStartTls { .. } | TlsPlan::Implicit(_) => true,
        TlsPlan::Plain => false,
    };
    let certificate = match outcome {
        _ if verified_by_handshake => CertificateCheck::Verified,
        Some(TlsOutcome::Verified) => CertificateCheck::Verified,
        Some(TlsOutcome::InvalidCertificate(why)) => CertificateCheck::invalid(why),
        Some(TlsOutcome::NoStartTls | TlsOutcome::StartTlsFailed(_)) | None => CertificateCheck::NotVerified,
    };
    ConnectionTls::Tls { certificate, version }
}

impl Session {
    /// One transaction: MAIL, RCPT, DATA and the message. The reply to the final dot is
    /// the receipt's.
    pub(crate) async fn deliver(&mut self, email: &OutboundEmail, timeouts: &Timeouts) -> Result<SmtpReply, Failure> {
        let from = address(&email.envelope_from).map_err(|reason| Failure::local(Stage::Mail, reason))?;
        let to = address(&email.envelope_to).map_err(|reason| Failure::local(Stage::Rcpt, reason))?;
        let mut parameters = Vec::new();
        if !email.raw.is_ascii() {
            // RFC 6152: 8-bit data only to a server that announced 8BITMIME. Core builds
            // 7-bit MIME, so this is a bug upstream rather than a property of the receiver.
            if !self.conn.server_info().supports_feature(Extension::EightBitMime) {
                return Err(Failure::local(
                    Stage::Mail,
                    format!("the message has 8-bit content and {} does not offer 8BITMIME", self.remote),
                ));
            }
            parameters.push(MailParameter::Body(MailBodyParameter::EightBitMime));
        }
        let conn = &mut self.conn;
        step(Stage::Mail, timeouts.command, conn.command(Mail::new(Some(from), parameters))).await?;
        step(Stage::Rcpt, timeouts.command, conn.command(Rcpt::new(to, Vec::new()))).await?;
        step(Stage::Data, timeouts.command, conn.command(Data)).await?;
        // lettre ends the data with CRLF "." CRLF; a message that already ends with CRLF
        // would otherwise gain an empty last line.
        let body = email.raw.strip_suffix(b"\r\n").unwrap_or(&email.raw);
        let response = step(Stage::Message, timeouts.message, conn.message(body)).await?;
        self.delivered += 1;
        Ok(reply_from_response(&response))
    }

    /// RSET after a refused transaction; `true` when the connection is usable again.
    pub(crate) async fn reset(&mut self, timeouts: &Timeouts) -> bool {
        step(Stage::Reset, timeouts.command, self.conn.command(Rset)).await.is_ok()
    }

    /// QUIT, politely and briefly, before dropping the connection.
    pub(crate) async fn quit(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.conn.quit()).await;
    }
}

/// Runs one step under `limit`.
async fn step<T>(
    stage: Stage,
    limit: Duration,
    action: impl Future<Output = Result<T, lettre::transport::smtp::Error>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(limit, action).await {
        Err(_elapsed) => Err(Failure::timeout(stage, limit)),
        Ok(Err(error)) => Err(Failure::smtp(stage, error)),
        Ok(Ok(value)) => Ok(value),
    }
}

/// The address as lettre takes it. Core's addresses are ASCII dot-atoms, which lettre
/// accepts; a refusal would be a disagreement between the two parsers.
fn address(address: &EmailAddress) -> Result<Address, String> {
    Address::new(address.local_part(), address.domain().as_str())
        .map_err(|error| format!("lettre refuses the address {address}: {error}"))
}
