//! What a parsed report says should happen to its message (a bounce of which type, a
//! delay, a complaint), decided from the report alone; `feedback.rs` then applies it to the
//! message's current status.

use super::{Ignored, MAX_RESPONSE_CHARS};
use crate::classify::{Verdict, classify_reply};
use crate::email::EmailAddress;
use crate::feedback::{Action, Arf, Diagnostic, Dsn, DsnRecipient, FeedbackType, Report};
use crate::model::{BounceType, EventDetails};
use crate::ports::SmtpReply;

/// What a report says should happen, before looking at the message's status.
pub(super) enum Finding {
    Bounce(BounceType, EventDetails),
    Delay(EventDetails),
    Complaint(EventDetails),
}

pub(super) fn finding(report: &Report, to: &EmailAddress) -> std::result::Result<Finding, Ignored> {
    match report {
        Report::Dsn(dsn) => dsn_finding(dsn, to),
        Report::Complaint(arf) => complaint_finding(arf),
        Report::Other(why) => Err(Ignored::NotAReport(why.clone())),
    }
}

/// The block about our recipient (any block if none names it) that reports a failure, else
/// one that reports a delay.
fn dsn_finding(dsn: &Dsn, to: &EmailAddress) -> std::result::Result<Finding, Ignored> {
    let names_ours = |r: &&DsnRecipient| {
        [&r.final_recipient, &r.original_recipient]
            .into_iter()
            .flatten()
            .filter_map(|v| v.address())
            .any(|a| a.normalized() == to.normalized())
    };
    let ours: Vec<&DsnRecipient> = dsn.recipients.iter().filter(names_ours).collect();
    let blocks = if ours.is_empty() { dsn.recipients.iter().collect() } else { ours };
    let class = |r: &DsnRecipient| r.status.map(|s| s.class);
    let failed = |r: &&&DsnRecipient| r.action == Some(Action::Failed) || (r.action.is_none() && class(r) == Some(5));
    let delayed = |r: &&&DsnRecipient| r.action == Some(Action::Delayed) || (r.action.is_none() && class(r) == Some(4));
    if let Some(block) = blocks.iter().find(failed) {
        let (kind, mut details) = bounce(block);
        details.bounce_type = Some(kind);
        return Ok(Finding::Bounce(kind, details));
    }
    if let Some(block) = blocks.iter().find(delayed) {
        return Ok(Finding::Delay(reply_details(block, reply(block).as_ref())));
    }
    Err(Ignored::NothingToRecord)
}

/// The bounce type of a failed recipient block, by the delivery worker's table.
fn bounce(block: &DsnRecipient) -> (BounceType, EventDetails) {
    let reply = reply(block);
    let details = reply_details(block, reply.as_ref());
    let kind = match reply.as_ref().map(classify_reply) {
        Some(Verdict::Bounce(kind)) => kind,
        // A 4xx (or odd) code in a failure report: the reporting MTA gave up retrying, which
        // is what a soft bounce means; no code at all says nothing about the address.
        Some(Verdict::Retry { .. } | Verdict::Delivered) | None => BounceType::Soft,
    };
    (kind, details)
}

/// The SMTP reply a block reports: the diagnostic's when it has a code (with `Status` as its
/// enhanced code when it names none), else one made from `Status` alone (`5.1.1` → 550).
fn reply(block: &DsnRecipient) -> Option<SmtpReply> {
    let status = block.status;
    match block.diagnostic.as_ref().and_then(Diagnostic::reply) {
        Some(mut reply) => {
            if reply.enhanced.is_none() {
                reply.enhanced = status.filter(|s| u16::from(s.class) == reply.code / 100);
            }
            Some(reply)
        }
        None => {
            let status = status?;
            let text = block.diagnostic.as_ref().map(|d| d.text.clone()).unwrap_or_default();
            Some(SmtpReply { code: u16::from(status.class) * 100 + 50, enhanced: Some(status), text })
        }
    }
}

/// `smtpCode` (only one the remote server said), `enhancedCode` and `response` (the
/// diagnostic text).
fn reply_details(block: &DsnRecipient, reply: Option<&SmtpReply>) -> EventDetails {
    let diagnostic = block.diagnostic.as_ref();
    let response = diagnostic.map(|d| d.text.chars().take(MAX_RESPONSE_CHARS).collect::<String>());
    EventDetails {
        smtp_code: diagnostic.and_then(|d| d.code),
        enhanced_code: reply.and_then(|r| r.enhanced).or(block.status).map(|e| e.to_string()),
        response: response.filter(|r| !r.is_empty()),
        ..EventDetails::default()
    }
}

fn complaint_finding(arf: &Arf) -> std::result::Result<Finding, Ignored> {
    // Everything a recipient or their provider files against the mail is a complaint;
    // `not-spam` says the opposite and `auth-failure` is about our DNS, not the recipient.
    if matches!(arf.feedback_type, FeedbackType::NotSpam | FeedbackType::AuthFailure) {
        return Err(Ignored::NotAComplaint(arf.feedback_type.clone()));
    }
    Ok(Finding::Complaint(EventDetails {
        user_agent: arf.user_agent.clone(),
        response: Some(arf.feedback_type.as_str().to_owned()),
        ..EventDetails::default()
    }))
}
