//! `Mailer`: hands a finished message to a transport (relay, direct MX, outbox).

use async_trait::async_trait;

use crate::email::EmailAddress;
use crate::ids::MessageId;

/// A message ready for the wire: RFC 5322 bytes, already DKIM-signed, and its envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundEmail {
    /// The message it carries (for logs and keyed retries).
    pub message_id: MessageId,
    /// `Message-ID` header value without angle brackets.
    pub provider_message_id: String,
    /// Envelope sender (MAIL FROM); the return path.
    pub envelope_from: EmailAddress,
    /// Envelope recipient (RCPT TO).
    pub envelope_to: EmailAddress,
    /// The full message, CRLF line endings.
    pub raw: Vec<u8>,
}

/// The receiving side accepted the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendReceipt {
    /// SMTP reply code (250).
    pub smtp_code: u16,
    /// The reply text.
    pub response: String,
}

/// Why a send did not succeed, classified once, by the transport, from the SMTP reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Try again later (4xx, connection trouble, timeouts).
    #[error("temporary failure {code:?} {enhanced_code:?}: {response}")]
    Transient {
        /// SMTP reply code, if the server answered.
        code: Option<u16>,
        /// Enhanced status code, e.g. `4.2.2`.
        enhanced_code: Option<String>,
        /// Reply text or local error.
        response: String,
    },
    /// Will never be accepted (5xx).
    #[error("permanent failure {code:?} {enhanced_code:?}: {response}")]
    Permanent {
        /// SMTP reply code, if the server answered.
        code: Option<u16>,
        /// Enhanced status code, e.g. `5.1.1`.
        enhanced_code: Option<String>,
        /// Reply text or local error.
        response: String,
    },
}

/// Delivers messages.
#[async_trait]
pub trait Mailer: Send + Sync {
    /// Delivers one message. Must be safe to call again for the same `provider_message_id`
    /// after a crash (receivers de-duplicate on Message-ID at best; at-least-once is the
    /// contract).
    async fn send(&self, email: &OutboundEmail) -> Result<SendReceipt, SendError>;
}
