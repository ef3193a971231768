//! The operator's file: what it overrides, and that every error names its line and field.

use std::time::Duration;

use super::super::*;

fn rate(text: &str) -> MessageRate {
    MessageRate::parse(text).unwrap()
}

fn limits<'t>(table: &'t ShapingTable, suffix: &str) -> &'t SiteLimits {
    table.suffixes().find(|(s, _)| *s == suffix).map(|(_, l)| l).unwrap()
}

/// The error of `text`, as (line, field).
fn error_at(text: &str) -> (usize, Option<String>, String) {
    let e = ShapingTable::from_toml(text).unwrap_err();
    (e.line, e.field.clone(), e.to_string())
}

#[test]
fn an_empty_file_is_the_built_in_table() {
    assert_eq!(ShapingTable::from_toml("").unwrap(), ShapingTable::default());
    assert_eq!(ShapingTable::from_toml("# nothing\n\n").unwrap(), ShapingTable::default());
}

#[test]
fn the_file_overrides_field_by_field_and_adds_sites() {
    let file = r#"
[default]
connection_limit = 4
max_message_rate = "50/min"

[".google.com"]
max_deliveries_per_connection = 25

[".yahoodns.net"]
enable_tls = "Required"

[".Example.NET"]
max_message_rate = "20/h"
"#;
    let table = ShapingTable::from_toml(file).unwrap();
    let default = table.default_limits();
    assert_eq!((default.connection_limit, default.max_deliveries_per_connection), (4, 100));
    assert_eq!(default.max_message_rate, rate("50/min"));
    let google = limits(&table, ".google.com");
    assert_eq!(
        (google.connection_limit, google.max_deliveries_per_connection, google.tls),
        (5, 25, TlsRequirement::Required),
        "the built-in site keeps what the file does not set"
    );
    assert_eq!(google.max_message_rate, rate("50/min"), "a rate the built-in site does not set follows the default");
    let yahoo = limits(&table, ".yahoodns.net");
    assert_eq!(
        (yahoo.connection_limit, yahoo.max_deliveries_per_connection, yahoo.tls),
        (4, 20, TlsRequirement::Required)
    );
    let added = limits(&table, ".example.net");
    assert_eq!(*added, SiteLimits { max_message_rate: rate("20/h"), ..default.clone() }, "a new site is the default");
    assert_eq!(table.suffixes().count(), 7);
}

#[test]
fn automation_rules_are_read_in_either_toml_form() {
    let inline = r#"
[".example.net"]
automation = [
  { regex = "busy", action = "suspend", duration = "10m" },
  { regex = "(?i)slow down", action = "Throttle", max_message_rate = "5/min", duration = "1h" },
]
"#;
    let tables = r#"
[[".example.net".automation]]
regex = "busy"
action = "suspend"
duration = "10m"

[[".example.net".automation]]
regex = "(?i)slow down"
action = "Throttle"
max_message_rate = "5/min"
duration = "1h"
"#;
    let table = ShapingTable::from_toml(inline).unwrap();
    assert_eq!(table, ShapingTable::from_toml(tables).unwrap());
    let site = table
        .site_for(&[(1, "mx.example.net".to_owned())], &crate::domain_name::DomainName::parse("a.example").unwrap())
        .0;
    let rules: Vec<_> = table.rules(&site).collect();
    assert_eq!(rules.len(), 2);
    assert_eq!(
        (rules[0].regex.as_str(), rules[0].action, rules[0].duration),
        ("busy", RuleAction::Suspend, Duration::from_secs(600))
    );
    assert_eq!(rules[1].action, RuleAction::Throttle(rate("5/min")));
    assert_eq!(rules[1].duration, Duration::from_secs(3_600));
}

#[test]
fn syntax_errors_name_their_line() {
    let (line, field, message) = error_at("[default]\nconnection_limit = 3\nmax_message_rate = \"10/s\n");
    assert_eq!((line, field), (3, None));
    assert!(message.starts_with("line 3: not valid TOML"), "{message}");
    assert_eq!(error_at("[default]\n[default]\n").0, 2, "a table twice");
}

#[test]
fn unknown_fields_name_their_line_and_field() {
    let (line, field, message) = error_at("[default]\nconnection_limit = 3\nmax_connections = 4\n");
    assert_eq!((line, field.as_deref()), (3, Some("default.max_connections")));
    assert!(message.contains("unknown field") && message.contains("connection_limit"), "{message}");
    let (line, field, _) = error_at(
        "[\".google.com\"]\nautomation = [{ regex = \"x\", action = \"suspend\", duration = \"1m\", for = \"me\" }]\n",
    );
    assert_eq!((line, field.as_deref()), (2, Some("\".google.com\".automation.for")));
    let (line, field, _) = error_at("\n\nlimit = 3\n");
    assert_eq!((line, field.as_deref()), (3, Some("limit")), "a top-level key that is no table");
}

#[test]
fn a_site_must_be_keyed_by_a_suffix() {
    let (line, field, message) = error_at("[default]\n\n[\"google.com\"]\nconnection_limit = 1\n");
    assert_eq!((line, field.as_deref()), (3, Some("\"google.com\"")));
    assert!(message.contains("starting with a dot"), "{message}");
    // Unquoted, TOML reads a dotted key as nested tables: the first part is the site key.
    assert_eq!(error_at("[google.com]\nconnection_limit = 1\n").0, 1);
    assert_eq!(error_at("[\".com\"]\n").0, 1, "one label is not a suffix of a provider");
    assert_eq!(error_at("[\".bad_name.com\"]\n").0, 1);
    let (line, _, message) = error_at("[\".Google.com\"]\nconnection_limit = 1\n[\".google.com\"]\n");
    assert!(line == 1 || line == 3, "{line}");
    assert!(message.contains("twice"), "{message}");
}

#[test]
fn bad_values_name_their_line_and_field() {
    let cases: &[(&str, usize, &str, &str)] = &[
        ("[default]\nconnection_limit = 0\n", 2, "default.connection_limit", "from 1 to 10000"),
        ("[default]\nconnection_limit = 10001\n", 2, "default.connection_limit", "from 1 to 10000"),
        ("[default]\nconnection_limit = -3\n", 2, "default.connection_limit", "whole number"),
        ("[default]\nconnection_limit = \"5\"\n", 2, "default.connection_limit", "whole number"),
        ("[default]\nconnection_limit = 2.5\n", 2, "default.connection_limit", "whole number"),
        (
            "[\".x.com\"]\n\nmax_deliveries_per_connection = 0\n",
            3,
            "\".x.com\".max_deliveries_per_connection",
            "from 1",
        ),
        ("[default]\nmax_message_rate = \"100/d\"\n", 2, "default.max_message_rate", "rate such as"),
        ("[default]\nmax_message_rate = \"0/s\"\n", 2, "default.max_message_rate", "from 1 to"),
        ("[default]\nmax_message_rate = 100\n", 2, "default.max_message_rate", "must be a string"),
        ("[default]\nenable_tls = \"always\"\n", 2, "default.enable_tls", "\"required\""),
        ("[default]\nenable_tls = true\n", 2, "default.enable_tls", "must be a string"),
        ("[default]\nautomation = \"suspend\"\n", 2, "default.automation", "list of rules"),
        ("[default]\nautomation = [\"x\"]\n", 2, "default.automation", "must be a table"),
    ];
    for (text, line, field, says) in cases {
        let (at, named, message) = error_at(text);
        assert_eq!((at, named.as_deref()), (*line, Some(*field)), "{text:?}: {message}");
        assert!(message.contains(says), "{text:?}: {message}");
        assert!(message.starts_with(&format!("line {line}, {field}: ")), "{message}");
    }
}

#[test]
fn bad_rules_name_their_line_and_field() {
    let rule = |body: &str| format!("[default]\nconnection_limit = 3\nautomation = [\n  {{ {body} }},\n]\n");
    let cases: &[(&str, &str, &str)] = &[
        (r#"regex = "(unclosed", action = "suspend", duration = "1m""#, "regex", "not a valid regular expression"),
        (r#"regex = "", action = "suspend", duration = "1m""#, "regex", "must not be empty"),
        (r#"regex = "x", action = "pause", duration = "1m""#, "action", "\"suspend\" or \"throttle\""),
        (r#"regex = "x", action = "throttle", duration = "1m""#, "max_message_rate", "needs the rate"),
        (
            r#"regex = "x", action = "suspend", max_message_rate = "1/s", duration = "1m""#,
            "max_message_rate",
            "only a \"throttle\"",
        ),
        (
            r#"regex = "x", action = "throttle", max_message_rate = "fast", duration = "1m""#,
            "max_message_rate",
            "rate such as",
        ),
        (r#"regex = "x", action = "suspend", duration = "10 minutes""#, "duration", "whole number with a unit"),
        (r#"regex = "x", action = "suspend", duration = "0s""#, "duration", "longer than zero"),
        (r#"regex = "x", action = "suspend", duration = "31d""#, "duration", "at most 30d"),
        (r#"regex = "x", action = "suspend""#, "duration", "missing"),
        (r#"action = "suspend", duration = "1m""#, "regex", "missing"),
        (r#"regex = "x", duration = "1m""#, "action", "missing"),
        (r#"regex = 5, action = "suspend", duration = "1m""#, "regex", "must be a string"),
    ];
    for (body, field, says) in cases {
        let text = rule(body);
        let (line, named, message) = error_at(&text);
        assert_eq!(
            (line, named.as_deref()),
            (4, Some(format!("default.automation.{field}").as_str())),
            "{body}: {message}"
        );
        assert!(message.contains(says), "{body}: {message}");
    }
    // A rule over several lines: the error is at the field's own line.
    let text =
        "[default]\nautomation = [\n  { regex = \"x\",\n    action = \"suspend\",\n    duration = \"1 hour\" },\n]\n";
    assert_eq!(error_at(text).0, 5);
    // In the array-of-tables form too.
    let text = "[[\".example.net\".automation]]\nregex = \"x\"\naction = \"throttle\"\nmax_message_rate = \"1/s\"\nduration = \"soon\"\n";
    let (line, field, _) = error_at(text);
    assert_eq!((line, field.as_deref()), (5, Some("\".example.net\".automation.duration")));
}
