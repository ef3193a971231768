//! The SSRF guard of direct MX delivery: a recipient domain is chosen by whoever sends, and
//! its MX records by whoever owns that domain, so without a guard a tenant could make the
//! server connect to `127.0.0.1:25` or any internal host and read the reply in its timeline.
//! The same address classification as the webhook sender's guard
//! ([`tidings_core::net_policy::is_public_ip`]), applied to every address an MX host
//! resolves to and again to the connected socket's peer, so DNS rebinding cannot pass it.

use std::net::IpAddr;

use tidings_core::net_policy::is_public_ip;

/// An address the guard refused. The text names the setting that lifts the guard, so an
/// operator reading a bounce knows the way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("address {0} is not public (set TIDINGS_MX_ALLOW_PRIVATE to allow it)")]
pub(crate) struct NotPublic(pub(crate) IpAddr);

/// Whether direct delivery may connect to `ip`: every address with `allow_private`, else only
/// globally routable unicast ones (loopback, private, link-local, CGNAT, documentation,
/// reserved and their IPv4-mapped, NAT64 and 6to4 forms are refused).
pub(crate) fn check(ip: IpAddr, allow_private: bool) -> Result<(), NotPublic> {
    if allow_private || is_public_ip(ip) { Ok(()) } else { Err(NotPublic(ip)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_public_addresses_pass_only_when_allowed() {
        for text in ["127.0.0.1", "10.0.0.5", "169.254.169.254", "::1", "fd00::1", "::ffff:192.168.1.1"] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(check(ip, false), Err(NotPublic(ip)), "{text}");
            assert_eq!(check(ip, true), Ok(()), "{text}");
        }
        let public: IpAddr = "192.0.43.10".parse().unwrap();
        assert_eq!(check(public, false), Ok(()));
        assert!(NotPublic(public).to_string().contains("TIDINGS_MX_ALLOW_PRIVATE"));
    }
}
