//! One delivery attempt to one server through its pool: reuse or open a session, run the
//! transaction, and put the session back only when it is known to be clean. Shared by the
//! relay and MX transports.

use std::sync::Arc;
use std::time::Instant;

use tidings_core::ports::{OutboundEmail, SendError, SendReceipt};

use crate::broken_tls::BrokenTls;
use crate::pool::{HostPool, Ready};
use crate::session::{Connector, Session, TlsOutcome, TlsPlan};
use crate::site_connections::SiteSeat;

/// A message the server accepted, and how the session that carried it was secured (when its
/// connector audits TLS).
#[derive(Debug)]
pub(crate) struct Delivered {
    /// The receipt.
    pub(crate) receipt: SendReceipt,
    /// [`Session::tls_outcome`] of the session used.
    pub(crate) tls_outcome: Option<TlsOutcome>,
}

/// Opportunistic TLS (MX delivery that no policy requires TLS for): a server whose STARTTLS
/// fails is tried again in plaintext, and a host whose handshake failed is remembered in
/// `broken`, so that its next sessions skip STARTTLS for a while.
pub(crate) struct Opportunistic<'a> {
    /// The MX host's name, as `broken` keys it.
    pub(crate) host: &'a str,
    /// The mailer's memory of hosts whose handshake failed.
    pub(crate) broken: &'a BrokenTls,
}

/// Why an attempt failed, split by whether another server might still be tried.
#[derive(Debug)]
pub(crate) enum AttemptError {
    /// Before the transaction (connection, TLS, greeting, EHLO, AUTH): this server could
    /// not take the message; another MX host may.
    Session(SendError),
    /// The server answered (or went silent) about this message: final for this delivery.
    Transaction(SendError),
}

impl AttemptError {
    /// The port's error, whichever kind.
    pub(crate) fn into_send_error(self) -> SendError {
        match self {
            Self::Session(error) | Self::Transaction(error) => error,
        }
    }
}

/// Delivers `email` over a connection from `pool`, opened with `connector` when none is
/// idle; TLS is [`Opportunistic`] when given (MX only), else as the connector plans it.
pub(crate) async fn deliver(
    pool: &Arc<HostPool>,
    connector: &Connector,
    opportunistic: Option<&Opportunistic<'_>>,
    email: &OutboundEmail,
) -> Result<Delivered, AttemptError> {
    let timeouts = &connector.timeouts;
    let slot = pool.acquire().await;
    let (mut session, reused) = match slot.ready().await {
        Ready::Idle(session) => (*session, true),
        Ready::Open(seat) => (open(connector, opportunistic, seat).await.map_err(AttemptError::Session)?, false),
    };
    let mut result = session.deliver(email, timeouts).await;
    if reused && result.as_ref().is_err_and(|failure| failure.suggests_stale_connection()) {
        tracing::debug!(remote = %session.remote, "an idle connection had gone stale; opening a new one");
        // The new connection takes the stale one's seat in the site's cap, once it is closed.
        let seat = session.seat.take();
        drop(session);
        session = open(connector, opportunistic, seat).await.map_err(AttemptError::Session)?;
        result = session.deliver(email, timeouts).await;
    }
    match result {
        Ok(reply) => {
            let remote = session.remote.clone();
            let tls_outcome = session.tls_outcome.clone();
            let tls = Some(session.tls.clone());
            slot.release(session).await;
            Ok(Delivered { receipt: SendReceipt { reply, remote, tls }, tls_outcome })
        }
        Err(failure) => {
            let error = failure.to_send_error(&session.remote);
            if failure.keeps_connection() && session.reset(timeouts).await {
                slot.release(session).await;
            }
            Err(if failure.stage.in_transaction() {
                AttemptError::Transaction(error)
            } else {
                AttemptError::Session(error)
            })
        }
    }
}

/// A new session holding `seat` (its site's, with shaping); with `opportunistic` TLS, a
/// second one without TLS if STARTTLS failed (the first connection is closed by then), or
/// only one without TLS if the host's handshake failed recently.
async fn open(
    connector: &Connector,
    opportunistic: Option<&Opportunistic<'_>>,
    seat: Option<SiteSeat>,
) -> Result<Session, SendError> {
    let mut session = open_unseated(connector, opportunistic).await?;
    session.seat = seat;
    Ok(session)
}

async fn open_unseated(connector: &Connector, opportunistic: Option<&Opportunistic<'_>>) -> Result<Session, SendError> {
    let Some(opportunistic) = opportunistic else {
        return connector.open().await.map_err(|failure| failure.to_send_error(&connector.remote));
    };
    let host = opportunistic.host;
    if opportunistic.broken.is_broken(host, Instant::now()) {
        tracing::debug!(remote = %connector.remote, "the TLS handshake with this host failed within the hour; not trying STARTTLS");
        let why = format!("not tried: the TLS handshake with {host} failed within the last hour");
        return open_plaintext(connector, why).await;
    }
    match connector.open().await {
        Ok(session) => Ok(session),
        Err(failure) if failure.is_starttls_failure() => {
            let error = failure.to_send_error(&connector.remote);
            if failure.is_tls_handshake_failure() {
                opportunistic.broken.remember(host, Instant::now());
            }
            tracing::info!(remote = %connector.remote, %error, "STARTTLS failed; trying again without TLS");
            open_plaintext(connector, error.to_string()).await
        }
        Err(failure) => Err(failure.to_send_error(&connector.remote)),
    }
}

/// A session without TLS after STARTTLS failed or was skipped (`why`, for an audit).
async fn open_plaintext(connector: &Connector, why: String) -> Result<Session, SendError> {
    let mut session =
        connector.open_with(&TlsPlan::Plain).await.map_err(|failure| failure.to_send_error(&connector.remote))?;
    if connector.audit.is_some() {
        session.tls_outcome = Some(TlsOutcome::StartTlsFailed(why));
    }
    Ok(session)
}
