//! The reputation guard at work (contract §12, "Reputation guard"; the rule is
//! `crate::reputation`): judging every workspace's rates on a timer, pausing and warning,
//! refusing sends and holding mail while paused, resuming, and showing where each scope
//! stands.
//!
//! - **Who judges**: every node, every `check_every`, from the store's activity counters;
//!   each change is a compare-and-swap on the stored standing written with the webhook
//!   deliveries that announce it, so two nodes judging at once change it (and announce it)
//!   once. On PostgreSQL every node reads the same counters, so they agree.
//! - **What the workspace's rates count**: the mail of its domains that are not themselves
//!   warned or paused. One bad domain then raises one event and takes one resume, while mail
//!   spread over domains too small to judge alone (under the minimum volume each) is still
//!   caught at the workspace.
//! - **How a pause bites**: sends from a paused domain (or any domain of a paused workspace)
//!   are refused with 403 `sending_paused`; mail already queued is put back by the delivery
//!   worker without an attempt or an event ([`Reputation::holds`]) and leaves after a resume.
//!   Both read the standings through a per-node cache kept [`STANDING_TTL`], so a change made
//!   on another node bites within that long.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::activity::rates::Rate;
use crate::activity::{ActivityCounts, HourStart, HourlyActivity};
use crate::ids::{DomainId, EventId, WorkspaceId};
use crate::model::{Domain, WebhookDelivery, WebhookEventType};
use crate::reputation::{
    Announcement, Baseline, Breach, ReputationPolicy, Scope, ScopeReputation, Standing, Verdict, baseline_at, counted,
    judge,
};
use crate::usecases::{Principal, Tidings};
use crate::{Error, Result};

/// How long a node keeps a workspace's standings before reading them again.
pub const STANDING_TTL: chrono::Duration = chrono::Duration::seconds(2);

/// Most workspaces a node keeps standings of; past it the cache starts over.
const MAX_KEPT: usize = 100_000;

/// A workspace's standings as read at a time.
type Kept = (DateTime<Utc>, Arc<Vec<ScopeReputation>>);

/// What each node keeps: recent standings (for sends and deliveries) and the figures of its
/// last judgement of each workspace (for `/metrics`).
#[derive(Debug, Default)]
pub struct ReputationMemory {
    standings: Mutex<HashMap<WorkspaceId, Kept>>,
    board: Mutex<BTreeMap<(WorkspaceId, Scope), ScopeFigures>>,
}

/// One scope's rates and standing as last judged on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeFigures {
    /// The workspace.
    pub workspace_id: WorkspaceId,
    /// `workspace` or `domain`.
    pub scope: &'static str,
    /// The domain, for a domain's scope.
    pub domain_id: Option<DomainId>,
    /// Its name, for a domain's scope (when it still exists).
    pub domain: Option<String>,
    /// `good`, `warning` or `paused`.
    pub state: &'static str,
    /// Recipients delivered or bounced in the window (after a resume: since it).
    pub volume: u64,
    /// Hard bounces among them.
    pub hard_bounced: u64,
    /// Recipients delivered.
    pub delivered: u64,
    /// Complaints among them.
    pub complained: u64,
    /// Whether there is enough volume to judge.
    pub judged: bool,
    /// What paused or warned it, in words.
    pub reason: Option<String>,
    /// Since when it is warned or paused.
    pub since: Option<DateTime<Utc>>,
    /// How to resume it, when paused.
    pub resume: Option<String>,
}

impl ScopeFigures {
    /// The hard-bounce rate in percent; `None` with no volume.
    pub fn bounce_percent(&self) -> Option<f64> {
        Rate { part: self.hard_bounced, whole: self.volume }.percent()
    }

    /// The complaint rate in percent; `None` with nothing delivered.
    pub fn complaint_percent(&self) -> Option<f64> {
        Rate { part: self.complained, whole: self.delivered }.percent()
    }
}

/// What one pass over every workspace did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JudgeReport {
    /// Workspaces judged.
    pub workspaces: usize,
    /// Standings changed by this node.
    pub changed: usize,
    /// Workspaces that could not be judged, with why; tried again next pass.
    pub errors: Vec<(WorkspaceId, String)>,
}

/// The reputation guard's use cases.
pub struct Reputation<'a> {
    core: &'a Tidings,
}

impl Tidings {
    /// The reputation guard.
    pub fn reputation(&self) -> Reputation<'_> {
        Reputation { core: self }
    }
}

impl Reputation<'_> {
    fn policy(&self) -> &ReputationPolicy {
        &self.core.config.reputation
    }

    /// The standings of `ws`, from this node's memory if read within [`STANDING_TTL`].
    async fn standings(&self, ws: WorkspaceId) -> Result<Arc<Vec<ScopeReputation>>> {
        let now = self.core.clock.now();
        let memory = &self.core.reputation_memory;
        {
            let kept = memory.standings.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, records)) = kept.get(&ws)
                && now >= *at
                && now - *at < STANDING_TTL
            {
                return Ok(Arc::clone(records));
            }
        }
        let records = Arc::new(self.core.store.reputation(ws).await?);
        let mut kept = memory.standings.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(ws, (now, Arc::clone(&records)));
        Ok(records)
    }

    /// Forgets what this node keeps of `ws`, after changing it here.
    fn forget(&self, ws: WorkspaceId) {
        self.core.reputation_memory.standings.lock().unwrap_or_else(PoisonError::into_inner).remove(&ws);
    }

    /// What pauses mail from `domain` of `ws`: the workspace's pause, else the domain's.
    async fn pause_of(&self, ws: WorkspaceId, domain: DomainId) -> Result<Option<(Scope, Breach)>> {
        if !self.policy().is_on() {
            return Ok(None);
        }
        let records = self.standings(ws).await?;
        let paused = |scope: Scope| {
            records.iter().find(|r| r.scope == scope).and_then(|r| match r.standing {
                Standing::Paused { breach, .. } => Some((scope, breach)),
                _ => None,
            })
        };
        Ok(paused(Scope::Workspace).or_else(|| paused(Scope::Domain(domain))))
    }

    /// Refuses a send from `domain` while it (or its workspace) is paused: 403
    /// `sending_paused`, naming the rate and how to resume.
    pub async fn check_sending(&self, domain: &Domain) -> Result<()> {
        match self.pause_of(domain.workspace_id, domain.id).await? {
            None => Ok(()),
            Some((scope, breach)) => Err(Error::SendingPaused(paused_message(scope, &breach, domain, self.policy()))),
        }
    }

    /// Whether mail from `domain` of `ws` is held (paused): the delivery worker then puts it
    /// back until this long from `now`, without an attempt.
    pub async fn holds(&self, ws: WorkspaceId, domain: DomainId, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        Ok(self.pause_of(ws, domain).await?.map(|_| now + self.policy().hold))
    }

    /// Judges every workspace once (the background loop calls it every `check_every`).
    pub async fn judge_all(&self, now: DateTime<Utc>) -> Result<JudgeReport> {
        let mut report = JudgeReport::default();
        if !self.policy().is_on() {
            return Ok(report);
        }
        for workspace in self.core.store.list_workspaces().await? {
            report.workspaces += 1;
            match self.judge_workspace(workspace.id, now).await {
                Ok(changed) => report.changed += changed,
                Err(e) => report.errors.push((workspace.id, e.to_string())),
            }
        }
        Ok(report)
    }

    /// Judges `ws`: its domains first, then the workspace over the mail of its domains left
    /// good; writes each change (with its announcement) over the standing it was judged
    /// from, and returns how many this call wrote.
    pub async fn judge_workspace(&self, ws: WorkspaceId, now: DateTime<Utc>) -> Result<usize> {
        let store = &self.core.store;
        let policy = self.policy().clone();
        let from = policy.window_start(now);
        let rows = store.activity(ws, from, HourStart::of(now).plus_hours(1)).await?;
        let stored: BTreeMap<Scope, ScopeReputation> =
            store.reputation(ws).await?.into_iter().map(|r| (r.scope, r)).collect();
        let record = |scope| stored.get(&scope).cloned().unwrap_or_else(|| ScopeReputation::fresh(ws, scope));
        let workspace = record(Scope::Workspace);
        let mut domains: BTreeSet<DomainId> = rows.iter().map(|r| r.domain).collect();
        domains.extend(stored.keys().filter_map(|s| match s {
            Scope::Domain(id) => Some(*id),
            Scope::Workspace => None,
        }));
        let mut changed = 0;
        let mut figures = Vec::new();
        let mut left_good = ActivityCounts::default();
        for id in domains {
            let Some(domain) = store.get_domain(ws, id).await? else { continue };
            let current = record(Scope::Domain(id));
            let counts =
                counted(&rows, id, from, Baseline::latest(current.baseline.as_ref(), workspace.baseline.as_ref()));
            let (standing, wrote) = self.change(current, &counts, Some(&domain), now).await?;
            changed += usize::from(wrote);
            if standing == Standing::Good {
                left_good = left_good.plus(&counts);
            }
            figures.push(self.figures(ws, Scope::Domain(id), Some(&domain), &standing, &counts));
        }
        let (standing, wrote) = self.change(workspace, &left_good, None, now).await?;
        changed += usize::from(wrote);
        figures.push(self.figures(ws, Scope::Workspace, None, &standing, &left_good));
        if changed > 0 {
            self.forget(ws);
        }
        let mut board = self.core.reputation_memory.board.lock().unwrap_or_else(PoisonError::into_inner);
        board.retain(|(w, _), _| *w != ws);
        board.extend(figures.into_iter().map(|f| {
            let scope = f.domain_id.map_or(Scope::Workspace, Scope::Domain);
            ((ws, scope), f)
        }));
        Ok(changed)
    }

    /// Judges one scope on `counts` and writes what changes: returns its standing after (as
    /// stored) and whether this call wrote it. Lost to another writer, the standing is what
    /// this node read; the next pass judges from the winner's.
    async fn change(
        &self,
        current: ScopeReputation,
        counts: &ActivityCounts,
        domain: Option<&Domain>,
        now: DateTime<Utc>,
    ) -> Result<(Standing, bool)> {
        let verdict = judge(self.policy(), counts);
        let Some((standing, said)) = current.standing.next(verdict, now) else {
            return Ok((current.standing, false));
        };
        let deliveries = match said {
            Some(announcement) => self.announce(current.workspace_id, current.scope, domain, announcement, now).await?,
            None => Vec::new(),
        };
        let (expected, before) = (current.version, current.standing);
        let next = ScopeReputation { standing, version: expected.saturating_add(1), ..current };
        let wrote = self.core.store.change_reputation(&next, expected, &deliveries).await?;
        if wrote {
            let what = match verdict {
                Verdict::Pause(b) | Verdict::Warn(b) => b.describe(),
                Verdict::Good => "rates back under the warning thresholds".to_owned(),
            };
            let name = domain.map(|d| d.name.to_string());
            tracing::warn!(workspace = %next.workspace_id, scope = next.scope.kind(), domain = ?name,
                state = standing.as_str(), "reputation: {what}");
            Ok((standing, true))
        } else {
            Ok((before, false))
        }
    }

    /// The deliveries announcing `announcement` to the workspace's endpoints that want it.
    async fn announce(
        &self,
        ws: WorkspaceId,
        scope: Scope,
        domain: Option<&Domain>,
        announcement: Announcement,
        now: DateTime<Utc>,
    ) -> Result<Vec<WebhookDelivery>> {
        let (event_type, breach) = match announcement {
            Announcement::ReputationWarning(b) => (WebhookEventType::ReputationWarning, b),
            Announcement::SendingPaused(b) => (WebhookEventType::SendingPaused, b),
        };
        let random = &*self.core.random;
        let event_id = EventId::new_at(now, random);
        let details = crate::usecases::webhooks::ReputationEvent {
            scope,
            domain,
            breach: &breach,
            window_hours: self.policy().window.num_hours(),
            paused: event_type == WebhookEventType::SendingPaused,
        };
        let mut deliveries = Vec::new();
        for endpoint in self.core.store.list_enabled_webhooks(ws).await? {
            if !endpoint.wants(event_type) {
                continue;
            }
            let payload = crate::usecases::webhooks::reputation_body(event_type, event_id, now, &details)?;
            deliveries.push(WebhookDelivery::queued(&endpoint, (event_id, event_type, None), payload, now, random));
        }
        Ok(deliveries)
    }

    fn figures(
        &self,
        ws: WorkspaceId,
        scope: Scope,
        domain: Option<&Domain>,
        standing: &Standing,
        counts: &ActivityCounts,
    ) -> ScopeFigures {
        let volume = counts.delivered.saturating_add(counts.bounced());
        let (reason, since) = match standing {
            Standing::Good => (None, None),
            Standing::Warned { since, breach } | Standing::Paused { since, breach } => {
                (Some(breach.describe()), Some(*since))
            }
        };
        ScopeFigures {
            workspace_id: ws,
            scope: scope.kind(),
            domain_id: match scope {
                Scope::Domain(id) => Some(id),
                Scope::Workspace => None,
            },
            domain: domain.map(|d| d.name.to_string()),
            state: standing.as_str(),
            volume,
            hard_bounced: counts.hard_bounced,
            delivered: counts.delivered,
            complained: counts.complained,
            judged: volume >= self.policy().min_volume.max(1),
            reason,
            since,
            resume: standing.is_paused().then(|| resume_call(scope)),
        }
    }

    /// Every scope this node judged last, for `/metrics`.
    pub fn board(&self) -> Vec<ScopeFigures> {
        self.core.reputation_memory.board.lock().unwrap_or_else(PoisonError::into_inner).values().cloned().collect()
    }

    /// `GET /v1/reputation`: where the workspace and each of its domains with mail in the
    /// window stand, judged now from the store (not from this node's memory).
    pub async fn status(&self, who: &Principal) -> Result<Vec<ScopeFigures>> {
        who.require_full()?;
        let ws = who.workspace_id;
        self.judge_workspace(ws, self.core.clock.now()).await?;
        let mut figures: Vec<ScopeFigures> = self.board().into_iter().filter(|f| f.workspace_id == ws).collect();
        // The workspace first, then domains by name.
        figures.sort_by(|a, b| (a.domain_id.is_some(), &a.domain).cmp(&(b.domain_id.is_some(), &b.domain)));
        Ok(figures)
    }

    /// `POST /v1/domains/{id}/resume`: lifts the domain's pause (or warning) and counts its
    /// mail from now on.
    pub async fn resume_domain(&self, who: &Principal, id: DomainId) -> Result<Vec<ScopeFigures>> {
        who.require_full()?;
        let ws = who.workspace_id;
        self.core.store.get_domain(ws, id).await?.ok_or(Error::NotFound("domain"))?;
        self.resume(ws, Scope::Domain(id)).await?;
        self.status(who).await
    }

    /// `POST /v1/reputation/resume`: lifts the workspace's pause (or warning) and counts the
    /// mail of every domain from now on for the workspace's rates.
    pub async fn resume_workspace(&self, who: &Principal) -> Result<Vec<ScopeFigures>> {
        who.require_full()?;
        self.resume(who.workspace_id, Scope::Workspace).await?;
        self.status(who).await
    }

    async fn resume(&self, ws: WorkspaceId, scope: Scope) -> Result<()> {
        let now = self.core.clock.now();
        let rows: Vec<HourlyActivity> =
            self.core.store.activity(ws, HourStart::of(now), HourStart::of(now).plus_hours(1)).await?;
        // A racing judgement may change the record between the read and the write: read again.
        for _ in 0..8 {
            let current = self
                .core
                .store
                .reputation(ws)
                .await?
                .into_iter()
                .find(|r| r.scope == scope)
                .unwrap_or_else(|| ScopeReputation::fresh(ws, scope));
            let next = ScopeReputation {
                standing: Standing::Good,
                baseline: Some(baseline_at(&rows, scope, now)),
                version: current.version.saturating_add(1),
                ..current.clone()
            };
            if self.core.store.change_reputation(&next, current.version, &[]).await? {
                tracing::info!(workspace = %ws, scope = scope.kind(), "reputation: sending resumed");
                self.forget(ws);
                return Ok(());
            }
        }
        Err(Error::Conflict("the standing kept changing while being resumed; try again".to_owned()))
    }
}

/// The API call that resumes `scope`.
fn resume_call(scope: Scope) -> String {
    match scope {
        Scope::Workspace => "POST /v1/reputation/resume".to_owned(),
        Scope::Domain(id) => format!("POST /v1/domains/{id}/resume"),
    }
}

/// The refusal of a send while `scope` is paused.
fn paused_message(scope: Scope, breach: &Breach, domain: &Domain, policy: &ReputationPolicy) -> String {
    let whose = match scope {
        Scope::Workspace => "this workspace".to_owned(),
        Scope::Domain(_) => format!("domain {}", domain.name),
    };
    format!(
        "sending from {whose} is paused by the reputation guard: its {} over the last {} hours; fix the \
         list, then resume with a full key: {}",
        breach.describe(),
        policy.window.num_hours(),
        resume_call(scope)
    )
}
