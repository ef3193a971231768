//! Shaping for direct (MX) delivery by site (contract §12, "Destinations" and "Adaptive";
//! docs/decisions.md, "Direct delivery by site"): recipient domains roll up to sites by their
//! MX hosts ([`ShapingTable::site_for`]), each site has limits ([`SiteLimits`]: connections,
//! messages per connection, messages per period, TLS), and replies that match a site's
//! adaptive rules suspend or throttle it for a while ([`ShapingTable::react`]). The
//! built-in table carries the large providers' numbers; the operator's TOML file
//! ([`ShapingTable::from_toml`]) overrides them field by field and adds sites.
//!
//! Pure: no clock (the caller gives `now`), no DNS (the caller gives the MX hosts), no
//! files (the caller gives the file's text).

mod limits;
mod rate;
mod rules;
mod table;
mod toml_file;

pub use limits::{SiteLimits, TlsRequirement};
pub use rate::{MAX_RATE_COUNT, MessageRate, RateError, RatePeriod};
pub use rules::{AdaptiveRule, Reaction, RuleAction};
pub use table::{MAX_SITE_KEY_LEN, ShapingTable, SiteKey};
pub use toml_file::{MAX_CONNECTION_LIMIT, MAX_DELIVERIES_PER_CONNECTION, MAX_RULE_DURATION};

/// Why the shaping file cannot be used: where (the 1-based line, and the field when the
/// error is about one, as `"site".field` or `default.automation.regex`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}{}: {message}", field.as_ref().map(|f| format!(", {f}")).unwrap_or_default())]
pub struct ShapingError {
    /// The line, counted from 1.
    pub line: usize,
    /// The field, when the error is about one.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl ShapingTable {
    /// The built-in table with the operator's file `text` over it (contract §12's format):
    /// `[default]` and each `[".suffix"]` set `connection_limit`,
    /// `max_deliveries_per_connection`, `max_message_rate` (`"N/s"`, `"N/min"`, `"N/h"`),
    /// `enable_tls` (`"opportunistic"` or `"required"`) and `automation`, rules
    /// `{ regex, action = "suspend" | "throttle", max_message_rate, duration = "10m" }`
    /// checked before the built-in ones. A field left out keeps the built-in value (for a
    /// new site, the default's). Unknown fields, bad values, a bad regular expression, a
    /// throttle without a rate and zero limits are errors naming the line and the field.
    pub fn from_toml(text: &str) -> Result<Self, ShapingError> {
        toml_file::parse(text)
    }
}

#[cfg(test)]
mod tests;
