//! Bodies in Postmark's webhook format (docs/api.md#webhook-formats): one object per event
//! with `RecordType` `Delivery`, `Bounce`, `SpamComplaint`, `Open` or `Click` and Postmark's
//! field names for each, as its webhook documentation shows them.
//!
//! Choices where Tidings knows less or differently than Postmark:
//! - `MessageID` is the Tidings message id (the id `/postmark/email` answers with).
//! - `Tag` is the value of the message's first tag (Postmark has one tag per message), `""`
//!   without tags; `Metadata` is the message's metadata; `MessageStream` is `outbound`;
//!   `ServerID` is 0 (Tidings has no Postmark servers).
//! - A bounce's `ID` is a number Postmark would give the bounce record: here 53 bits of the
//!   event's id, so it is stable across retries and exact in JavaScript.
//! - `Client`, `OS`, `Geo` and `Platform` of opens and clicks are empty or `Unknown`: Tidings
//!   keeps the user agent only, which is in `UserAgent`. `FirstOpen` is true for the first
//!   open of the message Tidings kept.
//! - `Inactive` is true when Tidings suppressed the address (hard bounce, complaint).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{ABOUT_TEST, render_json};
use crate::Result;
use crate::email::EmailAddress;
use crate::ids::{EventId, MessageId, WebhookId};
use crate::model::{BounceType, EventType, Message, MessageEvent};

const STREAM: &str = "outbound";

/// The fields every record about a message has.
#[derive(Clone, Serialize)]
struct About<'a> {
    #[serde(rename = "MessageID")]
    message_id: MessageId,
    #[serde(rename = "ServerID")]
    server_id: u32,
    #[serde(rename = "MessageStream")]
    message_stream: &'static str,
    #[serde(rename = "Tag")]
    tag: &'a str,
    #[serde(rename = "Metadata")]
    metadata: BTreeMap<&'a str, &'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Delivery<'a> {
    record_type: &'static str,
    #[serde(flatten)]
    about: About<'a>,
    recipient: &'a EmailAddress,
    delivered_at: DateTime<Utc>,
    details: &'a str,
}

/// `Bounce` and `SpamComplaint` (Postmark gives both the bounce record's fields).
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Bounce<'a> {
    record_type: &'static str,
    #[serde(rename = "ID")]
    id: u64,
    #[serde(rename = "Type")]
    bounce_type: &'static str,
    type_code: u32,
    name: &'static str,
    #[serde(flatten)]
    about: About<'a>,
    description: &'static str,
    details: &'a str,
    email: &'a EmailAddress,
    from: &'a EmailAddress,
    bounced_at: DateTime<Utc>,
    dump_available: bool,
    inactive: bool,
    can_activate: bool,
    subject: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Agent {
    name: &'static str,
    company: &'static str,
    family: &'static str,
}

const UNKNOWN_AGENT: Agent = Agent { name: "Unknown", company: "Unknown", family: "Unknown" };

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Open<'a> {
    record_type: &'static str,
    #[serde(flatten)]
    about: About<'a>,
    first_open: bool,
    client: Agent,
    #[serde(rename = "OS")]
    os: Agent,
    platform: &'static str,
    user_agent: &'a str,
    read_seconds: u32,
    geo: BTreeMap<&'static str, &'static str>,
    received_at: DateTime<Utc>,
    recipient: &'a EmailAddress,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Click<'a> {
    record_type: &'static str,
    #[serde(flatten)]
    about: About<'a>,
    click_location: &'static str,
    client: Agent,
    #[serde(rename = "OS")]
    os: Agent,
    platform: &'static str,
    user_agent: &'a str,
    original_link: &'a str,
    geo: BTreeMap<&'static str, &'static str>,
    received_at: DateTime<Utc>,
    recipient: &'a EmailAddress,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Test {
    record_type: &'static str,
    message_stream: &'static str,
    #[serde(rename = "WebhookID")]
    webhook_id: WebhookId,
    #[serde(rename = "EventID")]
    event_id: EventId,
    description: &'static str,
}

/// A number for the bounce record `event` stands for: the low 53 bits of its id (the
/// random part of the ULID), stable for the event and exact as a JavaScript number.
fn bounce_record_id(event: EventId) -> u64 {
    const JS_SAFE: u128 = (1 << 53) - 1;
    u64::try_from(event.0.0 & JS_SAFE).unwrap_or(0)
}

/// The body announcing `event` of `message`, or `None` when Postmark has no such record.
pub(super) fn message_event(message: &Message, event: &MessageEvent) -> Result<Option<String>> {
    let details = &event.details;
    let recipient = event.recipient.as_ref().unwrap_or(&message.to);
    let about = About {
        message_id: message.id,
        server_id: 0,
        message_stream: STREAM,
        tag: message.extras.tags.first().map_or("", |t| t.value()),
        metadata: message.extras.metadata.iter().collect(),
    };
    let response = details.response.as_deref().unwrap_or("");
    let user_agent = details.user_agent.as_deref().unwrap_or("");
    let bounce = |record_type, bounce_type, type_code, name, description, inactive| Bounce {
        record_type,
        id: bounce_record_id(event.id),
        bounce_type,
        type_code,
        name,
        about: about.clone(),
        description,
        details: response,
        email: recipient,
        from: &message.from.address,
        bounced_at: event.occurred_at,
        dump_available: false,
        inactive,
        can_activate: true,
        subject: &message.subject,
    };
    let body = match event.event_type {
        EventType::Delivered => render_json(&Delivery {
            record_type: "Delivery",
            about,
            recipient,
            delivered_at: event.occurred_at,
            details: response,
        }),
        EventType::Bounced => match details.bounce_type.or(message.bounce_type) {
            Some(BounceType::Soft) => render_json(&bounce(
                "Bounce",
                "SoftBounce",
                4096,
                "Soft bounce",
                "Unable to temporarily deliver this email.",
                false,
            )),
            Some(BounceType::Hard) | None => render_json(&bounce(
                "Bounce",
                "HardBounce",
                1,
                "Hard bounce",
                "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
                true,
            )),
        },
        EventType::Complained => render_json(&bounce(
            "SpamComplaint",
            "SpamComplaint",
            100_001,
            "Spam complaint",
            "The subscriber explicitly marked this email as spam.",
            true,
        )),
        EventType::Opened => render_json(&Open {
            record_type: "Open",
            about,
            first_open: message.tracking_tally.opens <= 1,
            client: UNKNOWN_AGENT,
            os: UNKNOWN_AGENT,
            platform: "Unknown",
            user_agent,
            read_seconds: 0,
            geo: BTreeMap::new(),
            received_at: event.occurred_at,
            recipient,
        }),
        EventType::Clicked => render_json(&Click {
            record_type: "Click",
            about,
            click_location: "HTML",
            client: UNKNOWN_AGENT,
            os: UNKNOWN_AGENT,
            platform: "Unknown",
            user_agent,
            original_link: details.url.as_deref().unwrap_or(""),
            geo: BTreeMap::new(),
            received_at: event.occurred_at,
            recipient,
        }),
        EventType::Queued
        | EventType::Sent
        | EventType::Scheduled
        | EventType::Deferred
        | EventType::Failed
        | EventType::Suppressed
        | EventType::Canceled => return Ok(None),
    };
    body.map(Some)
}

/// The body of a `Test` event: Postmark has none, so it is a record of type `Test`.
pub(super) fn test_event(endpoint: WebhookId, event_id: EventId) -> Result<String> {
    render_json(&Test {
        record_type: "Test",
        message_stream: STREAM,
        webhook_id: endpoint,
        event_id,
        description: ABOUT_TEST,
    })
}
