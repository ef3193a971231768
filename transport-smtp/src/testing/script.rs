//! How a test tells [`SmtpSink`](super::SmtpSink) to misbehave: at a [`Stage`] of the
//! exchange, answer with a chosen reply, drop the connection, or go silent, for the next N
//! times or for good, for every message or only for one recipient.

/// A point of the SMTP exchange where the sink can be scripted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The 220 greeting when a client connects.
    Greeting,
    /// The reply to EHLO or HELO.
    Ehlo,
    /// The reply to MAIL FROM.
    Mail,
    /// The reply to RCPT TO (a recipient filter matches the recipient of that command).
    Rcpt,
    /// The reply to the DATA command itself (the 354).
    Data,
    /// The message: a reply replaces the 250 after the final dot; a disconnect happens in
    /// the middle of the message, after its first line; silence comes after the final dot.
    Message,
}

/// What the sink does instead of its normal answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Answers with this reply, e.g. `451` and `4.7.1 try again later`. Multi-line text
    /// (with `\n`) is sent as a multi-line reply.
    Reply {
        /// Three-digit code.
        code: u16,
        /// Text after the code, enhanced status code included when wanted.
        text: String,
    },
    /// Closes the connection without a word.
    Disconnect,
    /// Never answers; reads and discards whatever the client sends until it gives up.
    Hang,
}

/// One scripted deviation: an [`Action`] at a [`Stage`], optionally limited to a number of
/// times and to one recipient. Rules are matched in the order they were added; the first
/// that matches is used (and counts down).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub(super) stage: Stage,
    pub(super) action: Action,
    pub(super) remaining: Option<usize>,
    pub(super) recipient: Option<String>,
}

impl Rule {
    /// Answer `code text` at `stage`, e.g. `Rule::reply(Stage::Rcpt, 550, "5.1.1 user unknown")`.
    pub fn reply(stage: Stage, code: u16, text: &str) -> Self {
        Self::new(stage, Action::Reply { code, text: text.to_owned() })
    }

    /// Drop the connection at `stage`.
    pub fn disconnect(stage: Stage) -> Self {
        Self::new(stage, Action::Disconnect)
    }

    /// Stop answering at `stage`.
    pub fn hang(stage: Stage) -> Self {
        Self::new(stage, Action::Hang)
    }

    /// Any action at `stage`, for good until limited with [`Rule::times`].
    pub fn new(stage: Stage, action: Action) -> Self {
        Self { stage, action, remaining: None, recipient: None }
    }

    /// Only the next `n` times it matches.
    pub fn times(mut self, n: usize) -> Self {
        self.remaining = Some(n);
        self
    }

    /// Only when `address` is the recipient (at [`Stage::Rcpt`]) or among the message's
    /// recipients (at [`Stage::Data`] and [`Stage::Message`]); compared case-insensitively.
    /// Such a rule never matches at the stages before any recipient is known.
    pub fn for_recipient(mut self, address: &str) -> Self {
        self.recipient = Some(address.to_owned());
        self
    }

    /// Whether it applies at `stage` with these recipients.
    pub(super) fn matches(&self, stage: Stage, recipients: &[String]) -> bool {
        self.stage == stage
            && self.remaining != Some(0)
            && self
                .recipient
                .as_ref()
                .is_none_or(|wanted| recipients.iter().any(|recipient| recipient.eq_ignore_ascii_case(wanted)))
    }
}

/// Takes the action of the first rule matching, counting it down (and dropping spent rules).
pub(super) fn take_action(rules: &mut Vec<Rule>, stage: Stage, recipients: &[String]) -> Option<Action> {
    let index = rules.iter().position(|rule| rule.matches(stage, recipients))?;
    let rule = &mut rules[index];
    let action = rule.action.clone();
    if let Some(remaining) = &mut rule.remaining {
        *remaining -= 1;
        if *remaining == 0 {
            rules.remove(index);
        }
    }
    Some(action)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(addresses: &[&str]) -> Vec<String> {
        addresses.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn limited_rules_count_down_and_disappear() {
        let mut rules = vec![Rule::reply(Stage::Message, 451, "4.7.1 later").times(2)];
        for _ in 0..2 {
            assert!(matches!(take_action(&mut rules, Stage::Message, &[]), Some(Action::Reply { code: 451, .. })));
        }
        assert_eq!(take_action(&mut rules, Stage::Message, &[]), None);
        assert!(rules.is_empty());
    }

    #[test]
    fn recipient_rules_match_only_their_recipient() {
        let mut rules = vec![Rule::reply(Stage::Rcpt, 550, "5.1.1 unknown").for_recipient("Bob@Example.com")];
        assert_eq!(take_action(&mut rules, Stage::Rcpt, &to(&["alice@example.com"])), None);
        assert_eq!(take_action(&mut rules, Stage::Mail, &[]), None);
        assert!(take_action(&mut rules, Stage::Rcpt, &to(&["bob@example.com"])).is_some());
        assert!(take_action(&mut rules, Stage::Rcpt, &to(&["bob@example.com"])).is_some(), "unlimited");
    }

    #[test]
    fn the_first_matching_rule_wins() {
        let mut rules = vec![Rule::disconnect(Stage::Data).times(1), Rule::hang(Stage::Data)];
        assert_eq!(take_action(&mut rules, Stage::Data, &[]), Some(Action::Disconnect));
        assert_eq!(take_action(&mut rules, Stage::Data, &[]), Some(Action::Hang));
    }
}
