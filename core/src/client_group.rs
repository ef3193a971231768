//! The unit per-client limits count in: the failed-authentication throttle, the HTTPS
//! listener's connections per address, and the SMTP listeners' sessions and message data per
//! address all key on [`client_group`] rather than on the raw address.
//!
//! An IPv4 address is scarce, so it is a client of its own. An IPv6 host is usually given a
//! whole /64 (RFC 6177; SLAAC and privacy addresses pick any of its 2^64 interface ids), so a
//! limit per IPv6 address would let one host take a fresh allowance per request; the /64 is
//! the smallest unit a host cannot step out of. An IPv4-mapped IPv6 address (a dual-stack
//! socket's view of an IPv4 client) is that IPv4 client.

use std::net::{IpAddr, Ipv6Addr};

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
