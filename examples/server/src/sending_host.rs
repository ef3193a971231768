//! The sending host's name (`TIDINGS_EHLO_NAME`; contract §12, "The sending host"): what it
//! may be ([`EhloName`]), the line that says at start which name the transports send with
//! EHLO, and, with direct MX delivery, a check that the name resolves to an address of this
//! host. Receivers compare the EHLO name with the reverse DNS of the address a connection
//! comes from, so a name that points elsewhere (or nowhere, like a bare machine name `vm`)
//! costs every message some reputation; the check tells the operator at start rather than
//! leaving them to find out from spam scores.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::sync::Arc;

use tidings_core::domain_name::DomainName;
use tidings_core::ports::DnsError;
use tidings_dns::HickoryDns;

use crate::config::{Config, Delivery};

/// A name fit to send with EHLO (RFC 5321 §4.1.1.1, §4.1.3): a fully qualified host name, or
/// an address literal for a host without one (`[192.0.2.1]`, `[IPv6:2001:db8::1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EhloName {
    /// A host name, lower-cased, without a trailing dot.
    Host(DomainName),
    /// An address literal.
    Address(IpAddr),
}

impl EhloName {
    /// Parses `mail.example.com`, `[192.0.2.1]` or `[IPv6:2001:db8::1]`; the error says what
    /// is wrong and shows both forms.
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            let ip = match inner.get(..5) {
                Some(tag) if tag.eq_ignore_ascii_case("IPv6:") => inner[5..].parse::<Ipv6Addr>().ok().map(IpAddr::V6),
                _ => inner.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
            };
            return ip.map(Self::Address).ok_or_else(|| {
                format!("`{text}` is not an address literal such as [192.0.2.1] or [IPv6:2001:db8::1]")
            });
        }
        DomainName::parse(text).map(Self::Host).map_err(|e| {
            format!(
                "`{text}` is not a fully qualified host name such as mail.example.com (it {e}), nor an address \
                 literal such as [192.0.2.1]"
            )
        })
    }
}

impl fmt::Display for EhloName {
    /// As sent with EHLO.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host(name) => f.write_str(name.as_str()),
            Self::Address(IpAddr::V4(ip)) => write!(f, "[{ip}]"),
            Self::Address(IpAddr::V6(ip)) => write!(f, "[IPv6:{ip}]"),
        }
    }
}

/// The name the transports send with EHLO, and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendingHost {
    /// `TIDINGS_EHLO_NAME`; `None`: the machine's host name.
    configured: Option<EhloName>,
    /// The name as sent.
    name: String,
}

/// Why the name matters, in every warning.
const WHY: &str = "receivers compare the EHLO name with the reverse DNS of the address mail comes from, and a \
                   mismatch counts against every message";
/// What to do, in every warning.
const FIX: &str = "set TIDINGS_EHLO_NAME to this host's public name, whose A or AAAA record is the address mail \
                   leaves from (behind NAT this host cannot see that address: check it yourself)";

impl SendingHost {
    /// The name of `TIDINGS_EHLO_NAME`, or the machine's host name when it is unset.
    pub fn new(configured: Option<EhloName>) -> Self {
        let name = configured.as_ref().map_or_else(tidings_transport_smtp::default_ehlo_name, ToString::to_string);
        Self { configured, name }
    }

    /// The name as sent with EHLO.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name and where it comes from, for log lines.
    pub fn described(&self) -> String {
        match self.configured {
            Some(_) => format!("{} (TIDINGS_EHLO_NAME)", self.name),
            None => format!("{}, the machine's host name (TIDINGS_EHLO_NAME is not set)", self.name),
        }
    }

    /// The address of this host the name stands for, or the warning to log: the name does not
    /// resolve (through `dns`, the server's resolver) to an address of this host, or the
    /// lookup failed.
    pub async fn check(&self, dns: &HickoryDns) -> Result<IpAddr, String> {
        let found = match &self.configured {
            Some(EhloName::Address(ip)) => Ok(vec![*ip]),
            Some(EhloName::Host(host)) => dns.host_addrs(host.as_str()).await,
            None => dns.host_addrs(&self.name).await,
        };
        self.verdict(found, is_local)
    }

    /// [`SendingHost::check`] on what the lookup gave, `is_local` telling this host's
    /// addresses.
    fn verdict(
        &self,
        found: Result<Vec<IpAddr>, DnsError>,
        is_local: impl Fn(IpAddr) -> bool,
    ) -> Result<IpAddr, String> {
        let name = self.described();
        let addresses = match found {
            Ok(addresses) => addresses,
            Err(DnsError::NxDomain(_)) => {
                return Err(format!("the EHLO name {name} does not exist in DNS: {WHY}; {FIX}"));
            }
            Err(e) => return Err(format!("the EHLO name {name} could not be checked ({e}): {WHY}; {FIX}")),
        };
        if let Some(local) = addresses.iter().copied().find(|ip| is_local(*ip)) {
            return Ok(local);
        }
        Err(match (&self.configured, addresses.as_slice()) {
            (_, []) => format!("the EHLO name {name} has no A or AAAA record: {WHY}; {FIX}"),
            (Some(EhloName::Address(_)), _) => {
                format!("the EHLO name {name} is not an address of this host: {WHY}; {FIX}")
            }
            (_, addresses) => {
                let list = addresses.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
                format!("the EHLO name {name} resolves to {list}, not to an address of this host: {WHY}; {FIX}")
            }
        })
    }
}

/// Whether `ip` is an address of this host. Binding a socket to an address succeeds only for
/// one of the host's own (EADDRNOTAVAIL otherwise), so the kernel answers the question itself
/// with no crate to list the interfaces. UDP on port 0 takes no port anyone needs, sends
/// nothing, and the socket is closed at once. The unspecified address binds anywhere and
/// multicast addresses bind on any host, so neither counts. (A host with
/// `net.ipv4.ip_nonlocal_bind` on would call every IPv4 address its own: the check then never
/// warns, which errs on the quiet side.)
fn is_local(ip: IpAddr) -> bool {
    let special = ip.is_unspecified() || ip.is_multicast() || matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    !special && UdpSocket::bind((ip, 0)).is_ok()
}

/// Says at start which name relay and mx delivery send with EHLO (the other modes send none),
/// and with mx delivery checks it ([`SendingHost::check`]): a warning when the name does not
/// resolve to an address of this host, or cannot be checked. Needs a Tokio runtime.
pub fn announce(config: &Config, dns: Arc<HickoryDns>) {
    if !matches!(config.delivery.mode, Delivery::Relay | Delivery::Mx) {
        return;
    }
    let host = SendingHost::new(config.delivery.ehlo_name.clone());
    tracing::info!("EHLO name: {}", host.described());
    if config.delivery.mode == Delivery::Mx {
        // In the background: a lookup may take the resolver's whole deadline, which must not
        // hold up the start (the warning is advice; mail flows either way).
        tokio::spawn(async move {
            match host.check(&dns).await {
                Ok(ip) => tracing::info!("the EHLO name {} resolves to {ip}, an address of this host", host.name()),
                Err(warning) => tracing::warn!("{warning}"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> SendingHost {
        SendingHost::new(Some(EhloName::parse(text).unwrap()))
    }

    #[test]
    fn host_names_and_address_literals_parse_and_read_back_as_sent() {
        for (text, sent) in [
            ("mail.example.com", "mail.example.com"),
            ("Mail.Example.COM.", "mail.example.com"),
            ("[192.0.2.1]", "[192.0.2.1]"),
            ("[ipv6:2001:DB8::1]", "[IPv6:2001:db8::1]"),
        ] {
            assert_eq!(EhloName::parse(text).unwrap().to_string(), sent, "{text}");
        }
        for bad in ["", "vm", "192.0.2.1", "two words.example", "mail_host.example", "[192.0.2]", "[2001:db8::1]", "[]"]
        {
            let e = EhloName::parse(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")) && e.contains("[192.0.2.1]"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_name_is_fine_when_one_of_its_addresses_is_this_hosts() {
        let ours: IpAddr = "192.0.2.7".parse().unwrap();
        let found = Ok(vec!["198.51.100.1".parse().unwrap(), ours]);
        assert_eq!(host("mail.example.com").verdict(found, |ip| ip == ours), Ok(ours));
    }

    #[test]
    fn a_name_elsewhere_nowhere_or_unchecked_is_warned_about_with_what_to_do() {
        let elsewhere = host("mail.example.com").verdict(Ok(vec!["192.0.2.10".parse().unwrap()]), |_| false);
        let e = elsewhere.unwrap_err();
        assert!(
            e.starts_with("the EHLO name mail.example.com (TIDINGS_EHLO_NAME) resolves to 192.0.2.10, not to"),
            "{e}"
        );
        assert!(e.contains("reverse DNS") && e.contains("set TIDINGS_EHLO_NAME"), "{e}");

        let e = host("mail.example.com").verdict(Ok(vec![]), |_| true).unwrap_err();
        assert!(e.contains("has no A or AAAA record"), "{e}");

        let e = host("mail.example.com").verdict(Err(DnsError::NxDomain("mail.example.com".to_owned())), |_| true);
        assert!(e.unwrap_err().contains("mail.example.com (TIDINGS_EHLO_NAME) does not exist in DNS"));

        let failed = Err(DnsError::Timeout("mail.example.com".to_owned()));
        let e = host("mail.example.com").verdict(failed, |_| true).unwrap_err();
        assert!(e.contains("could not be checked (DNS lookup of mail.example.com timed out)"), "{e}");

        let e = host("[192.0.2.1]").verdict(Ok(vec!["192.0.2.1".parse().unwrap()]), |_| false).unwrap_err();
        assert!(e.contains("[192.0.2.1] (TIDINGS_EHLO_NAME) is not an address of this host"), "{e}");

        let unset = SendingHost::new(None);
        let e = unset.verdict(Ok(vec![]), |_| false).unwrap_err();
        assert!(e.contains("the machine's host name (TIDINGS_EHLO_NAME is not set)"), "{e}");
        assert_eq!(unset.name(), tidings_transport_smtp::default_ehlo_name());
    }

    #[test]
    fn only_this_hosts_own_addresses_bind() {
        assert!(is_local(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        // TEST-NET-3 (RFC 5737) is never a host's address.
        assert!(!is_local("203.0.113.9".parse().unwrap()));
        assert!(!is_local(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), "binds anywhere, names no host");
        assert!(!is_local("224.0.0.1".parse().unwrap()));
    }
}
