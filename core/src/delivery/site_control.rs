//! [`SiteControl`]: the operator's view of the delivery sites and the way to suspend and
//! resume one (contract §12, "Visible and operable"). Sites are the server's, not a
//! workspace's: one tenant must neither stop Gmail for all nor see the others' queues, so
//! the front ends serve this to the operator alone (`/v1/operator/sites`, the
//! `tidings-server sites` command, `/metrics`).

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};

use crate::delivery::site_activity::{LastReply, SiteSeen};
use crate::delivery::site_gate::Shaping;
use std::sync::Arc;

use crate::duration_text::parse_duration;
use crate::error::FieldError;
use crate::ports::site_admission::MAX_SITE_REASON_CHARS;
use crate::ports::{SiteChange, Store, StoreResult};
use crate::shaping::{MessageRate, SiteKey, SiteLimits};

/// Longest suspension an operator sets in one go: past it, a forgotten suspension would hold
/// mail beyond any retry schedule.
pub const MAX_OPERATOR_SUSPENSION: TimeDelta = TimeDelta::days(7);

/// The reason of a suspension the operator gave none for.
pub const DEFAULT_OPERATOR_REASON: &str = "suspended by the operator";

/// One site as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteView {
    /// The site: a suffix of the shaping table (`.google.com`) or the MX hosts.
    pub site: SiteKey,
    /// Its limits.
    pub limits: SiteLimits,
    /// Live connection leases, every node together (deliveries in flight and connections
    /// kept idle).
    pub leases: u32,
    /// What this node saw: waiting, in flight, admitted in the last minute, last reply.
    pub seen: SiteSeen,
    /// Suspended until then, and why.
    pub suspended: Option<(DateTime<Utc>, String)>,
    /// Throttled to a rate until then, and why.
    pub throttled: Option<(MessageRate, DateTime<Utc>, String)>,
}

impl SiteView {
    /// The last reply this node got from the site.
    pub fn last_reply(&self) -> Option<&LastReply> {
        self.seen.last_reply.as_ref()
    }
}

/// See the module docs.
#[derive(Clone)]
pub struct SiteControl {
    shaping: Shaping,
    /// Where a resume makes this node's waiting mail due at once.
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for SiteControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SiteControl").field("shaping", &self.shaping).finish_non_exhaustive()
    }
}

impl SiteControl {
    /// Over the shaping the delivery worker uses (the same limits and activity) and the
    /// store its messages are in.
    pub fn new(shaping: Shaping, store: Arc<dyn Store>) -> Self {
        Self { shaping, store }
    }

    /// Every site with something to show at `now` (leases, a suspension or throttle, mail
    /// waiting or in flight here, a delivery in the last minute or a reply), by site key.
    pub async fn list(&self, now: DateTime<Utc>) -> StoreResult<Vec<SiteView>> {
        let states = self.shaping.limits.site_states(now).await?;
        let mut seen = self.shaping.activity.snapshot(now);
        let mut views: BTreeMap<SiteKey, SiteView> = BTreeMap::new();
        for state in states {
            let limits = self.shaping.table.limits(&state.site).clone();
            let suspended =
                state.suspended_until.map(|until| (until, state.suspend_reason.clone().unwrap_or_default()));
            let view = SiteView {
                seen: seen.remove(&state.site).unwrap_or_default(),
                site: state.site.clone(),
                limits,
                leases: state.leases,
                suspended,
                throttled: state.throttle,
            };
            views.insert(state.site, view);
        }
        for (site, seen) in seen {
            let limits = self.shaping.table.limits(&site).clone();
            let view = SiteView { site: site.clone(), limits, leases: 0, seen, suspended: None, throttled: None };
            views.insert(site, view);
        }
        Ok(views.into_values().collect())
    }

    /// Suspends `site` until `until` (a later suspension already set is kept).
    pub async fn suspend(
        &self,
        site: &SiteKey,
        until: DateTime<Utc>,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let change = SiteChange::Suspend { until, reason: reason.to_owned() };
        tracing::warn!(%site, %until, reason, "site suspended by the operator");
        self.shaping.limits.change_site(site, change, now).await
    }

    /// Suspends `site` for `duration`, typed by the operator (`30s`, `10m`, `2h`, `1d`; 1 s to
    /// [`MAX_OPERATOR_SUSPENSION`]), because of `reason` (at most 500 characters;
    /// [`DEFAULT_OPERATOR_REASON`] when blank), and answers until when. A validation error
    /// names `duration` or `reason`; the front ends (operator API, dashboard) share these
    /// rules through this call.
    pub async fn suspend_for(
        &self,
        site: &SiteKey,
        duration: Option<&str>,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> crate::Result<DateTime<Utc>> {
        let invalid =
            |field: &str, message: &str| crate::Error::Validation { fields: vec![FieldError::new(field, message)] };
        let text = duration
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| invalid("duration", "required: how long, as 30s, 10m, 2h or 1d"))?;
        let duration = parse_duration(text)
            .ok()
            .and_then(|d| TimeDelta::from_std(d).ok())
            .filter(|d| *d > TimeDelta::zero() && *d <= MAX_OPERATOR_SUSPENSION)
            .ok_or_else(|| invalid("duration", "a duration from 1s to 7d, as 30s, 10m, 2h or 1d"))?;
        let reason = reason.map(str::trim).filter(|r| !r.is_empty()).unwrap_or(DEFAULT_OPERATOR_REASON);
        if reason.chars().count() > MAX_SITE_REASON_CHARS {
            return Err(invalid("reason", "at most 500 characters"));
        }
        let until = now + duration;
        self.suspend(site, until, reason, now).await?;
        Ok(until)
    }

    /// Ends `site`'s suspension and throttle now, and makes the mail this node put back for
    /// the site due now (mail other nodes put back asks again within
    /// [`SUSPENSION_RECHECK`](super::site_gate::SUSPENSION_RECHECK) or its rate's spread).
    pub async fn resume(&self, site: &SiteKey, now: DateTime<Utc>) -> StoreResult<()> {
        tracing::warn!(%site, "site resumed by the operator");
        self.shaping.limits.change_site(site, SiteChange::Resume, now).await?;
        let waiting = self.shaping.activity.take_waiting(site);
        let mut released = 0_usize;
        for (workspace, message, due) in waiting {
            // Only if it still waits as put back: `false` when it was taken since.
            if due > now && self.store.requeue_message(workspace, message, due, now).await? {
                released += 1;
            }
        }
        tracing::info!(%site, released, "mail waiting for the site is due now");
        Ok(())
    }
}
