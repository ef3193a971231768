//! [`TestDnsServer`]: a real authoritative DNS server on loopback (hickory-server, UDP and
//! TCP on one port) whose records tests publish and replace while it runs. For this crate's
//! tests and the server's end-to-end tests (`TIDINGS_DNS_SERVER=<addr>`).
//!
//! The server is authoritative for the root zone, so any name can be published (`acme.test`,
//! `example.com`, ...) and any name not published is NXDOMAIN; a name with some records but
//! none of the type asked for is NODATA. Every record has TTL 0 and the negative TTL is 0,
//! so no resolver in between keeps an old answer.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_server::Server;
use hickory_server::net::runtime::TokioRuntimeProvider;
use hickory_server::proto::rr::rdata::{A, AAAA, MX, SOA, TXT};
use hickory_server::proto::rr::{LowerName, Name, RData, Record, RecordSet, RecordType, RrKey};
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{AxfrPolicy, Catalog, ZoneHandler, ZoneType};
use tokio::net::{TcpListener, UdpSocket};

/// The longest character-string a TXT record can hold (RFC 1035 §3.3).
const MAX_STRING_LEN: usize = 255;

/// Zone serial; never changes, because nothing transfers the zone.
const SERIAL: u32 = 1;

/// A record to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestRecord {
    /// A TXT record made of these character-strings, each at most 255 bytes.
    Txt {
        /// Owner name, with or without the trailing dot.
        name: String,
        /// The record's character-strings, as they go on the wire.
        strings: Vec<String>,
    },
    /// An IPv4 address.
    A {
        /// Owner name.
        name: String,
        /// The address.
        addr: Ipv4Addr,
    },
    /// An IPv6 address.
    Aaaa {
        /// Owner name.
        name: String,
        /// The address.
        addr: Ipv6Addr,
    },
    /// A mail exchanger.
    Mx {
        /// Owner name (the mail domain).
        name: String,
        /// Lower is preferred.
        preference: u16,
        /// The exchange host; `"."` for a null MX (RFC 7505).
        exchange: String,
    },
}

impl TestRecord {
    /// A TXT record holding `value`, split into 255-byte strings as DNS providers do with a
    /// long DKIM key (at byte boundaries, so keep `value` ASCII).
    pub fn txt(name: &str, value: &str) -> Self {
        Self::Txt { name: name.to_owned(), strings: split_txt(value) }
    }

    /// A TXT record made of exactly these character-strings.
    pub fn txt_strings(name: &str, strings: &[&str]) -> Self {
        Self::Txt { name: name.to_owned(), strings: strings.iter().map(|s| (*s).to_owned()).collect() }
    }

    /// An A record.
    pub fn a(name: &str, addr: Ipv4Addr) -> Self {
        Self::A { name: name.to_owned(), addr }
    }

    /// An AAAA record.
    pub fn aaaa(name: &str, addr: Ipv6Addr) -> Self {
        Self::Aaaa { name: name.to_owned(), addr }
    }

    /// An MX record.
    pub fn mx(name: &str, preference: u16, exchange: &str) -> Self {
        Self::Mx { name: name.to_owned(), preference, exchange: exchange.to_owned() }
    }

    /// The hickory record; a name that does not parse is a bug in the test, hence the panic.
    fn to_record(&self) -> Record {
        let (name, data) = match self {
            Self::Txt { name, strings } => {
                assert!(strings.iter().all(|s| s.len() <= MAX_STRING_LEN), "a TXT string is longer than 255 bytes");
                (name, RData::TXT(TXT::new(strings.clone())))
            }
            Self::A { name, addr } => (name, RData::A(A(*addr))),
            Self::Aaaa { name, addr } => (name, RData::AAAA(AAAA(*addr))),
            Self::Mx { name, preference, exchange } => (name, RData::MX(MX::new(*preference, fqdn(exchange)))),
        };
        Record::from_rdata(fqdn(name), 0, data)
    }
}

/// `value` cut into strings of at most 255 bytes; one empty string for an empty value.
fn split_txt(value: &str) -> Vec<String> {
    if value.is_empty() {
        return vec![String::new()];
    }
    value.as_bytes().chunks(MAX_STRING_LEN).map(|chunk| String::from_utf8_lossy(chunk).into_owned()).collect()
}

/// `name` as an absolute name. Panics on a malformed name: test input.
fn fqdn(name: &str) -> Name {
    let absolute = if name.ends_with('.') { name.to_owned() } else { format!("{name}.") };
    Name::from_ascii(&absolute).unwrap_or_else(|error| panic!("bad DNS name {name:?} in a test record: {error}"))
}

/// A running authoritative DNS server on `127.0.0.1`, UDP and TCP on the same port. Stops
/// when dropped. Must be created and used inside a Tokio runtime.
pub struct TestDnsServer {
    addr: SocketAddr,
    zone: Arc<InMemoryZoneHandler<TokioRuntimeProvider>>,
    // Dropping the server aborts its tasks (they live in its JoinSet).
    _server: Server<Catalog>,
}

impl std::fmt::Debug for TestDnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDnsServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl TestDnsServer {
    /// Starts a server publishing `records` on a free loopback port.
    pub async fn start(records: impl IntoIterator<Item = TestRecord>) -> io::Result<Self> {
        let (udp, tcp) = bind_pair().await?;
        let addr = udp.local_addr()?;

        let mut zone =
            InMemoryZoneHandler::<TokioRuntimeProvider>::empty(Name::root(), ZoneType::Primary, AxfrPolicy::Deny);
        // Negative TTL (SOA minimum) 0: an NXDOMAIN is not to be remembered anywhere.
        let soa = SOA::new(fqdn("ns.tidings.test"), fqdn("hostmaster.tidings.test"), SERIAL, 3600, 600, 86400, 0);
        zone.upsert_mut(Record::from_rdata(Name::root(), 0, RData::SOA(soa)), SERIAL);
        for record in records {
            zone.upsert_mut(record.to_record(), SERIAL);
        }
        let zone = Arc::new(zone);

        let mut catalog = Catalog::new();
        catalog.upsert(LowerName::from(Name::root()), vec![zone.clone() as Arc<dyn ZoneHandler>]);
        let mut server = Server::new(catalog);
        server.register_socket(udp);
        server.register_listener(tcp, Duration::from_secs(5), 32);
        Ok(Self { addr, zone, _server: server })
    }

    /// The address to point a resolver at (`TIDINGS_DNS_SERVER`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces every TXT record at `name` with one record per value, each split into
    /// 255-byte strings; no values removes them. Visible to the next query.
    pub async fn set_txt(&self, name: &str, values: &[&str]) {
        let records: Vec<TestRecord> = values.iter().map(|value| TestRecord::txt(name, value)).collect();
        self.replace(name, RecordType::TXT, records).await;
    }

    /// Replaces every MX record at `name` with these (preference, exchange) pairs.
    pub async fn set_mx(&self, name: &str, exchanges: &[(u16, &str)]) {
        let records = exchanges.iter().map(|(preference, exchange)| TestRecord::mx(name, *preference, exchange));
        self.replace(name, RecordType::MX, records.collect()).await;
    }

    /// Adds `record` to those already at its name and type.
    pub async fn add(&self, record: TestRecord) {
        self.zone.upsert(record.to_record(), SERIAL).await;
    }

    /// Removes every record at `name` (so it becomes NXDOMAIN, unless names below it exist).
    pub async fn remove_name(&self, name: &str) {
        let owner = LowerName::from(fqdn(name));
        self.zone.records_mut().await.retain(|key, _| key.name != owner);
    }

    /// Removes the records of `record_type` at `name` and publishes `records` (all of that
    /// type, at that name) in one step, so no query sees the name half-updated.
    async fn replace(&self, name: &str, record_type: RecordType, records: Vec<TestRecord>) {
        let owner = fqdn(name);
        let key = RrKey::new(LowerName::new(&owner), record_type);
        let mut set = RecordSet::new(owner, record_type, SERIAL);
        for record in &records {
            set.insert(record.to_record(), SERIAL);
        }
        let mut zone = self.zone.records_mut().await;
        if set.is_empty() {
            zone.remove(&key);
        } else {
            zone.insert(key, Arc::new(set));
        }
    }
}

/// A UDP socket and a TCP listener on the same free loopback port. The UDP port is chosen
/// by the OS; the same TCP port is usually free too, and if not, another pair is tried.
async fn bind_pair() -> io::Result<(UdpSocket, TcpListener)> {
    let mut last_error = None;
    for _ in 0..20 {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        match TcpListener::bind(udp.local_addr()?).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no free port pair")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_split_into_255_byte_strings() {
        let value = "a".repeat(600);
        let strings = split_txt(&value);
        assert_eq!(strings.iter().map(String::len).collect::<Vec<_>>(), [255, 255, 90]);
        assert_eq!(strings.concat(), value);
        assert_eq!(split_txt(""), [""]);
    }
}
