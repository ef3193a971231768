//! Inbound mail (contract §13): the routes that say where a workspace's incoming mail goes,
//! and each message received, as stored.

use std::fmt;
use std::net::IpAddr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain_name::DomainName;
use crate::email::EmailAddress;
use crate::ids::{InboundMessageId, InboundRouteId, MessageId, WebhookId, WorkspaceId};
use crate::model::{AuthResults, ParsedInbound};

/// Which recipients a route takes: one address, or every address of a domain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "camelCase")]
pub enum RouteMatch {
    /// Exactly this address (compared by its normalized form).
    Address(EmailAddress),
    /// `*@domain`: every address of the domain not matched by an `Address` route.
    Domain(DomainName),
}

impl RouteMatch {
    /// Parses the API form: `user@example.com` or `*@example.com`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.strip_prefix("*@") {
            Some(domain) => DomainName::parse(domain).ok().map(Self::Domain),
            None => EmailAddress::parse(text).ok().map(Self::Address),
        }
    }

    /// The domain whose mail the route concerns.
    pub fn domain(&self) -> &DomainName {
        match self {
            Self::Address(address) => address.domain(),
            Self::Domain(domain) => domain,
        }
    }

    /// Whether the route takes mail for `recipient`.
    pub fn matches(&self, recipient: &EmailAddress) -> bool {
        match self {
            Self::Address(address) => address.normalized() == recipient.normalized(),
            Self::Domain(domain) => recipient.domain() == domain,
        }
    }

    /// The form two routes of a workspace may not share: the API form with the address
    /// [normalized](EmailAddress::normalized), as routes match addresses by it.
    pub fn normalized(&self) -> String {
        match self {
            Self::Address(address) => address.normalized(),
            Self::Domain(domain) => format!("*@{domain}"),
        }
    }

    /// How specific it is: an address beats its domain (the most specific route wins).
    pub fn specificity(&self) -> u8 {
        match self {
            Self::Address(_) => 2,
            Self::Domain(_) => 1,
        }
    }
}

impl fmt::Display for RouteMatch {
    /// The API form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Address(address) => write!(f, "{address}"),
            Self::Domain(domain) => write!(f, "*@{domain}"),
        }
    }
}

/// What a route does with the mail it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum RouteAction {
    /// Store it and send `InboundReceived` to this endpoint only.
    Webhook {
        /// The endpoint.
        webhook_id: WebhookId,
    },
    /// Store it; no event.
    Store,
    /// Refuse it at `RCPT TO` (`550 5.1.1`): nothing is stored.
    Reject,
}

impl RouteAction {
    /// The API name: `webhook`, `store` or `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Webhook { .. } => "webhook",
            Self::Store => "store",
            Self::Reject => "reject",
        }
    }
}

/// A route of a workspace (docs/api.md#inbound-routes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundRoute {
    /// Id.
    pub id: InboundRouteId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// Which recipients it takes. Unique within the workspace.
    pub matcher: RouteMatch,
    /// What it does with them.
    pub action: RouteAction,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// The SMTP envelope an inbound message came with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboundEnvelope {
    /// `MAIL FROM`, `None` for the null sender `<>`.
    pub mail_from: Option<String>,
    /// The accepted `RCPT TO` addresses of this workspace, in order.
    pub recipients: Vec<EmailAddress>,
    /// The client's address.
    pub client_ip: IpAddr,
    /// The name it gave in `EHLO`/`HELO`.
    pub helo: String,
}

/// One message received for a workspace (contract §13). Its raw bytes are stored beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboundMessage {
    /// Id.
    pub id: InboundMessageId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// When the listener took it.
    pub received_at: DateTime<Utc>,
    /// The envelope.
    pub envelope: InboundEnvelope,
    /// What the message says.
    pub parsed: ParsedInbound,
    /// SPF, DKIM and DMARC.
    pub auth: AuthResults,
    /// The message Tidings sent that this one answers, from `In-Reply-To`/`References`.
    pub in_reply_to_message_id: Option<MessageId>,
    /// The route that took it (the most specific one of its first recipient with a route);
    /// `None` when no route matched (stored, and `InboundReceived` goes to every endpoint
    /// that subscribes to it).
    pub route_id: Option<InboundRouteId>,
    /// Size of the raw message in bytes.
    pub size: u64,
}

impl InboundMessage {
    /// What the message costs the workspace's quota: its raw bytes and what its parsed form
    /// adds (the text and HTML bodies again, headers, metadata).
    pub fn stored_bytes(&self) -> u64 {
        let parsed = &self.parsed;
        let text = parsed.text.as_ref().map_or(0, String::len) + parsed.html.as_ref().map_or(0, String::len);
        let reply = parsed.stripped_text_reply.as_ref().map_or(0, String::len);
        let headers: usize = parsed.headers.iter().map(|h| h.name.len() + h.value.len()).sum();
        // A flat allowance for the envelope, addresses and attachment metadata.
        self.size.saturating_add((text + reply + headers) as u64).saturating_add(4096)
    }
}
