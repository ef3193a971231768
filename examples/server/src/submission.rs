//! The SMTP submission listener (`TIDINGS_SUBMISSION_LISTEN`, issue #8): the SMTP server of
//! `tidings-inbound-smtp` in its submission role, with STARTTLS on the HTTPS certificate
//! and `tidings_inbound_smtp::SubmissionHandler`, which sends through core with the same
//! limits as the HTTP API (one rate-limit budget per key, one failed-auth count per client).

use std::net::SocketAddr;
use std::sync::Arc;

use tidings_core::ports::Limits;
use tidings_core::usecases::Tidings;
use tidings_inbound_smtp::{InboundListener, InboundSettings, SubmissionHandler};
use tokio_rustls::rustls::ServerConfig;

use crate::ServerError;

/// Binds the listener on `addr`; prints `SMTP submission listening on ADDR` on stderr (the
/// real port when `addr` has port 0).
pub async fn bind(
    addr: SocketAddr,
    https: &ServerConfig,
    core: Tidings,
    limits: Arc<dyn Limits>,
) -> Result<InboundListener, ServerError> {
    // The HTTPS configuration offers h2 and http/1.1 by ALPN; an SMTP client that offers
    // ALPN at all would be refused for naming neither, so SMTP offers none.
    let mut tls = https.clone();
    tls.alpn_protocols.clear();
    let settings = InboundSettings::submission(Arc::new(tls));
    let listener = InboundListener::bind(addr, settings, Arc::new(SubmissionHandler::new(core, limits)))
        .await
        .map_err(|source| ServerError::SubmissionBind { addr, source })?;
    eprintln!("SMTP submission listening on {}", listener.local_addr());
    Ok(listener)
}
