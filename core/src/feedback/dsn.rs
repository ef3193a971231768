//! RFC 3464 delivery status notifications.

use chrono::{DateTime, Utc};

use super::Original;
use super::fields::{self, Block, Diagnostic, TypedValue};
use crate::email::EmailAddress;
use crate::ports::EnhancedStatus;

/// A delivery status notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dsn {
    /// `Reporting-MTA`: who wrote the report.
    pub reporting_mta: Option<TypedValue>,
    /// `Arrival-Date`: when the reporting MTA received the original.
    pub arrival_date: Option<DateTime<Utc>>,
    /// One entry per per-recipient block, in order.
    pub recipients: Vec<DsnRecipient>,
    /// `Message-ID` of the original (without brackets), from the attached message or headers.
    pub original_message_id: Option<String>,
    /// `Return-Path` of the original, from the attached message or headers, when the
    /// receiving system added one.
    pub original_return_path: Option<EmailAddress>,
}

/// What a DSN says about one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DsnRecipient {
    /// `Final-Recipient`.
    pub final_recipient: Option<TypedValue>,
    /// `Original-Recipient`.
    pub original_recipient: Option<TypedValue>,
    /// `Action`; `None` if missing or not one RFC 3464 defines.
    pub action: Option<Action>,
    /// `Status`.
    pub status: Option<EnhancedStatus>,
    /// `Diagnostic-Code`.
    pub diagnostic: Option<Diagnostic>,
    /// `Remote-MTA`.
    pub remote_mta: Option<TypedValue>,
}

/// The `Action` of a recipient block (RFC 3464 §2.3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Could not be delivered and will not be tried again.
    Failed,
    /// Not delivered yet; still being tried.
    Delayed,
    /// Delivered.
    Delivered,
    /// Handed on to a system that sends no DSNs.
    Relayed,
    /// Delivered and forwarded to several addresses.
    Expanded,
}

impl Action {
    /// Parses the field's first word, any case.
    pub fn parse(value: &str) -> Option<Self> {
        let word = fields::first_word(value)?.to_ascii_lowercase();
        Some(match word.as_str() {
            "failed" => Self::Failed,
            "delayed" => Self::Delayed,
            "delivered" => Self::Delivered,
            "relayed" => Self::Relayed,
            "expanded" => Self::Expanded,
            _ => return None,
        })
    }
}

impl Dsn {
    /// Reads the blocks of a `message/delivery-status` part: the per-message block first,
    /// then per-recipient blocks. A first block that already names a recipient (some MTAs
    /// leave the per-message block out) counts as a recipient block.
    pub(super) fn from_fields(blocks: &[Block], original: Original) -> Self {
        let is_recipient = |b: &Block| fields::has(b, "final-recipient") || fields::has(b, "action");
        let per_message = blocks.first().filter(|b| !is_recipient(b));
        Self {
            reporting_mta: per_message.and_then(|b| fields::get(b, "reporting-mta")).map(TypedValue::parse),
            arrival_date: per_message.and_then(|b| fields::get(b, "arrival-date")).and_then(fields::date),
            recipients: blocks.iter().filter(|b| is_recipient(b)).map(DsnRecipient::from_block).collect(),
            original_message_id: original.message_id,
            original_return_path: original.return_path,
        }
    }
}

impl DsnRecipient {
    fn from_block(block: &Block) -> Self {
        Self {
            final_recipient: fields::get(block, "final-recipient").map(TypedValue::parse),
            original_recipient: fields::get(block, "original-recipient").map(TypedValue::parse),
            action: fields::get(block, "action").and_then(Action::parse),
            status: fields::get(block, "status").and_then(fields::status),
            diagnostic: fields::get(block, "diagnostic-code").map(Diagnostic::parse),
            remote_mta: fields::get(block, "remote-mta").map(TypedValue::parse),
        }
    }
}
