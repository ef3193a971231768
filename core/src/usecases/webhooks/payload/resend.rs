//! Bodies in Resend's webhook format (docs/api.md#webhook-formats), the shapes Resend's SDK
//! declares for its events (`WebhookEventPayload` in resend-node):
//! `{"type":"email.delivered","created_at","data":{"email_id","created_at","from","to",
//! "subject","message_id","tags", …}}`, with `bounce`, `click`, `failed` or `suppressed`
//! added on the events that carry them.
//!
//! Choices where Tidings knows less or differently than Resend:
//! - `email_id` is the Tidings message id (the id `/resend/emails` answers with).
//! - `to` is the recipient the event is about when it is about one (a message with several
//!   recipients), otherwise the message's to addresses.
//! - `message_id` is the Message-ID header in angle brackets, `""` before one was written.
//! - `click.ipAddress` is `""`: Tidings does not keep a clicker's address.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{ABOUT_TEST, render_json};
use crate::Result;
use crate::ids::{EventId, MessageId, WebhookId};
use crate::model::{BounceType, EventType, Message, MessageEvent, RecipientKind, WebhookFormat};

#[derive(Serialize)]
struct Envelope<D> {
    #[serde(rename = "type")]
    event_type: &'static str,
    created_at: DateTime<Utc>,
    data: D,
}

#[derive(Serialize)]
struct EmailData<'a> {
    email_id: MessageId,
    created_at: DateTime<Utc>,
    from: String,
    to: Vec<String>,
    subject: &'a str,
    message_id: String,
    tags: BTreeMap<&'a str, &'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bounce: Option<Bounce<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    click: Option<Click<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<Failed<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suppressed: Option<Suppressed>,
}

/// Resend's `EmailBounce`: `type` is `Permanent` (a hard bounce) or `Transient` (retries
/// used up); `message` is the receiving server's answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Bounce<'a> {
    message: &'a str,
    sub_type: &'static str,
    #[serde(rename = "type")]
    bounce_type: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Click<'a> {
    ip_address: &'static str,
    link: &'a str,
    timestamp: DateTime<Utc>,
    user_agent: &'a str,
}

#[derive(Serialize)]
struct Failed<'a> {
    reason: &'a str,
}

#[derive(Serialize)]
struct Suppressed {
    message: &'static str,
    #[serde(rename = "type")]
    suppression_type: &'static str,
}

#[derive(Serialize)]
struct TestData {
    webhook_id: WebhookId,
    event_id: EventId,
    description: &'static str,
}

/// The body announcing `event` of `message`, or `None` when Resend has no such event.
pub(super) fn message_event(message: &Message, event: &MessageEvent) -> Result<Option<String>> {
    let Some(event_type) = WebhookFormat::Resend.event_name(event.event_type) else {
        return Ok(None);
    };
    let details = &event.details;
    let response = details.response.as_deref().unwrap_or("");
    let to = match &event.recipient {
        Some(recipient) => vec![recipient.to_string()],
        None => message.mailboxes_of(RecipientKind::To).iter().map(|m| m.address.to_string()).collect(),
    };
    let provider_message_id = event.provider_message_id.as_deref().or(message.provider_message_id.as_deref());
    let data = EmailData {
        email_id: message.id,
        created_at: message.created_at,
        from: message.from.to_string(),
        to,
        subject: &message.subject,
        message_id: provider_message_id.map(|id| format!("<{id}>")).unwrap_or_default(),
        tags: message.extras.tags.iter().map(|t| (t.name(), t.value())).collect(),
        bounce: (event.event_type == EventType::Bounced).then(|| Bounce {
            message: response,
            sub_type: "General",
            bounce_type: match details.bounce_type.or(message.bounce_type) {
                Some(BounceType::Soft) => "Transient",
                Some(BounceType::Hard) | None => "Permanent",
            },
        }),
        click: (event.event_type == EventType::Clicked).then(|| Click {
            ip_address: "",
            link: details.url.as_deref().unwrap_or(""),
            timestamp: event.occurred_at,
            user_agent: details.user_agent.as_deref().unwrap_or(""),
        }),
        failed: (event.event_type == EventType::Failed).then_some(Failed {
            reason: if response.is_empty() { "The message could not be sent." } else { response },
        }),
        suppressed: (event.event_type == EventType::Suppressed).then_some(Suppressed {
            message: "The recipient is on this workspace's suppression list.",
            suppression_type: "OnAccountSuppressionList",
        }),
    };
    render_json(&Envelope { event_type, created_at: event.occurred_at, data }).map(Some)
}

/// The body of a `Test` event: Resend has none, so it is `tidings.test`, in Resend's envelope.
pub(super) fn test_event(endpoint: WebhookId, event_id: EventId, at: DateTime<Utc>) -> Result<String> {
    render_json(&Envelope {
        event_type: "tidings.test",
        created_at: at,
        data: TestData { webhook_id: endpoint, event_id, description: ABOUT_TEST },
    })
}
