//! Judging counters against the policy, and reading thresholds as operators write them.

use super::{Breach, RateKind, ReputationPolicy, Thresholds};
use crate::activity::ActivityCounts;
use crate::activity::rates::{Percent, Rate};

/// What the rates of a scope call for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Under every warning threshold, or too little mail to judge.
    Good,
    /// At or over a warning threshold, under every pause threshold.
    Warn(Breach),
    /// At or over a pause threshold.
    Pause(Breach),
}

/// The verdict on `counts` (one scope over the window). Nothing is judged below the minimum
/// volume; a pause threshold wins over a warning; the bounce rate is looked at before the
/// complaint rate when both are over.
pub fn judge(policy: &ReputationPolicy, counts: &ActivityCounts) -> Verdict {
    let volume = counts.delivered.saturating_add(counts.bounced());
    if volume < policy.min_volume.max(1) {
        return Verdict::Good;
    }
    let rates = [
        (RateKind::Bounce, Rate::bounce(counts), policy.bounce),
        (RateKind::Complaint, Rate::complaint(counts), policy.complaint),
    ];
    let over = |pick: fn(&Thresholds) -> Option<Percent>| {
        rates.iter().find_map(|(kind, rate, thresholds)| {
            let threshold = pick(thresholds)?;
            // A rate of nothing (no delivery: no complaint rate) reaches nothing.
            (rate.whole > 0 && rate.reaches(threshold)).then_some(Breach {
                kind: *kind,
                part: rate.part,
                whole: rate.whole,
                threshold,
            })
        })
    };
    if let Some(breach) = over(|t| t.pause) {
        Verdict::Pause(breach)
    } else if let Some(breach) = over(|t| t.warn) {
        Verdict::Warn(breach)
    } else {
        Verdict::Good
    }
}

/// Why a threshold's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a percentage such as `8%` or `0.08%`, or `off`")]
pub struct ThresholdText(pub String);

/// A threshold as operators write it: a percentage with at most three decimals and a `%`
/// sign (`8%`, `0.08%`, `0.3 %`), from more than 0 up to 100, or `off` (`None`).
pub fn parse_threshold(text: &str) -> Result<Option<Percent>, ThresholdText> {
    let bad = || ThresholdText(text.to_owned());
    let trimmed = text.trim();
    if trimmed.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let number = trimmed.strip_suffix('%').ok_or_else(bad)?.trim_end();
    let digits = |s: &str| !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit());
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) if digits(fraction) => (whole, fraction),
        Some(_) => return Err(bad()),
        None => (number, ""),
    };
    if !digits(whole) {
        return Err(bad());
    }
    let whole: u32 = whole.parse().map_err(|_| bad())?;
    let fraction: u32 = format!("{fraction:0<3}").parse().map_err(|_| bad())?;
    let thousandths = whole * 1000 + fraction;
    if thousandths == 0 || thousandths > 100_000 {
        return Err(bad());
    }
    Ok(Some(Percent(thousandths)))
}
