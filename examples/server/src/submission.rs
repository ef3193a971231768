//! The SMTP submission listeners (`TIDINGS_SUBMISSION_LISTEN` with STARTTLS,
//! `TIDINGS_SUBMISSION_TLS_LISTEN` with implicit TLS): the SMTP server of
//! `tidings-inbound-smtp` in its submission role, with TLS on the HTTPS certificate and
//! `tidings_inbound_smtp::SubmissionHandler`, which sends through core with the same
//! limits as the HTTP API (one rate-limit budget per key, one failed-auth count per client).

use std::net::SocketAddr;
use std::sync::Arc;

use tidings_core::ports::Limits;
use tidings_core::usecases::Tidings;
use tidings_inbound_smtp::{InboundListener, InboundSettings, SubmissionHandler};
use tokio_rustls::rustls::ServerConfig;

use crate::ServerError;
use crate::config::SmtpLimits;
use crate::inbound::with_limits;

/// Binds a listener on `addr`, with implicit TLS or STARTTLS; prints `SMTP submission
/// listening on ADDR` (or `SMTP submission (implicit TLS) listening on ADDR`) on stderr, with
/// the real port when `addr` has port 0.
pub async fn bind(
    addr: SocketAddr,
    implicit_tls: bool,
    https: &ServerConfig,
    smtp_limits: &SmtpLimits,
    core: Tidings,
    limits: Arc<dyn Limits>,
) -> Result<InboundListener, ServerError> {
    // The HTTPS configuration offers h2 and http/1.1 by ALPN; an SMTP client that offers
    // ALPN at all would be refused for naming neither, so SMTP offers none.
    let mut tls = https.clone();
    tls.alpn_protocols.clear();
    let (settings, var, what) = match implicit_tls {
        false => (InboundSettings::submission(Arc::new(tls)), "TIDINGS_SUBMISSION_LISTEN", ""),
        true => (
            InboundSettings::submission_implicit_tls(Arc::new(tls)),
            "TIDINGS_SUBMISSION_TLS_LISTEN",
            " (implicit TLS)",
        ),
    };
    let settings = with_limits(settings, smtp_limits);
    let listener = InboundListener::bind(addr, settings, Arc::new(SubmissionHandler::new(core, limits)))
        .await
        .map_err(|source| ServerError::SubmissionBind { var, addr, source })?;
    eprintln!("SMTP submission{what} listening on {}", listener.local_addr());
    Ok(listener)
}
