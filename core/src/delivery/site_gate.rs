//! [`SiteGate`]: the delivery worker's admission by site (contract §12, "Destinations";
//! docs/decisions.md, "Direct delivery by site"). Before a message is attempted, its
//! recipient's site must admit it through the [`Limits`] port (a rate token and a connection
//! lease, no suspension); a message it refuses goes back to the queue for when the site
//! will take it, with no attempt, no event and no retry used.
//!
//! This node's side of the leases: after a delivery its lease is kept for as long as the
//! transport may keep the connection idle ([`Mailer::idle_connection_lifetime`]), and the
//! node's next delivery to the site takes that lease over instead of asking for a new one.
//! So the leases of a site count the connections open to it on every node, idle ones
//! included, and a node reusing its own idle connection never waits for it.
//!
//! It also spreads the mail it refuses: the k-th message refused by one site in a row is due
//! k rate intervals after the site's answer (at most [`MAX_SPREAD`] later), so that a backlog
//! comes back about when its turn comes rather than all at once to be refused again.
//!
//! [`Mailer::idle_connection_lifetime`]: crate::ports::Mailer::idle_connection_lifetime

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, TimeDelta, Utc};

use crate::delivery::site_activity::SiteActivity;
use crate::ids::SiteLeaseId;
use crate::ids::{MessageId, WorkspaceId};
use crate::ports::site_admission::{CONNECTION_WAIT, SiteAdmission, SiteWait};
use crate::ports::{Limits, Random, SiteChange, SiteLease, SiteQuota, Store, StoreResult};
use crate::shaping::{RuleAction, ShapingTable, SiteKey};

/// Longest a refused message is put off beyond the site's answer by the spreading: past it,
/// the message asks again (a claim and a write), so a throttle lifted early is noticed.
pub const MAX_SPREAD: TimeDelta = TimeDelta::minutes(5);

/// Longest mail waits for a suspended site before it asks again, however long the
/// suspension: a resume on another node (which cannot reach this node's waiting list) is
/// then noticed within this long.
pub const SUSPENSION_RECHECK: TimeDelta = TimeDelta::minutes(5);

/// Most sites this node remembers leases kept idle and refusals in a row of; past it the
/// memory is cleared (it only saves asks).
const MAX_REMEMBERED_SITES: usize = 10_000;

/// What the worker shapes by: the table of sites and the limits they are counted in.
#[derive(Clone)]
pub struct Shaping {
    /// Each site's limits and adaptive rules.
    pub table: Arc<ShapingTable>,
    /// Where admissions are counted: in memory for one node, in the database for several.
    pub limits: Arc<dyn Limits>,
    /// What this node's worker sees of each site, for the operator's view and metrics.
    pub activity: Arc<SiteActivity>,
}

impl Shaping {
    /// Shaping by `table`, counted in `limits`, with a fresh activity record.
    pub fn new(table: Arc<ShapingTable>, limits: Arc<dyn Limits>) -> Self {
        Self { table, limits, activity: Arc::default() }
    }
}

impl std::fmt::Debug for Shaping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shaping").field("table", &self.table).finish_non_exhaustive()
    }
}

/// A delivery admitted to a site: give it back with [`SiteGate::release`].
#[derive(Debug)]
pub(crate) struct Ticket {
    site: SiteKey,
    lease: SiteLeaseId,
}

/// What [`SiteGate::admit`] answers.
pub(crate) enum Gate {
    /// Go; release the ticket after the attempt.
    Admitted(Ticket),
    /// Put the message back until `due`.
    Wait { due: DateTime<Utc>, why: SiteWait },
}

#[derive(Default)]
struct Memory {
    /// Leases kept idle, per site, with their end.
    kept: HashMap<SiteKey, Vec<(SiteLeaseId, DateTime<Utc>)>>,
    /// The latest due time given to a refused message, per site.
    backlog: HashMap<SiteKey, DateTime<Utc>>,
}

/// See the module docs.
pub(crate) struct SiteGate {
    shaping: Shaping,
    /// Where a waiting message is made due when a delivery to its site ends.
    store: Arc<dyn Store>,
    /// How long a lease is kept after a delivery (zero: released at once).
    keep: TimeDelta,
    memory: Mutex<Memory>,
}

impl SiteGate {
    pub(crate) fn new(shaping: Shaping, store: Arc<dyn Store>, keep: std::time::Duration) -> Self {
        // Twice the transport's idle time: its reaper closes an idle connection up to one
        // period after it expires.
        let keep = TimeDelta::from_std(keep.saturating_mul(2)).unwrap_or(TimeDelta::minutes(10));
        Self { shaping, store, keep, memory: Mutex::new(Memory::default()) }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks `site` to admit the delivery of `message` (of `workspace`) at `now`, its lease
    /// held until `lease_until`.
    pub(crate) async fn admit(
        &self,
        site: SiteKey,
        workspace: WorkspaceId,
        message: MessageId,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        random: &dyn Random,
    ) -> StoreResult<Gate> {
        let limits = self.shaping.table.limits(&site);
        let quota = SiteQuota { connections: limits.connection_limit, rate: limits.max_message_rate };
        let kept = self.take_kept(&site, now);
        let id = kept.unwrap_or_else(|| SiteLeaseId::new_at(now, random));
        match self.shaping.limits.admit_delivery(&site, quota, SiteLease { id, until: lease_until }, now).await {
            Ok(SiteAdmission::Admitted) => {
                self.memory().backlog.remove(&site);
                self.shaping.activity.admitted(&site, message, now);
                Ok(Gate::Admitted(Ticket { site, lease: id }))
            }
            Ok(SiteAdmission::Wait { until, why }) => {
                if let Some(id) = kept {
                    self.keep_lease(&site, id, now + self.keep);
                }
                // The next one's turn: a connection comes free about every
                // CONNECTION_WAIT / connections, a token every interval.
                let step = match why {
                    SiteWait::Connections => CONNECTION_WAIT / i32::try_from(quota.connections.max(1)).unwrap_or(1),
                    _ => TimeDelta::from_std(quota.rate.interval()).unwrap_or(CONNECTION_WAIT),
                };
                let until = match why {
                    SiteWait::Suspended(_) => until.min(now + SUSPENSION_RECHECK),
                    _ => until,
                };
                let due = self.spread(&site, until, step);
                self.shaping.activity.waiting(&site, (workspace, message), due, now);
                Ok(Gate::Wait { due, why })
            }
            Err(e) => {
                if let Some(id) = kept {
                    self.keep_lease(&site, id, now + self.keep);
                }
                Err(e)
            }
        }
    }

    /// After the attempt: keeps the lease while the connection may sit idle (when `kept`),
    /// else ends it; applies what the site's reply means by its adaptive rules. Errors of the
    /// limits are logged: the lease then ends with the claim.
    pub(crate) async fn release(&self, ticket: Ticket, reply: Option<&str>, kept: bool, now: DateTime<Utc>) {
        let Ticket { site, lease } = ticket;
        let keep_until = (kept && self.keep > TimeDelta::zero()).then(|| now + self.keep);
        match self.shaping.limits.release_delivery(&site, lease, keep_until, now).await {
            Ok(()) => {
                if let Some(until) = keep_until {
                    self.keep_lease(&site, lease, until);
                }
            }
            Err(error) => tracing::warn!(%site, %error, "cannot release a delivery lease; it ends with its claim"),
        }
        self.shaping.activity.finished(&site, reply, now);
        if let Some(reply) = reply {
            self.react(&site, reply, now).await;
        }
        self.wake_next(&site, now).await;
    }

    /// A delivery to `site` is over, so its connection (or the lease kept for it) is free:
    /// the message this node put back for the site soonest is made due now, to take it
    /// (one write). Without this, mail refused for want of a connection came back only on
    /// its spread (a quarter second over the site's connections), so a site whose
    /// deliveries take milliseconds was held to about four deliveries a second per
    /// connection (bench/README.md, "site-delivery"). The spread stays, for leases that end
    /// on other nodes and for mail this node no longer remembers.
    async fn wake_next(&self, site: &SiteKey, now: DateTime<Utc>) {
        let Some((workspace, message, due)) = self.shaping.activity.take_next_waiting(site, now) else { return };
        match self.store.requeue_message(workspace, message, due, now).await {
            // `false`: it was taken meanwhile (or is gone); nothing to do.
            Ok(_) => {
                // A later refusal spreads from now, not from the woken message's old turn.
                let mut memory = self.memory();
                if memory.backlog.get(site).is_some_and(|last| *last <= due) {
                    memory.backlog.remove(site);
                }
            }
            Err(error) => tracing::debug!(%site, %error, "cannot make the next waiting message due"),
        }
    }

    /// Gives back a ticket whose delivery did not happen (the message failed before it was
    /// sent): the lease ends, nothing is learnt.
    pub(crate) async fn cancel(&self, ticket: Ticket, now: DateTime<Utc>) {
        self.release(ticket, None, false, now).await;
    }

    async fn react(&self, site: &SiteKey, reply: &str, now: DateTime<Utc>) {
        let Some(reaction) = self.shaping.table.react(site, reply, now) else { return };
        let reason = format!("{} (rule {})", reply.chars().take(300).collect::<String>(), reaction.rule);
        let change = match reaction.action {
            RuleAction::Suspend => SiteChange::Suspend { until: reaction.until, reason },
            RuleAction::Throttle(rate) => SiteChange::Throttle { rate, until: reaction.until, reason },
        };
        tracing::warn!(%site, ?change, "a reply matched an adaptive rule");
        if let Err(error) = self.shaping.limits.change_site(site, change, now).await {
            tracing::warn!(%site, %error, "cannot record what an adaptive rule does to the site");
        }
    }

    /// A lease this node keeps for `site` that has not ended, taken out of the memory.
    fn take_kept(&self, site: &SiteKey, now: DateTime<Utc>) -> Option<SiteLeaseId> {
        let mut memory = self.memory();
        let kept = memory.kept.get_mut(site)?;
        kept.retain(|(_, until)| *until > now);
        let id = kept.pop().map(|(id, _)| id);
        if kept.is_empty() {
            memory.kept.remove(site);
        }
        id
    }

    fn keep_lease(&self, site: &SiteKey, id: SiteLeaseId, until: DateTime<Utc>) {
        let mut memory = self.memory();
        if memory.kept.len() >= MAX_REMEMBERED_SITES && !memory.kept.contains_key(site) {
            // Forgetting a kept lease only means asking for a new one: the old one ends.
            memory.kept.clear();
        }
        memory.kept.entry(site.clone()).or_default().push((id, until));
    }

    /// When a message refused at `until` should come back: one `step` after the previous
    /// one refused by this site, if that is later, at most [`MAX_SPREAD`] after `until`.
    fn spread(&self, site: &SiteKey, until: DateTime<Utc>, step: TimeDelta) -> DateTime<Utc> {
        let mut memory = self.memory();
        if memory.backlog.len() >= MAX_REMEMBERED_SITES && !memory.backlog.contains_key(site) {
            memory.backlog.clear();
        }
        let due = match memory.backlog.get(site) {
            Some(previous) if *previous >= until => (*previous + step).min(until + MAX_SPREAD),
            _ => until,
        };
        memory.backlog.insert(site.clone(), due);
        due
    }
}
