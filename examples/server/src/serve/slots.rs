//! Connection slots: the global cap on open connections and the cap per client address.
//!
//! A connection holds a [`Slot`] from accept to close; dropping it gives both counts back.
//! The global cap is a semaphore the accept loop waits on (a client over it waits in the
//! kernel's backlog, and idle connections are shed meanwhile, see `connection`); the cap per
//! address refuses at once, since one address holding many connections is the attack.

use std::net::IpAddr;
use std::sync::Arc;

use tidings_core::client_group::{ClientTicket, PerClient};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Counts of open connections, in total and per client address.
#[derive(Debug, Clone)]
pub struct Slots {
    total: Arc<Semaphore>,
    max_total: usize,
    per_ip: PerClient,
    max_per_ip: usize,
}

/// One open connection's place in [`Slots`]; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    _total: OwnedSemaphorePermit,
    _per_ip: ClientTicket,
}

impl Slots {
    /// At most `max_total` connections, at most `max_per_ip` of them from one address.
    pub fn new(max_total: usize, max_per_ip: usize) -> Self {
        Self { total: Arc::new(Semaphore::new(max_total)), max_total, per_ip: PerClient::default(), max_per_ip }
    }

    /// A place among all connections, waiting for one if every place is taken.
    pub async fn total(&self) -> OwnedSemaphorePermit {
        // The semaphore is never closed.
        Arc::clone(&self.total).acquire_owned().await.expect("the connection semaphore is never closed")
    }

    /// A place among all connections if one is free now.
    pub fn try_total(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.total).try_acquire_owned().ok()
    }

    /// How many connections could still be accepted.
    pub fn free(&self) -> usize {
        self.total.available_permits()
    }

    /// The global cap.
    pub fn max_total(&self) -> usize {
        self.max_total
    }

    /// A slot for a connection from `ip` holding `total`, or `None` when `ip` already has
    /// the most connections it may have. Addresses count by
    /// [`client_group`](tidings_core::client_group::client_group): every address of an IPv6
    /// /64 is one client.
    pub fn claim(&self, ip: IpAddr, total: OwnedSemaphorePermit) -> Option<Slot> {
        let per_ip = self.per_ip.take(ip, self.max_per_ip)?;
        Some(Slot { _total: total, _per_ip: per_ip })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_address_gets_its_cap_and_the_places_come_back_on_close() {
        let slots = Slots::new(3, 2);
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let first = slots.claim(a, slots.try_total().unwrap()).unwrap();
        let _second = slots.claim(a, slots.try_total().unwrap()).unwrap();
        assert!(slots.claim(a, slots.try_total().unwrap()).is_none(), "a third from one address");
        // The refused claim gave its global place back.
        let _other = slots.claim(b, slots.try_total().unwrap()).unwrap();
        assert_eq!(slots.free(), 0);
        assert!(slots.try_total().is_none());
        drop(first);
        assert_eq!(slots.free(), 1);
        assert!(slots.claim(a, slots.try_total().unwrap()).is_some(), "a's place came back");
    }

    #[tokio::test]
    async fn the_addresses_of_one_ipv6_64_share_a_cap() {
        let slots = Slots::new(10, 2);
        let host = |id: &str| -> IpAddr { format!("2001:db8:0:1::{id}").parse().unwrap() };
        let _first = slots.claim(host("1"), slots.try_total().unwrap()).unwrap();
        let _second = slots.claim(host("2"), slots.try_total().unwrap()).unwrap();
        assert!(slots.claim(host("3"), slots.try_total().unwrap()).is_none(), "a third from the same /64");
        let next: IpAddr = "2001:db8:0:2::1".parse().unwrap();
        assert!(slots.claim(next, slots.try_total().unwrap()).is_some(), "the next /64 is another client");
    }
}
