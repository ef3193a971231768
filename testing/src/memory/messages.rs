//! Messages, their timelines, the delivery queue and idempotency of the [`MemoryStore`](super::MemoryStore).

use super::*;

#[async_trait]
impl MessageStore for MemoryStore {
    // Kept in this process's memory: nobody else can have it.
    fn is_exclusive(&self) -> bool {
        true
    }

    async fn create_message(&self, new: &NewMessage) -> StoreResult<CreateOutcome> {
        let mut st = self.state();
        if let Some(record) = &new.idempotency
            && let Some(existing) = st.idempotency.get(&(record.workspace_id, record.key.clone()))
            && existing.expires_at > new.message.created_at
        {
            return Ok(CreateOutcome::Duplicate(existing.clone()));
        }
        if st.messages.contains_key(&new.message.id) {
            return Err(conflict("message id exists"));
        }
        if let Some(e) = st.deliveries_conflict(&new.webhook_deliveries) {
            return Err(e);
        }
        let id = new.message.id;
        let commit = st.next_commit();
        st.add_events(commit, new.message.workspace_id, id, std::iter::once(&new.event).chain(&new.recipient_events));
        st.messages.insert(id, new.message.clone());
        st.purge_pending.insert(id);
        if let Some(record) = &new.idempotency {
            st.idempotency.insert((record.workspace_id, record.key.clone()), record.clone());
        }
        st.queue_deliveries(&new.webhook_deliveries);
        st.count_activity([&new.activity]);
        Ok(CreateOutcome::Created)
    }

    async fn create_messages(&self, batch: &NewBatch) -> StoreResult<CreateOutcome> {
        let mut st = self.state();
        if let Some(record) = &batch.idempotency
            && let Some(existing) = st.idempotency.get(&(record.workspace_id, record.key.clone()))
            && existing.expires_at > batch.accepted_at
        {
            return Ok(CreateOutcome::Duplicate(existing.clone()));
        }
        // Every check before any write: all or nothing.
        let mut ids = std::collections::HashSet::new();
        for new in &batch.messages {
            if st.messages.contains_key(&new.message.id) || !ids.insert(new.message.id) {
                return Err(conflict("message id exists"));
            }
        }
        let deliveries: Vec<WebhookDelivery> =
            batch.messages.iter().flat_map(|new| new.webhook_deliveries.iter().cloned()).collect();
        if let Some(e) = st.deliveries_conflict(&deliveries) {
            return Err(e);
        }
        let commit = st.next_commit();
        for new in &batch.messages {
            let id = new.message.id;
            st.add_events(
                commit,
                new.message.workspace_id,
                id,
                std::iter::once(&new.event).chain(&new.recipient_events),
            );
            st.messages.insert(id, new.message.clone());
        }
        if let Some(record) = &batch.idempotency {
            st.idempotency.insert((record.workspace_id, record.key.clone()), record.clone());
        }
        st.queue_deliveries(&deliveries);
        st.count_activity(batch.messages.iter().map(|new| &new.activity));
        Ok(CreateOutcome::Created)
    }

    async fn get_message(&self, workspace: WorkspaceId, id: MessageId) -> StoreResult<Option<Message>> {
        Ok(self.state().messages.get(&id).filter(|m| m.workspace_id == workspace).cloned())
    }

    async fn find_message(&self, id: MessageId) -> StoreResult<Option<Message>> {
        Ok(self.state().messages.get(&id).cloned())
    }

    async fn list_messages(&self, workspace: WorkspaceId, query: &MessageQuery) -> StoreResult<Page<Message>> {
        let to = query.to.as_ref().map(EmailAddress::normalized);
        let keep = |m: &Message| {
            m.workspace_id == workspace
                && query.status.is_none_or(|s| m.status == s)
                && to.as_ref().is_none_or(|to| m.recipient_addresses().iter().any(|r| r.normalized() == *to))
                && query.sent_by.is_none_or(|k| m.api_key_id == k)
                && query.matches_unindexed(m)
        };
        // A plain scan of the id range, in the direction the page walks.
        let (low, high) = query.id_bounds();
        let st = self.state();
        let in_range =
            st.messages.iter().filter(|(id, _)| low.is_none_or(|l| **id >= l) && high.is_none_or(|h| **id < h));
        let matching = in_range.map(|(_, m)| m).filter(|m| keep(m)).cloned();
        if query.ending_before.is_some() {
            let mut page = page_of(matching, query.page.limit);
            page.items.reverse();
            return Ok(page);
        }
        Ok(page_of(matching.rev(), query.page.limit))
    }

    async fn list_events(
        &self,
        workspace: WorkspaceId,
        message: MessageId,
        page: PageRequest<EventId>,
    ) -> StoreResult<Page<MessageEvent>> {
        let st = self.state();
        if st.messages.get(&message).filter(|m| m.workspace_id == workspace).is_none() {
            return Err(StoreError::NotFound);
        }
        let Some(events) = st.events.get(&message) else {
            return Ok(Page { items: vec![], has_more: false });
        };
        let after_cursor = events.iter().filter(|(id, _)| page.cursor.is_none_or(|c| **id > c));
        Ok(page_of(after_cursor.map(|(_, e)| e.clone()), page.limit))
    }

    async fn record_event(&self, write: EventWrite) -> StoreResult<()> {
        let mut st = self.state();
        let id = write.message.id;
        let stored = st.messages.get(&id).filter(|m| m.workspace_id == write.message.workspace_id);
        let stored = stored.ok_or(StoreError::NotFound)?;
        if stored.status != write.expected_status {
            return Err(StoreError::Conflict(format!(
                "message is {:?}, not {:?}",
                stored.status, write.expected_status
            )));
        }
        if let Some(expected) = write.expected_next_attempt_at
            && stored.next_attempt_at != Some(expected)
        {
            return Err(conflict("message is no longer under this lease"));
        }
        if let Some(expected) = write.expected_last_event_id
            && stored.last_event_id != expected
        {
            return Err(conflict("an event was recorded since the message was read"));
        }
        let written = std::iter::once(&write.event).chain(&write.more_events);
        if written.clone().any(|e| st.events.get(&id).is_some_and(|events| events.contains_key(&e.id))) {
            return Err(conflict("event id exists"));
        }
        if let Some(e) = st.deliveries_conflict(&write.webhook_deliveries) {
            return Err(e);
        }
        let mut message = write.message;
        if write.expected_last_event_id.is_none()
            && let Some(stored) = st.messages.get(&id)
        {
            message.tracking_tally = stored.tracking_tally.clone();
        }
        let workspace = message.workspace_id;
        st.messages.insert(id, message);
        st.purge_pending.insert(id);
        let commit = st.next_commit();
        st.add_events(commit, workspace, id, std::iter::once(&write.event).chain(&write.more_events));
        st.queue_deliveries(&write.webhook_deliveries);
        st.count_activity([&write.activity]);
        Ok(())
    }

    async fn claim_due_messages(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<Message>> {
        let mut st = self.state();
        let ids = due(&st.messages, now, limit, |m| m.next_attempt_at);
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(m) = st.messages.get_mut(&id) {
                m.next_attempt_at = Some(lease_until);
                claimed.push(m.clone());
            }
        }
        Ok(claimed)
    }

    async fn release_message_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut st = self.state();
        let mut leased: Vec<(DateTime<Utc>, MessageId)> = st
            .messages
            .values()
            .filter(|m| m.status.next_attempt_is_lease())
            .filter_map(|m| m.next_attempt_at.filter(|at| *at > now).map(|at| (at, m.id)))
            .collect();
        leased.sort();
        leased.truncate(limit);
        for (_, id) in &leased {
            if let Some(m) = st.messages.get_mut(id) {
                m.next_attempt_at = Some(now);
            }
        }
        Ok(leased.len())
    }

    async fn requeue_message(
        &self,
        workspace: WorkspaceId,
        id: MessageId,
        lease: DateTime<Utc>,
        due: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut st = self.state();
        match st.messages.get_mut(&id) {
            Some(m) if m.workspace_id == workspace && m.next_attempt_at == Some(lease) => {
                m.next_attempt_at = Some(due);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn count_pending_messages(&self, now: DateTime<Utc>) -> StoreResult<PendingMessages> {
        let st = self.state();
        let pending: Vec<DateTime<Utc>> = st.messages.values().filter_map(|m| m.next_attempt_at).collect();
        let due = pending.iter().filter(|at| **at <= now).count();
        Ok(PendingMessages { total: pending.len() as u64, due: due as u64 })
    }

    async fn purge_message_content(&self, created_before: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut st = self.state();
        let bound = MessageId::first_at(created_before);
        let candidates: Vec<MessageId> = st.purge_pending.range(..bound).copied().collect();
        let mut purged = 0;
        for id in candidates {
            if purged == limit {
                break;
            }
            let Some(message) = st.messages.get(&id) else {
                st.purge_pending.remove(&id);
                continue;
            };
            if message.next_attempt_at.is_some() {
                continue;
            }
            let kept = message.without_content();
            st.messages.insert(id, kept);
            st.events.remove(&id);
            st.purge_pending.remove(&id);
            purged += 1;
        }
        Ok(purged)
    }

    async fn get_idempotency(
        &self,
        workspace: WorkspaceId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        Ok(self.state().idempotency.get(&(workspace, key.clone())).cloned())
    }

    async fn purge_expired_idempotency(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let mut st = self.state();
        let mut expired: Vec<(DateTime<Utc>, (WorkspaceId, IdempotencyKey))> = st
            .idempotency
            .iter()
            .filter(|(_, r)| r.expires_at <= now)
            .map(|(k, r)| (r.expires_at, k.clone()))
            .collect();
        expired.sort();
        expired.truncate(limit);
        for (_, key) in &expired {
            st.idempotency.remove(key);
        }
        Ok(expired.len())
    }
}
