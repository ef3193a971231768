//! Durations written for people in settings and files: a whole number and one unit, `90s`,
//! `10m`, `1h`, `2d`. The retry schedule (`TIDINGS_RETRY_SCHEDULE`) and the shaping file's
//! rule durations read them with [`parse_duration`], so both take the same texts.

use std::time::Duration;

/// Why a text is not a duration such as `90s` or `10m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must be a whole number with a unit s, m, h or d, like 90s or 10m")]
pub struct DurationTextError;

/// Reads a whole number (at most nine digits) followed by `s`, `m`, `h` or `d` (in either
/// case), with nothing around it. Zero is a duration (`0s`); the caller bounds the range it
/// accepts.
pub fn parse_duration(text: &str) -> Result<Duration, DurationTextError> {
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or(DurationTextError)?;
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() || digits.len() > 9 {
        return Err(DurationTextError);
    }
    let amount: u64 = digits.parse().map_err(|_| DurationTextError)?;
    let unit_secs = match unit.to_ascii_lowercase().as_str() {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(DurationTextError),
    };
    // Nine digits of days fit in a u64 of seconds; saturating all the same.
    Ok(Duration::from_secs(amount.saturating_mul(unit_secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_in_either_case() {
        let secs = |t: &str| parse_duration(t).map(|d| d.as_secs());
        assert_eq!(secs("30s"), Ok(30));
        assert_eq!(secs("10m"), Ok(600));
        assert_eq!(secs("1H"), Ok(3_600));
        assert_eq!(secs("2d"), Ok(172_800));
        assert_eq!(secs("0s"), Ok(0));
    }

    #[test]
    fn anything_else_is_an_error() {
        for bad in ["", "s", "10", "1.5m", "-1s", "1 s", " 1s", "1m2s", "9999999999s", "١s", "10min", "2 hours"] {
            assert_eq!(parse_duration(bad), Err(DurationTextError), "{bad:?}");
        }
    }
}
