//! The recipients of a message (docs/api.md#recipients, contract §10): who it goes to, in
//! which list, and where each one is in its own life.
//!
//! A message names 1–50 recipients across `to`, `cc` and `bcc`. Each recipient moves through
//! the states of [`MessageStatus`] on its own (attempts, retries, bounces, complaints,
//! suppression), and the message's `status` is [`aggregate_status`] of theirs.
//!
//! Storage keeps the shape of every message made before recipients existed: a message with
//! one recipient, in `to`, without a display name, stores no list ([`Message::recipients`]
//! empty), and its own `status`, `attempts`, `next_attempt_at` and `bounce_type` are that
//! recipient's. Only other messages store the list, and then the message's fields are the
//! aggregate. So old records read as they are, and a single-recipient send costs what it
//! did (docs/decisions.md, "Several recipients").

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::email::{DisplayName, EmailAddress, Mailbox};
use crate::model::{BounceType, Message, MessageStatus};

/// Most recipients of one message, across `to`, `cc` and `bcc`.
pub const MAX_RECIPIENTS: usize = 50;

/// Which list of the send named a recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecipientKind {
    /// In the `To:` header.
    To,
    /// In the `Cc:` header.
    Cc,
    /// In no header: only the envelope names it.
    Bcc,
}

impl RecipientKind {
    /// The API name: `to`, `cc` or `bcc`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::To => "to",
            Self::Cc => "cc",
            Self::Bcc => "bcc",
        }
    }
}

/// One recipient of a message and its own state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipient {
    /// The address.
    pub email: EmailAddress,
    /// Its display name, if the send gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<DisplayName>,
    /// The list that named it.
    pub kind: RecipientKind,
    /// Where it is (the states of a message, docs/api.md#statuses-and-transitions).
    pub status: MessageStatus,
    /// Delivery attempts started for it.
    pub attempts: u32,
    /// Its last change.
    pub updated_at: DateTime<Utc>,
    /// When it is next due (`Queued`, `Scheduled`, `Deferred`; kept while `Sent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Hard or soft, once `Bounced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounce_type: Option<BounceType>,
    /// Put back, unattempted, for its delivery site's turn (contract §12), its
    /// `next_attempt_at` being that turn: not a retry, so any claim of the message asks the
    /// site again (after a resume, say) instead of waiting for that time. Any event clears it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waits_for_site: bool,
}

impl Recipient {
    /// A recipient named by a send, before any event.
    pub fn new(mailbox: Mailbox, kind: RecipientKind, status: MessageStatus, at: DateTime<Utc>) -> Self {
        Self {
            email: mailbox.address,
            name: mailbox.display_name,
            kind,
            status,
            attempts: 0,
            updated_at: at,
            next_attempt_at: None,
            bounce_type: None,
            waits_for_site: false,
        }
    }

    /// `Name <addr>` or `addr`, as a header shows it.
    pub fn mailbox(&self) -> Mailbox {
        Mailbox { display_name: self.name.clone(), address: self.email.clone() }
    }

    /// Nothing more will be attempted for it: delivered or terminal.
    pub fn is_settled(&self) -> bool {
        !matches!(
            self.status,
            MessageStatus::Queued | MessageStatus::Scheduled | MessageStatus::Sent | MessageStatus::Deferred
        )
    }

    /// The receiver took it: `Delivered`, or `Complained` (a complaint is about mail that
    /// arrived).
    fn was_delivered(&self) -> bool {
        matches!(self.status, MessageStatus::Delivered | MessageStatus::Complained)
    }
}

/// The `To:` and `Cc:` of a message submitted over SMTP as its sender wrote them, kept when
/// they are not simply its recipients of those lists: SMTP delivers to the envelope, and
/// the headers may name others (a list address, `undisclosed-recipients:;`). Contract §10:
/// the headers are kept as written; envelope recipients in neither are the message's bcc.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenHeaders {
    /// The `To:` mailboxes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<Mailbox>,
    /// The `Cc:` mailboxes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cc: Vec<Mailbox>,
}

/// The recipients a send named, once each, in request order: the first list that names an
/// address keeps it (to, then cc, then bcc; addresses compare as
/// [`EmailAddress::normalized`]).
pub fn dedupe(lists: [(RecipientKind, Vec<Mailbox>); 3]) -> Vec<(RecipientKind, Mailbox)> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (kind, list) in lists {
        for mailbox in list {
            if seen.insert(mailbox.address.normalized()) {
                out.push((kind, mailbox));
            }
        }
    }
    out
}

/// The status of a message whose recipients are `recipients` (contract §10): with one, its
/// status. With several, while any is not settled: `Scheduled` or `Queued` until the first
/// attempt, then `Deferred` when every unsettled one is deferred, else `Sent`; once all are
/// settled: `Delivered` if every one was, `PartiallyDelivered` if some were, else `Bounced`
/// if any bounced, `Suppressed` if all were suppressed, `Canceled` if any was canceled (the
/// contract is silent: a cancel is the client's choice for the whole message, so it names
/// the message), else `Failed`.
pub fn aggregate_status(recipients: &[Recipient]) -> MessageStatus {
    use MessageStatus as S;
    if let [only] = recipients {
        return only.status;
    }
    let unsettled: Vec<&Recipient> = recipients.iter().filter(|r| !r.is_settled()).collect();
    if !unsettled.is_empty() {
        let attempted = recipients.iter().any(|r| r.attempts > 0);
        if !attempted {
            return if unsettled.iter().any(|r| r.status == S::Scheduled) { S::Scheduled } else { S::Queued };
        }
        return if unsettled.iter().all(|r| r.status == S::Deferred) { S::Deferred } else { S::Sent };
    }
    let delivered = recipients.iter().filter(|r| r.was_delivered()).count();
    if delivered == recipients.len() {
        S::Delivered
    } else if delivered > 0 {
        S::PartiallyDelivered
    } else if recipients.iter().any(|r| r.status == S::Bounced) {
        S::Bounced
    } else if recipients.iter().all(|r| r.status == S::Suppressed) {
        S::Suppressed
    } else if recipients.iter().any(|r| r.status == S::Canceled) {
        S::Canceled
    } else {
        S::Failed
    }
}

impl Message {
    /// Whether the message stores its recipients as a list (more than one, or one with a
    /// display name or in another list than `to`); otherwise its own fields are its one
    /// recipient's.
    pub fn has_recipient_list(&self) -> bool {
        !self.recipients.is_empty()
    }

    /// Every recipient with its state, in request order: the stored list, or the one
    /// recipient that a message without a list has.
    pub fn recipient_list(&self) -> Cow<'_, [Recipient]> {
        if self.has_recipient_list() {
            return Cow::Borrowed(&self.recipients);
        }
        Cow::Owned(vec![Recipient {
            email: self.to.clone(),
            name: None,
            kind: RecipientKind::To,
            status: self.status,
            attempts: self.attempts,
            updated_at: self.updated_at,
            next_attempt_at: self.next_attempt_at,
            bounce_type: self.bounce_type,
            waits_for_site: false,
        }])
    }

    /// The position of `address` among the recipients (compared as
    /// [`EmailAddress::normalized`]).
    pub fn recipient_index(&self, address: &EmailAddress) -> Option<usize> {
        let wanted = address.normalized();
        if !self.has_recipient_list() {
            return (self.to.normalized() == wanted).then_some(0);
        }
        self.recipients.iter().position(|r| r.email.normalized() == wanted)
    }

    /// Addresses of every recipient, in request order.
    pub fn recipient_addresses(&self) -> Vec<EmailAddress> {
        if self.has_recipient_list() {
            self.recipients.iter().map(|r| r.email.clone()).collect()
        } else {
            vec![self.to.clone()]
        }
    }

    /// The mailboxes of the `To:` or `Cc:` header (as written, for a submitted message that
    /// keeps them), or the recipients of that list. Bcc recipients are in no header: asked
    /// for `Bcc`, the recipients of that list.
    pub fn mailboxes_of(&self, kind: RecipientKind) -> Vec<Mailbox> {
        match (&self.written_headers, kind) {
            (Some(written), RecipientKind::To) => return written.to.clone(),
            (Some(written), RecipientKind::Cc) => return written.cc.clone(),
            _ => {}
        }
        if !self.has_recipient_list() {
            return match kind {
                RecipientKind::To => vec![Mailbox { display_name: None, address: self.to.clone() }],
                RecipientKind::Cc | RecipientKind::Bcc => Vec::new(),
            };
        }
        self.recipients.iter().filter(|r| r.kind == kind).map(Recipient::mailbox).collect()
    }

    /// The API's `to`: the to recipients as written (a submitted message's `To:` header as
    /// written), joined by `", "`; for a message without a list, the address as it always was.
    pub fn to_field(&self) -> String {
        self.mailboxes_of(RecipientKind::To).iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    }

    /// Sets the message's own `status`, `attempts`, `next_attempt_at`, `bounce_type` and
    /// `updated_at` from its recipient list (no-op without one). While a recipient is
    /// `Sent`, `next_attempt_at` stays as it is (the claim's lease): a message with an
    /// attempt in flight stays leased to the worker making it.
    pub fn settle_from_recipients(&mut self) {
        if !self.has_recipient_list() {
            return;
        }
        self.status = aggregate_status(&self.recipients);
        self.attempts = self.recipients.iter().map(|r| r.attempts).max().unwrap_or(0);
        self.bounce_type = match self.status {
            MessageStatus::Bounced => self
                .recipients
                .iter()
                .filter_map(|r| r.bounce_type)
                .max_by_key(|b| matches!(b, BounceType::Hard))
                .or(Some(BounceType::Hard)),
            _ => None,
        };
        if let Some(latest) = self.recipients.iter().map(|r| r.updated_at).max() {
            self.updated_at = self.updated_at.max(latest);
        }
        let in_flight = self.recipients.iter().any(|r| r.status == MessageStatus::Sent);
        if !in_flight {
            self.next_attempt_at = self
                .recipients
                .iter()
                .filter(|r| {
                    matches!(r.status, MessageStatus::Queued | MessageStatus::Scheduled | MessageStatus::Deferred)
                })
                .filter_map(|r| r.next_attempt_at)
                .min();
        }
    }
}

#[cfg(test)]
#[path = "recipients_tests.rs"]
mod tests;
