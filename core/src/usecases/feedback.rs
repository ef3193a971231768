//! Bounce and complaint reports (docs/api.md#tracking): what the inbound SMTP listener calls
//! with every message it receives, [`Feedback::process_report`].
//!
//! 1. Parse ([`crate::feedback`]). Not a report → `Ignored`.
//! 2. Find the message by its signed return path (contract §8,
//!    [`crate::outbound::return_path`]): among the envelope recipients (a DSN is sent to the
//!    return path), then the report's quoted envelope sender (a feedback report's
//!    `Original-Mail-From`, the attached original's `Return-Path`), the first address on the
//!    return-path domain whose signature verifies for the message it names and that
//!    message's recipient. On a message to several recipients, the recipient whose return
//!    path it is is the one the report concerns (contract §10: a bounce or complaint
//!    suppresses that recipient and no other). Reports arrive from anyone: a report to an unsigned or wrongly
//!    signed address, or one that names a message only by the `Message-ID` it quotes (which
//!    every holder of the mail can read), changes nothing. Nothing found, or a message never
//!    sent → `Unmatched`.
//! 3. Decide, with the delivery worker's classification table ([`classify_reply`]):
//!    - a recipient block with `Action: failed` → `Bounced`. The reply is the
//!      `Diagnostic-Code`'s when it has an SMTP code, else built from `Status`. `Hard` →
//!      `HardBounce` suppression first, then the event (as the worker does); `Soft` → no
//!      suppression. A failure whose code is 4xx (the reporting MTA gave up retrying) is a
//!      `Soft` bounce, like our own retries running out.
//!    - `Action: delayed` (or only a 4.x.x status) → an informational `Deferred` event on a
//!      `Delivered` message, which stays `Delivered`; at most
//!      [`MAX_REPORTED_DELAYS_KEPT`] per message (the tally on the message, written only if no
//!      event came in between), so a flood of delay notices neither grows the store nor
//!      queues webhooks without end.
//!    - a feedback report of any type but `not-spam` and `auth-failure` → `Complaint`
//!      suppression, then `Complained` (from `Delivered`). On a message in another status
//!      the suppression is still added (the recipient asked for no more mail) but no event.
//! 4. The same report twice changes nothing the second time: `Duplicate`.
//!
//! Only storage failures are errors: the listener answers every report with 250.

use std::fmt;

use crate::email::EmailAddress;
use crate::feedback::{self, FeedbackType, NotAReport, Report};
use crate::ids::{EventId, MessageId};
use crate::model::{BounceType, EventDetails, EventType, Message, MessageStatus, SuppressionReason, SuppressionSource};
use crate::outbound::{ClaimedReturnPath, ReturnPath, ReturnPathError, ReturnPaths};
use crate::ports::PageRequest;
use crate::state_machine::{Happening, apply_recipient_event};
use crate::tracking::{MAX_REPORTED_DELAYS_KEPT, TrackingTally};
use crate::usecases::Tidings;
use crate::{Error, Result};

mod findings;

use findings::{Finding, finding};

/// Longest `response` kept in an event's details (the worker's limit too).
const MAX_RESPONSE_CHARS: usize = 1_000;
/// Return paths of ours looked up for one report (each is a read).
const MAX_LOOKUPS: usize = 4;
/// Reads of a message that changed under us before giving up with `Conflict`. A message to
/// several recipients changes once per recipient event, so a report may race several.
const MAX_ATTEMPTS: usize = 8;
/// Timeline pages searched for an identical delay report; timelines are short, but opens
/// and clicks can make one long.
const MAX_TIMELINE_PAGES: usize = 10;
const TIMELINE_PAGE: usize = 200;

/// What [`Feedback::process_report`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportOutcome {
    /// The message is now `Bounced`; `hard` means its address was suppressed.
    Bounced {
        /// The message after the event.
        message: Box<Message>,
        /// Hard bounce (address suppressed) or soft.
        hard: bool,
    },
    /// A delay was recorded on the delivered message.
    Deferred {
        /// The message after the event (still `Delivered`).
        message: Box<Message>,
    },
    /// A complaint: the address is suppressed; `recorded` when the message moved to
    /// `Complained` (only a `Delivered` message can).
    Complained {
        /// The message after the event, or as it was.
        message: Box<Message>,
        /// Whether a `Complained` event was recorded.
        recorded: bool,
    },
    /// The report was already processed (or the message already ended the way it says).
    Duplicate {
        /// The message, unchanged.
        message: Box<Message>,
    },
    /// The report is about no message of ours.
    Unmatched {
        /// Why.
        reason: Unmatched,
    },
    /// The report needs nothing done.
    Ignored {
        /// Why.
        reason: Ignored,
    },
}

/// Why a report matched no message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmatched {
    /// No return path is configured: reports cannot be told from forgeries.
    NoReturnPath,
    /// No return path of ours among the envelope recipients or the quoted envelope sender.
    NoReference,
    /// A return path of ours without a signature (`bounces+<id>@…`: forged, or mail sent
    /// before return paths were signed).
    Unsigned,
    /// A signed return path whose signature is not that of the message it names for the
    /// message's recipient, or that names no message (the same answer for both).
    BadSignature(MessageId),
    /// The message went away while the report was applied.
    UnknownMessage(MessageId),
    /// The message has never been handed to a transport, so no report can be about it.
    NotSent(MessageId),
}

/// Why a report that matched needs nothing done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ignored {
    /// Not a delivery status or feedback report.
    NotAReport(NotAReport),
    /// A DSN reporting no failure or delay (`Action: delivered`, `relayed`, `expanded`).
    NothingToRecord,
    /// A feedback report that is not a complaint (`not-spam`, `auth-failure`).
    NotAComplaint(FeedbackType),
    /// The report does not apply to a message in this status (a delay for a message still
    /// in our queue, a bounce for a complained one, ...).
    NotApplicable(MessageStatus),
    /// The message already keeps as many reported delays as it may.
    TooManyDelays,
}

impl fmt::Display for Unmatched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoReturnPath => f.write_str("no return path is configured"),
            Self::NoReference => f.write_str("the report names no return path of ours"),
            Self::Unsigned => f.write_str("the return path it names is not signed"),
            Self::BadSignature(id) => write!(f, "the return path naming message {id} is not signed for it"),
            Self::UnknownMessage(id) => write!(f, "no message {id}"),
            Self::NotSent(id) => write!(f, "message {id} was never sent"),
        }
    }
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAReport(why) => write!(f, "{why}"),
            Self::NothingToRecord => f.write_str("the report states no failure or delay"),
            Self::NotAComplaint(kind) => write!(f, "feedback type {} is not a complaint", kind.as_str()),
            Self::NotApplicable(status) => write!(f, "the report does not apply to a {} message", status.as_str()),
            Self::TooManyDelays => write!(f, "the message already keeps {MAX_REPORTED_DELAYS_KEPT} reported delays"),
        }
    }
}

/// The result of one try at applying a finding.
enum Applied {
    Done(ReportOutcome),
    /// The message changed between the read and the write: read it again.
    Changed,
}

impl Tidings {
    /// The bounce and complaint report use cases: what the inbound report listener calls.
    pub fn feedback(&self) -> Feedback<'_> {
        Feedback { core: self }
    }
}

/// The feedback area of [`Tidings`] ([`Tidings::feedback`]): bounce and complaint reports
/// received by the inbound listener, matched to the message and recipient they concern
/// through the signed return path, and recorded as events and suppressions.
#[derive(Clone, Copy)]
pub struct Feedback<'a> {
    core: &'a Tidings,
}

impl Feedback<'_> {
    /// Processes one received report: `recipients` are the envelope's RCPT TO addresses,
    /// `raw` the message as received. See the module docs for what it does. Unmatched,
    /// malformed and irrelevant reports are `Ok` outcomes; only storage failures (and a
    /// message that keeps changing under us, `Conflict`) are errors.
    pub async fn process_report(&self, recipients: &[EmailAddress], raw: &[u8]) -> Result<ReportOutcome> {
        let report = feedback::parse_report(raw);
        if let Report::Other(why) = &report {
            return Ok(ReportOutcome::Ignored { reason: Ignored::NotAReport(why.clone()) });
        }
        let (mut message, index) = match self.reported_message(recipients, &report).await? {
            Reported::Found(message, index) => (*message, index),
            Reported::Unmatched(reason) => return Ok(ReportOutcome::Unmatched { reason }),
        };
        let Some(address) = message.recipient_list().get(index).map(|r| r.email.clone()) else {
            return Ok(ReportOutcome::Unmatched { reason: Unmatched::UnknownMessage(message.id) });
        };
        let finding = match finding(&report, &address) {
            Ok(finding) => finding,
            Err(reason) => return Ok(ReportOutcome::Ignored { reason }),
        };
        let about = Recipient { index, address };
        for _ in 0..MAX_ATTEMPTS {
            match self.apply_finding(&message, &about, &finding).await? {
                Applied::Done(outcome) => return Ok(outcome),
                Applied::Changed => match self.core.store.find_message(message.id).await? {
                    Some(fresh) => message = fresh,
                    None => return Ok(ReportOutcome::Unmatched { reason: Unmatched::UnknownMessage(message.id) }),
                },
            }
        }
        Err(Error::Conflict(format!("message {} kept changing while a report was applied", message.id)))
    }

    /// Step 2 of the module docs.
    async fn reported_message(&self, recipients: &[EmailAddress], report: &Report) -> Result<Reported> {
        let paths = self.core.config.return_paths();
        if !paths.is_configured() {
            return Ok(Reported::Unmatched(Unmatched::NoReturnPath));
        }
        let mut unmatched = Unmatched::NoReference;
        let mut looked_up = 0;
        for address in recipients.iter().chain(report.quoted_return_paths()) {
            let (at, claimed) = match paths.claim(address) {
                Ok(claim) => claim,
                Err(ReturnPathError::NotAReturnPath) => continue,
                Err(ReturnPathError::Unsigned) => {
                    unmatched = Unmatched::Unsigned;
                    continue;
                }
            };
            // Each candidate costs a read; a report naming many is not worth more than a few.
            looked_up += 1;
            if looked_up > MAX_LOOKUPS {
                break;
            }
            match self.signed_for(&paths, &at, &claimed).await? {
                Some((message, index)) => return Ok(sent(message, index)),
                None => unmatched = Unmatched::BadSignature(claimed.message),
            }
        }
        Ok(Reported::Unmatched(unmatched))
    }

    /// The message `claimed` names and the position of the recipient its signature is for,
    /// if the return path on `at` is one that message went out with and the signature is
    /// right: at most 50 signatures to check, after one read.
    async fn signed_for(
        &self,
        paths: &ReturnPaths<'_>,
        at: &ReturnPath,
        claimed: &ClaimedReturnPath,
    ) -> Result<Option<(Message, usize)>> {
        let Some(message) = self.core.store.find_message(claimed.message).await? else {
            return Ok(None);
        };
        if !paths.serves(&at.domain, &message) {
            return Ok(None);
        }
        let index = message.recipient_list().iter().position(|r| at.verify(claimed, &r.email));
        Ok(index.map(|index| (message, index)))
    }

    /// Whether the report listener should take mail for `address` at `RCPT TO`: a return
    /// path of ours, on the domain its message went out with, whose signature is right. The
    /// server-wide return-path domain is taken whole by the listener itself; this answers
    /// for the per-domain ones, so that mail for any other address on a `bounces.` name is
    /// refused before its data is read.
    pub async fn accepts_report_to(&self, address: &EmailAddress) -> Result<bool> {
        let paths = self.core.config.return_paths();
        let Ok((at, claimed)) = paths.claim(address) else { return Ok(false) };
        Ok(self.signed_for(&paths, &at, &claimed).await?.is_some())
    }

    /// Step 3 for the message as read, about its recipient `about`; `Changed` if it changed
    /// before the write.
    async fn apply_finding(&self, message: &Message, about: &Recipient, finding: &Finding) -> Result<Applied> {
        use MessageStatus as S;
        let done = |outcome| Ok(Applied::Done(outcome));
        let unchanged = || Box::new(message.clone());
        let status = message.recipient_list().get(about.index).map_or(message.status, |r| r.status);
        match finding {
            Finding::Bounce(kind, details) => match status {
                S::Bounced => done(ReportOutcome::Duplicate { message: unchanged() }),
                S::Sent | S::Deferred | S::Delivered => {
                    if *kind == BounceType::Hard {
                        // Suppress first, as the delivery worker does: if the process dies
                        // before the event, the address is protected and a resent report
                        // records the event.
                        let (reason, source) = (SuppressionReason::HardBounce, SuppressionSource::Bounce);
                        self.core
                            .suppressions()
                            .add_automatically(message.workspace_id, &about.address, reason, source, Some(message.id))
                            .await?;
                    }
                    let hard = *kind == BounceType::Hard;
                    self.record(message, about, EventType::Bounced, details.clone(), |m| ReportOutcome::Bounced {
                        message: m,
                        hard,
                    })
                    .await
                }
                other => done(ReportOutcome::Ignored { reason: Ignored::NotApplicable(other) }),
            },
            Finding::Delay(details) => match status {
                S::Delivered if self.has_identical_event(message, EventType::Deferred, details).await? => {
                    done(ReportOutcome::Duplicate { message: unchanged() })
                }
                S::Delivered => match message.tracking_tally.keep_reported_delay() {
                    Some(tally) => self.record_delay(message, about, details.clone(), tally).await,
                    None => done(ReportOutcome::Ignored { reason: Ignored::TooManyDelays }),
                },
                // Sent and Deferred messages are the delivery worker's; it has its own answer.
                other => done(ReportOutcome::Ignored { reason: Ignored::NotApplicable(other) }),
            },
            Finding::Complaint(details) => {
                if status == S::Complained {
                    return done(ReportOutcome::Duplicate { message: unchanged() });
                }
                let (reason, source) = (SuppressionReason::Complaint, SuppressionSource::Complaint);
                self.core
                    .suppressions()
                    .add_automatically(message.workspace_id, &about.address, reason, source, Some(message.id))
                    .await?;
                if status != S::Delivered {
                    return done(ReportOutcome::Complained { message: unchanged(), recorded: false });
                }
                self.record(message, about, EventType::Complained, details.clone(), |m| ReportOutcome::Complained {
                    message: m,
                    recorded: true,
                })
                .await
            }
        }
    }

    async fn record(
        &self,
        message: &Message,
        about: &Recipient,
        event_type: EventType,
        details: EventDetails,
        outcome: impl FnOnce(Box<Message>) -> ReportOutcome,
    ) -> Result<Applied> {
        let at = self.core.clock.now();
        let happening = Happening {
            event_id: EventId::new_at(at, &*self.core.random),
            event_type,
            at,
            details,
            provider_message_id: None,
            next_attempt_at: None,
        };
        match self.core.messages().record_recipient_event(message, about.index, happening).await {
            Ok((next, _)) => Ok(Applied::Done(outcome(Box::new(next)))),
            Err(Error::Conflict(_) | Error::NotFound(_)) => Ok(Applied::Changed),
            Err(e) => Err(e),
        }
    }

    /// Records a reported delay with the tally that counts it, only if no event was recorded
    /// since `message` was read, so concurrent reports cannot all slip under the cap.
    async fn record_delay(
        &self,
        message: &Message,
        about: &Recipient,
        details: EventDetails,
        tally: TrackingTally,
    ) -> Result<Applied> {
        let at = self.core.clock.now();
        let happening = Happening {
            event_id: EventId::new_at(at, &*self.core.random),
            event_type: EventType::Deferred,
            at,
            details,
            provider_message_id: None,
            next_attempt_at: None,
        };
        let (mut next, event) = match apply_recipient_event(message, about.index, happening) {
            Ok(applied) => applied,
            Err(_) => {
                let reason = Ignored::NotApplicable(message.status);
                return Ok(Applied::Done(ReportOutcome::Ignored { reason }));
            }
        };
        next.tracking_tally = tally;
        match self.core.store_message_event(message, next, event, None, Some(message.last_event_id)).await {
            Ok((next, _)) => Ok(Applied::Done(ReportOutcome::Deferred { message: Box::new(next) })),
            Err(Error::Conflict(_) | Error::NotFound(_)) => Ok(Applied::Changed),
            Err(e) => Err(e),
        }
    }

    /// Whether the timeline already holds an event of this type with exactly these details
    /// (the same report received twice).
    async fn has_identical_event(
        &self,
        message: &Message,
        event_type: EventType,
        details: &EventDetails,
    ) -> Result<bool> {
        let mut cursor = None;
        for _ in 0..MAX_TIMELINE_PAGES {
            let page = self
                .core
                .store
                .list_events(message.workspace_id, message.id, PageRequest { limit: TIMELINE_PAGE, cursor })
                .await?;
            if page.items.iter().any(|e| e.event_type == event_type && &e.details == details) {
                return Ok(true);
            }
            match page.items.last() {
                Some(last) if page.has_more => cursor = Some(last.id),
                _ => return Ok(false),
            }
        }
        Ok(false)
    }
}

/// The message a report is about with the position of the recipient it concerns, or why
/// none is.
enum Reported {
    Found(Box<Message>, usize),
    Unmatched(Unmatched),
}

/// The recipient a report concerns.
struct Recipient {
    /// Its position in the message's list (0 for a message without one).
    index: usize,
    /// Its address.
    address: EmailAddress,
}

/// `message` if it was ever handed to a transport (a report about mail never sent is forged
/// or misdirected).
fn sent(message: Message, index: usize) -> Reported {
    if message.provider_message_id.is_some() {
        Reported::Found(Box::new(message), index)
    } else {
        Reported::Unmatched(Unmatched::NotSent(message.id))
    }
}
