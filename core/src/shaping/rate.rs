//! `MessageRate`: most messages per second, minute or hour, written `"100/s"`, `"20/min"`
//! or `"500/h"` (contract §12).

use std::fmt;
use std::time::Duration;

/// The most messages a rate allows in its period: more is surely a typo (a million a second
/// is beyond any one site).
pub const MAX_RATE_COUNT: u32 = 1_000_000;

/// The period of a [`MessageRate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RatePeriod {
    /// Per second: `/s`.
    Second,
    /// Per minute: `/min`.
    Minute,
    /// Per hour: `/h`.
    Hour,
}

impl RatePeriod {
    /// How long the period is.
    pub fn length(self) -> Duration {
        Duration::from_secs(match self {
            Self::Second => 1,
            Self::Minute => 60,
            Self::Hour => 3_600,
        })
    }

    /// The unit as the file writes it: `s`, `min` or `h`.
    pub fn unit(self) -> &'static str {
        match self {
            Self::Second => "s",
            Self::Minute => "min",
            Self::Hour => "h",
        }
    }
}

/// Why a text is not a rate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// Not a whole number, a slash and a unit.
    #[error("`{0}` is not a rate such as \"100/s\", \"20/min\" or \"500/h\"")]
    Form(String),
    /// Zero, or more than [`MAX_RATE_COUNT`].
    #[error("`{0}` must allow from 1 to {MAX_RATE_COUNT} messages in its period")]
    OutOfRange(String),
}

/// Most messages in a period: `count` per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageRate {
    count: u32,
    period: RatePeriod,
}

impl MessageRate {
    /// 100 a second: the general default (see [`super::ShapingTable`]).
    pub(super) const HUNDRED_PER_SECOND: Self = Self { count: 100, period: RatePeriod::Second };
    /// One a minute: what the built-in rules throttle a site to.
    pub(super) const ONE_PER_MINUTE: Self = Self { count: 1, period: RatePeriod::Minute };

    /// `count` messages per `period`; `None` when `count` is zero or over [`MAX_RATE_COUNT`].
    pub fn new(count: u32, period: RatePeriod) -> Option<Self> {
        (1..=MAX_RATE_COUNT).contains(&count).then_some(Self { count, period })
    }

    /// Reads `N/s`, `N/min` or `N/h` (also `N/second`, `N/minute`, `N/hour`; units in
    /// either case, spaces around the slash allowed), `N` a whole number from 1 to
    /// [`MAX_RATE_COUNT`].
    pub fn parse(text: &str) -> Result<Self, RateError> {
        let form = || RateError::Form(text.to_owned());
        let (count, unit) = text.split_once('/').ok_or_else(form)?;
        let (count, unit) = (count.trim(), unit.trim());
        if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(form());
        }
        let period = match unit.to_ascii_lowercase().as_str() {
            "s" | "sec" | "second" => RatePeriod::Second,
            "min" | "minute" => RatePeriod::Minute,
            "h" | "hr" | "hour" => RatePeriod::Hour,
            _ => return Err(form()),
        };
        let count = count.parse::<u32>().map_err(|_| RateError::OutOfRange(text.to_owned()))?;
        Self::new(count, period).ok_or_else(|| RateError::OutOfRange(text.to_owned()))
    }

    /// Messages allowed per period.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The period.
    pub fn period(&self) -> RatePeriod {
        self.period
    }

    /// The time one message takes of the rate: the period divided by the count (a token
    /// bucket adds one token this often).
    pub fn interval(&self) -> Duration {
        self.period.length() / self.count
    }

    /// Messages per second, as a fraction (for comparing rates and for display).
    pub fn per_second(&self) -> f64 {
        f64::from(self.count) / self.period.length().as_secs_f64()
    }
}

/// `100/s`, `20/min`, `500/h`: what [`MessageRate::parse`] reads back.
impl fmt::Display for MessageRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, self.period.unit())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_three_units_and_their_long_names() {
        let rate = |t: &str| MessageRate::parse(t).unwrap();
        assert_eq!(rate("100/s"), MessageRate::new(100, RatePeriod::Second).unwrap());
        assert_eq!(rate("20/min"), MessageRate::new(20, RatePeriod::Minute).unwrap());
        assert_eq!(rate("500/h"), MessageRate::new(500, RatePeriod::Hour).unwrap());
        assert_eq!(rate("1 / Minute"), rate("1/min"));
        assert_eq!(rate("3/HOUR"), rate("3/h"));
        assert_eq!(rate("20/min").interval(), Duration::from_secs(3));
        assert_eq!(rate("4/s").per_second(), 4.0);
        assert_eq!(rate("20/min").to_string(), "20/min");
    }

    #[test]
    fn anything_else_is_a_clear_error() {
        for bad in ["", "100", "100/", "/s", "100/d", "100/ms", "1.5/s", "-1/s", "+1/s", "ten/s", "1/s/s", "1 0/s"] {
            assert_eq!(MessageRate::parse(bad), Err(RateError::Form(bad.to_owned())), "{bad:?}");
        }
        for bad in ["0/s", "1000001/s", "99999999999999999999/h"] {
            assert_eq!(MessageRate::parse(bad), Err(RateError::OutOfRange(bad.to_owned())), "{bad:?}");
        }
        assert!(MessageRate::parse("x").unwrap_err().to_string().contains("\"100/s\""));
    }

    proptest! {
        #[test]
        fn display_reads_back(count in 1..=MAX_RATE_COUNT, period in prop_oneof![
            Just(RatePeriod::Second), Just(RatePeriod::Minute), Just(RatePeriod::Hour)
        ]) {
            let rate = MessageRate::new(count, period).unwrap();
            prop_assert_eq!(MessageRate::parse(&rate.to_string()), Ok(rate));
        }
    }
}
