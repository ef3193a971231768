//! How one message's data takes its budget: from the shared
//! [`DataBudget`](crate::budget::DataBudget) if it has room now; else the idlest holder is
//! evicted and the session waits a little for the budget, evicting again every tick. It
//! may be evicted itself meanwhile if it is the one that has made no progress for longest:
//! sessions all waiting for budget they partly hold would otherwise hold it to the end of
//! their waits.
//! Each chunk granted is progress: a client that sends its message briskly never counts as
//! idle, one that stalls half-way does.

use std::sync::Arc;
use std::time::Duration;

use crate::activity::{Activity, Need, Registry};
use crate::budget::{Reservation, Shortage};
use crate::data::Budget;

/// How long a message waits for budget held by others before its session is closed.
pub(crate) const BUDGET_WAIT: Duration = Duration::from_secs(10);
/// How often a waiting message looks again for an idle holder to evict.
const EVICTION_TICK: Duration = Duration::from_millis(250);

/// The budget of the message a session is receiving.
pub(crate) struct MessageBudget {
    pub(crate) reservation: Reservation,
    pub(crate) activity: Arc<Activity>,
    pub(crate) registry: Arc<Registry>,
}

impl Budget for MessageBudget {
    async fn reserve(&mut self, bytes: usize) -> Result<usize, Shortage> {
        match self.reservation.try_grow(bytes) {
            Ok(()) => {}
            Err(Shortage::ClientShare) => return Err(Shortage::ClientShare),
            Err(Shortage::Spent) => {
                // Holders that were still sending when the wait began may stall during it,
                // so the idlest holder is looked for again at every tick, not only once. The
                // session stays evictable while it waits (see `activity`), but never by
                // itself.
                let deadline = tokio::time::Instant::now() + BUDGET_WAIT;
                let grown = loop {
                    self.registry.evict_idlest_but(Need::Budget, Some(&self.activity));
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    match self.reservation.grow_within(bytes, left.min(EVICTION_TICK)).await {
                        Err(Shortage::Spent) if left > EVICTION_TICK => continue,
                        other => break other,
                    }
                };
                self.activity.progress();
                grown?;
            }
        }
        self.activity.set_held(self.reservation.bytes());
        self.activity.progress();
        Ok(self.reservation.bytes())
    }

    fn release(&mut self) {
        self.reservation.release();
        self.activity.set_held(0);
    }
}

impl Drop for MessageBudget {
    fn drop(&mut self) {
        self.activity.set_held(0);
    }
}
