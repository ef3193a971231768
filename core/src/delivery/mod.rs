//! Delivery: the worker that takes queued messages to the transport ([`worker`]), the one
//! table that classifies what the transport reports ([`crate::classify`]), the retry schedule
//! ([`schedule`]), and the worker that POSTs webhook deliveries ([`webhooks`]). The runtime
//! runs each message's attempt as a task of its own, claiming more as they finish, and
//! webhooks through the [`WebhookDispatcher`], which runs each delivery as its own task so
//! that a dead endpoint delays nobody else; tests call the step functions
//! ([`DeliveryWorker::deliver_due`]) directly.

pub mod schedule;
mod signers;
pub mod site_activity;
pub mod site_control;
pub mod site_gate;
pub mod webhooks;
pub mod worker;

// The classification table is shared with the bounce-report use case below this module.
pub use crate::classify::{MAX_NAMED_RETRY, Verdict, classify, classify_error, classify_reply, named_retry_delay};
pub use schedule::{RetrySchedule, ScheduleError};
pub use site_activity::{LastReply, SiteActivity, SiteSeen};
pub use site_control::{SiteControl, SiteView};
pub use site_gate::{MAX_SPREAD, Shaping};
pub use webhooks::{
    AttemptOutcome, DispatchPass, DispatchSettings, WebhookDispatcher, WebhookReport, WebhookSettings, WebhookWorker,
    webhook_retry_schedule,
};
pub use worker::{DeliveryReport, DeliverySettings, DeliveryWorker};
