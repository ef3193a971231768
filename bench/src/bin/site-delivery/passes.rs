//! The passes a run makes, each the same load under other delivery settings: `shaped` (each
//! site its own limits, one at 50 a second: admissions are refused), `open` (`mx` mode with
//! limits no delivery reaches: every admission succeeds) and `relay` (one smart host, no
//! admission at all); and the shaping file each `mx` pass gives the server.

use std::fmt::Write as _;

use crate::providers::{SITES, SiteNames};

/// A site's limits as the shaping file sets them.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `connection_limit`.
    pub connections: usize,
    /// `max_deliveries_per_connection`.
    pub per_connection: usize,
    /// `max_message_rate`, e.g. `"50/s"`.
    pub rate: &'static str,
}

/// The largest rate the shaping file takes: a site that is never refused a token.
const UNLIMITED_RATE: &str = "1000000/s";

/// Above the delivery worker's 32 concurrent attempts: never refused a connection.
const NEVER_REFUSED: Limits = Limits { connections: 64, per_connection: 1_000, rate: UNLIMITED_RATE };

/// Each site its own limits: a slow one (50 a second, 2 connections, 10 messages on each),
/// two in between, and one limited only by its connections.
const SHAPED: [Limits; SITES] = [
    Limits { connections: 2, per_connection: 10, rate: "50/s" },
    Limits { connections: 4, per_connection: 50, rate: "200/s" },
    Limits { connections: 8, per_connection: 100, rate: "500/s" },
    Limits { connections: 16, per_connection: 1_000, rate: UNLIMITED_RATE },
];

/// One pass of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// `mx` mode, each site its own limits ([`SHAPED`]).
    Shaped,
    /// `mx` mode, limits that never refuse.
    Open,
    /// `relay` mode to the first provider: no sites, no admission.
    Relay,
}

impl Pass {
    /// Every pass, in the order a run makes them.
    pub const ALL: [Self; 3] = [Self::Shaped, Self::Open, Self::Relay];

    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Shaped => "shaped",
            Self::Open => "open",
            Self::Relay => "relay",
        }
    }

    /// The pass named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Each site's limits; `None` in relay mode, where there are no sites.
    pub fn limits(self) -> Option<[Limits; SITES]> {
        match self {
            Self::Shaped => Some(SHAPED),
            Self::Open => Some([NEVER_REFUSED; SITES]),
            Self::Relay => None,
        }
    }

    /// The shaping file (contract §12): one table per site, keyed by its MX host suffix.
    pub fn shaping_file(self) -> Option<String> {
        let limits = self.limits()?;
        let mut file = String::new();
        for (n, limits) in limits.iter().enumerate() {
            let _ = write!(
                file,
                "[\"{}\"]\nconnection_limit = {}\nmax_deliveries_per_connection = {}\nmax_message_rate = \"{}\"\n\n",
                SiteNames::of(n).suffix,
                limits.connections,
                limits.per_connection,
                limits.rate
            );
        }
        Some(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shaped_file_names_every_site_with_its_limits() {
        let file = Pass::Shaped.shaping_file().unwrap();
        assert!(file.starts_with("[\".p1.test\"]\nconnection_limit = 2\nmax_deliveries_per_connection = 10\n"));
        assert!(file.contains("[\".p4.test\"]\nconnection_limit = 16\n"));
        assert_eq!(file.matches("max_message_rate").count(), SITES);
        assert!(Pass::Relay.shaping_file().is_none());
        assert_eq!(Pass::parse("open"), Some(Pass::Open));
    }

    #[test]
    fn the_server_reads_each_file_with_these_limits() {
        for pass in [Pass::Shaped, Pass::Open] {
            let table = tidings_core::shaping::ShapingTable::from_toml(&pass.shaping_file().unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", pass.name()));
            let suffixes: std::collections::BTreeMap<&str, _> = table.suffixes().collect();
            for (n, limits) in pass.limits().unwrap().iter().enumerate() {
                let site = suffixes[SiteNames::of(n).suffix.as_str()];
                assert_eq!(site.connection_limit as usize, limits.connections, "{}", pass.name());
                assert_eq!(site.max_deliveries_per_connection as usize, limits.per_connection);
                assert_eq!(site.max_message_rate.to_string(), limits.rate);
            }
        }
    }
}
