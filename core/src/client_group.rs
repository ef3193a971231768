//! The unit per-client limits count in: the failed-authentication throttle, the HTTPS
//! listener's connections per address, and the SMTP listeners' sessions and message data per
//! address all key on [`client_group`] rather than on the raw address.
//!
//! An IPv4 address is scarce, so it is a client of its own. An IPv6 host is usually given a
//! whole /64 (RFC 6177; SLAAC and privacy addresses pick any of its 2^64 interface ids), so a
//! limit per IPv6 address would let one host take a fresh allowance per request; the /64 is
//! the smallest unit a host cannot step out of. An IPv4-mapped IPv6 address (a dual-stack
//! socket's view of an IPv4 client) is that IPv4 client.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

/// The key per-client limits use for `ip`: IPv4 addresses as they are (IPv4-mapped IPv6
/// ones as their IPv4 address), IPv6 addresses as their /64 network (the interface id
/// zeroed), so every address of one /64 counts as one client.
pub fn client_group(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let network = u128::from(v6) & !u128::from(u64::MAX);
                IpAddr::V6(Ipv6Addr::from(network))
            }
        },
    }
}

/// How many of something (connections, sessions) each client holds, by [`client_group`];
/// clones share the counts. Each one held is a [`ClientTicket`], which gives its count back
/// when dropped, so a client's entry exists only while it holds something.
#[derive(Debug, Clone, Default)]
pub struct PerClient {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One thing held by a client in [`PerClient`]; given back when dropped.
#[derive(Debug)]
pub struct ClientTicket {
    client: IpAddr,
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerClient {
    /// One more for the client of `ip`, or `None` when it already holds `max`.
    pub fn take(&self, ip: IpAddr, max: usize) -> Option<ClientTicket> {
        let client = client_group(ip);
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(client).or_insert(0);
        if *count >= max {
            if *count == 0 {
                counts.remove(&client);
            }
            return None;
        }
        *count += 1;
        Some(ClientTicket { client, counts: Arc::clone(&self.counts) })
    }
}

impl Drop for ClientTicket {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn group(text: &str) -> String {
        client_group(text.parse().unwrap()).to_string()
    }

    #[test]
    fn ipv4_is_kept_and_ipv6_is_cut_to_its_64() {
        assert_eq!(group("192.0.2.7"), "192.0.2.7");
        assert_eq!(group("127.0.0.2"), "127.0.0.2");
        assert_eq!(group("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::");
        assert_eq!(group("2001:db8:1:2::ffff"), "2001:db8:1:2::");
        assert_eq!(group("2001:db8:1:3::1"), "2001:db8:1:3::");
        assert_eq!(group("::1"), "::");
        assert_eq!(group("::ffff:192.0.2.7"), "192.0.2.7");
    }

    #[test]
    fn tickets_count_per_client_and_come_back_when_dropped() {
        let per_client = PerClient::default();
        let first = per_client.take("2001:db8::1".parse().unwrap(), 2).expect("a first");
        let _second = per_client.take("2001:db8::2".parse().unwrap(), 2).expect("a second from the same /64");
        assert!(per_client.take("2001:db8::3".parse().unwrap(), 2).is_none(), "a third from the /64");
        assert!(per_client.take("2001:db8:0:1::1".parse().unwrap(), 2).is_some(), "another /64");
        drop(first);
        assert!(per_client.take("2001:db8::3".parse().unwrap(), 2).is_some(), "a place came back");
        assert!(per_client.take("192.0.2.1".parse().unwrap(), 0).is_none());
        assert!(per_client.counts.lock().unwrap().get(&"192.0.2.1".parse::<IpAddr>().unwrap()).is_none());
    }

    proptest! {
        #[test]
        fn addresses_of_one_64_share_a_group_and_other_64s_do_not(prefix: u64, a: u64, b: u64, other: u64) {
            let ip = |prefix: u64, id: u64| IpAddr::V6(Ipv6Addr::from((u128::from(prefix) << 64) | u128::from(id)));
            // IPv4-mapped addresses live in ::ffff:0:0/96, inside the /64 of prefix 0.
            prop_assume!(prefix != 0 && other != 0);
            prop_assert_eq!(client_group(ip(prefix, a)), client_group(ip(prefix, b)));
            prop_assert_eq!(client_group(client_group(ip(prefix, a))), client_group(ip(prefix, a)));
            prop_assume!(other != prefix);
            prop_assert_ne!(client_group(ip(prefix, a)), client_group(ip(other, b)));
        }
    }
}
