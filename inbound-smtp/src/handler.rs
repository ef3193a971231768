//! What the listener hands over: the envelope and the raw message, to a handler that stores
//! it (or refuses it) before the sender is told `250`.

use std::net::SocketAddr;

use async_trait::async_trait;
use tidings_core::email::EmailAddress;

/// The SMTP envelope of one accepted message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// `MAIL FROM`; `None` for the null reverse path `<>`, which bounce reports use.
    pub mail_from: Option<EmailAddress>,
    /// The accepted `RCPT TO` addresses, all on the accepted domain, in order.
    pub recipients: Vec<EmailAddress>,
    /// The name the client gave in `EHLO`/`HELO` (printable ASCII, at most 255 bytes).
    pub helo: String,
    /// The client's address.
    pub peer: SocketAddr,
}

/// Why a handler did not take a message; decides the reply the sender gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Could not store it now (storage down, overloaded): `451 4.3.0`, the sender retries.
    #[error("temporary failure: {0}")]
    Temporary(String),
    /// Will never take it: `554 5.6.0`, the sender gives up. The text is logged, not sent.
    #[error("permanent failure: {0}")]
    Permanent(String),
}

/// Receives each message the listener accepts.
#[async_trait]
pub trait InboundHandler: Send + Sync {
    /// Called once per accepted message, after the final dot and before the 250 is sent;
    /// `Ok` → `250`, `Err(Temporary)` → `451 4.3.0` (the sender retries), `Err(Permanent)` →
    /// `554`. `raw` is the message as sent, after dot-unstuffing, line endings untouched.
    async fn receive(&self, envelope: Envelope, raw: Vec<u8>) -> Result<(), HandlerError>;
}
