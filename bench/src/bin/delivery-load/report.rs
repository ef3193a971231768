//! The Markdown table that compares both sides.

use std::fmt::Write as _;

use crate::Options;

/// What one side measured.
#[derive(Debug, Default)]
pub struct Side {
    /// Messages / (last accept − first accept attempt).
    pub accepted_per_sec: f64,
    /// Messages / (last message counted at the sink − first accept attempt).
    pub delivered_per_sec: f64,
    /// Seconds from queued to delivered, sorted.
    pub latencies: Vec<f64>,
    /// Memory in KiB: tidings-server's peak resident set (VmHWM; summed over the nodes
    /// when there are several); for Postfix's many
    /// processes, which share their libraries, the sum of their proportional set sizes at the
    /// end (summing their VmHWM would count the shared pages once per process).
    pub memory_kib: u64,
    /// CPU seconds used during the run by: the relay (server or Postfix), the load
    /// generator (wrk or smtp-source), the sink.
    pub cpu: [f64; 3],
    /// On PostgreSQL, CPU seconds used during the run by the backends of the run's database
    /// and by all of PostgreSQL's processes (other users' sessions on the server too).
    pub database_cpu: Option<(f64, f64)>,
    /// Messages the sink counted beyond N a second after the last (duplicates).
    pub extra_at_sink: u64,
    /// A line about the accepting side (wrk's latencies; smtp-source's sessions).
    pub note: String,
}

/// The `q`-quantile (0..=1) of sorted `values`, nearest rank.
fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let last = values.len().checked_sub(1)?;
    values.get(((last as f64) * q).round() as usize).copied()
}

fn grouped(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The report of a run: load averages, the table, and a note per side.
pub fn report(options: &Options, tidings: &Side, postfix: Option<&Side>, loads: (&str, &str)) -> String {
    let empty = Side::default();
    let p = postfix.unwrap_or(&empty);
    let ratio = |t: f64, p: f64| if p > 0.0 { format!("{:.1}×", t / p) } else { "–".to_owned() };
    let secs = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.3} s"));
    // Per copy delivered: with one recipient per send, per message.
    let per_k = |cpu: f64| format!("{:.2}", cpu * 1000.0 / options.copies() as f64);
    let unit = if options.recipients > 1 { "recipients" } else { "messages" };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} messages of {} recipient(s), Tidings on {}; load average before {} / after {}\n",
        grouped(options.messages as f64),
        options.recipients,
        crate::store_label(options),
        loads.0,
        loads.1
    );
    let _ = writeln!(out, "| | Tidings | Postfix | Tidings / Postfix |\n|---|---:|---:|---:|");
    let mut row = |name: &str, t: String, p: String, r: String| {
        let _ = writeln!(out, "| {name} | {t} | {p} | {r} |");
    };
    row(
        "accepted/s",
        grouped(tidings.accepted_per_sec),
        grouped(p.accepted_per_sec),
        ratio(tidings.accepted_per_sec, p.accepted_per_sec),
    );
    row(
        &format!("{unit} delivered/s (first accept → last at the sink)"),
        grouped(tidings.delivered_per_sec),
        grouped(p.delivered_per_sec),
        ratio(tidings.delivered_per_sec, p.delivered_per_sec),
    );
    for (name, q) in
        [("queued → delivered p50", 0.5), ("queued → delivered p99", 0.99), ("queued → delivered max", 1.0)]
    {
        row(name, secs(quantile(&tidings.latencies, q)), secs(quantile(&p.latencies, q)), String::new());
    }
    row(
        "memory (MiB): Tidings peak RSS, Postfix Σ PSS",
        format!("{:.0}", tidings.memory_kib as f64 / 1024.0),
        format!("{:.0}", p.memory_kib as f64 / 1024.0),
        ratio(tidings.memory_kib as f64, p.memory_kib as f64),
    );
    row(
        &format!("CPU s per 1,000 {unit}: relay"),
        per_k(tidings.cpu[0]),
        per_k(p.cpu[0]),
        ratio(tidings.cpu[0], p.cpu[0]),
    );
    if let Some((backends, all)) = tidings.database_cpu {
        row(
            &format!("CPU s per 1,000 {unit}: PostgreSQL, this database's backends"),
            per_k(backends),
            "–".into(),
            String::new(),
        );
        row(&format!("CPU s per 1,000 {unit}: PostgreSQL, all processes"), per_k(all), "–".into(), String::new());
    }
    row(&format!("CPU s per 1,000 {unit}: load generator"), per_k(tidings.cpu[1]), per_k(p.cpu[1]), String::new());
    row(&format!("CPU s per 1,000 {unit}: smtp-sink"), per_k(tidings.cpu[2]), per_k(p.cpu[2]), String::new());
    row("extra messages at the sink", tidings.extra_at_sink.to_string(), p.extra_at_sink.to_string(), String::new());
    let _ = writeln!(
        out,
        "\n- Tidings: {}\n- Postfix: {}",
        tidings.note,
        if postfix.is_some() { &p.note } else { "not run" }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_grouping() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&values, 0.5), Some(51.0));
        assert_eq!(quantile(&values, 0.99), Some(99.0));
        assert_eq!(quantile(&values, 1.0), Some(100.0));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(grouped(1_234_567.4), "1,234,567");
        assert_eq!(grouped(999.0), "999");
    }
}
