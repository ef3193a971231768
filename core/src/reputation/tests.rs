use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;

use super::*;
use crate::activity::rates::Percent;

fn counts(delivered: u64, hard: u64, soft: u64, complained: u64) -> ActivityCounts {
    ActivityCounts { delivered, hard_bounced: hard, soft_bounced: soft, complained, ..ActivityCounts::default() }
}

fn at(hours: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 30, 0).unwrap() + Duration::hours(hours)
}

#[test]
fn the_contracts_thresholds_are_the_defaults() {
    let policy = ReputationPolicy::default();
    assert_eq!(policy.window, Duration::days(7));
    assert_eq!(policy.min_volume, 200);
    assert_eq!(policy.bounce.warn, parse_threshold("4%").unwrap());
    assert_eq!(policy.bounce.pause, parse_threshold("8%").unwrap());
    assert_eq!(policy.complaint.warn, parse_threshold("0.08%").unwrap());
    assert_eq!(policy.complaint.pause, parse_threshold("0.3%").unwrap());
}

#[test]
fn rates_at_a_threshold_reach_it_and_a_hair_below_do_not() {
    let policy = ReputationPolicy::default();
    // 8 of 100 is 8 %: paused. 7 hard bounces of 100: warned (over 4 %).
    assert!(matches!(judge(&policy, &counts(920, 80, 0, 0)), Verdict::Pause(b) if b.kind == RateKind::Bounce));
    assert!(matches!(judge(&policy, &counts(921, 79, 0, 0)), Verdict::Warn(b) if b.kind == RateKind::Bounce));
    assert_eq!(judge(&policy, &counts(961, 39, 0, 0)), Verdict::Good);
    // Soft bounces count in the base only.
    assert_eq!(judge(&policy, &counts(900, 39, 61, 0)), Verdict::Good);
    // Complaints: 3 of 1000 delivered is 0.3 %.
    assert!(matches!(judge(&policy, &counts(1000, 0, 0, 3)), Verdict::Pause(b) if b.kind == RateKind::Complaint));
    assert!(matches!(judge(&policy, &counts(1250, 0, 0, 1)), Verdict::Warn(b) if b.kind == RateKind::Complaint));
    assert_eq!(judge(&policy, &counts(1251, 0, 0, 1)), Verdict::Good);
}

#[test]
fn nothing_is_judged_under_the_minimum_volume() {
    let policy = ReputationPolicy::default();
    assert_eq!(judge(&policy, &counts(100, 99, 0, 50)), Verdict::Good);
    assert!(matches!(judge(&policy, &counts(101, 99, 0, 0)), Verdict::Pause(_)));
}

#[test]
fn thresholds_turned_off_never_fire() {
    let policy = ReputationPolicy {
        bounce: Thresholds { warn: None, pause: None },
        complaint: Thresholds { warn: parse_threshold("0.1%").unwrap(), pause: None },
        ..ReputationPolicy::default()
    };
    assert_eq!(judge(&policy, &counts(0, 1000, 0, 0)), Verdict::Good);
    assert!(matches!(judge(&policy, &counts(1000, 0, 0, 500)), Verdict::Warn(_)));
    assert!(policy.is_on());
    let off = ReputationPolicy { complaint: Thresholds { warn: None, pause: None }, ..policy };
    assert!(!off.is_on());
}

#[test]
fn thresholds_read_as_operators_write_them() {
    assert_eq!(parse_threshold("8%"), Ok(Some(Percent(8_000))));
    assert_eq!(parse_threshold(" 0.08 % "), Ok(Some(Percent(80))));
    assert_eq!(parse_threshold("0.3%"), Ok(Some(Percent(300))));
    assert_eq!(parse_threshold("100%"), Ok(Some(Percent(100_000))));
    assert_eq!(parse_threshold("OFF"), Ok(None));
    for bad in ["8", "0%", "101%", "-1%", "0.0001%", "1e2%", "%", ".5%", "5.%", "", "eight%", "1000%"] {
        assert!(parse_threshold(bad).is_err(), "{bad:?} was taken");
    }
}

#[test]
fn a_pause_stays_until_resumed_and_a_warning_is_said_once() {
    let b = Breach { kind: RateKind::Bounce, part: 50, whole: 1000, threshold: Percent(4_000) };
    let (warned, said) = Standing::Good.next(Verdict::Warn(b), at(0)).unwrap();
    assert_eq!(said, Some(Announcement::ReputationWarning(b)));
    assert_eq!(warned.next(Verdict::Warn(b), at(1)), None);
    let (paused, said) = warned.next(Verdict::Pause(b), at(2)).unwrap();
    assert_eq!(said, Some(Announcement::SendingPaused(b)));
    assert!(paused.is_paused());
    for verdict in [Verdict::Good, Verdict::Warn(b), Verdict::Pause(b)] {
        assert_eq!(paused.next(verdict, at(3)), None);
    }
    assert_eq!(warned.next(Verdict::Good, at(4)), Some((Standing::Good, None)));
}

fn row(domain: DomainId, hour: i64, c: ActivityCounts) -> HourlyActivity {
    HourlyActivity { domain, hour: HourStart::of(at(hour)), counts: c }
}

#[test]
fn after_a_resume_only_later_mail_counts() {
    let (a, b) = (DomainId(ulid::Ulid(1)), DomainId(ulid::Ulid(2)));
    let rows = vec![row(a, 0, counts(100, 50, 0, 0)), row(a, 5, counts(300, 40, 0, 0)), row(b, 5, counts(10, 0, 0, 1))];
    let from = HourStart::of(at(-100));
    assert_eq!(counted(&rows, a, from, None), counts(400, 90, 0, 0));
    assert_eq!(counted(&rows, b, from, None), counts(10, 0, 0, 1));
    // Resumed in hour 5 after 300 and 40 were counted there: they are not counted again.
    let baseline = baseline_at(&rows, Scope::Domain(a), at(5));
    assert_eq!(baseline.counts.len(), 1, "a domain's resume holds that domain only");
    assert_eq!(counted(&rows, a, from, Some(&baseline)), ActivityCounts::default());
    let later = vec![rows[0], row(a, 5, counts(310, 41, 0, 0)), row(a, 6, counts(5, 0, 0, 0))];
    assert_eq!(counted(&later, a, from, Some(&baseline)), counts(15, 1, 0, 0));
    // The workspace's resume holds every domain.
    let whole = baseline_at(&rows, Scope::Workspace, at(5));
    assert_eq!(counted(&rows, b, from, Some(&whole)), ActivityCounts::default());
    assert_eq!(counted(&later, a, from, Some(&whole)), counts(15, 1, 0, 0));
    // The later of two resumes counts.
    let earlier = Baseline { resumed_at: at(1), counts: vec![] };
    assert_eq!(Baseline::latest(Some(&earlier), Some(&baseline)), Some(&baseline));
    assert_eq!(Baseline::latest(Some(&baseline), Some(&earlier)), Some(&baseline));
    assert_eq!(Baseline::latest(None, Some(&earlier)), Some(&earlier));
    // A resume before the window's start changes nothing.
    let old = Baseline { resumed_at: at(-200), counts: vec![(a, counts(9, 9, 9, 9).to_array())] };
    assert_eq!(counted(&rows, a, from, Some(&old)), counts(400, 90, 0, 0));
    // The window's start drops older hours.
    assert_eq!(counted(&rows, a, HourStart::of(at(1)), None), counts(300, 40, 0, 0));
}

fn arb_counts() -> impl Strategy<Value = ActivityCounts> {
    (0u64..5_000, 0u64..600, 0u64..600, 0u64..60).prop_map(|(d, h, s, c)| counts(d, h, s, c))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::outbound::test_support::proptest_cases(256)))]

    /// The verdict agrees with the rates computed in floating point, away from the
    /// thresholds' edges (exactly at them the integer rule is checked above).
    #[test]
    fn the_verdict_follows_the_rates(c in arb_counts()) {
        let policy = ReputationPolicy::default();
        let volume = c.delivered + c.bounced();
        let bounce = if volume == 0 { 0.0 } else { c.hard_bounced as f64 * 100.0 / volume as f64 };
        let complaint = if c.delivered == 0 { 0.0 } else { c.complained as f64 * 100.0 / c.delivered as f64 };
        let edge = |x: f64, t: f64| (x - t).abs() < 1e-9;
        prop_assume!(!edge(bounce, 4.0) && !edge(bounce, 8.0) && !edge(complaint, 0.08) && !edge(complaint, 0.3));
        let expected = if volume < 200 {
            "good"
        } else if bounce > 8.0 || complaint > 0.3 {
            "pause"
        } else if bounce > 4.0 || complaint > 0.08 {
            "warn"
        } else {
            "good"
        };
        let got = match judge(&policy, &c) {
            Verdict::Good => "good",
            Verdict::Warn(_) => "warn",
            Verdict::Pause(_) => "pause",
        };
        prop_assert_eq!(got, expected);
    }

    /// Over any sequence of verdicts: a pause is announced exactly when the standing becomes
    /// paused, never lifted, and a warning is announced only on the way up from good.
    #[test]
    fn standings_move_only_as_the_rules_say(verdicts in proptest::collection::vec(arb_counts(), 1..30)) {
        let policy = ReputationPolicy::default();
        let mut standing = Standing::Good;
        let mut pauses = 0;
        for (i, c) in verdicts.iter().enumerate() {
            let verdict = judge(&policy, c);
            let before = standing;
            if let Some((next, said)) = standing.next(verdict, at(i as i64)) {
                prop_assert!(!before.is_paused(), "a pause was lifted");
                match said {
                    Some(Announcement::SendingPaused(_)) => {
                        pauses += 1;
                        prop_assert!(next.is_paused());
                    }
                    Some(Announcement::ReputationWarning(_)) => {
                        prop_assert_eq!(before, Standing::Good);
                        prop_assert!(matches!(next, Standing::Warned { .. }), "a warning leaves the standing warned");
                    }
                    None => prop_assert_eq!(next, Standing::Good),
                }
                standing = next;
            }
            prop_assert_eq!(standing.is_paused(), pauses == 1);
        }
    }
}
