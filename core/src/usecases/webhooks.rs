//! Webhook endpoints and their delivery log (docs/api.md#webhooks, Standard Webhooks), the
//! fan-out rule that turns a message event into deliveries, and the
//! request signature.
//!
//! Decisions of our own:
//! - `Test` is accepted in `eventTypes` (the model lists it as subscribable) but changes
//!   nothing: a test event is delivered only by `POST /v1/webhooks/{id}/test`, and always
//!   to the endpoint being tested, whatever its `eventTypes`.
//! - A manual retry may re-send any delivery, `Delivered` ones included: it keeps its id,
//!   which is the `webhook-id` header, so a receiver that deduplicates on it (as Standard
//!   Webhooks asks) sees a repeat, and one that does not gets the replay it asked for. The
//!   retry is one more attempt made now; the delivery worker records its outcome as usual.
//! - Changing the URL or re-enabling an endpoint clears `failingSince` (and re-enabling
//!   clears `disabledReason`): the new target gets a fresh start.

mod payload;
mod signing;
pub(crate) use payload::{InboundUrls, ReputationEvent, inbound_body, reputation_body};

use serde::{Deserialize, Serialize};

pub use signing::{sign_webhook, signing_secrets};

use crate::error::FieldError;
use crate::ids::{DeliveryId, EventId, MessageId, WebhookId};
use crate::model::{
    DeliveryStatus, EventType, Message, MessageEvent, WebhookDelivery, WebhookEndpoint, WebhookEventType,
    WebhookFormat, WebhookSecret, WebhookUrl,
};
use crate::usecases::{ListParams, Listed, Principal, Tidings};
use crate::{Error, Result};

/// Most webhook deliveries of one message that [`Webhooks::message_deliveries`]
/// returns: a message to 50 recipients with a few endpoints has a few hundred at most.
pub const MESSAGE_DELIVERIES_SHOWN: usize = 200;

/// Body of `POST /v1/webhooks`, before validation.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateWebhookRequest {
    /// Receiving URL (required): https, not a non-public address.
    pub url: Option<String>,
    /// Event type names to deliver (required, non-empty); duplicates are ignored.
    pub event_types: Option<Vec<String>>,
    /// Default true.
    pub enabled: Option<bool>,
    /// `tidings` (default), `resend` or `postmark`.
    pub format: Option<String>,
}

/// Body of `PATCH /v1/webhooks/{id}`: fields given are changed, others kept.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateWebhookRequest {
    /// New URL.
    pub url: Option<String>,
    /// New event types (non-empty).
    pub event_types: Option<Vec<String>>,
    /// Enable or disable.
    pub enabled: Option<bool>,
    /// New format.
    pub format: Option<String>,
}

impl Tidings {
    /// The webhook use cases: endpoints, their secrets and their delivery log.
    pub fn webhooks(&self) -> Webhooks<'_> {
        Webhooks { core: self }
    }
}

/// The webhook area of [`Tidings`] ([`Tidings::webhooks`]): endpoints, their secrets and
/// their delivery log, and the fan-out rule that queues deliveries for a message event.
#[derive(Clone, Copy)]
pub struct Webhooks<'a> {
    core: &'a Tidings,
}

impl Webhooks<'_> {
    /// `POST /v1/webhooks`: creates an endpoint with a fresh `whsec_` secret. The returned
    /// endpoint carries the secret; the front end shows it in this response and after a
    /// rotation only.
    pub async fn create(&self, who: &Principal, req: CreateWebhookRequest) -> Result<WebhookEndpoint> {
        who.require_full()?;
        let mut errors = Vec::new();
        let url = match req.url.as_deref() {
            None => {
                errors.push(FieldError::new("url", "is required"));
                None
            }
            Some(text) => self.parse_url(text).map_err(|e| errors.push(e)).ok(),
        };
        let event_types = match req.event_types {
            None => {
                errors.push(FieldError::new("eventTypes", "is required"));
                None
            }
            Some(names) => parse_event_types(&names).map_err(|e| errors.push(e)).ok(),
        };
        let format = match req.format.as_deref() {
            None => Some(WebhookFormat::Tidings),
            Some(text) => parse_format(text).map_err(|e| errors.push(e)).ok(),
        };
        let (Some(url), Some(event_types), Some(format)) = (url, event_types, format) else {
            return Err(Error::Validation { fields: errors });
        };
        let now = self.core.clock.now();
        let endpoint = WebhookEndpoint {
            id: WebhookId::new_at(now, &*self.core.random),
            workspace_id: who.workspace_id,
            url,
            event_types,
            enabled: req.enabled.unwrap_or(true),
            format,
            secret: WebhookSecret::generate(&*self.core.random),
            previous_secret: None,
            disabled_reason: None,
            failing_since: None,
            created_at: now,
            updated_at: now,
        };
        self.core.store.insert_webhook(&endpoint).await?;
        Ok(endpoint)
    }

    /// `GET /v1/webhooks`: endpoints, newest first.
    pub async fn list(&self, who: &Principal, params: ListParams) -> Result<Listed<WebhookEndpoint>> {
        who.require_full()?;
        let page = params.to_page(WebhookId::parse)?;
        let limit = page.limit;
        let found = self.core.store.list_webhooks(who.workspace_id, page).await?;
        Ok(Listed::from_page(found, limit, |w| w.id.to_string()))
    }

    /// `GET /v1/webhooks/{id}`.
    pub async fn get(&self, who: &Principal, id: WebhookId) -> Result<WebhookEndpoint> {
        who.require_full()?;
        self.find_webhook(who, id).await
    }

    /// `PATCH /v1/webhooks/{id}`: changes `url`, `eventTypes`, `enabled`, `format`. A new
    /// format applies to deliveries queued from then on; queued ones keep their body. Re-enabling a
    /// disabled endpoint clears why it was disabled and its failure run.
    pub async fn update(&self, who: &Principal, id: WebhookId, req: UpdateWebhookRequest) -> Result<WebhookEndpoint> {
        who.require_full()?;
        let mut errors = Vec::new();
        let url = req.url.as_deref().and_then(|text| self.parse_url(text).map_err(|e| errors.push(e)).ok());
        let event_types = req.event_types.and_then(|names| parse_event_types(&names).map_err(|e| errors.push(e)).ok());
        let format = req.format.as_deref().and_then(|text| parse_format(text).map_err(|e| errors.push(e)).ok());
        // Look the endpoint up first: a missing endpoint is 404 whatever the body says.
        let mut endpoint = self.find_webhook(who, id).await?;
        if !errors.is_empty() {
            return Err(Error::Validation { fields: errors });
        }
        if let Some(url) = url
            && url != endpoint.url
        {
            endpoint.url = url;
            endpoint.failing_since = None;
        }
        if let Some(event_types) = event_types {
            endpoint.event_types = event_types;
        }
        if let Some(format) = format {
            endpoint.format = format;
        }
        if let Some(enabled) = req.enabled {
            if enabled && !endpoint.enabled {
                endpoint.disabled_reason = None;
                endpoint.failing_since = None;
            }
            endpoint.enabled = enabled;
        }
        endpoint.updated_at = self.core.clock.now();
        self.save_webhook(&endpoint).await?;
        Ok(endpoint)
    }

    /// `DELETE /v1/webhooks/{id}`: removes the endpoint and its delivery log.
    pub async fn delete(&self, who: &Principal, id: WebhookId) -> Result<()> {
        who.require_full()?;
        self.core.store.delete_webhook(who.workspace_id, id).await.map_err(crate::ports::missing("webhook"))?;
        Ok(())
    }

    /// `POST /v1/webhooks/{id}/rotate-secret`: a new secret signs from now on; the old one
    /// signs beside it until `now + webhook_secret_overlap` (24 h by default), so receivers
    /// can switch without dropping requests. Only one previous secret is kept: rotating
    /// twice within the overlap retires the first one at once.
    pub async fn rotate_secret(&self, who: &Principal, id: WebhookId) -> Result<WebhookEndpoint> {
        who.require_full()?;
        let mut endpoint = self.find_webhook(who, id).await?;
        let now = self.core.clock.now();
        let until = now
            .checked_add_signed(self.core.config.webhook_secret_overlap)
            .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
        let old = std::mem::replace(&mut endpoint.secret, WebhookSecret::generate(&*self.core.random));
        endpoint.previous_secret = Some((old, until));
        endpoint.updated_at = now;
        self.save_webhook(&endpoint).await?;
        Ok(endpoint)
    }

    /// `POST /v1/webhooks/{id}/test`: queues one `Test` event for this endpoint, due now,
    /// whatever its `eventTypes`, and returns the queued delivery. A disabled endpoint is
    /// queued too; the delivery worker applies its rule for disabled endpoints.
    pub async fn test(&self, who: &Principal, id: WebhookId) -> Result<WebhookDelivery> {
        who.require_full()?;
        let endpoint = self.find_webhook(who, id).await?;
        let now = self.core.clock.now();
        let event_id = EventId::new_at(now, &*self.core.random);
        let payload = payload::test_body(endpoint.format, endpoint.id, event_id, now)?;
        let about = (event_id, WebhookEventType::Test, None);
        let delivery = WebhookDelivery::queued(&endpoint, about, payload, now, &*self.core.random);
        self.core
            .store
            .insert_webhook_deliveries(std::slice::from_ref(&delivery))
            .await
            .map_err(crate::ports::missing("webhook"))?;
        Ok(delivery)
    }

    /// `GET /v1/webhooks/{id}/deliveries`: the endpoint's delivery log, newest first.
    pub async fn deliveries(
        &self,
        who: &Principal,
        webhook_id: WebhookId,
        params: ListParams,
    ) -> Result<Listed<WebhookDelivery>> {
        who.require_full()?;
        let page = params.to_page(DeliveryId::parse)?;
        let endpoint = self.find_webhook(who, webhook_id).await?;
        let limit = page.limit;
        let found = self.core.store.list_webhook_deliveries(who.workspace_id, endpoint.id, page).await?;
        Ok(Listed::from_page(found, limit, |d| d.id.to_string()))
    }

    /// The webhook deliveries message `id`'s events caused, at every endpoint, newest first
    /// (at most [`MESSAGE_DELIVERIES_SHOWN`]); a `full` key only, like every webhook read.
    pub async fn message_deliveries(&self, who: &Principal, id: MessageId) -> Result<Vec<WebhookDelivery>> {
        who.require_full()?;
        let message = self.core.messages().get(who, id).await?;
        Ok(self
            .core
            .store
            .list_message_webhook_deliveries(who.workspace_id, message.id, MESSAGE_DELIVERIES_SHOWN)
            .await?)
    }

    /// One delivery of an endpoint, payload included (the dashboard's delivery page). A
    /// delivery of another endpoint, or of another workspace, is not found.
    pub async fn delivery(
        &self,
        who: &Principal,
        webhook_id: WebhookId,
        delivery_id: DeliveryId,
    ) -> Result<WebhookDelivery> {
        who.require_full()?;
        let endpoint = self.find_webhook(who, webhook_id).await?;
        match self.core.store.get_webhook_delivery(who.workspace_id, delivery_id).await? {
            Some(d) if d.endpoint_id == endpoint.id => Ok(d),
            _ => Err(Error::NotFound("webhook delivery")),
        }
    }

    /// `POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry`: makes a delivery of this
    /// endpoint due now, in any status (see the module docs), and returns it. Its attempt
    /// count and last result are kept for the log; the status becomes `Pending` if it was
    /// never attempted, `Retrying` otherwise.
    pub async fn retry_delivery(
        &self,
        who: &Principal,
        webhook_id: WebhookId,
        delivery_id: DeliveryId,
    ) -> Result<WebhookDelivery> {
        who.require_full()?;
        let endpoint = self.find_webhook(who, webhook_id).await?;
        let mut delivery = match self.core.store.get_webhook_delivery(who.workspace_id, delivery_id).await? {
            Some(d) if d.endpoint_id == endpoint.id => d,
            _ => return Err(Error::NotFound("webhook delivery")),
        };
        delivery.status = if delivery.attempts == 0 { DeliveryStatus::Pending } else { DeliveryStatus::Retrying };
        delivery.next_attempt_at = Some(self.core.clock.now());
        self.core.store.update_webhook_delivery(&delivery).await.map_err(crate::ports::missing("webhook delivery"))?;
        Ok(delivery)
    }

    /// The fan-out rule: one `Pending` delivery, due now, for each enabled endpoint of the
    /// message's workspace that subscribes to the event's type, carrying its payload
    /// (docs/api.md#signing). The caller stores them in the same write as the event, so an event
    /// is never recorded without its deliveries.
    pub async fn deliveries_for(&self, message: &Message, event: &MessageEvent) -> Result<Vec<WebhookDelivery>> {
        let event_type = WebhookEventType::Message(event.event_type);
        let endpoints = self.core.store.list_enabled_webhooks(message.workspace_id).await?;
        let wanted = endpoints.iter().filter(|e| e.wants(event_type));
        // One body per format in use, rendered once however many endpoints share it.
        let mut bodies: Vec<(WebhookFormat, String)> = Vec::new();
        let now = self.core.clock.now();
        let mut deliveries = Vec::new();
        for endpoint in wanted {
            let body = match bodies.iter().find(|(format, _)| *format == endpoint.format) {
                Some((_, body)) => body.clone(),
                None => {
                    // `wants` checked that the format has the event, so a body is rendered.
                    let Some(body) = payload::message_event_body(endpoint.format, message, event)? else {
                        continue;
                    };
                    bodies.push((endpoint.format, body.clone()));
                    body
                }
            };
            let about = (event.id, event_type, Some(message.id));
            deliveries.push(WebhookDelivery::queued(endpoint, about, body, now, &*self.core.random));
        }
        Ok(deliveries)
    }

    async fn find_webhook(&self, who: &Principal, id: WebhookId) -> Result<WebhookEndpoint> {
        self.core.store.get_webhook(who.workspace_id, id).await?.ok_or(Error::NotFound("webhook"))
    }

    async fn save_webhook(&self, endpoint: &WebhookEndpoint) -> Result<()> {
        self.core.store.update_webhook(endpoint).await.map_err(crate::ports::missing("webhook"))?;
        Ok(())
    }

    fn parse_url(&self, text: &str) -> std::result::Result<WebhookUrl, FieldError> {
        WebhookUrl::parse(text, self.core.config.allow_private_webhooks)
            .map_err(|e| FieldError::new("url", e.to_string()))
    }
}

/// `format`: one of the API names of [`WebhookFormat`].
fn parse_format(text: &str) -> std::result::Result<WebhookFormat, FieldError> {
    WebhookFormat::parse(text).ok_or_else(|| {
        let known: Vec<&str> = WebhookFormat::ALL.iter().map(|f| f.as_str()).collect();
        FieldError::new("format", format!("unknown format {text:?}; known formats: {}", known.join(", ")))
    })
}

/// `eventTypes`: a non-empty list of known names, first occurrences kept in order.
fn parse_event_types(names: &[String]) -> std::result::Result<Vec<WebhookEventType>, FieldError> {
    if names.is_empty() {
        return Err(FieldError::new("eventTypes", "must name at least one event type"));
    }
    let mut types = Vec::with_capacity(names.len());
    for name in names {
        let parsed = WebhookEventType::parse(name).ok_or_else(|| {
            let guard = [
                WebhookEventType::ReputationWarning,
                WebhookEventType::SendingPaused,
                WebhookEventType::InboundReceived,
            ];
            let known: Vec<&str> =
                EventType::ALL.iter().map(|t| t.as_str()).chain(guard.iter().map(|t| t.as_str())).collect();
            FieldError::new("eventTypes", format!("unknown event type {name:?}; known types: {}", known.join(", ")))
        })?;
        if !types.contains(&parsed) {
            types.push(parsed);
        }
    }
    Ok(types)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn event_types_are_parsed_deduplicated_and_kept_in_order() {
        let parsed = parse_event_types(&names(&["Delivered", "Bounced", "Delivered", "Test"])).unwrap();
        assert_eq!(
            parsed,
            [
                WebhookEventType::Message(EventType::Delivered),
                WebhookEventType::Message(EventType::Bounced),
                WebhookEventType::Test
            ]
        );
    }

    #[test]
    fn empty_or_unknown_event_types_name_the_field() {
        for bad in [names(&[]), names(&["Delivered", "delivered"]), names(&["Opened", "Bogus"])] {
            let err = parse_event_types(&bad).unwrap_err();
            assert_eq!(err.field, "eventTypes", "{bad:?}");
        }
        assert!(parse_event_types(&names(&["Bogus"])).unwrap_err().message.contains("\"Bogus\""));
    }

    #[test]
    fn formats_parse_by_their_api_names_and_an_unknown_one_names_the_field() {
        for format in WebhookFormat::ALL {
            assert_eq!(parse_format(format.as_str()), Ok(format));
        }
        for bad in ["", "Resend", "svix", "standard"] {
            let err = parse_format(bad).unwrap_err();
            assert_eq!(err.field, "format", "{bad:?}");
            assert!(err.message.contains("tidings, resend, postmark"), "{}", err.message);
        }
    }
}
