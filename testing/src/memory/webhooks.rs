//! Webhook endpoints and deliveries of the [`MemoryStore`](super::MemoryStore).

use super::*;

#[async_trait]
impl WebhookStore for MemoryStore {
    async fn insert_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()> {
        let sealed = self.seal(endpoint)?;
        let mut st = self.state();
        if st.webhooks.contains_key(&endpoint.id) {
            return Err(conflict("webhook id exists"));
        }
        st.webhooks.insert(endpoint.id, sealed);
        Ok(())
    }

    async fn get_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<Option<WebhookEndpoint>> {
        let st = self.state();
        st.webhooks.get(&id).filter(|w| w.unopened().workspace_id == workspace).map(|w| self.open(w)).transpose()
    }

    async fn list_webhooks(
        &self,
        workspace: WorkspaceId,
        page: PageRequest<WebhookId>,
    ) -> StoreResult<Page<WebhookEndpoint>> {
        self.open_page(newest_first(&self.state().webhooks, &page, |w| w.unopened().workspace_id == workspace))
    }

    async fn list_enabled_webhooks(&self, workspace: WorkspaceId) -> StoreResult<Vec<WebhookEndpoint>> {
        let st = self.state();
        let enabled = st.webhooks.values().filter(|w| w.unopened().workspace_id == workspace && w.unopened().enabled);
        enabled.map(|w| self.open(w)).collect()
    }

    async fn update_webhook(&self, endpoint: &WebhookEndpoint) -> StoreResult<()> {
        let sealed = self.seal(endpoint)?;
        let mut st = self.state();
        let stored = st.webhooks.get_mut(&endpoint.id).filter(|w| w.unopened().workspace_id == endpoint.workspace_id);
        *stored.ok_or(StoreError::NotFound)? = sealed;
        Ok(())
    }

    async fn delete_webhook(&self, workspace: WorkspaceId, id: WebhookId) -> StoreResult<()> {
        let mut st = self.state();
        if !st.endpoint_exists(workspace, id) {
            return Err(StoreError::NotFound);
        }
        st.webhooks.remove(&id);
        st.deliveries.retain(|_, d| d.endpoint_id != id);
        Ok(())
    }

    async fn insert_webhook_deliveries(&self, deliveries: &[WebhookDelivery]) -> StoreResult<()> {
        let mut st = self.state();
        if !deliveries.iter().all(|d| st.endpoint_exists(d.workspace_id, d.endpoint_id)) {
            return Err(StoreError::NotFound);
        }
        if let Some(e) = st.deliveries_conflict(deliveries) {
            return Err(e);
        }
        st.queue_deliveries(deliveries);
        Ok(())
    }

    async fn get_webhook_delivery(
        &self,
        workspace: WorkspaceId,
        id: DeliveryId,
    ) -> StoreResult<Option<WebhookDelivery>> {
        Ok(self.state().deliveries.get(&id).filter(|d| d.workspace_id == workspace).cloned())
    }

    async fn list_webhook_deliveries(
        &self,
        workspace: WorkspaceId,
        endpoint: WebhookId,
        page: PageRequest<DeliveryId>,
    ) -> StoreResult<Page<WebhookDelivery>> {
        Ok(newest_first(&self.state().deliveries, &page, |d| d.workspace_id == workspace && d.endpoint_id == endpoint))
    }

    async fn list_message_webhook_deliveries(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        limit: usize,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        let st = self.state();
        let of_message =
            st.deliveries.values().rev().filter(|d| d.workspace_id == workspace && d.message_id == Some(message));
        Ok(of_message.take(limit).cloned().collect())
    }

    async fn update_webhook_delivery(&self, delivery: &WebhookDelivery) -> StoreResult<()> {
        let mut st = self.state();
        let stored = st.deliveries.get_mut(&delivery.id).filter(|d| d.workspace_id == delivery.workspace_id);
        *stored.ok_or(StoreError::NotFound)? = delivery.clone();
        Ok(())
    }

    async fn claim_due_webhook_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
        quota: &EndpointQuota,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        let mut st = self.state();
        let mut count = quota.start();
        let ids: Vec<DeliveryId> = due(&st.deliveries, now, usize::MAX, |d| d.next_attempt_at)
            .into_iter()
            .filter(|id| st.deliveries.get(id).is_some_and(|d| count.take(d.workspace_id, d.endpoint_id)))
            .take(limit)
            .collect();
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(d) = st.deliveries.get_mut(&id) {
                d.next_attempt_at = Some(lease_until);
                claimed.push(d.clone());
            }
        }
        Ok(claimed)
    }

    async fn release_webhook_delivery_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut st = self.state();
        let mut leased: Vec<(DateTime<Utc>, DeliveryId)> = st
            .deliveries
            .values()
            .filter(|d| d.status.next_attempt_is_lease())
            .filter_map(|d| d.next_attempt_at.filter(|at| *at > now).map(|at| (at, d.id)))
            .collect();
        leased.sort();
        leased.truncate(limit);
        for (_, id) in &leased {
            if let Some(d) = st.deliveries.get_mut(id) {
                d.next_attempt_at = Some(now);
            }
        }
        Ok(leased.len())
    }
}
