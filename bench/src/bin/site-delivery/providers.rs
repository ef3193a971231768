//! The fake providers: one [`SmtpSink`] per site on 127.0.0.2, .3, .4 and .5, all on one port
//! (the server dials every MX host on `TIDINGS_MX_PORT`), each named by an MX record on the
//! loopback DNS server; what each saw (messages, connections open at once, messages on one
//! connection), and when each had received its share of a run.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tidings_bench::Result;
use tidings_dns::testing::{TestDnsServer, TestRecord};
use tidings_transport_smtp::testing::{SinkConfig, SmtpSink};

/// How many providers (sites) a run has: one per loopback address 127.0.0.2 to .5.
pub const SITES: usize = 4;

/// The names of the `n`-th site (0-based): its recipient domain, MX host and shaping suffix.
#[derive(Debug, Clone)]
pub struct SiteNames {
    /// Recipients are `user<i>@` this (`p1.example`).
    pub domain: String,
    /// Its one MX host (`mx.p1.test`).
    pub mx_host: String,
    /// The shaping table's key for it (`.p1.test`): the suffix the MX host ends with.
    pub suffix: String,
    /// The loopback address its sink listens on.
    pub ip: Ipv4Addr,
}

impl SiteNames {
    /// The names of site `n` (0-based).
    pub fn of(n: usize) -> Self {
        let label = format!("p{}", n + 1);
        let last = u8::try_from(n + 2).expect("a handful of sites");
        Self {
            domain: format!("{label}.example"),
            mx_host: format!("mx.{label}.test"),
            suffix: format!(".{label}.test"),
            ip: Ipv4Addr::new(127, 0, 0, last),
        }
    }
}

/// What one provider saw over a run.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// Messages accepted.
    pub messages: usize,
    /// Connections accepted.
    pub connections: usize,
    /// Most connections open at once (one that sent QUIT counts as closed).
    pub max_open: usize,
    /// Most messages carried by one connection.
    pub max_per_connection: usize,
}

/// The running providers, one per site, in site order.
pub struct Providers {
    sinks: Vec<SmtpSink>,
    port: u16,
}

impl Providers {
    /// Starts one sink per site, all on one free port.
    pub async fn start() -> Result<Self> {
        // The first sink picks a free port; the others bind it on their own addresses,
        // which may fail if something else holds it there: then try another port.
        for _ in 0..10 {
            let first = sink(SiteNames::of(0).ip, 0).await?;
            let port = first.port();
            let mut sinks = vec![first];
            for n in 1..SITES {
                match sink(SiteNames::of(n).ip, port).await {
                    Ok(next) => sinks.push(next),
                    Err(_) => break,
                }
            }
            if sinks.len() == SITES {
                return Ok(Self { sinks, port });
            }
        }
        Err("no port free on 127.0.0.2-5 after 10 tries".into())
    }

    /// The port every provider listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Publishes each site's domain with its one MX host, and the host's address.
    pub async fn publish(&self, dns: &TestDnsServer) {
        for n in 0..SITES {
            let names = SiteNames::of(n);
            dns.set_mx(&names.domain, &[(10, &names.mx_host)]).await;
            dns.add(TestRecord::a(&names.mx_host, names.ip)).await;
        }
    }

    /// Messages each provider has accepted so far.
    pub fn counts(&self) -> Vec<usize> {
        self.sinks.iter().map(SmtpSink::message_count).collect()
    }

    /// Waits until each provider has accepted at least its `targets` entry; when each got
    /// there. Gives up, with what was reached, when no count grew for `stall`.
    pub async fn wait_for(&self, targets: &[usize], stall: Duration) -> Result<Vec<Instant>, Vec<usize>> {
        let mut reached: Vec<Option<Instant>> = vec![None; self.sinks.len()];
        let mut last = self.counts();
        let mut last_growth = Instant::now();
        loop {
            let now = Instant::now();
            let counts = self.counts();
            for ((at, &count), &target) in reached.iter_mut().zip(&counts).zip(targets) {
                if at.is_none() && count >= target {
                    *at = Some(now);
                }
            }
            if reached.iter().all(Option::is_some) {
                return Ok(reached.into_iter().flatten().collect());
            }
            if counts != last {
                last = counts;
                last_growth = now;
            } else if last_growth.elapsed() > stall {
                return Err(counts);
            }
            // Fine enough for runs of several seconds; the sinks count in this process.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// What each provider saw.
    pub fn seen(&self) -> Vec<Seen> {
        self.sinks
            .iter()
            .map(|sink| {
                let mut per_connection = BTreeMap::<u64, usize>::new();
                for message in sink.messages() {
                    *per_connection.entry(message.connection).or_default() += 1;
                }
                Seen {
                    messages: sink.message_count(),
                    connections: sink.connection_count(),
                    max_open: sink.max_concurrent_connections(),
                    max_per_connection: per_connection.values().copied().max().unwrap_or(0),
                }
            })
            .collect()
    }
}

/// A plain sink on `ip:port` that keeps what it receives (for the messages per connection;
/// a run's few thousand messages of ~2.7 KB fit in memory).
async fn sink(ip: Ipv4Addr, port: u16) -> std::io::Result<SmtpSink> {
    let bind = SocketAddr::new(IpAddr::V4(ip), port);
    SmtpSink::start_with(SinkConfig { bind, ..SinkConfig::default() }).await
}
