//! Which network targets Tidings may call: webhook URL rules and the public-address test
//! that the webhook sender also applies at connect time (docs/api.md#webhooks).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// Why a webhook URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookUrlError {
    /// Not a URL.
    #[error("is not a valid URL")]
    Malformed,
    /// Not https (plain http only with private targets allowed).
    #[error("must use https")]
    NotHttps,
    /// Names a non-public address literally.
    #[error("must not point to a loopback, private, link-local or otherwise non-public address")]
    NonPublicAddress,
    /// Carries credentials, which would end up in logs.
    #[error("must not contain a user name or password")]
    Credentials,
    /// Over 2048 characters.
    #[error("must be at most 2048 characters")]
    TooLong,
}

/// A webhook URL that passed the create-time checks. Host names are checked again at every
/// connection by the sender, because DNS can change.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WebhookUrl(String);

impl WebhookUrl {
    /// Validates `text`. With `allow_private`, http and non-public literal addresses pass.
    pub fn parse(text: &str, allow_private: bool) -> Result<Self, WebhookUrlError> {
        if text.len() > 2048 {
            return Err(WebhookUrlError::TooLong);
        }
        let url = url::Url::parse(text).map_err(|_| WebhookUrlError::Malformed)?;
        match url.scheme() {
            "https" => {}
            "http" if allow_private => {}
            _ => return Err(WebhookUrlError::NotHttps),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(WebhookUrlError::Credentials);
        }
        let host = url.host().ok_or(WebhookUrlError::Malformed)?;
        if !allow_private {
            let literal = match host {
                url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
                url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
                url::Host::Domain(name) => {
                    if name.eq_ignore_ascii_case("localhost") || name.to_ascii_lowercase().ends_with(".localhost") {
                        return Err(WebhookUrlError::NonPublicAddress);
                    }
                    None
                }
            };
            if literal.is_some_and(|ip| !is_public_ip(ip)) {
                return Err(WebhookUrlError::NonPublicAddress);
            }
        }
        Ok(Self(url.to_string()))
    }

    /// The URL text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WebhookUrl({})", self.0)
    }
}

/// Whether `ip` is a globally routable unicast address: not loopback, private, link-local,
/// CGNAT, multicast, unspecified, documentation, benchmarking or reserved, nor an
/// IPv4-mapped, IPv4-compatible, NAT64 or 6to4 form of one of those. IPv6 must moreover be
/// global unicast (2000::/3) outside the special blocks (Teredo and the rest of 2001::/23,
/// documentation).
pub fn is_public_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments 192.0.0/24
        || (a == 198 && (b == 18 || b == 19)) // benchmarking 198.18/15
        || a >= 240) // reserved 240/4
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let seg = ip.segments();
    // IPv4-compatible (deprecated ::a.b.c.d) and NAT64 64:ff9b::/96 embed an IPv4 address.
    if seg[..6] == [0, 0, 0, 0, 0, 0] && !ip.is_loopback() && !ip.is_unspecified() {
        return is_public_v4(Ipv4Addr::new((seg[6] >> 8) as u8, seg[6] as u8, (seg[7] >> 8) as u8, seg[7] as u8));
    }
    if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0] {
        return is_public_v4(Ipv4Addr::new((seg[6] >> 8) as u8, seg[6] as u8, (seg[7] >> 8) as u8, seg[7] as u8));
    }
    // 6to4 2002::/16 embeds the IPv4 address in segments 1 and 2.
    if seg[0] == 0x2002 {
        return is_public_v4(Ipv4Addr::new((seg[1] >> 8) as u8, seg[1] as u8, (seg[2] >> 8) as u8, seg[2] as u8));
    }
    // Everything else must be global unicast (2000::/3, where every public allocation lies)
    // outside its special-purpose blocks. An allow-list, so that loopback, link-local, ULA,
    // multicast, SIIT ::ffff:0:0/96, local-use NAT64 64:ff9b:1::/48 and blocks assigned in
    // the future are refused without naming each.
    let global_unicast = (seg[0] & 0xe000) == 0x2000;
    // 2001::/23 (IETF assignments: Teredo, benchmarking, ORCHID) and documentation
    // 2001:db8::/32 and 3fff::/20.
    let special = match seg[0] {
        0x2001 => seg[1] < 0x0200 || seg[1] == 0x0db8,
        0x3fff => seg[1] < 0x1000,
        _ => false,
    };
    global_unicast && !special
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_public_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2002:7f00:1::",
            "2002:c0a8:101::",
            "64:ff9b::7f00:1",
            "::127.0.0.1",
            "2001:0:a00:1::",
            "2001::1",
            "2001:2::1",
            "2001:10::1",
            "2001:20::1",
            "2001:db8::1",
            "3fff::1",
            "64:ff9b:1::a00:1",
            "::ffff:0:7f00:1",
            "::ffff:0:a00:1",
            "5f00::1",
            "fec0::1",
            "100::1",
        ] {
            assert!(!is_public_ip(ip.parse().unwrap()), "{ip} considered public");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "2002:0808:0808::",
            "64:ff9b::808:808",
            "2001:4860:4860::8888",
        ] {
            assert!(is_public_ip(ip.parse().unwrap()), "{ip} considered private");
        }
    }

    #[test]
    fn webhook_urls_follow_the_documented_rules() {
        assert!(WebhookUrl::parse("https://hooks.example.com/tidings", false).is_ok());
        assert_eq!(WebhookUrl::parse("http://hooks.example.com/", false), Err(WebhookUrlError::NotHttps));
        assert_eq!(WebhookUrl::parse("https://127.0.0.1/", false), Err(WebhookUrlError::NonPublicAddress));
        assert_eq!(WebhookUrl::parse("https://[::ffff:10.0.0.1]/", false), Err(WebhookUrlError::NonPublicAddress));
        assert_eq!(WebhookUrl::parse("https://localhost/", false), Err(WebhookUrlError::NonPublicAddress));
        assert_eq!(WebhookUrl::parse("https://u:p@example.com/", false), Err(WebhookUrlError::Credentials));
        assert_eq!(WebhookUrl::parse("ftp://example.com/", true), Err(WebhookUrlError::NotHttps));
        assert_eq!(WebhookUrl::parse("not a url", false), Err(WebhookUrlError::Malformed));
        assert!(WebhookUrl::parse("http://127.0.0.1:9000/hook", true).is_ok());
    }
}
