//! `/v1/inbound/routes` (contract §13): which of a workspace's incoming mail goes where.
//! A route matches one address or `*@domain` of a domain of the workspace; its action is
//! `webhook` (an endpoint of the workspace subscribed to `InboundReceived`), `store` or
//! `reject`. One route per match; at most [`InboundPolicy::max_routes`](super::InboundPolicy::max_routes)
//! per workspace.

use serde::{Deserialize, Serialize};

use crate::ids::{InboundRouteId, WebhookId};
use crate::model::{InboundRoute, RouteAction, RouteMatch, WebhookEventType};
use crate::ports::{Page, StoreError, missing};
use crate::usecases::{ListParams, Listed, Principal, Tidings};
use crate::{Error, Result};

/// Body of `POST /v1/inbound/routes` and `PATCH /v1/inbound/routes/{id}`; on a `PATCH` an
/// absent field is left as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteRequest {
    /// `support@in.example.com` or `*@in.example.com`.
    #[serde(rename = "match")]
    pub matcher: Option<String>,
    /// `webhook`, `store` or `reject`.
    pub action: Option<String>,
    /// The endpoint of a `webhook` route.
    pub webhook_id: Option<String>,
}

/// The routes area of inbound mail ([`Tidings::inbound_routes`]).
#[derive(Clone, Copy)]
pub struct InboundRoutes<'a> {
    core: &'a Tidings,
}

impl Tidings {
    /// The inbound route use cases.
    pub fn inbound_routes(&self) -> InboundRoutes<'_> {
        InboundRoutes { core: self }
    }
}

impl InboundRoutes<'_> {
    /// `POST /v1/inbound/routes`.
    pub async fn create(&self, who: &Principal, req: RouteRequest) -> Result<InboundRoute> {
        who.require_full()?;
        let ws = who.workspace_id;
        let matcher = req.matcher.as_deref().ok_or_else(|| Error::field("match", "is required"))?;
        let action = req.action.as_deref().ok_or_else(|| Error::field("action", "is required"))?;
        let matcher = self.matcher(who, matcher).await?;
        let action = self.action(who, action, req.webhook_id.as_deref()).await?;
        let max = self.core.config.inbound.max_routes;
        if self.core.store.list_inbound_routes(ws).await?.len() >= max {
            return Err(Error::field("match", format!("a workspace has at most {max} inbound routes")));
        }
        let now = self.core.clock.now();
        let route = InboundRoute {
            id: InboundRouteId::new_at(now, &*self.core.random),
            workspace_id: ws,
            matcher,
            action,
            created_at: now,
            updated_at: now,
        };
        self.core.store.insert_inbound_route(&route).await.map_err(taken)?;
        Ok(route)
    }

    /// `GET /v1/inbound/routes`: oldest first.
    pub async fn list(&self, who: &Principal) -> Result<Vec<InboundRoute>> {
        who.require_full()?;
        Ok(self.core.store.list_inbound_routes(who.workspace_id).await?)
    }

    /// `GET /v1/inbound/routes`, a page at a time: oldest first, the cursor a route's id.
    pub async fn page(&self, who: &Principal, params: ListParams) -> Result<Listed<InboundRoute>> {
        let page = params.to_page(InboundRouteId::parse)?;
        let mut after: Vec<InboundRoute> =
            self.list(who).await?.into_iter().filter(|r| page.cursor.is_none_or(|c| r.id > c)).collect();
        let has_more = after.len() > page.limit;
        after.truncate(page.limit);
        Ok(Listed::from_page(Page { items: after, has_more }, page.limit, |r| r.id.to_string()))
    }

    /// `GET /v1/inbound/routes/{id}`.
    pub async fn get(&self, who: &Principal, id: InboundRouteId) -> Result<InboundRoute> {
        self.list(who).await?.into_iter().find(|r| r.id == id).ok_or(Error::NotFound("inbound route"))
    }

    /// `PATCH /v1/inbound/routes/{id}`.
    pub async fn update(&self, who: &Principal, id: InboundRouteId, req: RouteRequest) -> Result<InboundRoute> {
        let mut route = self.get(who, id).await?;
        if let Some(matcher) = req.matcher.as_deref() {
            route.matcher = self.matcher(who, matcher).await?;
        }
        match (req.action.as_deref(), req.webhook_id.as_deref()) {
            (Some(action), webhook) => route.action = self.action(who, action, webhook).await?,
            // A new endpoint for a webhook route that stays one.
            (None, Some(webhook)) => route.action = self.action(who, route.action.as_str(), Some(webhook)).await?,
            (None, None) => {}
        }
        route.updated_at = self.core.clock.now();
        self.core.store.update_inbound_route(&route).await.map_err(|e| match e {
            StoreError::NotFound => Error::NotFound("inbound route"),
            other => taken(other),
        })?;
        Ok(route)
    }

    /// `DELETE /v1/inbound/routes/{id}`.
    pub async fn delete(&self, who: &Principal, id: InboundRouteId) -> Result<()> {
        who.require_full()?;
        self.core.store.delete_inbound_route(who.workspace_id, id).await.map_err(missing("inbound route"))
    }

    /// `match`: an address or `*@domain` of a domain this workspace has.
    async fn matcher(&self, who: &Principal, text: &str) -> Result<RouteMatch> {
        let matcher = RouteMatch::parse(text.trim())
            .ok_or_else(|| Error::field("match", "must be an email address or *@ followed by a domain"))?;
        let domain = matcher.domain();
        if self.core.store.find_domain_by_name(who.workspace_id, domain).await?.is_none() {
            return Err(Error::field(
                "match",
                format!("{domain} is not a domain of this workspace; add it and switch inbound on first"),
            ));
        }
        Ok(matcher)
    }

    /// `action` (and `webhookId`, which only a `webhook` route has).
    async fn action(&self, who: &Principal, action: &str, webhook: Option<&str>) -> Result<RouteAction> {
        match (action, webhook) {
            ("webhook", None) => Err(Error::field("webhookId", "is required for a webhook route")),
            ("webhook", Some(text)) => {
                let id = WebhookId::parse_or_none(text);
                let endpoint = self.core.store.get_webhook(who.workspace_id, id).await?;
                let endpoint =
                    endpoint.ok_or_else(|| Error::field("webhookId", "is not a webhook of this workspace"))?;
                if !endpoint.event_types.contains(&WebhookEventType::InboundReceived) {
                    return Err(Error::field("webhookId", "the webhook does not subscribe to InboundReceived"));
                }
                Ok(RouteAction::Webhook { webhook_id: id })
            }
            ("store" | "reject", Some(_)) => Err(Error::field("webhookId", "only a webhook route has one")),
            ("store", None) => Ok(RouteAction::Store),
            ("reject", None) => Ok(RouteAction::Reject),
            _ => Err(Error::field("action", "must be one of webhook, store, reject")),
        }
    }
}

/// A route's match taken by another route: 409.
fn taken(e: StoreError) -> Error {
    match e {
        StoreError::Conflict(_) => Error::Conflict("the workspace has a route with this match".to_owned()),
        other => other.into(),
    }
}
