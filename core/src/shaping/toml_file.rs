//! The operator's shaping file (`TIDINGS_SHAPING_FILE`, contract §12): a `[default]` table
//! and one table per site keyed by an MX host suffix (`[".google.com"]`), each with
//! `connection_limit`, `max_deliveries_per_connection`, `max_message_rate`, `enable_tls` and
//! `automation`, a list of rules. Read as spanned TOML so that every error names the line
//! (1-based) and the field.

use std::time::Duration;

use regex::RegexBuilder;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::ShapingError;
use super::limits::{LimitsPatch, TlsRequirement};
use super::rate::MessageRate;
use super::rules::{AdaptiveRule, REGEX_SIZE_LIMIT, RuleAction};
use super::table::{Layer, ShapingTable};
use crate::domain_name::DomainName;
use crate::duration_text::parse_duration;

/// Most connections one site may be given: more is surely a typo.
pub const MAX_CONNECTION_LIMIT: u32 = 10_000;
/// Most messages over one connection.
pub const MAX_DELIVERIES_PER_CONNECTION: u32 = 1_000_000;
/// Longest a rule may last.
pub const MAX_RULE_DURATION: Duration = Duration::from_secs(30 * 86_400);

const SITE_FIELDS: &str = "connection_limit, max_deliveries_per_connection, max_message_rate, enable_tls, automation";
const RULE_FIELDS: &str = "regex, action, max_message_rate, duration";

/// The file's text, for turning spans into lines.
struct Source<'t> {
    text: &'t str,
}

impl Source<'_> {
    /// The 1-based line of byte `offset`.
    fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
    }

    fn error<T>(&self, at: &Spanned<T>, field: impl Into<String>, message: impl Into<String>) -> ShapingError {
        ShapingError { line: self.line(at.span().start), field: Some(field.into()), message: message.into() }
    }
}

/// Parses the file into the operator's layer of the table.
pub(super) fn parse(text: &str) -> Result<ShapingTable, ShapingError> {
    let source = Source { text };
    let document = DeTable::parse(text).map_err(|e| ShapingError {
        line: source.line(e.span().map_or(0, |s| s.start)),
        field: None,
        message: format!("not valid TOML: {}", e.message().trim_end()),
    })?;
    let mut layer = Layer::default();
    for (key, value) in document.get_ref() {
        let name = key.get_ref().as_ref();
        let DeValue::Table(table) = value.get_ref() else {
            return Err(source.error(
                key,
                name,
                "must be a table: [default], or a site keyed by its MX host suffix such as [\".google.com\"]",
            ));
        };
        if name == "default" {
            let (patch, rules) = site(&source, "default", table)?;
            (layer.default, layer.default_rules) = (patch, rules);
            continue;
        }
        let path = format!("{name:?}");
        let normalised = suffix(name).map_err(|message| source.error(key, &path, message))?;
        let parsed = site(&source, &path, table)?;
        if layer.sites.insert(normalised.clone(), parsed).is_some() {
            return Err(source.error(key, &path, format!("the site {normalised:?} is configured twice")));
        }
    }
    Ok(ShapingTable::layered(layer))
}

/// A site's key as a suffix: a dot and a domain name, lower-cased.
fn suffix(name: &str) -> Result<String, String> {
    let hint = "a site is keyed by an MX host suffix starting with a dot, in quotes, such as [\".google.com\"]";
    let Some(domain) = name.strip_prefix('.') else {
        return Err(format!("{hint} (or is [default])"));
    };
    DomainName::parse(domain).map(|d| format!(".{d}")).map_err(|e| format!("{hint}: the name {e}"))
}

/// One site table (or `[default]`): its fields and its rules.
fn site(
    source: &Source<'_>,
    path: &str,
    table: &DeTable<'_>,
) -> Result<(LimitsPatch, Vec<AdaptiveRule>), ShapingError> {
    let mut patch = LimitsPatch::default();
    let mut rules = Vec::new();
    for (key, value) in table {
        let name = key.get_ref().as_ref();
        let field = format!("{path}.{name}");
        match name {
            "connection_limit" => {
                patch.connection_limit = Some(count(source, value, &field, MAX_CONNECTION_LIMIT)?);
            }
            "max_deliveries_per_connection" => {
                patch.max_deliveries_per_connection =
                    Some(count(source, value, &field, MAX_DELIVERIES_PER_CONNECTION)?);
            }
            "max_message_rate" => patch.max_message_rate = Some(rate(source, value, &field)?),
            "enable_tls" => {
                let text = string(source, value, &field)?;
                let tls = TlsRequirement::parse(text).ok_or_else(|| {
                    source.error(value, &field, format!("`{text}` is not \"opportunistic\" or \"required\""))
                })?;
                patch.tls = Some(tls);
            }
            "automation" => {
                let DeValue::Array(items) = value.get_ref() else {
                    return Err(source.error(
                        value,
                        &field,
                        "must be a list of rules: [{ regex = \"...\", action = \"suspend\", duration = \"10m\" }]",
                    ));
                };
                for item in items.iter() {
                    rules.push(rule(source, item, &field)?);
                }
            }
            _ => return Err(source.error(key, &field, format!("unknown field; a site has {SITE_FIELDS}"))),
        }
    }
    Ok((patch, rules))
}

/// One rule of `automation`.
fn rule(source: &Source<'_>, item: &Spanned<DeValue<'_>>, path: &str) -> Result<AdaptiveRule, ShapingError> {
    let DeValue::Table(table) = item.get_ref() else {
        return Err(source.error(item, path, "each rule must be a table: { regex = \"...\", action = \"...\", ... }"));
    };
    let (mut regex, mut action, mut rate_given, mut duration) = (None, None, None, None);
    for (key, value) in table {
        let name = key.get_ref().as_ref();
        let field = format!("{path}.{name}");
        match name {
            "regex" => {
                let pattern = string(source, value, &field)?;
                if pattern.is_empty() {
                    return Err(source.error(value, &field, "must not be empty (it would match every reply)"));
                }
                let compiled = RegexBuilder::new(pattern)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| source.error(value, &field, format!("not a valid regular expression: {e}")))?;
                regex = Some(compiled);
            }
            "action" => {
                let text = string(source, value, &field)?;
                action = Some(match text.to_ascii_lowercase().as_str() {
                    "suspend" => (false, value),
                    "throttle" => (true, value),
                    _ => {
                        return Err(source.error(
                            value,
                            &field,
                            format!("`{text}` is not \"suspend\" or \"throttle\""),
                        ));
                    }
                });
            }
            "max_message_rate" => rate_given = Some((rate(source, value, &field)?, value)),
            "duration" => {
                let text = string(source, value, &field)?;
                let parsed = parse_duration(text).map_err(|e| source.error(value, &field, format!("`{text}` {e}")))?;
                if parsed.is_zero() || parsed > MAX_RULE_DURATION {
                    return Err(source.error(
                        value,
                        &field,
                        format!("`{text}` must be longer than zero and at most 30d"),
                    ));
                }
                duration = Some(parsed);
            }
            _ => return Err(source.error(key, &field, format!("unknown field; a rule has {RULE_FIELDS}"))),
        }
    }
    let missing = |name: &str| source.error(item, format!("{path}.{name}"), "is missing from this rule");
    let regex = regex.ok_or_else(|| missing("regex"))?;
    let (throttle, action_at) = action.ok_or_else(|| missing("action"))?;
    let duration = duration.ok_or_else(|| missing("duration"))?;
    let action = match (throttle, rate_given) {
        (true, Some((rate, _))) => RuleAction::Throttle(rate),
        (true, None) => {
            return Err(source.error(
                action_at,
                format!("{path}.max_message_rate"),
                "a \"throttle\" rule needs the rate to throttle to, such as max_message_rate = \"10/min\"",
            ));
        }
        (false, None) => RuleAction::Suspend,
        (false, Some((_, at))) => {
            return Err(source.error(
                at,
                format!("{path}.max_message_rate"),
                "only a \"throttle\" rule takes a rate; a \"suspend\" rule stops the site",
            ));
        }
    };
    Ok(AdaptiveRule { regex, action, duration })
}

fn string<'v>(source: &Source<'_>, value: &'v Spanned<DeValue<'_>>, field: &str) -> Result<&'v str, ShapingError> {
    match value.get_ref() {
        DeValue::String(text) => Ok(text.as_ref()),
        other => Err(source.error(value, field, format!("must be a string, not {}", other.type_str()))),
    }
}

/// A whole number from 1 to `max`.
fn count(source: &Source<'_>, value: &Spanned<DeValue<'_>>, field: &str, max: u32) -> Result<u32, ShapingError> {
    let out_of_range = || source.error(value, field, format!("must be a whole number from 1 to {max}"));
    let DeValue::Integer(integer) = value.get_ref() else {
        return Err(out_of_range());
    };
    let n = i64::from_str_radix(integer.as_str(), integer.radix()).map_err(|_| out_of_range())?;
    u32::try_from(n).ok().filter(|n| (1..=max).contains(n)).ok_or_else(out_of_range)
}

fn rate(source: &Source<'_>, value: &Spanned<DeValue<'_>>, field: &str) -> Result<MessageRate, ShapingError> {
    let text = string(source, value, field)?;
    MessageRate::parse(text).map_err(|e| source.error(value, field, e.to_string()))
}

#[cfg(test)]
mod tests;
