//! Session places: at most `max_connections` sessions in all and `max_connections_per_ip`
//! from one client (an IPv4 address or an IPv6 /64, [`client_group`](tidings_core::client_group::client_group)). A session holds a
//! [`Place`] from accept to close; dropping it gives both counts back.
//!
//! Over the per-client cap a connection is refused at once: one client holding many
//! sessions is the attack. At the global cap the newcomer waits briefly for a place while
//! the idlest session is evicted (`activity`), so idle sockets from many addresses cannot
//! lock a live client out either.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tidings_core::client_group::{ClientTicket, PerClient};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Counts of sessions, in total and per client.
#[derive(Debug, Clone)]
pub(crate) struct Places {
    total: Arc<Semaphore>,
    per_client: PerClient,
    max_per_client: usize,
}

/// A client's share of the places, taken before the global place: held by a waiting
/// newcomer too, so one client cannot queue more than its share.
#[derive(Debug)]
pub(crate) struct ClientShare {
    _ticket: ClientTicket,
}

/// One running session's place.
#[derive(Debug)]
pub(crate) struct Place {
    _total: OwnedSemaphorePermit,
    _share: ClientShare,
}

impl Places {
    pub(crate) fn new(max_total: usize, max_per_client: usize) -> Self {
        Self { total: Arc::new(Semaphore::new(max_total)), per_client: PerClient::default(), max_per_client }
    }

    /// A share for a connection from `ip`, or `None` when its client has all it may have.
    pub(crate) fn share(&self, ip: IpAddr) -> Option<ClientShare> {
        self.per_client.take(ip, self.max_per_client).map(|ticket| ClientShare { _ticket: ticket })
    }

    /// A place now, if one is free; else the share back.
    pub(crate) fn try_place(&self, share: ClientShare) -> Result<Place, ClientShare> {
        match Arc::clone(&self.total).try_acquire_owned() {
            Ok(total) => Ok(Place { _total: total, _share: share }),
            Err(_) => Err(share),
        }
    }

    /// A place within `wait`, or the share back.
    pub(crate) async fn place_within(&self, share: ClientShare, wait: Duration) -> Result<Place, ClientShare> {
        match tokio::time::timeout(wait, Arc::clone(&self.total).acquire_owned()).await {
            Ok(Ok(total)) => Ok(Place { _total: total, _share: share }),
            _ => Err(share),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[tokio::test]
    async fn a_client_gets_its_share_and_places_come_back_on_close() {
        let places = Places::new(3, 2);
        let first = places.try_place(places.share(ip("192.0.2.1")).unwrap()).unwrap();
        let _second = places.try_place(places.share(ip("192.0.2.1")).unwrap()).unwrap();
        assert!(places.share(ip("192.0.2.1")).is_none(), "a third from one address");
        let _other = places.try_place(places.share(ip("192.0.2.2")).unwrap()).unwrap();
        let waiting = places.try_place(places.share(ip("192.0.2.3")).unwrap()).unwrap_err();

        drop(first);

        let place = places.place_within(waiting, Duration::from_secs(1)).await;
        assert!(place.is_ok(), "the freed place went to the waiting client");
        assert!(places.share(ip("192.0.2.1")).is_some(), "the first client's share came back");
    }

    #[tokio::test]
    async fn the_addresses_of_one_ipv6_64_share_a_client_cap() {
        let places = Places::new(10, 2);
        let _a = places.share(ip("2001:db8:5:6::1")).unwrap();
        let _b = places.share(ip("2001:db8:5:6:ffff::2")).unwrap();
        assert!(places.share(ip("2001:db8:5:6::3")).is_none());
        assert!(places.share(ip("2001:db8:5:7::1")).is_some());
    }

    #[tokio::test]
    async fn waiting_for_a_place_gives_up_in_time() {
        let places = Places::new(1, 5);
        let _held = places.try_place(places.share(ip("192.0.2.1")).unwrap()).unwrap();
        let share = places.share(ip("192.0.2.2")).unwrap();
        assert!(places.place_within(share, Duration::from_millis(50)).await.is_err());
    }
}
