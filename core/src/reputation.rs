//! The reputation guard (contract §12, "Reputation guard"): a workspace's and each of its
//! sending domains' hard-bounce and complaint rates over a rolling window, judged against
//! warning and pause thresholds, and the standing that follows (good, warned, paused).
//!
//! This module is the rule and nothing else: pure functions from the activity counters
//! (`crate::activity`, which every store keeps in the same write as the events) to a
//! [`Verdict`], and from a standing and a verdict to the next standing ([`Standing::next`]).
//! `usecases::reputation` runs it on every node, writes changes with a compare-and-swap so
//! that each change (and its webhook event) happens once however many nodes see it, and
//! answers "may this domain send?" for the API and the delivery worker.
//!
//! A pause is never lifted by the rates: mail already judged by receivers stays judged, and
//! the rates fall only as the window moves on, days later. Only a person lifts it
//! (`resume`); the guard then counts from that moment ([`Baseline`]), so the mail that
//! caused the pause does not pause the sender again at once, and new bad mail does.

mod judge;
#[cfg(test)]
mod tests;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::activity::rates::Percent;
use crate::activity::{ActivityCounts, HourStart, HourlyActivity};
use crate::ids::{DomainId, WorkspaceId};

pub use judge::{ThresholdText, Verdict, judge, parse_threshold};

/// Whose mail a standing is about: the whole workspace, or one of its sending domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Scope {
    /// Every domain of the workspace together.
    Workspace,
    /// One sending domain.
    Domain(DomainId),
}

impl Scope {
    /// `workspace` or `domain`, as the API and webhooks say it.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::Domain(_) => "domain",
        }
    }
}

/// Which rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RateKind {
    /// Hard bounces over recipients delivered or bounced.
    Bounce,
    /// Complaints over recipients delivered.
    Complaint,
}

impl RateKind {
    /// `bounce` or `complaint`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bounce => "bounce",
            Self::Complaint => "complaint",
        }
    }
}

/// A rate at or over one of its thresholds: which, how much, and of what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breach {
    /// The rate.
    pub kind: RateKind,
    /// Hard-bounced (or complained) recipients counted.
    pub part: u64,
    /// What they are counted among.
    pub whole: u64,
    /// The threshold reached.
    pub threshold: Percent,
}

impl Breach {
    /// The rate in percent.
    pub fn percent(&self) -> f64 {
        crate::activity::rates::Rate { part: self.part, whole: self.whole }.percent().unwrap_or(0.0)
    }

    /// In words, e.g. `bounce rate 9.10 % (91 of 1000 recipients) is at or over 8 %`.
    pub fn describe(&self) -> String {
        format!(
            "{} rate {:.2} % ({} of {} recipients) is at or over {} %",
            self.kind.as_str(),
            self.percent(),
            self.part,
            self.whole,
            self.threshold.as_f64()
        )
    }
}

/// Where a scope stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Standing {
    /// Under every warning threshold, or too little mail to judge.
    Good,
    /// Over a warning threshold since `since` (a `ReputationWarning` went out then).
    Warned {
        /// When it was first seen over.
        since: DateTime<Utc>,
        /// The rate, as when first seen.
        breach: Breach,
    },
    /// Sending paused since `since` (a `SendingPaused` went out then), until resumed.
    Paused {
        /// When it was paused.
        since: DateTime<Utc>,
        /// The rate that paused it.
        breach: Breach,
    },
}

impl Standing {
    /// `good`, `warning` or `paused`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Good => "good",
            Self::Warned { .. } => "warning",
            Self::Paused { .. } => "paused",
        }
    }

    /// Whether sending is paused.
    pub fn is_paused(&self) -> bool {
        matches!(self, Self::Paused { .. })
    }

    /// What a judgement at `now` changes, and what to announce; `None` when nothing changes.
    /// A pause stays until resumed; a warning is announced once, when first reached, and
    /// forgotten without a word when the rates fall back.
    pub fn next(&self, verdict: Verdict, now: DateTime<Utc>) -> Option<(Standing, Option<Announcement>)> {
        match (self, verdict) {
            (Self::Paused { .. }, _) => None,
            (_, Verdict::Pause(breach)) => {
                Some((Self::Paused { since: now, breach }, Some(Announcement::SendingPaused(breach))))
            }
            (Self::Good, Verdict::Warn(breach)) => {
                Some((Self::Warned { since: now, breach }, Some(Announcement::ReputationWarning(breach))))
            }
            (Self::Warned { .. }, Verdict::Warn(_)) | (Self::Good, Verdict::Good) => None,
            (Self::Warned { .. }, Verdict::Good) => Some((Self::Good, None)),
        }
    }
}

/// An event a change of standing sends to the workspace's webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announcement {
    /// A warning threshold was reached.
    ReputationWarning(Breach),
    /// A pause threshold was reached: sending is paused.
    SendingPaused(Breach),
}

/// What the counters held at a resume, per domain: counted from then on, the guard subtracts
/// them from their hour, so only mail after the resume is judged. A domain's resume holds
/// that domain; the workspace's holds each of its domains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// When it was resumed.
    pub resumed_at: DateTime<Utc>,
    /// The counters of the resume's hour at that moment, per domain, in
    /// `ActivityCounts::NAMES` order; a domain not listed had nothing counted.
    pub counts: Vec<(DomainId, [u64; 11])>,
}

impl Baseline {
    /// The hour of the resume: earlier hours are not counted.
    pub fn hour(&self) -> HourStart {
        HourStart::of(self.resumed_at)
    }

    /// What it holds for `domain`.
    fn of(&self, domain: DomainId) -> ActivityCounts {
        self.counts
            .iter()
            .find(|(d, _)| *d == domain)
            .map_or_else(ActivityCounts::default, |(_, c)| ActivityCounts::from_array(*c))
    }

    /// The later of two baselines: counting starts at the latest resume that concerns it.
    pub fn latest<'a>(a: Option<&'a Self>, b: Option<&'a Self>) -> Option<&'a Self> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.resumed_at > a.resumed_at { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

/// The stored standing of one scope of one workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeReputation {
    /// The workspace.
    pub workspace_id: WorkspaceId,
    /// Whose mail.
    pub scope: Scope,
    /// Where it stands.
    pub standing: Standing,
    /// Counting starts here after a resume; `None` if never resumed.
    pub baseline: Option<Baseline>,
    /// Bumped by every change: the stores write a change only over the version it was
    /// made from, so two nodes judging at once change a standing (and announce it) once.
    pub version: u64,
}

impl ScopeReputation {
    /// A scope with no record yet: good, never resumed.
    pub fn fresh(workspace_id: WorkspaceId, scope: Scope) -> Self {
        Self { workspace_id, scope, standing: Standing::Good, baseline: None, version: 0 }
    }
}

/// The guard's settings (contract §12; the server reads `TIDINGS_REPUTATION_*`,
/// `TIDINGS_BOUNCE_RATE_*` and `TIDINGS_COMPLAINT_RATE_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReputationPolicy {
    /// How far back the rates look (default 7 days).
    pub window: Duration,
    /// Recipients delivered or bounced in the window below which nothing is judged
    /// (default 200): two bounces of the first ten messages say nothing yet.
    pub min_volume: u64,
    /// Hard-bounce rate thresholds (default warn 4 %, pause 8 %).
    pub bounce: Thresholds,
    /// Complaint rate thresholds (default warn 0.08 %, pause 0.3 %).
    pub complaint: Thresholds,
    /// How often each node judges every workspace (default one minute).
    pub check_every: std::time::Duration,
    /// How long the delivery worker puts back a message whose sending is paused before it
    /// looks again (default one minute): held mail leaves at most this long after a resume.
    pub hold: Duration,
}

/// A rate's two thresholds; `None` is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// A `ReputationWarning` from here on.
    pub warn: Option<Percent>,
    /// Sending paused from here on.
    pub pause: Option<Percent>,
}

impl Default for ReputationPolicy {
    fn default() -> Self {
        Self {
            window: Duration::days(7),
            min_volume: 200,
            bounce: Thresholds { warn: Some(Percent(4_000)), pause: Some(Percent(8_000)) },
            complaint: Thresholds { warn: Some(Percent(80)), pause: Some(Percent(300)) },
            check_every: std::time::Duration::from_secs(60),
            hold: Duration::minutes(1),
        }
    }
}

impl ReputationPolicy {
    /// Whether the guard can ever warn or pause.
    pub fn is_on(&self) -> bool {
        [self.bounce.warn, self.bounce.pause, self.complaint.warn, self.complaint.pause].iter().any(Option::is_some)
    }

    /// The first hour the window counts at `now`.
    pub fn window_start(&self, now: DateTime<Utc>) -> HourStart {
        HourStart::of(now - self.window)
    }
}

/// What the counters say of `domain` over the window from `from`, after `baseline`: its rows
/// from `from` (or the resume's hour, if later) on, minus what the resume's hour held at the
/// resume.
pub fn counted(
    rows: &[HourlyActivity],
    domain: DomainId,
    from: HourStart,
    baseline: Option<&Baseline>,
) -> ActivityCounts {
    let start = match baseline {
        Some(b) if b.hour() > from => b.hour(),
        _ => from,
    };
    let total = rows
        .iter()
        .filter(|r| r.domain == domain && r.hour >= start)
        .fold(ActivityCounts::default(), |sum, r| sum.plus(&r.counts));
    match baseline {
        Some(b) if b.hour() >= from => {
            let (have, less) = (total.to_array(), b.of(domain).to_array());
            ActivityCounts::from_array(std::array::from_fn(|i| have[i].saturating_sub(less[i])))
        }
        _ => total,
    }
}

/// What a resume at `at` of `scope` records: the counters of the hour of `at`, per domain
/// of the scope.
pub fn baseline_at(rows: &[HourlyActivity], scope: Scope, at: DateTime<Utc>) -> Baseline {
    let hour = HourStart::of(at);
    let mut counts: Vec<(DomainId, [u64; 11])> = Vec::new();
    for row in rows.iter().filter(|r| r.hour == hour) {
        if scope == Scope::Workspace || scope == Scope::Domain(row.domain) {
            match counts.iter_mut().find(|(d, _)| *d == row.domain) {
                Some((_, c)) => *c = ActivityCounts::from_array(*c).plus(&row.counts).to_array(),
                None => counts.push((row.domain, row.counts.to_array())),
            }
        }
    }
    Baseline { resumed_at: at, counts }
}
