//! `Mailer`: hands a finished message to a transport (relay, direct MX, outbox).
//!
//! The transport reports what happened in SMTP's own terms (the reply, or why there was none);
//! it does not decide what that means for the message. Core classifies outcomes in one place
//! (`crate::classify`), so relay, MX, the SMTP submission front end and bounce reports all
//! share one table.

use async_trait::async_trait;
use bytes::Bytes;

use crate::email::EmailAddress;
use crate::ids::MessageId;
use crate::model::ConnectionTls;

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
    /// The full message, CRLF line endings. Shared so that retries and pooled transports do
    /// not copy it, and made from the signer's buffer without copying it.
    pub raw: Bytes,
}

/// An RFC 3463 enhanced status code such as `5.1.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EnhancedStatus {
    /// 2 (success), 4 (persistent transient) or 5 (permanent).
    pub class: u8,
    /// Subject, e.g. 1 for addressing, 7 for security/policy.
    pub subject: u16,
    /// Detail within the subject.
    pub detail: u16,
}

impl EnhancedStatus {
    /// Parses `class.subject.detail` (RFC 3463: class 2, 4 or 5; subject and detail up to
    /// three digits). `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.');
        let class = parts.next()?;
        let subject = parts.next()?;
        let detail = parts.next()?;
        if parts.next().is_some() {
            return None;
        }
        let digits = |s: &str, max: usize| !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_digit());
        if !(digits(class, 1) && digits(subject, 3) && digits(detail, 3)) {
            return None;
        }
        let class: u8 = class.parse().ok()?;
        if !matches!(class, 2 | 4 | 5) {
            return None;
        }
        Some(Self { class, subject: subject.parse().ok()?, detail: detail.parse().ok()? })
    }
}

impl std::fmt::Display for EnhancedStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.class, self.subject, self.detail)
    }
}

/// A reply of an SMTP server: code, enhanced status code when the text starts with one, and
/// the text (lines joined with a space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpReply {
    /// Three-digit reply code.
    pub code: u16,
    /// The enhanced status code at the start of the text, if any.
    pub enhanced: Option<EnhancedStatus>,
    /// The reply text without code and enhanced code.
    pub text: String,
}

impl SmtpReply {
    /// A reply from its code and full text; the enhanced status code is taken from the start
    /// of the text when it has one whose class matches the code's first digit (RFC 3463 §2).
    pub fn new(code: u16, text: &str) -> Self {
        let text = text.trim();
        let (first, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        match EnhancedStatus::parse(first) {
            Some(enhanced) if u16::from(enhanced.class) == code / 100 => {
                Self { code, enhanced: Some(enhanced), text: rest.trim().to_owned() }
            }
            _ => Self { code, enhanced: None, text: text.to_owned() },
        }
    }
}

impl std::fmt::Display for SmtpReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.enhanced {
            Some(enhanced) => write!(f, "{} {enhanced} {}", self.code, self.text),
            None => write!(f, "{} {}", self.code, self.text),
        }
    }
}

/// The receiving side accepted the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendReceipt {
    /// The final reply (250 after DATA, or the outbox's own).
    pub reply: SmtpReply,
    /// Who accepted it: `relay.example:587`, `mx1.example.net[192.0.2.1]:25`, `outbox`.
    pub remote: String,
    /// How the connection that carried it was secured; `None` when there was none (the
    /// outbox) or the transport cannot tell. A failed attempt has none: its error's text
    /// says what failed, TLS included.
    pub tls: Option<ConnectionTls>,
}

/// Why a send did not succeed, as observed; core decides what it means
/// (`crate::classify`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// A server answered with a non-2xx reply (to the greeting, EHLO, MAIL, RCPT or DATA).
    #[error("rejected by {remote}: {reply}")]
    Rejected {
        /// The reply.
        reply: SmtpReply,
        /// Which server answered.
        remote: String,
    },
    /// No usable answer: connection refused or reset, timeout, TLS failure, DNS failure
    /// other than "no such domain". Always worth retrying.
    #[error("{reason}")]
    Unreachable {
        /// What went wrong, for the event's `response` and the logs.
        reason: String,
    },
    /// The recipient's domain cannot receive mail: it does not exist (NXDOMAIN) or publishes
    /// a null MX (RFC 7505). Retrying will not help.
    #[error("{reason}")]
    NoMailServer {
        /// What the DNS said.
        reason: String,
    },
    /// The transport is misconfigured or broken locally (outbox not writable, bad relay
    /// credentials format). Retried, and logged loudly.
    #[error("local transport error: {reason}")]
    Local {
        /// What failed.
        reason: String,
    },
}

/// Delivers messages.
#[async_trait]
pub trait Mailer: Send + Sync {
    /// Delivers one message. Must be safe to call again for the same `provider_message_id`
    /// after a crash (receivers de-duplicate on Message-ID at best; at-least-once is the
    /// promise). Must not take longer than the transport's own timeouts allow: the delivery
    /// worker holds a lease on the message only for a bounded time.
    async fn send(&self, email: &OutboundEmail) -> Result<SendReceipt, SendError>;

    /// Whether what this transport accepts stays on this machine (the outbox) instead of
    /// going to another server. Only such a transport gets mail from the sandbox sending
    /// domain (`usecases::sandbox`); `false`, the default, is the safe answer for every
    /// transport that sends.
    fn keeps_mail_local(&self) -> bool {
        false
    }

    /// The delivery site of mail to `domain` (contract §12, "Destinations"): the key of the
    /// [`ShapingTable`](crate::shaping::ShapingTable) site its MX hosts roll up to, for the
    /// worker to admit deliveries by. `None`, the default, when this transport does not
    /// deliver by site (a relay, the outbox), or cannot tell now (the MX lookup failed: the
    /// attempt then finds out and is retried like any other).
    async fn site(&self, _domain: &crate::domain_name::DomainName) -> Option<crate::shaping::SiteKey> {
        None
    }

    /// How long this transport may keep a connection open and idle after a delivery, to
    /// reuse it: the worker keeps the site's connection lease that long, so that idle
    /// connections count against the site's connection limit on every node. Zero, the
    /// default, for a transport that keeps none.
    fn idle_connection_lifetime(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enhanced_codes_parse_only_when_well_formed() {
        assert_eq!(EnhancedStatus::parse("5.1.1"), Some(EnhancedStatus { class: 5, subject: 1, detail: 1 }));
        assert_eq!(EnhancedStatus::parse("4.7.650").map(|e| e.to_string()), Some("4.7.650".into()));
        for bad in ["", "5.1", "5.1.1.1", "3.1.1", "5.1.1000", "5..1", "a.b.c", "5.1.1;"] {
            assert_eq!(EnhancedStatus::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn replies_split_off_a_matching_enhanced_code() {
        let reply = SmtpReply::new(550, "5.1.1 <x@y.example>: user unknown");
        assert_eq!(reply.enhanced.map(|e| e.to_string()).as_deref(), Some("5.1.1"));
        assert_eq!(reply.text, "<x@y.example>: user unknown");
        assert_eq!(reply.to_string(), "550 5.1.1 <x@y.example>: user unknown");
        // A class that contradicts the code is text, not a status.
        let odd = SmtpReply::new(451, "5.7.1 odd");
        assert_eq!((odd.enhanced, odd.text.as_str()), (None, "5.7.1 odd"));
        let plain = SmtpReply::new(250, "OK queued as 12345");
        assert_eq!((plain.enhanced, plain.text.as_str()), (None, "OK queued as 12345"));
    }
}
