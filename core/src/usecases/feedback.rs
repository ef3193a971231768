//! Bounce and complaint reports (docs/api.md#tracking): what the inbound SMTP listener calls
//! with every message it receives, [`Tidings::process_report`].
//!
//! 1. Parse ([`crate::feedback`]). Not a report → `Ignored`.
//! 2. Find the message: by the envelope recipient `bounces+<id>@<return-path domain>` (only
//!    that domain), else by the original `Message-ID` in the report, which must be a message
//!    id at the sending domain, exactly the message's `providerMessageId` (a Message-ID
//!    naming one of our ids at another domain is forged or not ours). If both name a message
//!    and disagree, the envelope wins: it is ours, the attached headers are whatever the
//!    reporter copied. Nothing found, or a message never sent → `Unmatched`.
//! 3. Decide, with the delivery worker's classification table ([`classify_reply`]):
//!    - a recipient block with `Action: failed` → `Bounced`. The reply is the
//!      `Diagnostic-Code`'s when it has an SMTP code, else built from `Status`. `Hard` →
//!      `HardBounce` suppression first, then the event (as the worker does); `Soft` → no
//!      suppression. A failure whose code is 4xx (the reporting MTA gave up retrying) is a
//!      `Soft` bounce, like our own retries running out.
//!    - `Action: delayed` (or only a 4.x.x status) → an informational `Deferred` event on a
//!      `Delivered` message, which stays `Delivered`.
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
use crate::outbound::message_id_from_return_path;
use crate::ports::PageRequest;
use crate::state_machine::Happening;
use crate::usecases::Tidings;
use crate::{Error, Result};

mod findings;

use findings::{Finding, finding};

/// Longest `response` kept in an event's details (the worker's limit too).
const MAX_RESPONSE_CHARS: usize = 1_000;
/// Reads of a message whose status changed under us before giving up with `Conflict`.
const MAX_ATTEMPTS: usize = 3;
/// Timeline pages searched for an identical delay report; timelines are short, but opens
/// and clicks can make one long.
const MAX_TIMELINE_PAGES: usize = 10;
const TIMELINE_PAGE: usize = 200;

/// What [`Tidings::process_report`] did.
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
    /// No return path of ours among the envelope recipients and no usable `Message-ID`.
    NoReference,
    /// It names a message id that does not exist.
    UnknownMessage(MessageId),
    /// Its `Message-ID` has a message id's form but is not that message's
    /// `providerMessageId` (another domain: forged, or someone else's).
    ForeignMessageId(String),
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
}

impl fmt::Display for Unmatched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoReference => f.write_str("the report names no message of ours"),
            Self::UnknownMessage(id) => write!(f, "no message {id}"),
            Self::ForeignMessageId(id) => write!(f, "Message-ID {id} is not one we sent"),
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
    /// Processes one received report: `recipients` are the envelope's RCPT TO addresses,
    /// `raw` the message as received. See the module docs for what it does. Unmatched,
    /// malformed and irrelevant reports are `Ok` outcomes; only storage failures (and a
    /// message that keeps changing under us, `Conflict`) are errors.
    pub async fn process_report(&self, recipients: &[EmailAddress], raw: &[u8]) -> Result<ReportOutcome> {
        let report = feedback::parse_report(raw);
        let original = match &report {
            Report::Dsn(dsn) => dsn.original_message_id.as_deref(),
            Report::Complaint(arf) => arf.original_message_id.as_deref(),
            Report::Other(why) => return Ok(ReportOutcome::Ignored { reason: Ignored::NotAReport(why.clone()) }),
        };
        let mut message = match self.reported_message(recipients, original).await? {
            Reported::Found(message) => *message,
            Reported::Unmatched(reason) => return Ok(ReportOutcome::Unmatched { reason }),
        };
        let finding = match finding(&report, &message.to) {
            Ok(finding) => finding,
            Err(reason) => return Ok(ReportOutcome::Ignored { reason }),
        };
        for _ in 0..MAX_ATTEMPTS {
            match self.apply_finding(&message, &finding).await? {
                Applied::Done(outcome) => return Ok(outcome),
                Applied::Changed => match self.store.find_message(message.id).await? {
                    Some(fresh) => message = fresh,
                    None => return Ok(ReportOutcome::Unmatched { reason: Unmatched::UnknownMessage(message.id) }),
                },
            }
        }
        Err(Error::Conflict(format!("message {} kept changing while a report was applied", message.id)))
    }

    /// Step 2 of the module docs.
    async fn reported_message(&self, recipients: &[EmailAddress], original: Option<&str>) -> Result<Reported> {
        let by_envelope = self.config.return_path_domain.as_ref().and_then(|domain| {
            recipients.iter().filter(|r| r.domain() == domain).find_map(message_id_from_return_path)
        });
        let mut unmatched = Unmatched::NoReference;
        if let Some(id) = by_envelope {
            match self.store.find_message(id).await? {
                Some(message) => {
                    if let Some(original) = original
                        && message.provider_message_id.as_deref() != Some(original)
                    {
                        tracing::warn!(message = %id, original, "a report's Message-ID disagrees with its return path; going by the return path");
                    }
                    return Ok(sent(message));
                }
                None => unmatched = Unmatched::UnknownMessage(id),
            }
        }
        let Some(original) = original else { return Ok(Reported::Unmatched(unmatched)) };
        let Some(id) = original.rsplit_once('@').and_then(|(local, _)| MessageId::parse(local)) else {
            return Ok(Reported::Unmatched(unmatched));
        };
        Ok(match self.store.find_message(id).await? {
            Some(message) if message.provider_message_id.as_deref() == Some(original) => sent(message),
            Some(_) => Reported::Unmatched(Unmatched::ForeignMessageId(original.to_owned())),
            None if by_envelope.is_some() => Reported::Unmatched(unmatched),
            None => Reported::Unmatched(Unmatched::UnknownMessage(id)),
        })
    }

    /// Step 3 for the message as read; `Changed` if it changed before the write.
    async fn apply_finding(&self, message: &Message, finding: &Finding) -> Result<Applied> {
        use MessageStatus as S;
        let done = |outcome| Ok(Applied::Done(outcome));
        let unchanged = || Box::new(message.clone());
        match finding {
            Finding::Bounce(kind, details) => match message.status {
                S::Bounced => done(ReportOutcome::Duplicate { message: unchanged() }),
                S::Sent | S::Deferred | S::Delivered => {
                    if *kind == BounceType::Hard {
                        // Suppress first, as the delivery worker does: if the process dies
                        // before the event, the address is protected and a resent report
                        // records the event.
                        let (reason, source) = (SuppressionReason::HardBounce, SuppressionSource::Bounce);
                        self.suppress_automatically(
                            message.workspace_id,
                            &message.to,
                            reason,
                            source,
                            Some(message.id),
                        )
                        .await?;
                    }
                    let hard = *kind == BounceType::Hard;
                    self.record(message, EventType::Bounced, details.clone(), |m| ReportOutcome::Bounced {
                        message: m,
                        hard,
                    })
                    .await
                }
                other => done(ReportOutcome::Ignored { reason: Ignored::NotApplicable(other) }),
            },
            Finding::Delay(details) => match message.status {
                S::Delivered if self.has_identical_event(message, EventType::Deferred, details).await? => {
                    done(ReportOutcome::Duplicate { message: unchanged() })
                }
                S::Delivered => {
                    self.record(message, EventType::Deferred, details.clone(), |m| ReportOutcome::Deferred {
                        message: m,
                    })
                    .await
                }
                // Sent and Deferred messages are the delivery worker's; it has its own answer.
                other => done(ReportOutcome::Ignored { reason: Ignored::NotApplicable(other) }),
            },
            Finding::Complaint(details) => {
                if message.status == S::Complained {
                    return done(ReportOutcome::Duplicate { message: unchanged() });
                }
                let (reason, source) = (SuppressionReason::Complaint, SuppressionSource::Complaint);
                self.suppress_automatically(message.workspace_id, &message.to, reason, source, Some(message.id))
                    .await?;
                if message.status != S::Delivered {
                    return done(ReportOutcome::Complained { message: unchanged(), recorded: false });
                }
                self.record(message, EventType::Complained, details.clone(), |m| ReportOutcome::Complained {
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
        event_type: EventType,
        details: EventDetails,
        outcome: impl FnOnce(Box<Message>) -> ReportOutcome,
    ) -> Result<Applied> {
        let at = self.clock.now();
        let happening = Happening {
            event_id: EventId::new_at(at, &*self.random),
            event_type,
            at,
            details,
            provider_message_id: None,
            next_attempt_at: None,
        };
        match self.record_message_event(message, happening).await {
            Ok((next, _)) => Ok(Applied::Done(outcome(Box::new(next)))),
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

/// The message a report is about, or why none is.
enum Reported {
    Found(Box<Message>),
    Unmatched(Unmatched),
}

/// `message` if it was ever handed to a transport (a report about mail never sent is forged
/// or misdirected).
fn sent(message: Message) -> Reported {
    if message.provider_message_id.is_some() {
        Reported::Found(Box::new(message))
    } else {
        Reported::Unmatched(Unmatched::NotSent(message.id))
    }
}
