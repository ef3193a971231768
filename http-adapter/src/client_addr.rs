//! The client's address, which the failed-auth throttle counts by and the access log shows.
//!
//! It is the TCP peer, unless the peer is one of the operator's [`TrustedProxies`]
//! (`TIDINGS_TRUSTED_PROXIES`): then `X-Forwarded-For` is read from the right, each address a
//! trusted proxy appended skipped, and the first one that is not a trusted proxy is the
//! client. Addresses further left were written by the client itself and prove nothing.
//! Without trusted proxies (the default) the header is ignored, so no client can choose its
//! own throttle bucket by sending one. Only `X-Forwarded-For` is read: it is what load
//! balancers (nginx, HAProxy, AWS ALB, Google's, Cloudflare) append by default.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;

use crate::ApiState;

/// The address a request is attributed to, set by the router on the request's extensions
/// and on its response's (for an access log outside the router). Absent when the router is
/// served without `ConnectInfo<SocketAddr>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

/// The proxies whose `X-Forwarded-For` is believed: addresses and networks (CIDR).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Trusts these networks (a single address is a /32 or /128).
    pub fn new(networks: Vec<IpNet>) -> Self {
        Self(networks)
    }

    /// Parses a comma-separated list of IP addresses and CIDR networks, e.g.
    /// `10.0.0.0/8, 192.0.2.7, fd00::/8`. The error names the entry at fault.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut networks = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let network = IpNet::from_str(entry)
                .or_else(|_| IpAddr::from_str(entry).map(IpNet::from))
                .map_err(|_| format!("`{entry}` is not an IP address or a network such as 10.0.0.0/8 or fd00::/8"))?;
            // 10.1.2.3/8 is almost certainly a typo for a network; trust what was meant.
            networks.push(network.trunc());
        }
        Ok(Self(networks))
    }

    /// Whether no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `ip` (an IPv4-mapped IPv6 address counts as its IPv4 one) is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request that came from `peer` with `headers` (see the module docs).
    /// An entry that is not an address stops the walk: the last trusted hop is then the
    /// client, since nothing left of the garbage can be believed.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.contains(client) {
            return client;
        }
        // Several header lines form one list, in order (RFC 9110 §5.3).
        let entries: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .flat_map(|value| value.to_str().unwrap_or("\u{0}").split(','))
            .collect();
        for entry in entries.into_iter().rev() {
            let Some(hop) = parse_hop(entry.trim()) else { break };
            client = hop;
            if !self.contains(hop) {
                break;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, or one with a port (`192.0.2.1:4711`,
/// `[2001:db8::1]:4711`), which some proxies write.
fn parse_hop(entry: &str) -> Option<IpAddr> {
    let ip = IpAddr::from_str(entry).ok().or_else(|| SocketAddr::from_str(entry).ok().map(|s| s.ip()))?;
    Some(ip.to_canonical())
}

/// Middleware: attributes the request to its client ([`ClientIp`]) for everything inside
/// the router, and tells the access log outside it through the response.
pub(crate) async fn resolve_client(
    axum::extract::State(state): axum::extract::State<ApiState>,
    mut req: Request,
    next: Next,
) -> Response {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip());
    let client = peer.map(|peer| ClientIp(state.config.trusted_proxies.client_ip(peer, req.headers())));
    if let Some(client) = client {
        req.extensions_mut().insert(client);
    }
    let mut response = next.run(req).await;
    if let Some(client) = client {
        response.extensions_mut().insert(client);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    #[test]
    fn without_trusted_proxies_the_header_is_ignored() {
        let none = TrustedProxies::default();
        assert_eq!(none.client_ip(ip("203.0.113.9"), &forwarded(&["198.51.100.1"])), ip("203.0.113.9"));
    }

    #[test]
    fn an_untrusted_peer_cannot_choose_its_address() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert_eq!(proxies.client_ip(ip("203.0.113.9"), &forwarded(&["198.51.100.1"])), ip("203.0.113.9"));
    }

    #[test]
    fn the_right_most_untrusted_address_is_the_client() {
        let proxies = TrustedProxies::parse("10.0.0.0/8, 192.0.2.7").unwrap();
        let peer = ip("10.0.0.5");
        // The client forged the first entry; the load balancer appended the real one.
        assert_eq!(proxies.client_ip(peer, &forwarded(&["6.6.6.6, 198.51.100.1"])), ip("198.51.100.1"));
        // Two trusted hops (a CDN in front of the balancer) are skipped.
        assert_eq!(proxies.client_ip(peer, &forwarded(&["6.6.6.6, 198.51.100.1, 192.0.2.7"])), ip("198.51.100.1"));
        // Several header lines are one list.
        assert_eq!(proxies.client_ip(peer, &forwarded(&["6.6.6.6", "198.51.100.2, 10.9.9.9"])), ip("198.51.100.2"));
        // Ports, brackets and IPv4-mapped addresses.
        assert_eq!(proxies.client_ip(peer, &forwarded(&["198.51.100.3:4711"])), ip("198.51.100.3"));
        assert_eq!(proxies.client_ip(peer, &forwarded(&["[2001:db8::1]:443"])), ip("2001:db8::1"));
        assert_eq!(proxies.client_ip(ip("::ffff:10.0.0.5"), &forwarded(&["::ffff:198.51.100.4"])), ip("198.51.100.4"));
    }

    #[test]
    fn without_a_usable_header_the_last_trusted_hop_is_the_client() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let peer = ip("10.0.0.5");
        assert_eq!(proxies.client_ip(peer, &HeaderMap::new()), peer);
        assert_eq!(proxies.client_ip(peer, &forwarded(&["unknown"])), peer);
        assert_eq!(proxies.client_ip(peer, &forwarded(&["198.51.100.1, garbage, 10.1.1.1"])), ip("10.1.1.1"));
        assert_eq!(proxies.client_ip(peer, &forwarded(&["10.1.1.1, 10.2.2.2"])), ip("10.1.1.1"));
    }

    #[test]
    fn lists_parse_addresses_and_networks_and_name_a_bad_entry() {
        let proxies = TrustedProxies::parse(" 10.1.2.3/8 ,192.0.2.7, fd00::/8 ,, ").unwrap();
        assert!(proxies.contains(ip("10.200.0.1")) && proxies.contains(ip("192.0.2.7")));
        assert!(proxies.contains(ip("fd00::1")) && proxies.contains(ip("::ffff:10.0.0.1")));
        assert!(!proxies.contains(ip("192.0.2.8")) && !proxies.contains(ip("11.0.0.1")));
        let err = TrustedProxies::parse("10.0.0.0/8, lb.internal").unwrap_err();
        assert!(err.contains("`lb.internal`"), "{err}");
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("").unwrap().is_empty());
    }
}
