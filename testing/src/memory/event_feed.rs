//! The event feed of the [`MemoryStore`](super::MemoryStore): each write takes the next
//! commit number under the store's lock, so the feed order is the order writes happened.

use tidings_core::ports::{EventFeedStore, FeedEntry, FeedPosition};

use super::*;

impl State {
    /// The commit number of a write about to be applied.
    pub(super) fn next_commit(&mut self) -> u64 {
        self.feed_commits += 1;
        self.feed_commits
    }

    /// Records `events` of `message` as written by the write numbered `commit`.
    pub(super) fn add_events<'a>(
        &mut self,
        commit: u64,
        workspace: WorkspaceId,
        message: MessageId,
        events: impl IntoIterator<Item = &'a MessageEvent>,
    ) {
        let timeline = self.events.entry(message).or_default();
        for event in events {
            timeline.insert(event.id, event.clone());
            let position = FeedPosition { commit, event: event.id };
            self.feed.insert(position, (workspace, message));
        }
    }
}

#[async_trait]
impl EventFeedStore for MemoryStore {
    async fn event_feed(
        &self,
        workspace: WorkspaceId,
        after: Option<FeedPosition>,
        limit: usize,
    ) -> StoreResult<Vec<FeedEntry>> {
        let st = self.state();
        let from = match after {
            Some(position) => std::ops::Bound::Excluded(position),
            None => std::ops::Bound::Unbounded,
        };
        Ok(st
            .feed
            .range((from, std::ops::Bound::Unbounded))
            .filter(|(_, (ws, _))| *ws == workspace)
            // An event whose timeline retention purged has left the feed.
            .filter_map(|(position, (_, message))| {
                let event = st.events.get(message)?.get(&position.event)?;
                Some(FeedEntry { position: *position, event: event.clone() })
            })
            .take(limit)
            .collect())
    }
}
