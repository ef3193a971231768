//! The Markdown a run prints: per pass, a table of the sites (throughput, and what each
//! provider saw against its limits); then one line per pass with the server's CPU.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::passes::Pass;
use crate::providers::{Seen, SiteNames};

/// What one site's provider saw in a pass.
#[derive(Debug)]
pub struct SiteOutcome {
    /// Messages it was to receive.
    pub target: usize,
    /// What it counted.
    pub seen: Seen,
    /// Seconds from the first send until it had `target`.
    pub done_after: f64,
    /// The most messages the server said were waiting for the site (`mx` passes).
    pub max_waiting: Option<u64>,
}

/// What one pass measured.
#[derive(Debug)]
pub struct Outcome {
    /// Which pass.
    pub pass: Pass,
    /// Messages sent.
    pub messages: usize,
    /// Seconds from the first send to the last 201.
    pub accepted_after: f64,
    /// Seconds from the first send until every provider had its share.
    pub delivered_after: f64,
    /// Per site, in site order.
    pub sites: Vec<SiteOutcome>,
    /// The server's CPU seconds over the same span.
    pub server_cpu: f64,
    /// The server's CPU seconds per second when idle, just before.
    pub idle_cpu_per_sec: f64,
    /// On PostgreSQL, CPU seconds of the run's database's backends over the span.
    pub database_cpu: Option<f64>,
    /// The server's peak resident set, KiB.
    pub memory_kib: u64,
    /// Messages per status in the API afterwards.
    pub statuses: BTreeMap<String, usize>,
}

impl Outcome {
    /// Server CPU milliseconds per message (= seconds per 1,000).
    fn cpu_ms(&self) -> f64 {
        self.server_cpu * 1000.0 / self.messages as f64
    }

    /// The same, less what the server would have used idle over the span.
    fn cpu_ms_above_idle(&self) -> f64 {
        (self.server_cpu - self.idle_cpu_per_sec * self.delivered_after).max(0.0) * 1000.0 / self.messages as f64
    }
}

/// `value` with a note when it is over `limit`.
fn against(value: usize, limit: Option<usize>) -> String {
    match limit {
        Some(limit) if value > limit => format!("{value} **over {limit}**"),
        Some(limit) => format!("{value} (≤ {limit})"),
        None => value.to_string(),
    }
}

/// A pass's table of sites and its figures.
pub fn pass(outcome: &Outcome) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "**{}**: {} messages accepted in {:.1} s, all delivered in {:.1} s ({:.0}/s)\n",
        outcome.pass.name(),
        outcome.messages,
        outcome.accepted_after,
        outcome.delivered_after,
        outcome.messages as f64 / outcome.delivered_after
    );
    let _ = writeln!(
        out,
        "| site | limits: connections / per connection / rate | messages | delivered/s | done after | \
         most connections open | most messages on one connection | connections | most waiting |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    let limits = outcome.pass.limits();
    for (n, site) in outcome.sites.iter().enumerate().filter(|(_, s)| s.target > 0) {
        let limit = limits.map(|l| l[n]);
        let name = match limits {
            Some(_) => SiteNames::of(n).suffix,
            None => "relay (every site)".to_owned(),
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {:.0} | {:.1} s | {} | {} | {} | {} |",
            limit.map_or("–".to_owned(), |l| format!("{} / {} / {}", l.connections, l.per_connection, l.rate)),
            site.seen.messages,
            site.seen.messages as f64 / site.done_after,
            site.done_after,
            against(site.seen.max_open, limit.map(|l| l.connections)),
            against(site.seen.max_per_connection, limit.map(|l| l.per_connection)),
            site.seen.connections,
            site.max_waiting.map_or("–".to_owned(), |w| w.to_string()),
        );
    }
    let statuses: Vec<String> = outcome.statuses.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let _ = writeln!(
        out,
        "\nserver CPU {:.2} s: {:.3} ms per message ({:.3} above its idle {:.3} s/s); {}peak RSS {} MiB; \
         statuses: {}",
        outcome.server_cpu,
        outcome.cpu_ms(),
        outcome.cpu_ms_above_idle(),
        outcome.idle_cpu_per_sec,
        outcome.database_cpu.map_or(String::new(), |c| format!(
            "database backends {:.2} s ({:.3} ms per message); ",
            c,
            c * 1000.0 / outcome.messages as f64
        )),
        outcome.memory_kib / 1024,
        statuses.join(", ")
    );
    out
}

/// One row per pass: throughput and the server's CPU per message.
pub fn summary(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| pass | delivered/s (all) | server CPU ms per message | above idle | database backends ms per message |\n\
         |---|---:|---:|---:|---:|\n",
    );
    for outcome in outcomes {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.3} | {:.3} | {} |",
            outcome.pass.name(),
            outcome.messages as f64 / outcome.delivered_after,
            outcome.cpu_ms(),
            outcome.cpu_ms_above_idle(),
            outcome.database_cpu.map_or("–".to_owned(), |c| format!("{:.3}", c * 1000.0 / outcome.messages as f64)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_over_its_limit_is_marked() {
        assert_eq!(against(3, Some(2)), "3 **over 2**");
        assert_eq!(against(2, Some(2)), "2 (≤ 2)");
        assert_eq!(against(7, None), "7");
    }
}
