//! The rates mailbox providers judge a sender by, and the thresholds at which they warn or
//! stop taking its mail (docs/dashboard.md, "Overview"). The comparisons are exact integer
//! arithmetic: a rate exactly at a threshold is at it, never a rounding error below.

use super::ActivityCounts;

/// A fraction of recipients: `part` of `whole`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// The counted recipients (bounces, complaints, first opens).
    pub part: u64,
    /// What they are counted among.
    pub whole: u64,
}

impl Rate {
    /// Hard bounces over recipients whose delivery ended, delivered or bounced (hard or
    /// soft): the share of addresses that do not exist, as providers see it. A late bounce
    /// after delivery (a relay's report) counts in both.
    pub fn bounce(c: &ActivityCounts) -> Self {
        Self { part: c.hard_bounced, whole: c.delivered.saturating_add(c.bounced()) }
    }

    /// Complaints over delivered recipients.
    pub fn complaint(c: &ActivityCounts) -> Self {
        Self { part: c.complained, whole: c.delivered }
    }

    /// First opens over recipients delivered with open tracking (opens of untracked mail
    /// cannot be seen).
    pub fn open(c: &ActivityCounts) -> Self {
        Self { part: c.opened, whole: c.delivered_open_tracked }
    }

    /// First clicks over recipients delivered with click tracking.
    pub fn click(c: &ActivityCounts) -> Self {
        Self { part: c.clicked, whole: c.delivered_click_tracked }
    }

    /// The rate in percent; `None` when there is nothing to count among.
    pub fn percent(&self) -> Option<f64> {
        (self.whole > 0).then(|| self.part as f64 * 100.0 / self.whole as f64)
    }

    /// Whether it is at least `threshold` (a rate of nothing reaches every threshold: callers
    /// look at `whole` first).
    pub(crate) fn reaches(&self, threshold: Percent) -> bool {
        // part / whole >= millis / 100_000, without floats; u128 cannot overflow here.
        u128::from(self.part) * 100_000 >= u128::from(threshold.0) * u128::from(self.whole)
    }
}

/// A percentage in thousandths of a percent (0.1 % is `Percent(100)`), exact in integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Percent(pub u32);

impl Percent {
    /// As a number of percent, for display.
    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / 1000.0
    }
}

/// Where a rate stands against its thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Nothing to compute it over (no delivery in the range).
    NoData,
    /// Under the warning threshold.
    Ok,
    /// At or over the warning threshold, under the one where mail is refused or the sender
    /// paused.
    Warn,
    /// At or over the threshold where providers refuse mail or pause the sender.
    Bad,
}

impl Level {
    /// A lower-case word for people and CSS classes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoData => "no data",
            Self::Ok => "ok",
            Self::Warn => "warning",
            Self::Bad => "bad",
        }
    }
}

/// The thresholds of one rate, and who set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// From here on: [`Level::Warn`].
    pub warn: Percent,
    /// From here on: [`Level::Bad`].
    pub bad: Percent,
    /// In words, for the page: whose rules these are.
    pub source: &'static str,
}

impl Thresholds {
    /// Where `rate` stands.
    pub fn level(&self, rate: Rate) -> Level {
        if rate.whole == 0 {
            Level::NoData
        } else if rate.reaches(self.bad) {
            Level::Bad
        } else if rate.reaches(self.warn) {
            Level::Warn
        } else {
            Level::Ok
        }
    }
}

/// Complaint rate: Gmail's and Yahoo's bulk sender rules (February 2024) ask senders to
/// stay under 0.1 % and never reach 0.3 %, from which mail is refused.
pub const COMPLAINT_THRESHOLDS: Thresholds = Thresholds {
    warn: Percent(100),
    bad: Percent(300),
    source: "Gmail asks bulk senders to stay under 0.1 % and refuses mail at 0.3 %",
};

/// Bounce rate: Resend asks senders to stay under 4 %; Amazon SES reviews an account at
/// 5 % and may pause its sending at 10 %. The warning starts at the stricter 4 %.
pub const BOUNCE_THRESHOLDS: Thresholds = Thresholds {
    warn: Percent(4_000),
    bad: Percent(10_000),
    source: "Resend asks for under 4 %, Amazon SES reviews at 5 % and pauses sending at 10 %",
};
