//! The delivery retry schedule (docs/api.md#retry-schedule): the delays between attempts after
//! a temporary failure. A schedule of n delays allows n + 1 attempts; when they are used up the
//! message ends `Bounced` with `bounceType: Soft` (no suppression). `TIDINGS_RETRY_SCHEDULE`
//! sets it as comma-separated whole numbers with a unit, e.g. `1s,2s,4s` or `1m,5m,1h,1d`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::duration_text::parse_duration;

/// Longest single delay accepted (longer is surely a typo, and keeps time arithmetic safe).
pub const MAX_DELAY: Duration = Duration::from_secs(30 * 86_400);
/// Most delays accepted in one schedule.
pub const MAX_RETRIES: usize = 1_000;

/// Why a schedule text or list is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// No delays at all.
    #[error("the retry schedule is empty")]
    Empty,
    /// An entry is not a whole number followed by s, m, h or d.
    #[error("retry delay {0:?} must be a whole number with a unit s, m, h or d, like 90s or 5m")]
    BadDelay(String),
    /// An entry is longer than [`MAX_DELAY`].
    #[error("retry delay {0:?} is longer than 30 days")]
    TooLong(String),
    /// More than [`MAX_RETRIES`] entries.
    #[error("the retry schedule has more than {MAX_RETRIES} delays")]
    TooMany,
    /// A delay that is not a whole number of seconds.
    #[error("retry delays must be whole seconds")]
    Fractional,
}

/// Delays between delivery attempts, in whole seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    delays: Vec<Duration>,
}

impl RetrySchedule {
    /// A schedule of exactly these delays, used as given. An empty list allows one attempt
    /// and no retry.
    pub fn new(delays: Vec<Duration>) -> Result<Self, ScheduleError> {
        if delays.len() > MAX_RETRIES {
            return Err(ScheduleError::TooMany);
        }
        if delays.iter().any(|d| d.subsec_nanos() != 0) {
            return Err(ScheduleError::Fractional);
        }
        if let Some(long) = delays.iter().find(|d| **d > MAX_DELAY) {
            return Err(ScheduleError::TooLong(format!("{}s", long.as_secs())));
        }
        Ok(Self { delays })
    }

    /// Parses `1m,5m,15m` (entries may be padded with spaces; units s, m, h, d in any case).
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        if text.trim().is_empty() {
            return Err(ScheduleError::Empty);
        }
        let entries: Vec<&str> = text.split(',').map(str::trim).collect();
        if entries.len() > MAX_RETRIES {
            return Err(ScheduleError::TooMany);
        }
        let delays = entries.into_iter().map(parse_delay).collect::<Result<Vec<_>, _>>()?;
        Self::new(delays)
    }

    /// The delays, in order.
    pub fn delays(&self) -> &[Duration] {
        &self.delays
    }

    /// How long to wait after the `attempt`-th attempt (1-based) failed temporarily, or
    /// `None` when that was the last attempt the schedule allows.
    pub fn delay_after(&self, attempt: u32) -> Option<Duration> {
        let index = usize::try_from(attempt).ok()?.checked_sub(1)?;
        self.delays.get(index).copied()
    }
}

/// The default schedule (docs/api.md#retry-schedule): 1m, 5m, 15m, 30m, 1h, 2h, 4h, 8h,
/// then 12h five times (about three days).
impl Default for RetrySchedule {
    fn default() -> Self {
        let minutes = [1, 5, 15, 30, 60, 120, 240, 480, 720, 720, 720, 720, 720];
        Self { delays: minutes.into_iter().map(|m| Duration::from_secs(m * 60)).collect() }
    }
}

fn parse_delay(entry: &str) -> Result<Duration, ScheduleError> {
    let delay = parse_duration(entry).map_err(|_| ScheduleError::BadDelay(entry.to_owned()))?;
    if delay > MAX_DELAY {
        return Err(ScheduleError::TooLong(entry.to_owned()));
    }
    Ok(delay)
}

impl FromStr for RetrySchedule {
    type Err = ScheduleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Each delay in the largest unit that divides it (`90s`, `5m`, `12h`, `1d`), comma
/// separated: what [`RetrySchedule::parse`] reads back.
impl fmt::Display for RetrySchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, delay) in self.delays.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let secs = delay.as_secs();
            let (amount, unit) = [(86_400, "d"), (3_600, "h"), (60, "m")]
                .into_iter()
                .find(|(size, _)| secs > 0 && secs % size == 0)
                .map_or((secs, "s"), |(size, unit)| (secs / size, unit));
            write!(f, "{amount}{unit}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn secs(list: &[u64]) -> Vec<Duration> {
        list.iter().map(|s| Duration::from_secs(*s)).collect()
    }

    #[test]
    fn the_default_is_the_documented_one() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.to_string(), "1m,5m,15m,30m,1h,2h,4h,8h,12h,12h,12h,12h,12h");
        let total: u64 = schedule.delays().iter().map(Duration::as_secs).sum();
        assert_eq!(total, 4_551 * 60, "about three days (75 h 51 min)");
    }

    #[test]
    fn parses_units_and_spaces() {
        let parsed = RetrySchedule::parse(" 1s, 2S ,4m,1h, 2d,0s").unwrap();
        assert_eq!(parsed.delays(), secs(&[1, 2, 240, 3600, 172_800, 0]));
        assert_eq!(parsed.to_string(), "1s,2s,4m,1h,2d,0s");
    }

    #[test]
    fn three_delays_allow_four_attempts() {
        let schedule = RetrySchedule::parse("1s,1s,1s").unwrap();
        let after: Vec<Option<Duration>> = (0..=5).map(|a| schedule.delay_after(a)).collect();
        let one = Some(Duration::from_secs(1));
        assert_eq!(after, [None, one, one, one, None, None]);
        assert_eq!(RetrySchedule::new(vec![]).unwrap().delay_after(1), None);
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in ["", " ", "1", "s", "1x", "1.5m", "-1s", "1s,,2s", "1s,", "1 s", "1m2s", "9999999999s", "١s"] {
            assert!(RetrySchedule::parse(bad).is_err(), "{bad:?} parsed");
        }
        assert_eq!(RetrySchedule::parse("31d"), Err(ScheduleError::TooLong("31d".into())));
        assert_eq!(RetrySchedule::parse(&vec!["1s"; MAX_RETRIES + 1].join(",")), Err(ScheduleError::TooMany));
        assert_eq!(RetrySchedule::new(vec![Duration::from_millis(1500)]), Err(ScheduleError::Fractional));
    }

    proptest! {
        #[test]
        fn display_and_parse_round_trip(delays in proptest::collection::vec(0u64..=MAX_DELAY.as_secs(), 1..30)) {
            let schedule = RetrySchedule::new(secs(&delays)).unwrap();
            prop_assert_eq!(RetrySchedule::parse(&schedule.to_string()), Ok(schedule));
        }

        #[test]
        fn any_text_parses_or_errs_without_panicking(text in "(\\PC|[0-9smhd, ]){0,40}") {
            if let Ok(schedule) = RetrySchedule::parse(&text) {
                prop_assert!(!schedule.delays().is_empty());
                prop_assert!(schedule.delays().iter().all(|d| *d <= MAX_DELAY));
            }
        }
    }
}
