//! RFC 5965 feedback reports (ARF): what mailbox providers send when a recipient marks a
//! message as spam.

use std::net::IpAddr;

use chrono::{DateTime, Utc};

use super::Original;
use super::fields::{self, Block};
use crate::email::EmailAddress;

/// A feedback report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arf {
    /// `Feedback-Type`.
    pub feedback_type: FeedbackType,
    /// `User-Agent`: the software that wrote the report.
    pub user_agent: Option<String>,
    /// `Version`.
    pub version: Option<String>,
    /// `Original-Rcpt-To`: often missing or redacted (Microsoft's JMRP leaves it out).
    pub original_rcpt_to: Option<EmailAddress>,
    /// `Original-Mail-From`.
    pub original_mail_from: Option<EmailAddress>,
    /// `Arrival-Date` (or the older `Received-Date`).
    pub arrival_date: Option<DateTime<Utc>>,
    /// `Source-IP`.
    pub source_ip: Option<IpAddr>,
    /// `Reported-Domain`.
    pub reported_domain: Option<String>,
    /// `Message-ID` of the original (without brackets), from the attached message or headers.
    pub original_message_id: Option<String>,
    /// `Return-Path` of the original, from the attached message or headers, when the
    /// receiving system added one.
    pub original_return_path: Option<EmailAddress>,
}

/// The `Feedback-Type` (RFC 5965 §7.3 registry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedbackType {
    /// Unsolicited mail: the spam button.
    Abuse,
    /// Phishing or other fraud.
    Fraud,
    /// Malware.
    Virus,
    /// Any other kind of complaint.
    Other,
    /// The recipient says it is *not* spam.
    NotSpam,
    /// An authentication failure report (RFC 6591): about DKIM/SPF, not the recipient.
    AuthFailure,
    /// A value the registry does not define, lower-cased; `""` when the field is missing.
    Unknown(String),
}

impl FeedbackType {
    /// Parses the field's first word, any case.
    pub fn parse(value: &str) -> Self {
        let word = fields::first_word(value).unwrap_or_default().to_ascii_lowercase();
        match word.as_str() {
            "abuse" => Self::Abuse,
            "fraud" => Self::Fraud,
            "virus" => Self::Virus,
            "other" => Self::Other,
            "not-spam" => Self::NotSpam,
            "auth-failure" => Self::AuthFailure,
            _ => Self::Unknown(word),
        }
    }

    /// The registry name (`abuse`, `not-spam`, ...), or the unknown value as given.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Abuse => "abuse",
            Self::Fraud => "fraud",
            Self::Virus => "virus",
            Self::Other => "other",
            Self::NotSpam => "not-spam",
            Self::AuthFailure => "auth-failure",
            Self::Unknown(word) => word,
        }
    }
}

impl Arf {
    /// Reads the fields of a `message/feedback-report` part (one block; any further blocks
    /// are read as if they continued it).
    pub(super) fn from_fields(blocks: &[Block], original: Original) -> Self {
        let all: Block = blocks.iter().flatten().cloned().collect();
        let get = |name| fields::get(&all, name);
        Self {
            feedback_type: FeedbackType::parse(get("feedback-type").unwrap_or_default()),
            user_agent: get("user-agent").map(str::to_owned),
            version: get("version").map(str::to_owned),
            original_rcpt_to: get("original-rcpt-to").and_then(fields::address),
            original_mail_from: get("original-mail-from").and_then(fields::address),
            arrival_date: get("arrival-date").or_else(|| get("received-date")).and_then(fields::date),
            source_ip: get("source-ip").and_then(|ip| ip.trim().parse().ok()),
            reported_domain: get("reported-domain").map(str::to_owned),
            original_message_id: original.message_id,
            original_return_path: original.return_path,
        }
    }
}
