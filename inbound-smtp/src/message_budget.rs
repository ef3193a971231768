//! How one message's data takes its budget: from the shared [`DataBudget`] if it has room
//! now; else the idlest holder is evicted and the session waits a little for the budget
//! (busy meanwhile, so that it is not evicted itself for a wait that is the server's doing).
//! Each chunk granted is progress: a client that sends its message briskly never counts as
//! idle, one that stalls half-way does.

use std::sync::Arc;
use std::time::Duration;

use crate::activity::{Activity, Need, Registry};
use crate::budget::{Reservation, Shortage};
use crate::data::Budget;

/// How long a message waits for budget held by others before its session is closed.
pub(crate) const BUDGET_WAIT: Duration = Duration::from_secs(10);

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
                if !self.activity.busy() {
                    return Err(Shortage::Spent);
                }
                self.registry.evict_idlest(Need::Budget);
                let grown = self.reservation.grow_within(bytes, BUDGET_WAIT).await;
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
