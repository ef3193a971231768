//! The JSON body of a webhook request (docs/api.md#signing):
//! `{"type","createdAt","data":{"messageId","eventId","to","from","subject","providerMessageId","tags","metadata","details"}}`.
//! `tags` (an array of `{name, value}`) and `metadata` (an object) are the message's own, so a
//! receiver can route an event without looking the message up; empty for a `Test` event.
//!
//! Every key is always present (null when it does not apply, as for a `Test` event), so
//! receivers can parse all events with one shape; `recipient` is the one addition, present
//! only on events about one recipient of a message with several (contract §10), where `to`
//! is that recipient too. An event about the whole of such a message (`Queued`) has the
//! message's `to` as the API shows it: the to recipients joined by `", "`. The body is rendered once, when the
//! delivery is queued, so every retry sends and signs the same bytes.
//!
//! That is the `tidings` format; endpoints in the `resend` and `postmark` formats get their
//! bodies from [`resend`] and [`postmark`] (docs/api.md#webhook-formats), chosen by
//! [`message_event_body`] and [`test_body`].

mod inbound;
mod postmark;
mod resend;

pub(crate) use inbound::{InboundUrls, inbound_body};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::email::EmailAddress;
use crate::ids::{EventId, MessageId, WebhookId};
use crate::model::extras::{Metadata, Tag};
use crate::model::{EventDetails, Message, MessageEvent, WebhookEventType, WebhookFormat};
use crate::{Error, Result};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Payload<'a, D> {
    #[serde(rename = "type")]
    event_type: &'static str,
    created_at: DateTime<Utc>,
    data: Data<'a, D>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Data<'a, D> {
    message_id: Option<MessageId>,
    event_id: EventId,
    to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recipient: Option<&'a EmailAddress>,
    from: Option<&'a EmailAddress>,
    subject: Option<&'a str>,
    provider_message_id: Option<&'a str>,
    tags: &'a [Tag],
    metadata: &'a Metadata,
    details: D,
}

impl<'a, D> Data<'a, D> {
    /// `data` of an event about no message (`Test`, the reputation guard's): every message
    /// key present and null, so receivers parse one shape.
    fn about_no_message(event_id: EventId, no_metadata: &'a Metadata, details: D) -> Self {
        Self {
            message_id: None,
            event_id,
            to: None,
            recipient: None,
            from: None,
            subject: None,
            provider_message_id: None,
            tags: &[],
            metadata: no_metadata,
            details,
        }
    }
}

/// `details` of a `Test` event: says what it is, so a person reading a receiver's log
/// does not mistake it for mail activity.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TestDetails {
    webhook_id: WebhookId,
    description: &'static str,
}

/// What every format's `Test` event says about itself.
const ABOUT_TEST: &str = "A test event sent on request to check this endpoint; it concerns no message.";

fn render_json<T: Serialize>(payload: &T) -> Result<String> {
    serde_json::to_string(payload).map_err(|e| Error::Internal(crate::Cause::context("webhook payload", e)))
}

fn render<D: Serialize>(payload: &Payload<'_, D>) -> Result<String> {
    render_json(payload)
}

/// The body announcing `event` of `message` to endpoints in `format`, or `None` when the
/// format has no equivalent of the event ([`WebhookFormat::event_name`]).
pub(super) fn message_event_body(
    format: WebhookFormat,
    message: &Message,
    event: &MessageEvent,
) -> Result<Option<String>> {
    match format {
        WebhookFormat::Tidings => message_event_payload(message, event).map(Some),
        WebhookFormat::Resend => resend::message_event(message, event),
        WebhookFormat::Postmark => postmark::message_event(message, event),
    }
}

/// The body of a `Test` event for `endpoint` in `format`, created at `at`.
pub(super) fn test_body(
    format: WebhookFormat,
    endpoint: WebhookId,
    event_id: EventId,
    at: DateTime<Utc>,
) -> Result<String> {
    match format {
        WebhookFormat::Tidings => test_payload(endpoint, event_id, at),
        WebhookFormat::Resend => resend::test_event(endpoint, event_id, at),
        WebhookFormat::Postmark => postmark::test_event(endpoint, event_id),
    }
}

/// The body announcing `event` of `message`.
fn message_event_payload(message: &Message, event: &MessageEvent) -> Result<String> {
    let provider_message_id = event.provider_message_id.as_deref().or(message.provider_message_id.as_deref());
    render(&Payload {
        event_type: WebhookEventType::Message(event.event_type).as_str(),
        created_at: event.occurred_at,
        data: Data::<&EventDetails> {
            message_id: Some(message.id),
            event_id: event.id,
            to: Some(event.recipient.as_ref().map_or_else(|| message.to_field(), ToString::to_string)),
            recipient: event.recipient.as_ref(),
            from: Some(&message.from.address),
            subject: Some(&message.subject),
            provider_message_id,
            tags: &message.extras.tags,
            metadata: &message.extras.metadata,
            details: &event.details,
        },
    })
}

/// The body of a `Test` event for `endpoint`, created at `at`.
fn test_payload(endpoint: WebhookId, event_id: EventId, at: DateTime<Utc>) -> Result<String> {
    let no_metadata = Metadata::default();
    render(&Payload {
        event_type: WebhookEventType::Test.as_str(),
        created_at: at,
        data: Data::about_no_message(
            event_id,
            &no_metadata,
            TestDetails { webhook_id: endpoint, description: ABOUT_TEST },
        ),
    })
}

#[cfg(test)]
mod tests;

/// What a `ReputationWarning` or `SendingPaused` event is about.
pub(crate) struct ReputationEvent<'a> {
    /// The workspace, or one domain.
    pub scope: crate::reputation::Scope,
    /// The domain, for a domain's scope.
    pub domain: Option<&'a crate::model::Domain>,
    /// The rate over its threshold.
    pub breach: &'a crate::reputation::Breach,
    /// The window's length.
    pub window_hours: i64,
    /// Whether sending is paused (else warned).
    pub paused: bool,
}

/// `details` of a reputation event.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReputationDetails<'a> {
    scope: &'static str,
    domain_id: Option<crate::ids::DomainId>,
    domain: Option<&'a str>,
    rate: &'static str,
    rate_percent: f64,
    threshold_percent: f64,
    counted: u64,
    among: u64,
    window_hours: i64,
    /// The call that resumes sending, when paused.
    resume: Option<String>,
    description: String,
}

/// The body of a `ReputationWarning` or `SendingPaused` event (Tidings' format only: Resend
/// and Postmark have no equivalent). Every message key is present and null, as for `Test`.
pub(crate) fn reputation_body(
    event_type: WebhookEventType,
    event_id: EventId,
    at: DateTime<Utc>,
    event: &ReputationEvent<'_>,
) -> Result<String> {
    use crate::reputation::Scope;
    let no_metadata = Metadata::default();
    let domain_id = match event.scope {
        Scope::Domain(id) => Some(id),
        Scope::Workspace => None,
    };
    let whose = match event.domain {
        Some(d) => format!("domain {}", d.name),
        None => "the workspace".to_owned(),
    };
    let what = if event.paused { "sending is paused until resumed" } else { "a warning: sending continues" };
    render(&Payload {
        event_type: event_type.as_str(),
        created_at: at,
        data: Data::about_no_message(
            event_id,
            &no_metadata,
            ReputationDetails {
                scope: event.scope.kind(),
                domain_id,
                domain: event.domain.map(|d| d.name.as_str()),
                rate: event.breach.kind.as_str(),
                rate_percent: (event.breach.percent() * 1000.0).round() / 1000.0,
                threshold_percent: event.breach.threshold.as_f64(),
                counted: event.breach.part,
                among: event.breach.whole,
                window_hours: event.window_hours,
                resume: event.paused.then(|| match domain_id {
                    Some(id) => format!("POST /v1/domains/{id}/resume"),
                    None => "POST /v1/reputation/resume".to_owned(),
                }),
                description: format!("For {whose}, the {}; {what}.", event.breach.describe()),
            },
        ),
    })
}
