//! The message data budget: every byte of message data the listener holds (from `354` until
//! the handler has taken the message) is counted against one budget shared by all sessions,
//! `max_data_bytes_in_flight`, of which one client (an IPv4 address or an IPv6 /64) may hold
//! at most a share. A session takes budget as its message grows, a chunk at a time, and gives
//! it all back when the message is handled or dropped.
//!
//! Without it, a hundred sessions each sending an unfinished 10 MiB message held a gigabyte.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The grain in which budget is taken, and the unit the semaphore counts in.
const KIB: usize = 1024;

/// Why a reservation could not grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Shortage {
    /// The client already holds its share of the budget in other sessions.
    #[error("the client holds its share of the message data budget")]
    ClientShare,
    /// The budget is spent (and was not freed in time).
    #[error("the message data budget is spent")]
    Spent,
}

/// The shared budget.
#[derive(Debug)]
pub(crate) struct DataBudget {
    /// Free budget in KiB.
    kib: Arc<Semaphore>,
    /// Bytes held per client.
    per_client: Mutex<HashMap<IpAddr, usize>>,
    /// The most bytes one client may hold.
    share: usize,
}

/// The budget one message holds; all given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<DataBudget>,
    client: IpAddr,
    bytes: usize,
    permit: Option<OwnedSemaphorePermit>,
}

impl DataBudget {
    /// A budget of `total` bytes of which one client may hold `share`.
    pub(crate) fn new(total: usize, share: usize) -> Arc<Self> {
        let kib = (total / KIB).clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(Self { kib: Arc::new(Semaphore::new(kib)), per_client: Mutex::default(), share })
    }

    /// An empty reservation for a message from `client` (a [`client_group`] key).
    ///
    /// [`client_group`]: tidings_core::client_group::client_group
    pub(crate) fn reservation(self: &Arc<Self>, client: IpAddr) -> Reservation {
        Reservation { budget: Arc::clone(self), client, bytes: 0, permit: None }
    }

    /// Free budget in bytes.
    #[cfg(test)]
    fn free(&self) -> usize {
        self.kib.available_permits() * KIB
    }
}

impl Reservation {
    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Grows to at least `bytes` (rounded up to whole KiB) if the budget has it now.
    pub(crate) fn try_grow(&mut self, bytes: usize) -> Result<(), Shortage> {
        let Some(extra) = self.take_share(bytes)? else { return Ok(()) };
        match Arc::clone(&self.budget.kib).try_acquire_many_owned(kib(extra)) {
            Ok(permit) => {
                self.add(permit, extra);
                Ok(())
            }
            Err(_) => {
                self.give_share(extra);
                Err(Shortage::Spent)
            }
        }
    }

    /// Grows to at least `bytes`, waiting up to `wait` for others to give budget back.
    pub(crate) async fn grow_within(&mut self, bytes: usize, wait: Duration) -> Result<(), Shortage> {
        let Some(extra) = self.take_share(bytes)? else { return Ok(()) };
        let acquire = Arc::clone(&self.budget.kib).acquire_many_owned(kib(extra));
        match tokio::time::timeout(wait, acquire).await {
            Ok(Ok(permit)) => {
                self.add(permit, extra);
                Ok(())
            }
            _ => {
                self.give_share(extra);
                Err(Shortage::Spent)
            }
        }
    }

    /// Counts the growth to `bytes` in the client's share: the extra bytes, `None` when
    /// there are none.
    fn take_share(&mut self, bytes: usize) -> Result<Option<usize>, Shortage> {
        let wanted = bytes.div_ceil(KIB).saturating_mul(KIB);
        let Some(extra) = wanted.checked_sub(self.bytes).filter(|&extra| extra > 0) else { return Ok(None) };
        let mut held = self.budget.per_client.lock().unwrap_or_else(PoisonError::into_inner);
        let client = held.entry(self.client).or_insert(0);
        if client.saturating_add(extra) > self.budget.share {
            if *client == 0 {
                held.remove(&self.client);
            }
            return Err(Shortage::ClientShare);
        }
        *client += extra;
        Ok(Some(extra))
    }

    fn give_share(&self, bytes: usize) {
        let mut held = self.budget.per_client.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = held.get_mut(&self.client) {
            *client = client.saturating_sub(bytes);
            if *client == 0 {
                held.remove(&self.client);
            }
        }
    }

    fn add(&mut self, permit: OwnedSemaphorePermit, extra: usize) {
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        self.bytes += extra;
    }

    /// Gives everything back now (the message was dropped) and starts again from nothing.
    pub(crate) fn release(&mut self) {
        self.give_share(self.bytes);
        self.permit = None;
        self.bytes = 0;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release();
    }
}

/// `bytes` (a whole number of KiB) as semaphore permits. Growth is capped by the largest
/// message, so it fits.
fn kib(bytes: usize) -> u32 {
    u32::try_from(bytes / KIB).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    fn client(last: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last])
    }

    #[test]
    fn growth_is_counted_in_whole_kib_and_given_back_on_drop() {
        let budget = DataBudget::new(4 * MIB, 2 * MIB);
        let mut reservation = budget.reservation(client(1));
        reservation.try_grow(1).unwrap();
        assert_eq!(reservation.bytes(), KIB);
        reservation.try_grow(100 * KIB + 1).unwrap();
        assert_eq!(reservation.bytes(), 101 * KIB);
        reservation.try_grow(50 * KIB).unwrap();
        assert_eq!(reservation.bytes(), 101 * KIB, "never shrinks by growing");
        assert_eq!(budget.free(), 4 * MIB - 101 * KIB);
        drop(reservation);
        assert_eq!(budget.free(), 4 * MIB);
        assert!(budget.per_client.lock().unwrap().is_empty());
    }

    #[test]
    fn one_client_holds_at_most_its_share_across_its_messages() {
        let budget = DataBudget::new(4 * MIB, 2 * MIB);
        let mut first = budget.reservation(client(1));
        let mut second = budget.reservation(client(1));
        first.try_grow(MIB + MIB / 2).unwrap();

        assert_eq!(second.try_grow(MIB), Err(Shortage::ClientShare));
        let mut other = budget.reservation(client(2));
        other.try_grow(2 * MIB).unwrap();

        first.release();
        second.try_grow(MIB).unwrap();
        assert_eq!(budget.free(), MIB);
    }

    #[tokio::test]
    async fn a_spent_budget_is_waited_for_and_the_wait_gives_up_in_time() {
        let budget = DataBudget::new(2 * MIB, 2 * MIB);
        let mut holder = budget.reservation(client(1));
        holder.try_grow(2 * MIB).unwrap();
        let mut waiter = budget.reservation(client(2));

        assert_eq!(waiter.try_grow(KIB), Err(Shortage::Spent));
        assert_eq!(waiter.grow_within(KIB, Duration::from_millis(50)).await, Err(Shortage::Spent));
        assert!(budget.per_client.lock().unwrap().get(&client(2)).is_none(), "a failed growth takes no share");

        let waiting = tokio::spawn(async move {
            let result = waiter.grow_within(KIB, Duration::from_secs(5)).await;
            (result, waiter.bytes())
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(holder);
        assert_eq!(waiting.await.unwrap(), (Ok(()), KIB));
    }
}
