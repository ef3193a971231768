//! The policy file's parser and MX matching: RFC 8461's examples, the invalid cases, and
//! properties over generated files.

use proptest::prelude::*;

use super::*;

const EXAMPLE: &str = "version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.example.net\r\nmx: backupmx.example.com\r\nmax_age: 604800\r\n";

#[test]
fn the_rfc_example_parses() {
    let policy = Policy::parse(EXAMPLE).unwrap();
    assert_eq!(policy.mode, Mode::Enforce);
    assert_eq!(policy.max_age, 604_800);
    let patterns: Vec<String> = policy.mx.iter().map(ToString::to_string).collect();
    assert_eq!(patterns, ["mail.example.com", "*.example.net", "backupmx.example.com"]);
}

#[test]
fn lf_line_ends_spaces_blank_lines_and_unknown_keys_are_accepted() {
    let text = "version: STSv1\nmode:testing  \n\nmx:\tMX.Example.COM.\nfuture_key: anything: at all\nmax_age: 0";
    let policy = Policy::parse(text).unwrap();
    assert_eq!(policy.mode, Mode::Testing);
    assert_eq!(policy.max_age, 0);
    assert_eq!(policy.mx, [MxPattern::parse("mx.example.com").unwrap()]);
}

#[test]
fn mode_none_needs_no_mx() {
    let policy = Policy::parse("version: STSv1\nmode: none\nmax_age: 86400\n").unwrap();
    assert_eq!(policy.mode, Mode::None);
    assert!(policy.mx.is_empty());
}

#[test]
fn missing_repeated_or_bad_fields_make_the_policy_invalid() {
    let cases: &[(&str, PolicyError)] = &[
        ("mode: enforce\nmx: a.test\nmax_age: 1\n", PolicyError::Missing("version")),
        ("version: STSv1\nmx: a.test\nmax_age: 1\n", PolicyError::Missing("mode")),
        ("version: STSv1\nmode: enforce\nmx: a.test\n", PolicyError::Missing("max_age")),
        ("version: STSv1\nmode: enforce\nmax_age: 1\n", PolicyError::Missing("mx")),
        ("version: STSv1\nmode: testing\nmax_age: 1\n", PolicyError::Missing("mx")),
        ("version: STSv2\nmode: enforce\nmx: a.test\nmax_age: 1\n", PolicyError::Version("STSv2".into())),
        ("version: STSv1\nmode: Enforce\nmx: a.test\nmax_age: 1\n", PolicyError::Mode("Enforce".into())),
        ("version: STSv1\nmode: enforce\nmode: testing\nmx: a.test\nmax_age: 1\n", PolicyError::Repeated("mode")),
        ("version: STSv1\nmode: enforce\nmx: a.test\nmax_age: 31557601\n", PolicyError::MaxAge("31557601".into())),
        ("version: STSv1\nmode: enforce\nmx: a.test\nmax_age: -1\n", PolicyError::MaxAge("-1".into())),
        (
            "version: STSv1\nmode: enforce\nmx: a.test\nmax_age: 99999999999\n",
            PolicyError::MaxAge("99999999999".into()),
        ),
        ("version: STSv1\nmode: enforce\nmx: a.test\nmax_age:\n", PolicyError::MaxAge(String::new())),
        ("version: STSv1\nmode: enforce\nmx: a..test\nmax_age: 1\n", PolicyError::BadMx("a..test".into())),
        ("version: STSv1\nmode: enforce\nmx: *\nmax_age: 1\n", PolicyError::BadMx("*".into())),
        ("version: STSv1\nmode: enforce\nmx: a.*.test\nmax_age: 1\n", PolicyError::BadMx("a.*.test".into())),
        ("version: STSv1\nmode: enforce\nmx:\nmax_age: 1\n", PolicyError::BadMx(String::new())),
        ("version: STSv1\nmode enforce\nmx: a.test\nmax_age: 1\n", PolicyError::Line(2)),
        (" version: STSv1\nmode: enforce\nmx: a.test\nmax_age: 1\n", PolicyError::Line(1)),
        ("<html>\n<body>Not found</body>\n", PolicyError::Line(1)),
        ("", PolicyError::Missing("version")),
    ];
    for (text, expected) in cases {
        assert_eq!(Policy::parse(text).as_ref(), Err(expected), "{text:?}");
    }
    assert_eq!(Policy::from_bytes(b"version: STSv1\nmode: \xff\n"), Err(PolicyError::NotText));
    assert_eq!(
        Policy::parse("version: STSv1\nmode: enforce\nmx: a.test\nmax_age: 31557600").unwrap().max_age,
        MAX_AGE_LIMIT
    );
}

#[test]
fn exact_patterns_match_the_host_ignoring_case_and_a_trailing_dot() {
    let pattern = MxPattern::parse("mail.Example.com").unwrap();
    assert!(pattern.matches("mail.example.com"));
    assert!(pattern.matches("MAIL.EXAMPLE.COM."));
    assert!(!pattern.matches("mx.mail.example.com"));
    assert!(!pattern.matches("example.com"));
    assert!(!pattern.matches("mail.example.co"));
}

#[test]
fn a_wildcard_matches_exactly_one_leftmost_label() {
    let pattern = MxPattern::parse("*.example.net").unwrap();
    assert!(pattern.matches("mx1.example.net"));
    assert!(pattern.matches("MX1.Example.NET."));
    assert!(!pattern.matches("example.net"));
    assert!(!pattern.matches(".example.net"));
    assert!(!pattern.matches("a.b.example.net"));
    assert!(!pattern.matches("mx1.badexample.net"));
    assert!(!pattern.matches("mx1example.net"));
}

#[test]
fn a_policy_allows_the_hosts_of_any_of_its_patterns() {
    let policy = Policy::parse(EXAMPLE).unwrap();
    assert!(policy.allows("mail.example.com"));
    assert!(policy.allows("mx7.example.net"));
    assert!(policy.allows("backupmx.example.com."));
    assert!(!policy.allows("mx.attacker.test"));
    assert!(!policy.allows("example.net"));
}

fn cases() -> u32 {
    std::env::var("TIDINGS_PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

fn pattern() -> impl Strategy<Value = MxPattern> {
    (any::<bool>(), "[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?(\\.[a-z0-9]{1,10}){0,3}")
        .prop_map(|(wildcard, name)| MxPattern { wildcard, name })
}

fn policy() -> impl Strategy<Value = Policy> {
    let mode = prop_oneof![Just(Mode::Enforce), Just(Mode::Testing), Just(Mode::None)];
    (mode, proptest::collection::vec(pattern(), 1..5), 0..=MAX_AGE_LIMIT).prop_map(|(mode, mx, max_age)| Policy {
        mode,
        mx,
        max_age,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Any bytes at all: an error or a policy, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Policy::from_bytes(&bytes);
    }

    /// Text built from the policy's own vocabulary, where the parser's branches are.
    #[test]
    fn policy_like_text_never_panics(
        lines in proptest::collection::vec(
            "(version|mode|mx|max_age|x)?:?[ \t]*(STSv1|enforce|testing|none|\\*\\.|[a-z.*-]{0,12}|[0-9]{0,12})[ \t]*\r?",
            0..8,
        ),
    ) {
        let _ = Policy::parse(&lines.join("\n"));
    }

    /// A policy written out parses back to itself, with either line end and unknown keys
    /// mixed in.
    #[test]
    fn valid_policies_round_trip(policy in policy(), lf in any::<bool>(), extra in "[a-z][a-z0-9_]{0,10}") {
        let mut text = policy.to_string();
        if lf {
            text = text.replace("\r\n", "\n");
        }
        if !matches!(extra.as_str(), "version" | "mode" | "mx" | "max_age") {
            text.insert_str(0, &format!("{extra}: some value\r\n"));
        }
        prop_assert_eq!(Policy::parse(&text), Ok(policy));
    }

    /// Every pattern matches a host made from it (its wildcard replaced by a label), in any
    /// case, with or without a trailing dot; never one with a label more or less.
    #[test]
    fn patterns_match_their_own_hosts(pattern in pattern(), label in "[a-z0-9]{1,10}", upper in any::<bool>(), dot in any::<bool>()) {
        let host = if pattern.wildcard { format!("{label}.{}", pattern.name) } else { pattern.name.clone() };
        let mut shown = if upper { host.to_ascii_uppercase() } else { host.clone() };
        if dot {
            shown.push('.');
        }
        prop_assert!(pattern.matches(&shown));
        let deeper = format!("{label}.{host}");
        prop_assert!(!pattern.matches(&deeper));
        if pattern.wildcard {
            prop_assert!(!pattern.matches(&pattern.name));
        }
    }

    /// Matching arbitrary host text never panics (non-ASCII included).
    #[test]
    fn matching_arbitrary_hosts_never_panics(pattern in pattern(), host in any::<String>()) {
        let _ = pattern.matches(&host);
    }
}
