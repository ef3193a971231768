//! The one table that turns what a transport observed into what happens to the message
//! (STYLE: "classify remote outcomes once, in one module"). Relay, direct MX, the outbox and
//! later asynchronous bounce reports all go through it.
//!
//! It sits below both of its users: the delivery worker (`crate::delivery`, which re-exports
//! it) and the use case that reads bounce reports (`crate::usecases`), which the worker
//! itself calls into.
//!
//! | observed | verdict |
//! |---|---|
//! | 2xx reply | `Delivered` |
//! | 4xx reply | `Retry` (honouring a retry time named in the text) |
//! | 530, 534, 535, 538 (authentication at the relay) | `Retry`: our configuration, not the recipient |
//! | 5xx with `5.1.x`, except 5.1.7/5.1.8 | `Bounce(Hard)`: the address is bad; suppress it |
//! | 5xx with `5.1.7`, `5.1.8` (the *sender's* address) | `Bounce(Soft)` |
//! | 5xx with `5.2.1` (mailbox disabled), `5.7.13` (account disabled), `5.7.17`/`5.7.18` (mailbox/domain owner changed) | `Bounce(Hard)` |
//! | 5xx with any other `5.2.x` (5.2.2 mailbox full, 5.2.3 too long, …) | `Bounce(Soft)` |
//! | 5xx with `5.3.x` (e.g. 5.3.4 too big), `5.4.x`, `5.5.x`, `5.6.x` (content), `5.7.x` (policy, spam) | `Bounce(Soft)` |
//! | 5xx with `5.0.x` ("other") or an unknown subject (≥ 8), or without an enhanced code | by the basic code, below |
//! | 552 (storage exceeded / too much data), 500–504 (protocol) | `Bounce(Soft)` |
//! | 521, 556 (host or domain accepts no mail, RFC 7504), any other 5xx | `Bounce(Hard)` |
//! | any other code (1xx, 3xx, out of range) | `Retry`: a confused exchange, the message may not have gone |
//! | `Unreachable` (refused, reset, timeout, TLS, DNS trouble), `Local` | `Retry` |
//! | `NoMailServer` (NXDOMAIN, null MX) | `Bounce(Hard)` |
//!
//! `Bounce(Hard)` suppresses the address; `Bounce(Soft)` ends the message as `Bounced` with
//! `bounceType: Soft` and suppresses nothing. So in the API, `bounceType: Hard` means exactly
//! "the address was suppressed because of this message". A 5xx is a permanent answer even for
//! a full mailbox (receivers that expect it to clear say 452 4.2.2, which is retried), so
//! soft bounces are not retried.

use std::time::Duration;

use crate::model::BounceType;
use crate::ports::{EnhancedStatus, SendError, SendReceipt, SmtpReply};

/// The longest retry time a reply may ask for; anything longer is taken as this.
pub const MAX_NAMED_RETRY: Duration = Duration::from_secs(24 * 60 * 60);

/// Only this much of a reply's text is searched for a retry time.
const MAX_SCANNED_TEXT: usize = 1024;

/// What happens to a message after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The receiving side accepted it.
    Delivered,
    /// A temporary failure: try again on the schedule, not before `not_before` when the
    /// reply named a time.
    Retry {
        /// A delay the server asked for (at most [`MAX_NAMED_RETRY`]).
        not_before: Option<Duration>,
    },
    /// A permanent failure. `Hard` also suppresses the address.
    Bounce(BounceType),
}

/// Classifies the outcome of a send.
pub fn classify(outcome: &Result<SendReceipt, SendError>) -> Verdict {
    match outcome {
        Ok(receipt) => classify_reply(&receipt.reply),
        Err(error) => classify_error(error),
    }
}

/// Classifies a failed send.
pub fn classify_error(error: &SendError) -> Verdict {
    match error {
        SendError::Rejected { reply, .. } => classify_reply(reply),
        SendError::Unreachable { .. } | SendError::Local { .. } => Verdict::Retry { not_before: None },
        SendError::NoMailServer { .. } => Verdict::Bounce(BounceType::Hard),
    }
}

/// Classifies one SMTP reply by the table in the module docs.
pub fn classify_reply(reply: &SmtpReply) -> Verdict {
    let retry = || Verdict::Retry { not_before: named_retry_delay(&reply.text) };
    match reply.code {
        200..=299 => Verdict::Delivered,
        400..=499 | 530 | 534 | 535 | 538 => retry(),
        500..=599 => match reply.enhanced.and_then(by_enhanced_code) {
            Some(bounce) => Verdict::Bounce(bounce),
            None => Verdict::Bounce(by_basic_code(reply.code)),
        },
        _ => retry(),
    }
}

/// The bounce type an enhanced status code decides, or `None` when it says nothing specific
/// (`x.0.0`, or a subject RFC 3463 does not define).
fn by_enhanced_code(status: EnhancedStatus) -> Option<BounceType> {
    use BounceType::{Hard, Soft};
    let bounce = match (status.subject, status.detail) {
        (0, _) => return None,
        (1, 7 | 8) => Soft,
        (1, _) | (2, 1) | (7, 13 | 17 | 18) => Hard,
        (2..=7, _) => Soft,
        _ => return None,
    };
    Some(bounce)
}

fn by_basic_code(code: u16) -> BounceType {
    match code {
        552 | 500..=504 => BounceType::Soft,
        _ => BounceType::Hard,
    }
}

/// A retry delay named in a reply's text: "try again in 5 minutes", "retry after 120
/// seconds", "please wait 30s", "Retry in 1 hour". A number with a unit (s/sec/second,
/// m/min/minute, h/hr/hour, d/day, singular or plural) counts only within three words after
/// "retry", "again" or "wait", so "500 messages in 24 hours, try again later" names nothing.
/// Reads at most 1 KiB; the result is capped at [`MAX_NAMED_RETRY`].
pub fn named_retry_delay(text: &str) -> Option<Duration> {
    let mut end = text.len().min(MAX_SCANNED_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let lower = text[..end].to_ascii_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    for (i, word) in words.iter().enumerate() {
        if !matches!(*word, "retry" | "again" | "wait") {
            continue;
        }
        for k in i + 1..words.len().min(i + 4) {
            let candidate = words[k];
            let (digits, unit) = candidate.split_at(candidate.bytes().take_while(u8::is_ascii_digit).count());
            if digits.is_empty() || digits.len() > 9 {
                continue;
            }
            // "60s" carries its unit; "60 seconds" has it in the next word.
            let unit = if unit.is_empty() { words.get(k + 1).copied().unwrap_or("") } else { unit };
            if let (Ok(n), Some(seconds)) = (digits.parse::<u64>(), unit_seconds(unit)) {
                return Some(Duration::from_secs(n.saturating_mul(seconds)).min(MAX_NAMED_RETRY));
            }
        }
    }
    None
}

fn unit_seconds(unit: &str) -> Option<u64> {
    match unit {
        "s" | "sec" | "secs" | "second" | "seconds" => Some(1),
        "m" | "min" | "mins" | "minute" | "minutes" => Some(60),
        "h" | "hr" | "hrs" | "hour" | "hours" => Some(3600),
        "d" | "day" | "days" => Some(86_400),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
