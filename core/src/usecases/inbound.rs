//! Inbound mail (contract §13, docs/api.md#inbound-mail): what the SMTP listener asks at
//! `RCPT TO` and hands over after the data, and what the API reads back.
//!
//! - **Whose mail.** A recipient is taken only for a domain that [`Domain::receives_mail`]:
//!   inbound on, its `MX` Verified and the domain Verified (its DKIM records prove which
//!   workspace owns the name; an `MX` alone proves nothing, anyone can add a domain whose
//!   owner points it at Tidings). If several workspaces have such a domain of one name (its
//!   owner published the keys of each), the one verified first receives. Which names
//!   receive is kept per node ([`InboundDomains`]) and read again every
//!   [`DOMAINS_TTL`]; a change on this node is seen at once.
//! - **Routes** ([`routes`]): the most specific route of a recipient decides (an address
//!   before `*@domain`): `reject` refuses it at `RCPT TO`, `store` keeps the message
//!   without an event, `webhook` keeps it and sends `InboundReceived` to that endpoint. No
//!   route: kept, and the event goes to every endpoint subscribed to `InboundReceived`.
//! - **One copy per workspace.** A message to several recipients of one workspace is
//!   stored once with all of them; the first recipient's route decides where its event
//!   goes. Recipients of other workspaces get their own copy.
//! - **Durable before `250`.** The message, its raw bytes and its event deliveries are one
//!   atomic, durable write within the workspace's quota ([`InboundPolicy::quota`]); a full
//!   workspace is `452 4.2.2` at `RCPT TO` (checked first, cheaply) or after the data.
//! - Retention: a message is deleted whole once older than `CoreConfig::message_retention`.

mod domains_index;
pub mod routes;

use std::net::IpAddr;

use crate::email::EmailAddress;
use crate::ids::{EventId, InboundMessageId, MessageId, WorkspaceId};
use crate::inbound::{InboundLimits, InboundParseError, attachment_bytes, parse_with, tidings_message_id};
use crate::model::{
    AttachmentMeta, AuthResults, Domain, InboundEnvelope, InboundMessage, InboundRoute, RouteAction, WebhookDelivery,
    WebhookEventType,
};
use crate::ports::{InboundQuery, InboundQuota, PageRequest};
use crate::tracking::PublicUrl;
use crate::usecases::webhooks::{InboundUrls, inbound_body};
use crate::usecases::{ListParams, Listed, Principal, Tidings};
use crate::{Error, Result};

pub use domains_index::{DOMAINS_TTL, InboundDomains};

/// Ids of Tidings' form a reply may name that are looked up to find the message it answers.
const THREAD_LOOKUPS: usize = 5;

/// How inbound mail is kept (`TIDINGS_INBOUND_*`).
#[derive(Debug, Clone)]
pub struct InboundPolicy {
    /// What one workspace may keep; past it new mail is refused with `452`.
    pub quota: InboundQuota,
    /// What a message may hold (size, parts, headers) to be read and kept.
    pub limits: InboundLimits,
    /// The base of the URLs the `InboundReceived` event gives for the raw message and the
    /// attachments (`TIDINGS_PUBLIC_URL`); without it they are paths (`/v1/inbound/…`).
    pub public_url: Option<PublicUrl>,
    /// Routes a workspace may have.
    pub max_routes: usize,
}

impl Default for InboundPolicy {
    fn default() -> Self {
        Self {
            quota: InboundQuota { max_messages: 10_000, max_bytes: 1 << 30 },
            limits: InboundLimits::default(),
            public_url: None,
            max_routes: 100,
        }
    }
}

impl Tidings {
    /// The inbound mail use cases.
    pub fn inbound(&self) -> Inbound<'_> {
        Inbound { core: self }
    }

    /// Makes this node read the receiving domains again at the next question: for an
    /// embedder that changed domains in the store directly (the use cases that change them
    /// do this themselves).
    pub fn inbound_domains_changed(&self) {
        self.inbound_domains.forget();
    }
}

/// The inbound area of [`Tidings`] ([`Tidings::inbound`]).
#[derive(Clone, Copy)]
pub struct Inbound<'a> {
    core: &'a Tidings,
}

/// What the listener does with one `RCPT TO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecipientVerdict {
    /// Take it: mail for this workspace.
    Accept(WorkspaceId),
    /// Its route says `reject`: `550 5.1.1`.
    Rejected,
    /// Not a domain that receives here: `550 5.7.1` (never relayed).
    NotOurs,
    /// The workspace's inbound mail is at its quota: `452 4.2.2`.
    Full,
}

/// The envelope the listener hands over with a message.
#[derive(Debug, Clone)]
pub struct ReceivedEnvelope {
    /// `MAIL FROM`, `None` for `<>`.
    pub mail_from: Option<EmailAddress>,
    /// Accepted recipients (each was [`RecipientVerdict::Accept`]ed).
    pub recipients: Vec<EmailAddress>,
    /// The client's address.
    pub client_ip: IpAddr,
    /// Its `EHLO` name.
    pub helo: String,
}

/// What became of a received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiveOutcome {
    /// Stored for every workspace it was for: `250`.
    Stored(Vec<InboundMessageId>),
    /// A workspace's quota is full (nothing stored for it): `452`, the sender retries.
    Full,
}

/// Why a received message cannot be taken at all: the listener answers with a permanent
/// refusal (`552` for size, `554` otherwise).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// The parser refused it.
    #[error(transparent)]
    Parse(#[from] InboundParseError),
}

impl Inbound<'_> {
    fn policy(&self) -> &InboundPolicy {
        &self.core.config.inbound
    }

    /// The domain that receives mail for `address`'s domain, if any.
    async fn receiving_domain(&self, address: &EmailAddress) -> Result<Option<Domain>> {
        let now = self.core.clock.now();
        self.core.inbound_domains.domain_for(&*self.core.store, address.domain(), now).await
    }

    /// The route of `recipient` among `routes`: the most specific match.
    pub fn route_for<'r>(routes: &'r [InboundRoute], recipient: &EmailAddress) -> Option<&'r InboundRoute> {
        routes.iter().filter(|r| r.matcher.matches(recipient)).max_by_key(|r| r.matcher.specificity())
    }

    /// Asked at `RCPT TO`: whether to take mail for `address`.
    pub async fn check_recipient(&self, address: &EmailAddress) -> Result<RecipientVerdict> {
        let Some(domain) = self.receiving_domain(address).await? else {
            return Ok(RecipientVerdict::NotOurs);
        };
        let ws = domain.workspace_id;
        let routes = self.core.store.list_inbound_routes(ws).await?;
        if Self::route_for(&routes, address).is_some_and(|r| r.action == RouteAction::Reject) {
            return Ok(RecipientVerdict::Rejected);
        }
        let usage = self.core.store.inbound_usage(ws).await?;
        if !usage.admits(0, &self.policy().quota) {
            return Ok(RecipientVerdict::Full);
        }
        Ok(RecipientVerdict::Accept(ws))
    }

    /// Called after the data, before the listener answers: reads the message, and stores
    /// it (with its raw bytes and event deliveries) once for each workspace among the
    /// recipients, `auth` being its SPF, DKIM and DMARC results. Recipients that no longer
    /// belong to a receiving domain, or whose route now rejects, are left out.
    pub async fn receive(
        &self,
        envelope: &ReceivedEnvelope,
        raw: &[u8],
        auth: AuthResults,
    ) -> Result<std::result::Result<ReceiveOutcome, Unreadable>> {
        let parsed = match parse_with(raw, &self.policy().limits) {
            Ok(parsed) => parsed,
            Err(e) => return Ok(Err(e.into())),
        };
        let mut by_workspace: Vec<(WorkspaceId, Vec<EmailAddress>)> = Vec::new();
        for recipient in &envelope.recipients {
            let Some(domain) = self.receiving_domain(recipient).await? else { continue };
            let ws = domain.workspace_id;
            match by_workspace.iter_mut().find(|(w, _)| *w == ws) {
                Some((_, list)) => list.push(recipient.clone()),
                None => by_workspace.push((ws, vec![recipient.clone()])),
            }
        }
        let now = self.core.clock.now();
        let mut stored = Vec::new();
        for (ws, recipients) in by_workspace {
            let routes = self.core.store.list_inbound_routes(ws).await?;
            // A route that came to reject a recipient since its `RCPT TO` leaves that one out,
            // never the others the sender was told `250` for.
            let recipients: Vec<EmailAddress> = recipients
                .into_iter()
                .filter(|r| Self::route_for(&routes, r).is_none_or(|route| route.action != RouteAction::Reject))
                .collect();
            if recipients.is_empty() {
                continue;
            }
            let route = recipients.iter().find_map(|r| Self::route_for(&routes, r));
            let answered = self.answered(ws, &parsed).await?;
            let message = InboundMessage {
                id: InboundMessageId::new_at(now, &*self.core.random),
                workspace_id: ws,
                received_at: now,
                envelope: InboundEnvelope {
                    mail_from: envelope.mail_from.as_ref().map(ToString::to_string),
                    recipients,
                    client_ip: envelope.client_ip,
                    helo: envelope.helo.clone(),
                },
                parsed: parsed.clone(),
                auth: auth.clone(),
                in_reply_to_message_id: answered,
                route_id: route.map(|r| r.id),
                size: raw.len() as u64,
            };
            let deliveries = self.announce(&message, route).await?;
            if !self.core.store.insert_inbound(&message, raw, &deliveries, &self.policy().quota).await? {
                tracing::info!(workspace = %ws, "inbound: quota full, message refused");
                return Ok(Ok(ReceiveOutcome::Full));
            }
            tracing::info!(workspace = %ws, inbound = %message.id, size = message.size, "inbound: stored");
            stored.push(message.id);
        }
        Ok(Ok(ReceiveOutcome::Stored(stored)))
    }

    /// The message of `ws` that `parsed` answers: the first of the ids of Tidings' form it
    /// names (`In-Reply-To`, then `References` newest first) that is a message of the
    /// workspace. At most [`THREAD_LOOKUPS`] are looked up: a forged list costs no more.
    async fn answered(&self, ws: WorkspaceId, parsed: &crate::model::ParsedInbound) -> Result<Option<MessageId>> {
        let named = parsed.in_reply_to.iter().chain(parsed.references.iter().rev());
        let candidates = named.filter_map(|id| tidings_message_id(id).map(|(id, _)| id)).take(THREAD_LOOKUPS);
        for id in candidates {
            if self.core.store.get_message(ws, id).await?.is_some() {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// The `InboundReceived` deliveries of `message`: to the route's endpoint when its
    /// action is `webhook`, none for `store`, to every subscribed endpoint without a route.
    async fn announce(&self, message: &InboundMessage, route: Option<&InboundRoute>) -> Result<Vec<WebhookDelivery>> {
        let wanted = match route.map(|r| r.action) {
            Some(RouteAction::Store | RouteAction::Reject) => return Ok(Vec::new()),
            Some(RouteAction::Webhook { webhook_id }) => Some(webhook_id),
            None => None,
        };
        let event_type = WebhookEventType::InboundReceived;
        let now = message.received_at;
        let random = &*self.core.random;
        let event_id = EventId::new_at(now, random);
        let urls = InboundUrls::new(self.policy().public_url.as_ref().map_or("", PublicUrl::as_str));
        let mut deliveries = Vec::new();
        for endpoint in self.core.store.list_enabled_webhooks(message.workspace_id).await? {
            let chosen = match wanted {
                Some(id) => endpoint.id == id,
                None => endpoint.wants(event_type),
            };
            if !chosen || !endpoint.format.carries(event_type) {
                continue;
            }
            let body = inbound_body(endpoint.format, event_id, now, message, &urls)?;
            deliveries.push(WebhookDelivery::queued(&endpoint, (event_id, event_type, None), body, now, random));
        }
        Ok(deliveries)
    }

    /// `GET /v1/inbound/messages`: newest first, filtered by `to` and `from`.
    pub async fn list(
        &self,
        who: &Principal,
        query: InboundQuery,
        params: ListParams,
    ) -> Result<Listed<InboundMessage>> {
        who.require_full()?;
        let page: PageRequest<InboundMessageId> = params.to_page(InboundMessageId::parse)?;
        let limit = page.limit;
        let found = self.core.store.list_inbound(who.workspace_id, &query, page).await?;
        Ok(Listed::from_page(found, limit, |m| m.id.to_string()))
    }

    /// `GET /v1/inbound/messages/{id}`.
    pub async fn get(&self, who: &Principal, id: InboundMessageId) -> Result<InboundMessage> {
        who.require_full()?;
        self.core.store.get_inbound(who.workspace_id, id).await?.ok_or(Error::NotFound("inbound message"))
    }

    /// `GET /v1/inbound/messages/{id}/raw`: the message as received.
    pub async fn raw(&self, who: &Principal, id: InboundMessageId) -> Result<Vec<u8>> {
        who.require_full()?;
        self.core.store.inbound_raw(who.workspace_id, id).await?.ok_or(Error::NotFound("inbound message"))
    }

    /// `GET /v1/inbound/messages/{id}/attachments/{n}`: the attachment's metadata and
    /// decoded contents.
    pub async fn attachment(
        &self,
        who: &Principal,
        id: InboundMessageId,
        index: usize,
    ) -> Result<(AttachmentMeta, Vec<u8>)> {
        let message = self.get(who, id).await?;
        let Some(meta) = message.parsed.attachments.iter().find(|a| a.index == index).cloned() else {
            return Err(Error::NotFound("attachment"));
        };
        let raw = self.raw(who, id).await?;
        let bytes = attachment_bytes(&raw, index, &self.policy().limits).map_err(|_| Error::NotFound("attachment"))?;
        Ok((meta, bytes))
    }

    /// Deletes up to `limit` inbound messages past `CoreConfig::message_retention`; returns
    /// how many. Nothing when retention is off.
    pub async fn purge_expired(&self, limit: usize) -> Result<usize> {
        match self.core.operations().retention_cutoff() {
            Some(cutoff) => Ok(self.core.store.purge_inbound(cutoff, limit).await?),
            None => Ok(0),
        }
    }
}
