//! Adaptive rules: a reply from a site that matches a rule's regular expression suspends the
//! site, or lowers its rate, for the rule's duration. This module holds the rules and the
//! built-in ones for the large providers' known replies; [`super::ShapingTable::react`]
//! picks the rule that applies, and the delivery worker keeps the state it sets.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use regex::Regex;

use super::rate::MessageRate;

/// Largest compiled size of an operator's regular expression: far above any reply pattern,
/// and keeps a mistyped repetition from taking the memory of the process.
pub(crate) const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// What a matching reply does to its site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    /// No delivery to the site until the rule's duration has passed.
    Suspend,
    /// The site's rate is at most this until the rule's duration has passed.
    Throttle(MessageRate),
}

/// One rule: a regular expression over the reply (code, enhanced code and text, as the
/// server sent them), what a match does, and for how long.
#[derive(Debug, Clone)]
pub struct AdaptiveRule {
    /// What the reply is matched against (anywhere in it).
    pub regex: Regex,
    /// What a match does.
    pub action: RuleAction,
    /// How long it lasts from the reply.
    pub duration: Duration,
}

/// Two rules are the same when they match with the same expression, as written.
impl PartialEq for AdaptiveRule {
    fn eq(&self, other: &Self) -> bool {
        self.regex.as_str() == other.regex.as_str() && self.action == other.action && self.duration == other.duration
    }
}

impl Eq for AdaptiveRule {}

/// What a reply did to its site, from [`super::ShapingTable::react`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaction {
    /// Suspend, or throttle to a rate.
    pub action: RuleAction,
    /// Until when (the reply's time plus the rule's duration).
    pub until: DateTime<Utc>,
    /// The regular expression that matched, as written: why, for the operator.
    pub rule: String,
}

impl AdaptiveRule {
    /// The reaction to `reply` received at `now`, if this rule matches it.
    pub fn react(&self, reply: &str, now: DateTime<Utc>) -> Option<Reaction> {
        if !self.regex.is_match(reply) {
            return None;
        }
        // Durations are at most 30 days (the file's bound), far inside chrono's range.
        let until = TimeDelta::from_std(self.duration).ok().and_then(|d| now.checked_add_signed(d)).unwrap_or(now);
        Some(Reaction { action: self.action, until, rule: self.regex.as_str().to_owned() })
    }
}

/// A built-in rule; its expression is a constant the tests compile.
fn rule(pattern: &str, action: RuleAction, minutes: u64) -> AdaptiveRule {
    let regex = match Regex::new(pattern) {
        Ok(regex) => regex,
        // Unreachable: `every_built_in_rule_compiles` compiles each pattern.
        Err(e) => panic!("built-in shaping rule {pattern:?}: {e}"),
    };
    AdaptiveRule { regex, action, duration: Duration::from_secs(minutes * 60) }
}

/// Throttled to one message a minute.
const ONE_PER_MINUTE: RuleAction = RuleAction::Throttle(MessageRate::ONE_PER_MINUTE);

/// Google's replies (Gmail and Workspace share the MX hosts), from
/// <https://support.google.com/mail/answer/81126> and Google's SMTP error reference.
pub(crate) fn google() -> Vec<AdaptiveRule> {
    vec![
        // `421 4.7.28 ... unusual rate of unsolicited mail`: Google is rate limiting this
        // sender. One message a minute for 90 minutes is what KumoMTA's published shaping file
        // does for the providers' rate-limit replies (its `default` automation).
        rule(r"\b4\.7\.28\b|(?i)unusual rate of unsolicited mail", ONE_PER_MINUTE, 90),
        // `4.7.26`/`5.7.26`, "This message does not have authentication information or fails
        // to pass authentication checks": about one sender's domain (SPF/DKIM), not the
        // site. KumoMTA's example suspends the tenant for 3 hours; Tidings has no tenant
        // queue yet, and a long suspension would stop every workspace's Gmail for one
        // domain's records, so our choice is a brief pause that stops hammering.
        rule(r"\b[45]\.7\.26\b|(?i)does not have authentication information", RuleAction::Suspend, 10),
    ]
}

/// Yahoo's `[TS0x]` deferrals (also written `[TSS0x]`). Yahoo's help page on 4xx replies
/// (<https://help.yahoo.com/kb/review-xx-smtp-sln26151.html>) asks senders to retry about 4
/// hours after one; `[TS03]` says "All messages from ... will be permanently deferred;
/// Retrying will NOT succeed" (<https://help.yahoo.com/kb/SLN3436.html>); KumoMTA's
/// published shaping file suspends Yahoo for 2 hours on `[TS04]`, which it gives as Yahoo's
/// recommendation. The durations below are our choices from those: the mildest codes
/// (`TS01`, `TS02`) an hour, `TS04` KumoMTA's 2 hours, `TS03` Yahoo's 4 hours.
pub(crate) fn yahoo() -> Vec<AdaptiveRule> {
    vec![
        rule(r"\[TSS?0[12]\]", RuleAction::Suspend, 60),
        rule(r"\[TSS?03\]", RuleAction::Suspend, 240),
        rule(r"\[(?:IP)?TSS?04\]", RuleAction::Suspend, 120),
    ]
}

/// Microsoft's throttling replies, consumer (Outlook.com) and 365 alike: "451 4.7.650 The
/// mail server [...] has been temporarily rate limited due to IP reputation ... (S775)"
/// (also S3114, S3150) and `RP-001`..`RP-003` (rate and connection limits) lower the rate to
/// one message a minute for 90 minutes, as KumoMTA's published shaping file does for this
/// text; any other `4.7.500`–`4.7.899` ("Access denied, please try again later" and the
/// like, Exchange Online's temporary policy refusals) suspends the site for 15 minutes, our
/// choice.
pub(crate) fn microsoft() -> Vec<AdaptiveRule> {
    vec![
        rule(
            r"(?i)temporarily rate limited due to IP reputation|\(S(?:775|3114|3150)\)|\bRP-00[1-3]\b",
            ONE_PER_MINUTE,
            90,
        ),
        rule(r"\b4\.7\.[5-8][0-9]{2}\b", RuleAction::Suspend, 15),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-05T10:00:00Z").unwrap().to_utc()
    }

    /// The first rule of `rules` that matches `reply`, as (action, minutes).
    fn first(rules: &[AdaptiveRule], reply: &str) -> Option<(RuleAction, i64)> {
        rules.iter().find_map(|r| r.react(reply, now())).map(|r| (r.action, (r.until - now()).num_minutes()))
    }

    #[test]
    fn every_built_in_rule_compiles() {
        assert_eq!(google().len() + yahoo().len() + microsoft().len(), 7);
    }

    #[test]
    fn gmail_unusual_rate_throttles_and_unauthenticated_mail_suspends_briefly() {
        let throttle = Some((ONE_PER_MINUTE, 90));
        assert_eq!(
            first(&google(), "421-4.7.28 Our system has detected an unusual rate of unsolicited mail originating"),
            throttle
        );
        assert_eq!(first(&google(), "421 4.7.28 [192.0.2.1] rate limited"), throttle);
        let suspend = Some((RuleAction::Suspend, 10));
        assert_eq!(first(&google(), "550-5.7.26 This mail is unauthenticated"), suspend);
        assert_eq!(first(&google(), "421-4.7.26 This message does not have authentication information"), suspend);
        assert_eq!(first(&google(), "550 5.1.1 The email account that you tried to reach does not exist"), None);
        assert_eq!(first(&google(), "421 4.7.280 something else"), None, "a whole enhanced code only");
    }

    #[test]
    fn yahoo_ts_codes_suspend_longer_the_worse_they_are() {
        let suspend = |minutes| Some((RuleAction::Suspend, minutes));
        assert_eq!(first(&yahoo(), "421 4.7.0 [TS01] Messages from 192.0.2.1 temporarily deferred"), suspend(60));
        assert_eq!(first(&yahoo(), "421 4.7.0 [TS02] Messages from 192.0.2.1 temporarily deferred"), suspend(60));
        assert_eq!(
            first(&yahoo(), "421 4.7.1 [TS03] All messages from 192.0.2.1 will be permanently deferred"),
            suspend(240)
        );
        assert_eq!(first(&yahoo(), "421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred"), suspend(120));
        assert_eq!(first(&yahoo(), "421 [IPTS04] Messages from 192.0.2.1 temporarily deferred"), suspend(120));
        assert_eq!(first(&yahoo(), "421 4.7.0 [GL01] Message from 192.0.2.1 temporarily deferred"), None);
        assert_eq!(first(&yahoo(), "TS01 without brackets"), None);
    }

    #[test]
    fn microsoft_rate_limits_throttle_and_other_4_7_5xx_to_8xx_suspend() {
        let throttle = Some((ONE_PER_MINUTE, 90));
        assert_eq!(
            first(
                &microsoft(),
                "451 4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP reputation. (S775)"
            ),
            throttle
        );
        assert_eq!(first(&microsoft(), "451 4.7.651 The mail server [192.0.2.1] blocked (S3114)"), throttle);
        assert_eq!(first(&microsoft(), "421 RP-001 The sending IP exceeded a rate limit"), throttle);
        let suspend = Some((RuleAction::Suspend, 15));
        assert_eq!(first(&microsoft(), "451 4.7.500 Access denied, please try again later"), suspend);
        assert_eq!(first(&microsoft(), "451 4.7.899 whatever"), suspend);
        assert_eq!(first(&microsoft(), "451 4.7.499 not throttling"), None);
        assert_eq!(first(&microsoft(), "451 4.7.900 not throttling"), None);
        assert_eq!(first(&microsoft(), "550 5.7.606 Access denied, banned sending IP"), None);
    }

    #[test]
    fn a_reaction_lasts_the_rules_duration_from_now_and_names_the_rule() {
        let rule = rule("busy", RuleAction::Suspend, 10);
        let reaction = rule.react("421 busy", now()).unwrap();
        assert_eq!(reaction.until, now() + TimeDelta::minutes(10));
        assert_eq!(reaction.rule, "busy");
        assert_eq!(rule.react("250 ok", now()), None);
    }
}
