//! Inbound mail (contract §13): what an accepted message says, read from its bytes. Pure
//! functions, no storage, no network; the use cases (`usecases/inbound.rs`) call them for
//! the SMTP listener and the API.
//!
//! - [`parse`] reads a message into a [`ParsedInbound`] (addresses, subject, text, HTML,
//!   decoded headers, attachment metadata, Message-ID, In-Reply-To, References) within the
//!   [`InboundLimits`]; [`attachment_bytes`] gives one attachment's decoded contents later,
//!   from the stored raw message, by the index its metadata carries.
//! - [`strip_reply`] is the `strippedTextReply`: the new text of a reply without the quoted
//!   history ([`reply`] lists its rules).
//! - [`in_reply_to_message_id`] names the Tidings message a reply answers, from the
//!   Message-ID form Tidings writes (`<ULID@sending-domain>`).
//! - [`AuthResults`] names what SPF, DKIM and DMARC said about a message; the checks need
//!   the SMTP envelope and DNS, so they run behind the
//!   [`MessageAuth`](crate::ports::MessageAuth) port, not here (the results are defined
//!   in the model, which the store and the port share, and re-exported here).
//!
//! The limits and rules are recorded in docs/decisions.md ("Inbound mail: parsing", "Inbound
//! mail: SPF, DKIM and DMARC results").

mod headers;
mod message;
pub mod reply;
mod threading;

pub use crate::model::{
    AttachmentMeta, AuthCheck, AuthOutcome, AuthResults, InboundHeader, InboundMailbox, ParsedInbound, Truncation,
};
pub use message::{attachment_bytes, parse, parse_with};
pub use reply::strip_reply;
pub use threading::{in_reply_to_message_id, tidings_message_id};

/// Bounds on what [`parse_with`] reads, so that a hostile message cannot make the parsed
/// form (and the JSON an API or webhook makes of it) much larger than a person's mail.
/// Past a refusing limit the parse fails; past a truncating one the list is cut and
/// [`ParsedInbound::truncated`] says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboundLimits {
    /// Refusing: the largest message read, in bytes. The SMTP listener refuses larger mail
    /// at `DATA` (contract §13, default 25 MiB); pass its configured limit here.
    pub max_message_bytes: usize,
    /// Refusing: MIME parts of the message (its own, not counting those of attached
    /// messages). Mail people write has tens; thousands is a parser attack.
    pub max_parts: usize,
    /// Truncating: headers listed in [`ParsedInbound::headers`], in order.
    pub max_headers: usize,
    /// Truncating: bytes of one header value (and of the subject), cut at a character.
    pub max_header_value_bytes: usize,
    /// Truncating: bytes of all listed header names and values together.
    pub max_header_bytes: usize,
    /// Truncating: mailboxes listed for each of `to` and `cc`.
    pub max_recipients: usize,
    /// Truncating: ids kept from `References` (the newest, which name the nearest messages).
    pub max_references: usize,
}

impl Default for InboundLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: 25 * 1024 * 1024,
            max_parts: 1_000,
            max_headers: 200,
            max_header_value_bytes: 8 * 1024,
            max_header_bytes: 64 * 1024,
            max_recipients: 500,
            max_references: 100,
        }
    }
}

/// Why a message (or one of its attachments) could not be read.
///
/// mail-parser reads anything that starts with a header and reports no cause when it
/// cannot, so [`NotAMessage`](Self::NotAMessage) has none to keep.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InboundParseError {
    /// The bytes hold no header (empty, or a blank line first): not an RFC 5322 message.
    #[error("not an RFC 5322 message: no header found")]
    NotAMessage,
    /// Larger than [`InboundLimits::max_message_bytes`].
    #[error("the message is {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The message's size.
        size: usize,
        /// The limit it is over.
        limit: usize,
    },
    /// More MIME parts than [`InboundLimits::max_parts`].
    #[error("the message has {count} MIME parts, over the limit of {limit}")]
    TooManyParts {
        /// Parts found.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// [`attachment_bytes`] was asked for an attachment the message does not have.
    #[error("the message has no attachment {index} (it has {count})")]
    NoSuchAttachment {
        /// The index asked for.
        index: usize,
        /// How many attachments the message has.
        count: usize,
    },
}

#[cfg(test)]
mod tests;
