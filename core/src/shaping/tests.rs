//! The built-in table, the rollup of domains to sites, and which rule reacts.

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;

use super::*;
use crate::domain_name::DomainName;

fn domain(name: &str) -> DomainName {
    DomainName::parse(name).unwrap()
}

fn mx(records: &[(u16, &str)]) -> Vec<(u16, String)> {
    records.iter().map(|(p, h)| (*p, (*h).to_owned())).collect()
}

fn site(table: &ShapingTable, records: &[(u16, &str)]) -> String {
    table.site_for(&mx(records), &domain("example.org")).0.to_string()
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-05T10:00:00Z").unwrap().to_utc()
}

fn rate(text: &str) -> MessageRate {
    MessageRate::parse(text).unwrap()
}

fn cases() -> u32 {
    std::env::var("TIDINGS_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

#[test]
fn the_built_in_table_has_kumomtas_numbers() {
    let table = ShapingTable::default();
    let limits = |suffix: &str| table.suffixes().find(|(s, _)| *s == suffix).map(|(_, l)| l.clone()).unwrap();
    let default = SiteLimits {
        connection_limit: 10,
        max_deliveries_per_connection: 100,
        max_message_rate: rate("100/s"),
        tls: TlsRequirement::Opportunistic,
    };
    assert_eq!(*table.default_limits(), default);
    let google = SiteLimits {
        connection_limit: 5,
        max_deliveries_per_connection: 50,
        tls: TlsRequirement::Required,
        ..default.clone()
    };
    assert_eq!(limits(".google.com"), google);
    assert_eq!(limits(".googlemail.com"), google);
    assert_eq!(limits(".yahoodns.net"), SiteLimits { max_deliveries_per_connection: 20, ..default.clone() });
    let microsoft = SiteLimits { connection_limit: 5, max_deliveries_per_connection: 50, ..default.clone() };
    assert_eq!(limits(".olc.protection.outlook.com"), microsoft);
    assert_eq!(limits(".mail.protection.outlook.com"), microsoft);
    assert_eq!(
        limits(".mail.icloud.com"),
        SiteLimits { connection_limit: 10, max_deliveries_per_connection: 5, ..default }
    );
    assert_eq!(table.suffixes().count(), 6);
}

#[test]
fn the_most_preferred_host_decides_by_its_longest_configured_suffix() {
    let table = ShapingTable::default();
    assert_eq!(
        site(&table, &[(5, "gmail-smtp-in.l.google.com."), (10, "alt1.gmail-smtp-in.l.google.com.")]),
        ".google.com"
    );
    assert_eq!(site(&table, &[(1, "ASPMX.L.GOOGLE.COM")]), ".google.com", "case and the trailing dot do not count");
    // The most preferred host decides, whatever the others are.
    assert_eq!(site(&table, &[(20, "mx.example.net"), (10, "aspmx.l.google.com")]), ".google.com");
    assert_eq!(
        site(&table, &[(10, "mx.example.net"), (20, "aspmx.l.google.com")]),
        "aspmx.l.google.com,mx.example.net"
    );
    // Longest suffix wins: an operator's suffix inside a built-in one.
    let table = ShapingTable::from_toml("[\".l.google.com\"]\nconnection_limit = 2\n").unwrap();
    let (key, limits) = table.site_for(&mx(&[(5, "aspmx.l.google.com")]), &domain("example.org"));
    assert_eq!((key.as_str(), limits.connection_limit), (".l.google.com", 2));
    assert_eq!(site(&table, &[(5, "smtp.google.com")]), ".google.com");
}

#[test]
fn a_suffix_matches_at_a_label_boundary_only() {
    let table = ShapingTable::default();
    assert_eq!(site(&table, &[(10, "evilgoogle.com")]), "evilgoogle.com");
    assert_eq!(site(&table, &[(10, "google.com")]), "google.com", "the suffix's own name is not under it");
    assert_eq!(site(&table, &[(10, "mx.google.com.evil.net")]), "mx.google.com.evil.net");
}

#[test]
fn without_a_suffix_domains_with_the_same_mx_hosts_share_a_site() {
    let table = ShapingTable::default();
    let a = table.site_for(&mx(&[(10, "mx2.example.net."), (5, "MX1.example.net")]), &domain("a.example"));
    let b = table
        .site_for(&mx(&[(1, "mx1.example.net"), (1, "mx2.example.net"), (2, "mx1.example.net")]), &domain("b.example"));
    assert_eq!(a.0.as_str(), "mx1.example.net,mx2.example.net");
    assert_eq!(a.0, b.0);
    assert!(!a.0.is_suffix());
    assert_eq!(a.1, table.default_limits());
    let c = table.site_for(&mx(&[(10, "mx1.example.net")]), &domain("c.example"));
    assert_ne!(a.0, c.0, "another set of hosts is another site");
}

#[test]
fn a_domain_without_mx_records_is_its_own_site() {
    let table = ShapingTable::default();
    let (key, limits) = table.site_for(&[], &domain("Example.COM"));
    assert_eq!((key.as_str(), limits), ("example.com", table.default_limits()));
    let (key, _) = table.site_for(&mx(&[(10, ".mx.example.net"), (20, "mx.example.net")]), &domain("a.example"));
    assert_eq!(
        key.as_str(),
        "mx.example.net",
        "no host name starts with a dot, so no site of hosts looks like a suffix"
    );
    let (key, _) = table.site_for(&mx(&[(0, ".")]), &domain("null.example"));
    assert_eq!(key.as_str(), "null.example", "a null MX (RFC 7505) has no host");
    assert_eq!(table.limits(&key), table.default_limits());
}

#[test]
fn a_site_key_finds_its_limits_again() {
    let table = ShapingTable::default();
    let (key, limits) = table.site_for(&mx(&[(5, "mta5.am0.yahoodns.net")]), &domain("yahoo.com"));
    assert!(key.is_suffix());
    assert_eq!(table.limits(&key), limits);
    assert_eq!(limits.max_deliveries_per_connection, 20);
}

#[test]
fn built_in_rules_react_for_their_provider_only() {
    let table = ShapingTable::default();
    let google = table.site_for(&mx(&[(5, "gmail-smtp-in.l.google.com")]), &domain("gmail.com")).0;
    let yahoo = table.site_for(&mx(&[(1, "mta6.am0.yahoodns.net")]), &domain("yahoo.com")).0;
    let other = table.site_for(&mx(&[(1, "mx.example.net")]), &domain("example.net")).0;
    let unusual = "421 4.7.28 Our system has detected an unusual rate of unsolicited mail";
    let reaction = table.react(&google, unusual, now()).unwrap();
    assert_eq!(reaction.action, RuleAction::Throttle(rate("1/min")));
    assert_eq!(reaction.until, now() + TimeDelta::minutes(90));
    assert_eq!(table.react(&yahoo, unusual, now()), None);
    assert_eq!(table.react(&other, unusual, now()), None);
    let ts04 = "421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred";
    assert_eq!(table.react(&yahoo, ts04, now()).unwrap().action, RuleAction::Suspend);
    assert_eq!(table.react(&google, ts04, now()), None);
}

#[test]
fn operator_rules_come_before_the_built_in_ones_site_first_then_default() {
    let file = r#"
[default]
automation = [{ regex = "4\\.7\\.28", action = "suspend", duration = "5m" }]

[".google.com"]
automation = [{ regex = "unusual rate", action = "throttle", max_message_rate = "10/h", duration = "1h" }]
"#;
    let table = ShapingTable::from_toml(file).unwrap();
    let google = table.site_for(&mx(&[(5, "aspmx.l.google.com")]), &domain("gmail.com")).0;
    let other = table.site_for(&mx(&[(5, "mx.example.net")]), &domain("example.net")).0;
    let reaction = table.react(&google, "421 4.7.28 an unusual rate of unsolicited mail", now()).unwrap();
    assert_eq!((reaction.action, reaction.rule.as_str()), (RuleAction::Throttle(rate("10/h")), "unusual rate"));
    assert_eq!(reaction.until, now() + TimeDelta::hours(1));
    let reaction = table.react(&google, "421 4.7.28 rate limited", now()).unwrap();
    assert_eq!((reaction.action, reaction.until), (RuleAction::Suspend, now() + TimeDelta::minutes(5)), "default's");
    assert_eq!(table.react(&other, "421 4.7.28 rate limited", now()).unwrap().action, RuleAction::Suspend);
    let unauthenticated = "550 5.7.26 This message does not have authentication information";
    assert_eq!(table.react(&google, unauthenticated, now()).unwrap().until, now() + TimeDelta::minutes(10), "built-in");
    assert_eq!(table.rules(&google).count(), 2 + 2);
    assert_eq!(table.rules(&other).count(), 1);
}

/// Host names made of labels that often end in a configured suffix, and some that almost do.
fn host() -> impl Strategy<Value = String> {
    let label = prop_oneof![
        Just("google".to_owned()),
        Just("evilgoogle".to_owned()),
        Just("l".to_owned()),
        Just("com".to_owned()),
        Just("yahoodns".to_owned()),
        Just("net".to_owned()),
        Just("mail".to_owned()),
        Just("protection".to_owned()),
        Just("outlook".to_owned()),
        Just("icloud".to_owned()),
        Just("GOOGLE".to_owned()),
        "[a-z0-9-]{0,6}",
    ];
    (proptest::collection::vec(label, 1..6), prop::bool::ANY)
        .prop_map(|(labels, dot)| format!("{}{}", labels.join("."), if dot { "." } else { "" }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn from_toml_never_panics(text in "\\PC{0,400}") {
        let _ = ShapingTable::from_toml(&text);
    }

    #[test]
    fn from_toml_never_panics_on_near_misses(
        lines in proptest::collection::vec(prop_oneof![
            Just("[default]".to_owned()),
            Just("[\".google.com\"]".to_owned()),
            Just("[\"google.com\"]".to_owned()),
            "connection_limit = -?[0-9]{1,12}",
            "max_deliveries_per_connection = [0-9]{1,3}",
            "max_message_rate = \"[0-9]{0,4}/(s|min|h|d)\"",
            "enable_tls = \"(required|opportunistic|none)\"",
            "automation = \\[\\{ regex = \"[a-z\\\\(\\[]{0,5}\", action = \"(suspend|throttle)\", duration = \"[0-9]{0,3}[smhd]\" \\}\\]",
            "\\PC{0,20}",
        ], 0..10)
    ) {
        let text = lines.join("\n");
        if let Err(e) = ShapingTable::from_toml(&text) {
            prop_assert!(e.line >= 1 && e.line <= text.split('\n').count(), "{e} of {text:?}");
        }
    }

    #[test]
    fn the_rollup_never_picks_a_suffix_the_preferred_host_does_not_end_with(
        records in proptest::collection::vec((0u16..4, host()), 0..5),
        extra in proptest::collection::vec("(\\.[a-z]{1,8}){2,3}", 0..4),
    ) {
        let file: String = extra.iter().map(|s| format!("[\"{s}\"]\nconnection_limit = 1\n")).collect();
        let table = ShapingTable::from_toml(&file).unwrap_or_default();
        let (key, limits) = table.site_for(&records, &domain("example.org"));
        prop_assert_eq!(table.limits(&key), limits);
        let mut hosts: Vec<(u16, String)> = records
            .iter()
            .map(|(p, h)| (*p, h.strip_suffix('.').unwrap_or(h).trim_start_matches('.').to_ascii_lowercase()))
            .filter(|(_, h)| !h.is_empty())
            .collect();
        hosts.sort();
        match hosts.first() {
            None => prop_assert_eq!(key.as_str(), "example.org"),
            Some((_, preferred)) if key.is_suffix() => {
                prop_assert!(preferred.ends_with(key.as_str()), "{} does not end with {}", preferred, key);
            }
            Some(_) => {
                prop_assert!(table.suffixes().all(|(s, _)| !hosts[0].1.ends_with(s)), "a suffix matched but was not picked");
                prop_assert_eq!(limits, table.default_limits());
            }
        }
    }
}
