//! Inbound mail in the [`MemoryStore`](super::MemoryStore): routes and messages in maps by
//! id, raw bytes beside them, each workspace's usage recomputed from what is kept.

use tidings_core::ids::{InboundMessageId, InboundRouteId};
use tidings_core::model::{InboundMessage, InboundRoute};
use tidings_core::ports::{InboundQuery, InboundQuota, InboundStore, InboundUsage};

use super::*;

impl State {
    fn inbound_usage_of(&self, ws: WorkspaceId) -> InboundUsage {
        let mine = self.inbound.values().filter(|(m, _)| m.workspace_id == ws);
        mine.fold(InboundUsage::default(), |usage, (m, _)| InboundUsage {
            messages: usage.messages + 1,
            bytes: usage.bytes.saturating_add(m.stored_bytes()),
        })
    }

    fn matcher_taken(&self, route: &InboundRoute) -> bool {
        let key = route.matcher.normalized();
        self.inbound_routes
            .values()
            .any(|r| r.workspace_id == route.workspace_id && r.id != route.id && r.matcher.normalized() == key)
    }
}

#[async_trait]
impl InboundStore for MemoryStore {
    async fn insert_inbound_route(&self, route: &InboundRoute) -> StoreResult<()> {
        let mut st = self.state();
        if st.inbound_routes.contains_key(&route.id) {
            return Err(conflict("inbound route id exists"));
        }
        if st.matcher_taken(route) {
            return Err(conflict("the workspace has a route with this match"));
        }
        st.inbound_routes.insert(route.id, route.clone());
        Ok(())
    }

    async fn list_inbound_routes(&self, workspace: WorkspaceId) -> StoreResult<Vec<InboundRoute>> {
        let st = self.state();
        Ok(st.inbound_routes.values().filter(|r| r.workspace_id == workspace).cloned().collect())
    }

    async fn update_inbound_route(&self, route: &InboundRoute) -> StoreResult<()> {
        let mut st = self.state();
        match st.inbound_routes.get(&route.id) {
            Some(stored) if stored.workspace_id == route.workspace_id => {}
            _ => return Err(StoreError::NotFound),
        }
        if st.matcher_taken(route) {
            return Err(conflict("the workspace has a route with this match"));
        }
        st.inbound_routes.insert(route.id, route.clone());
        Ok(())
    }

    async fn delete_inbound_route(&self, workspace: WorkspaceId, id: InboundRouteId) -> StoreResult<()> {
        let mut st = self.state();
        match st.inbound_routes.get(&id) {
            Some(stored) if stored.workspace_id == workspace => {
                st.inbound_routes.remove(&id);
                Ok(())
            }
            _ => Err(StoreError::NotFound),
        }
    }

    async fn insert_inbound(
        &self,
        message: &InboundMessage,
        raw: &[u8],
        deliveries: &[WebhookDelivery],
        quota: &InboundQuota,
    ) -> StoreResult<bool> {
        let mut st = self.state();
        if st.inbound.contains_key(&message.id) {
            return Err(conflict("inbound message id exists"));
        }
        if let Some(e) = st.deliveries_conflict(deliveries) {
            return Err(e);
        }
        if !st.inbound_usage_of(message.workspace_id).admits(message.stored_bytes(), quota) {
            return Ok(false);
        }
        st.queue_deliveries(deliveries);
        st.inbound.insert(message.id, (message.clone(), raw.to_vec()));
        Ok(true)
    }

    async fn get_inbound(&self, workspace: WorkspaceId, id: InboundMessageId) -> StoreResult<Option<InboundMessage>> {
        let st = self.state();
        Ok(st.inbound.get(&id).filter(|(m, _)| m.workspace_id == workspace).map(|(m, _)| m.clone()))
    }

    async fn inbound_raw(&self, workspace: WorkspaceId, id: InboundMessageId) -> StoreResult<Option<Vec<u8>>> {
        let st = self.state();
        Ok(st.inbound.get(&id).filter(|(m, _)| m.workspace_id == workspace).map(|(_, raw)| raw.clone()))
    }

    async fn list_inbound(
        &self,
        workspace: WorkspaceId,
        query: &InboundQuery,
        page: PageRequest<InboundMessageId>,
    ) -> StoreResult<Page<InboundMessage>> {
        let st = self.state();
        let items = st
            .inbound
            .values()
            .rev()
            .map(|(m, _)| m)
            .filter(|m| m.workspace_id == workspace)
            .filter(|m| page.cursor.is_none_or(|c| m.id < c))
            .filter(|m| query.matches(m))
            .cloned();
        Ok(page_of(items, page.limit))
    }

    async fn inbound_usage(&self, workspace: WorkspaceId) -> StoreResult<InboundUsage> {
        Ok(self.state().inbound_usage_of(workspace))
    }

    async fn inbound_domains(&self) -> StoreResult<Vec<Domain>> {
        let sealed: Vec<_> = self.state().domains.values().cloned().collect();
        let domains = sealed.iter().map(|d| self.open(d)).collect::<StoreResult<Vec<Domain>>>()?;
        Ok(domains.into_iter().filter(|d| d.inbound).collect())
    }

    async fn purge_inbound(&self, before: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut st = self.state();
        let doomed: Vec<InboundMessageId> =
            st.inbound.values().filter(|(m, _)| m.received_at < before).map(|(m, _)| m.id).take(limit).collect();
        for id in &doomed {
            st.inbound.remove(id);
        }
        Ok(doomed.len())
    }
}
