//! The durable event feed: every event of a workspace's messages, read from a cursor the
//! reader keeps, so that a reaction ("when Delivered, ...") survives restarts without
//! webhooks to oneself. The live observers ([`Tidings::add_observer`]) hear events as they
//! happen in this process only; the feed has them all, from every node, until retention.
//!
//! ```
//! use std::sync::Arc;
//! use tidings_core::model::EventType;
//! use tidings_core::ports::{NoDns, SystemClock, SystemRandom};
//! use tidings_core::usecases::{CoreConfig, SendRequest, Tidings};
//! use tidings_testing::MemoryStore;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let config = CoreConfig { sandbox_sending: true, ..CoreConfig::default() };
//! let core = Tidings::new(Arc::new(MemoryStore::new()), Arc::new(SystemClock), Arc::new(SystemRandom), Arc::new(NoDns), config);
//! let (_, key) = core.workspaces().create("acme", None).await?;
//! let who = core.authenticate(key.plaintext.expose()).await?;
//!
//! // The cursor the application saved last time (none on the first start).
//! let saved = None;
//! let mut events = core.events().follow(&who, saved);
//! let request = SendRequest { to: Some("ann@example.net".into()), subject: Some("Hi".into()), text: Some("Hello.".into()), ..SendRequest::default() };
//! core.messages().send(&who, request, None).await?;
//!
//! let batch = events.next().await?; // waits until there is at least one event
//! assert_eq!(batch[0].event.event_type, EventType::Queued);
//! // Handled: save this, and start from it next time.
//! let cursor = events.cursor().map(|c| c.to_string());
//! assert!(cursor.is_some());
//! # Ok::<(), tidings_core::Error>(())
//! # }).unwrap();
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::{Principal, Tidings};
use crate::ids::{EventId, WorkspaceId};
use crate::model::{Message, MessageEvent};
use crate::ports::{EventObserver, FeedEntry, FeedPosition, ObserverId};
use crate::{Error, Result};

/// Most events one read returns.
pub const MAX_FEED_LIMIT: usize = 500;

/// A place in the feed as an application keeps it: opaque text (`Display` to save it,
/// [`FeedCursor::parse`] to read it back). Valid on the store that gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FeedCursor(FeedPosition);

impl FeedCursor {
    /// Reads a cursor's text back; `None` for anything this type did not write.
    pub fn parse(text: &str) -> Option<Self> {
        let (commit, event) = text.split_once('-')?;
        if commit.is_empty() || commit.len() > 16 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let commit = u64::from_str_radix(commit, 16).ok()?;
        Some(Self(FeedPosition { commit, event: EventId::parse(event)? }))
    }

    /// The store's position.
    pub fn position(self) -> FeedPosition {
        self.0
    }
}

impl From<FeedPosition> for FeedCursor {
    fn from(position: FeedPosition) -> Self {
        Self(position)
    }
}

impl fmt::Display for FeedCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}-{}", self.0.commit, self.0.event)
    }
}

/// One read of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedPage {
    /// The events, in feed order.
    pub events: Vec<FeedEntry>,
    /// Where to go on from: the last event's place, or the cursor read from when there was
    /// nothing new (`None` then only if that was the start).
    pub next: Option<FeedCursor>,
}

impl Tidings {
    /// The durable event feed: a workspace's events read from a saved cursor.
    pub fn events(&self) -> Events<'_> {
        Events { core: self }
    }
}

/// The event feed area of [`Tidings`] ([`Tidings::events`]): every event of the caller's
/// workspace in feed order, read a page at a time from a cursor or followed as they come.
#[derive(Clone, Copy)]
pub struct Events<'a> {
    core: &'a Tidings,
}

impl Events<'_> {
    /// Up to `limit` (1–500) events of the caller's workspace after `after` (from the start
    /// of the feed: `None`). A full key only: the feed shows every message of the workspace.
    pub async fn since(&self, who: &Principal, after: Option<FeedCursor>, limit: usize) -> Result<FeedPage> {
        who.require_full()?;
        if !(1..=MAX_FEED_LIMIT).contains(&limit) {
            return Err(Error::field("limit", format!("must be between 1 and {MAX_FEED_LIMIT}")));
        }
        let events = self.core.store.event_feed(who.workspace_id, after.map(FeedCursor::position), limit).await?;
        let next = events.last().map(|e| FeedCursor(e.position)).or(after);
        Ok(FeedPage { events, next })
    }

    /// A reader of the caller's feed from `after` that waits for events: woken at once by
    /// events this process records, and polling (every second) for those of other nodes.
    pub fn follow(&self, who: &Principal, after: Option<FeedCursor>) -> EventFollower {
        let wake = Arc::new(Notify::new());
        let observer = self.core.add_observer(Arc::new(Waker { workspace: who.workspace_id, wake: Arc::clone(&wake) }));
        EventFollower {
            core: self.core.clone(),
            who: who.clone(),
            cursor: after,
            wake,
            observer,
            poll: Duration::from_secs(1),
            batch: 100,
        }
    }
}

/// Follows one workspace's feed ([`Events::follow`]). Keep [`Self::cursor`] once the
/// events a call returned are handled: starting from it again after a restart gives what
/// came after them, so each event is handled at least once.
pub struct EventFollower {
    core: Tidings,
    who: Principal,
    cursor: Option<FeedCursor>,
    wake: Arc<Notify>,
    observer: ObserverId,
    poll: Duration,
    batch: usize,
}

impl EventFollower {
    /// The next events (at most 100), waiting until there is at least one.
    pub async fn next(&mut self) -> Result<Vec<FeedEntry>> {
        loop {
            // Asked for before the read: an event recorded between the read and the wait
            // still wakes it.
            let woken = self.wake.notified();
            let page = self.core.events().since(&self.who, self.cursor, self.batch).await?;
            self.cursor = page.next;
            if !page.events.is_empty() {
                return Ok(page.events);
            }
            let _ = tokio::time::timeout(self.poll, woken).await;
        }
    }

    /// Where the events returned so far end: save it, and follow from it after a restart.
    pub fn cursor(&self) -> Option<FeedCursor> {
        self.cursor
    }

    /// Polls this often for events of other nodes (default one second).
    pub fn with_poll_interval(mut self, every: Duration) -> Self {
        self.poll = every;
        self
    }
}

impl Drop for EventFollower {
    fn drop(&mut self) {
        self.core.remove_observer(self.observer);
    }
}

impl fmt::Debug for EventFollower {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventFollower")
            .field("workspace", &self.who.workspace_id)
            .field("cursor", &self.cursor)
            .finish()
    }
}

/// Wakes a follower when this process records an event of its workspace.
struct Waker {
    workspace: WorkspaceId,
    wake: Arc<Notify>,
}

impl EventObserver for Waker {
    fn message_event(&self, message: &Message, _event: &MessageEvent) {
        if message.workspace_id == self.workspace {
            self.wake.notify_one();
        }
    }
}
