//! Messages and their event timeline (docs/api.md#messages).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::email::{EmailAddress, Mailbox};
use crate::ids::{ApiKeyId, DomainId, EventId, MessageId, TemplateId, TemplateVersionId, WorkspaceId};
use crate::model::recipients::{Recipient, WrittenHeaders};
use crate::model::{MessageExtras, TrackingTally};

/// Where a message is in its life (docs/api.md#messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MessageStatus {
    /// Accepted and waiting for the delivery worker.
    Queued,
    /// Waiting for its `scheduledAt`; from then on it behaves like `Queued`.
    Scheduled,
    /// Handed to the transport for an attempt.
    Sent,
    /// The last attempt failed temporarily; another is due.
    Deferred,
    /// Accepted by the receiving server.
    Delivered,
    /// Refused permanently, or retries exhausted (terminal).
    Bounced,
    /// The recipient reported it as spam (terminal).
    Complained,
    /// Could not be sent at all, e.g. its domain was deleted (terminal).
    Failed,
    /// The address was suppressed while the message waited (terminal).
    Suppressed,
    /// Canceled by the client before any attempt (terminal).
    Canceled,
    /// Of a message to several recipients: every recipient is settled and some, not all,
    /// were delivered (contract §10). Never the status of a single recipient.
    PartiallyDelivered,
}

impl MessageStatus {
    /// Every status, for exhaustive tests and filters.
    pub const ALL: [Self; 11] = [
        Self::Queued,
        Self::Scheduled,
        Self::Sent,
        Self::Deferred,
        Self::Delivered,
        Self::Bounced,
        Self::Complained,
        Self::Failed,
        Self::Suppressed,
        Self::Canceled,
        Self::PartiallyDelivered,
    ];

    /// No further status change is possible.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Bounced | Self::Complained | Self::Failed | Self::Suppressed | Self::Canceled)
    }

    /// Whether a `next_attempt_at` after now can only be a delivery claim's lease in this
    /// status: `Queued` messages are due from their creation and `Sent` ones are in flight.
    /// In `Scheduled` and `Deferred` it is the send or retry time; the others are never due.
    /// Decides what [`MessageStore::release_message_leases`] releases.
    ///
    /// [`MessageStore::release_message_leases`]: crate::ports::MessageStore::release_message_leases
    pub fn next_attempt_is_lease(self) -> bool {
        match self {
            Self::Queued | Self::Sent => true,
            Self::Scheduled
            | Self::Deferred
            | Self::Delivered
            | Self::Bounced
            | Self::Complained
            | Self::Failed
            | Self::Suppressed
            | Self::Canceled
            | Self::PartiallyDelivered => false,
        }
    }

    /// The PascalCase name used in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "Queued",
            Self::Scheduled => "Scheduled",
            Self::Sent => "Sent",
            Self::Deferred => "Deferred",
            Self::Delivered => "Delivered",
            Self::Bounced => "Bounced",
            Self::Complained => "Complained",
            Self::Failed => "Failed",
            Self::Suppressed => "Suppressed",
            Self::Canceled => "Canceled",
            Self::PartiallyDelivered => "PartiallyDelivered",
        }
    }

    /// Whether the client may still cancel or reschedule it: nothing was attempted yet.
    pub fn is_cancelable(self) -> bool {
        matches!(self, Self::Queued | Self::Scheduled)
    }

    /// Parses the API name (exact case).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// The type of a timeline event (docs/api.md#messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventType {
    /// Accepted by the API.
    Queued,
    /// An attempt started (handed to the transport).
    Sent,
    /// The receiving server accepted it.
    Delivered,
    /// A temporary failure; retried later.
    Deferred,
    /// Permanent failure or retries exhausted.
    Bounced,
    /// Spam complaint.
    Complained,
    /// Tracking pixel loaded.
    Opened,
    /// Tracked link followed.
    Clicked,
    /// Could not be sent at all.
    Failed,
    /// Skipped because the address is suppressed.
    Suppressed,
    /// Accepted with a `scheduledAt`, or rescheduled; the details carry the time.
    Scheduled,
    /// Canceled by the client before any attempt.
    Canceled,
}

impl EventType {
    /// Every event type.
    pub const ALL: [Self; 12] = [
        Self::Queued,
        Self::Sent,
        Self::Delivered,
        Self::Deferred,
        Self::Bounced,
        Self::Complained,
        Self::Opened,
        Self::Clicked,
        Self::Failed,
        Self::Suppressed,
        Self::Scheduled,
        Self::Canceled,
    ];

    /// The PascalCase name used in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "Queued",
            Self::Sent => "Sent",
            Self::Delivered => "Delivered",
            Self::Deferred => "Deferred",
            Self::Bounced => "Bounced",
            Self::Complained => "Complained",
            Self::Opened => "Opened",
            Self::Clicked => "Clicked",
            Self::Failed => "Failed",
            Self::Suppressed => "Suppressed",
            Self::Scheduled => "Scheduled",
            Self::Canceled => "Canceled",
        }
    }
}

/// Hard (permanent refusal) or soft (retries exhausted) bounce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BounceType {
    /// Permanent: suppresses the address.
    Hard,
    /// Retries exhausted: does not suppress.
    Soft,
}

/// What an event type carries (docs/api.md#messages); absent fields are omitted from JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventDetails {
    /// SMTP reply code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp_code: Option<u16>,
    /// Enhanced status code, e.g. `5.1.1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enhanced_code: Option<String>,
    /// The remote server's reply text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// Attempt number (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// When the next attempt is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Hard or soft bounce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounce_type: Option<BounceType>,
    /// Clicked URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// User agent of an open or click.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The send time a `Scheduled` event set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_at: Option<DateTime<Utc>>,
    /// How the connection that carried a delivered message was secured, when the transport
    /// said (SMTP relay and MX; not the outbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<super::ConnectionTls>,
}

/// One entry of a message's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageEvent {
    /// Id (ULID; events of one message sort in the order they happened).
    pub id: EventId,
    /// The message.
    pub message_id: MessageId,
    /// Type.
    pub event_type: EventType,
    /// The Message-ID written on the wire; `None` on `Queued`.
    pub provider_message_id: Option<String>,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// Type-specific details.
    pub details: EventDetails,
    /// The recipient it is about, on a message with a recipient list
    /// ([`Message::has_recipient_list`]); `None` on events about the whole message
    /// (`Queued`, `Scheduled`, ...) and on every event of a message without a list, whose one
    /// recipient is its `to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<EmailAddress>,
}

/// A message to one or more recipients. The bodies are kept (rendered) so the delivery worker can
/// build the MIME later; the API does not return them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Id.
    pub id: MessageId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// The key that sent it (send-scoped keys see only their own messages).
    pub api_key_id: ApiKeyId,
    /// The sending domain (for DKIM keys, and to fail the message if it is deleted).
    pub domain_id: DomainId,
    /// Current status.
    pub status: MessageStatus,
    /// The first recipient (of `to`); the only one of a message without a recipient list.
    pub to: EmailAddress,
    /// Every recipient with its own state, in request order, when the message has more than
    /// one or its one has a display name or is not in `to`; empty otherwise, and for every
    /// message stored before recipients existed (`model::recipients`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipients: Vec<Recipient>,
    /// The `To:` and `Cc:` headers as a message submitted over SMTP wrote them, when they are
    /// not simply its to and cc recipients; `None` for every other message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_headers: Option<WrittenHeaders>,
    /// Sender with display name.
    pub from: Mailbox,
    /// Rendered subject.
    pub subject: String,
    /// Rendered HTML body.
    pub html: Option<String>,
    /// Rendered text body.
    pub text: Option<String>,
    /// Template used, if any.
    pub template_id: Option<TemplateId>,
    /// Exact template version used, if any; survives template deletion.
    pub template_version_id: Option<TemplateVersionId>,
    /// Message-ID on the wire (without angle brackets), once handed to the transport.
    pub provider_message_id: Option<String>,
    /// Delivery attempts started.
    pub attempts: u32,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// When the delivery worker should next look at it; `None` once nothing is due
    /// (terminal, or delivered). The stores index this.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The bounce type, once `Bounced`.
    pub bounce_type: Option<BounceType>,
    /// Id of the newest timeline event. New events get a larger id, so that sorting a
    /// timeline by id gives the order in which events were accepted even when two happen in
    /// the same millisecond.
    pub last_event_id: EventId,
    /// Open and click tracking, resolved at accept time from the send and the domain's
    /// defaults (docs/api.md#tracking). Messages stored before tracking existed read as
    /// untracked.
    #[serde(default)]
    pub tracking: MessageTracking,
    /// Reply-To, custom headers, tags, metadata and attachments; empty for
    /// messages stored before they existed.
    #[serde(default, skip_serializing_if = "MessageExtras::is_empty")]
    pub extras: MessageExtras,
    /// The send time the client asked for (`scheduledAt`), kept after it passed; `None` for
    /// a message sent at once. Messages stored before scheduling existed read as `None`.
    #[serde(default)]
    pub scheduled_at: Option<DateTime<Utc>>,
    /// The opens and clicks its timeline holds, which bounds how many more it keeps
    /// ([`super::tracking_tally`]); empty until the first one, and for messages stored
    /// before the tally existed.
    #[serde(default, skip_serializing_if = "TrackingTally::is_empty")]
    pub tracking_tally: TrackingTally,
}

/// Which tracking a message gets; both off unless asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MessageTracking {
    /// Add the open pixel to the HTML part.
    pub opens: bool,
    /// Rewrite the HTML part's http(s) links to the click redirect.
    pub clicks: bool,
}

impl Message {
    /// The message as retention keeps it once its age has passed: everything that says what
    /// happened to it (status, addresses, subject, ids, times, counts) and nothing of what it
    /// said ([`MessageContent`]).
    pub fn without_content(&self) -> Self {
        let mut kept = self.clone();
        kept.take_content();
        kept
    }

    /// Whether [`Self::without_content`] would leave it as it is.
    pub fn has_content(&self) -> bool {
        self.html.is_some()
            || self.text.is_some()
            || !self.extras.headers.is_empty()
            || !self.extras.attachments.is_empty()
    }

    /// Moves the content out, leaving the message as [`Self::without_content`] would.
    pub fn take_content(&mut self) -> MessageContent {
        MessageContent {
            html: self.html.take(),
            text: self.text.take(),
            headers: std::mem::take(&mut self.extras.headers),
            attachments: std::mem::take(&mut self.extras.attachments),
        }
    }

    /// Puts back content taken by [`Self::take_content`] (or stored apart).
    pub fn put_content(&mut self, content: MessageContent) {
        let MessageContent { html, text, headers, attachments } = content;
        self.html = html;
        self.text = text;
        self.extras.headers = headers;
        self.extras.attachments = attachments;
    }
}

/// What a message said, as opposed to what happened to it: the fields a user sent that
/// retention clears once the message is old. Reply-To addresses, tags and metadata are not
/// content: they describe the message, and lists filter on them. A field that carries
/// content a user sent must be here; this is the one place retention looks, and stores that
/// keep the content apart from the often-rewritten rest of the message rely on it too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageContent {
    /// Rendered HTML body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    /// Rendered text body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Custom header fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<crate::model::extras::CustomHeader>,
    /// Attachments and inline parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::model::extras::Attachment>,
}

impl MessageContent {
    /// Nothing to keep.
    pub fn is_empty(&self) -> bool {
        self.html.is_none() && self.text.is_none() && self.headers.is_empty() && self.attachments.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::MessageStatus;

    #[test]
    fn content_taken_out_and_put_back_gives_the_message_back() {
        use crate::model::extras::{Attachment, CustomHeader, Tag};
        let domain = crate::outbound::test_support::signing_domain("example.com");
        let mut message = crate::outbound::test_support::message_from(&domain);
        message.extras.headers.push(CustomHeader::parse("X-Order", "42").unwrap());
        message.extras.attachments.push(Attachment::parse("a.txt", "text/plain", "aGk=", None).unwrap());
        message.extras.tags.push(Tag::parse("kind", "receipt").unwrap());
        let whole = message.clone();
        assert!(whole.has_content());
        let content = message.take_content();
        assert_eq!(message, whole.without_content(), "what is left is what retention keeps");
        assert!(!message.has_content() && !content.is_empty());
        assert_eq!(message.extras.tags, whole.extras.tags, "tags describe the message: not content");
        message.put_content(content);
        assert_eq!(message, whole);
    }

    #[test]
    fn only_queued_and_sent_messages_hold_leases() {
        // Scheduled behaves like Queued for sending, but its time is the send time: a
        // restart must not pull it forward.
        let leased: Vec<MessageStatus> = MessageStatus::ALL.into_iter().filter(|s| s.next_attempt_is_lease()).collect();
        assert_eq!(leased, [MessageStatus::Queued, MessageStatus::Sent]);
    }
}
