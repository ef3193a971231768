//! The destinations' one admission rule (`tidings_core::ports::admission_rule`), checked once
//! for both kinds of destination: random sequences of work starting, finishing and being
//! suspended, over mail sites and webhook endpoints mixed, each kind through the code that
//! admits it in production (a site through `SiteTable`, the in-memory `Limits`; an endpoint
//! through the `EndpointQuota` a claim applies, counted in flight as the dispatcher counts),
//! must answer as one simple model: not while suspended, and at most `cap` in flight per
//! destination (a site's lease taken over adds none); endpoints also at most `workspace_cap`
//! per workspace. Rates are not drawn here: the sites' exact rate answers are the `Limits`
//! conformance suite's, and endpoints have none.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;
use tidings_core::ids::{SiteLeaseId, WebhookId, WorkspaceId};
use tidings_core::ports::{EndpointQuota, InFlightCounts, SiteAdmission, SiteChange, SiteLease, SiteQuota, SiteWait};
use tidings_core::shaping::{MessageRate, RatePeriod, SiteKey};
use tidings_core::usecases::SiteTable;

/// A destination of either kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Destination {
    Site(SiteKey),
    Endpoint(WorkspaceId, WebhookId),
}

/// Two sites, two endpoints of one workspace, one of another.
fn destinations() -> Vec<Destination> {
    let (ws, other) = (WorkspaceId(ulid::Ulid(1)), WorkspaceId(ulid::Ulid(2)));
    vec![
        Destination::Site(SiteKey::parse(".a.example").expect("a site key")),
        Destination::Site(SiteKey::parse("mx.b.example").expect("a site key")),
        Destination::Endpoint(ws, WebhookId(ulid::Ulid(11))),
        Destination::Endpoint(ws, WebhookId(ulid::Ulid(12))),
        Destination::Endpoint(other, WebhookId(ulid::Ulid(13))),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    /// Work `work` asks to start at destination `dest`.
    Start { dest: usize, work: u8 },
    /// Work `work` at `dest` is over (nothing if it is not in flight).
    Finish { dest: usize, work: u8 },
    /// `dest` is suspended for `ms` (only sites can be).
    Suspend { dest: usize, ms: i64 },
    /// Time passes.
    Advance { ms: i64 },
}

fn op() -> impl Strategy<Value = Op> {
    let n = destinations().len();
    prop_oneof![
        4 => (0..n, 0u8..6).prop_map(|(dest, work)| Op::Start { dest, work }),
        2 => (0..n, 0u8..6).prop_map(|(dest, work)| Op::Finish { dest, work }),
        1 => (0..n, 1i64..2_000).prop_map(|(dest, ms)| Op::Suspend { dest, ms }),
        1 => (1i64..1_500).prop_map(|ms| Op::Advance { ms }),
    ]
}

/// The rule as stated, with nothing shared with the code under test.
#[derive(Default)]
struct Model {
    in_flight: BTreeMap<Destination, BTreeSet<u8>>,
    suspended: BTreeMap<Destination, DateTime<Utc>>,
}

impl Model {
    fn workspace_load(&self, ws: WorkspaceId) -> usize {
        self.in_flight
            .iter()
            .filter(|(dest, _)| matches!(dest, Destination::Endpoint(w, _) if *w == ws))
            .map(|(_, works)| works.len())
            .sum()
    }
}

/// What admits each kind in production, as one harness.
struct Gates {
    sites: SiteTable,
    endpoints: InFlightCounts<WebhookId>,
    workspaces: InFlightCounts<WorkspaceId>,
    /// The endpoints' work in flight (a delivery is claimed once: asking again is not a
    /// takeover, so the harness never asks for one in flight).
    deliveries: BTreeSet<(WebhookId, u8)>,
}

fn lease_id(work: u8) -> SiteLeaseId {
    SiteLeaseId(ulid::Ulid::from_parts(u64::from(work) + 1, u128::from(work)))
}

/// Whether the answer was a go, and if not whether for a suspension.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Go,
    Suspended,
    Full,
}

fn run(ops: &[Op], cap: usize, workspace_cap: usize) -> Result<(), TestCaseError> {
    let dests = destinations();
    let start = DateTime::from_timestamp(1_700_000_000, 0).expect("a time");
    let far = start + TimeDelta::days(1);
    // A rate no sequence here reaches: only the in-flight part and suspensions refuse.
    let rate = MessageRate::new(1_000, RatePeriod::Second).expect("a rate");
    let site_quota = SiteQuota { connections: u32::try_from(cap).expect("small"), rate };
    let mut now = start;
    let mut model = Model::default();
    let mut gates = Gates {
        sites: SiteTable::default(),
        endpoints: InFlightCounts::default(),
        workspaces: InFlightCounts::default(),
        deliveries: BTreeSet::new(),
    };
    for op in ops {
        match op.clone() {
            Op::Start { dest, work } => {
                let d = &dests[dest];
                if matches!(d, Destination::Endpoint(_, e) if gates.deliveries.contains(&(*e, work))) {
                    continue;
                }
                let works = model.in_flight.entry(d.clone()).or_default();
                let holds = works.contains(&work);
                let suspended = model.suspended.get(d).is_some_and(|until| *until > now);
                let workspace_room = match d {
                    Destination::Site(_) => true,
                    Destination::Endpoint(ws, _) => model.workspace_load(*ws) < workspace_cap,
                };
                let works = model.in_flight.entry(d.clone()).or_default();
                let expected = if suspended {
                    Answer::Suspended
                } else if (holds || works.len() < cap) && workspace_room {
                    works.insert(work);
                    Answer::Go
                } else {
                    Answer::Full
                };
                let got = match d {
                    Destination::Site(site) => {
                        match gates.sites.admit(site, site_quota, SiteLease { id: lease_id(work), until: far }, now) {
                            SiteAdmission::Admitted => Answer::Go,
                            SiteAdmission::Wait { why: SiteWait::Suspended(_), .. } => Answer::Suspended,
                            SiteAdmission::Wait { why: SiteWait::Connections, .. } => Answer::Full,
                            other => return Err(TestCaseError::fail(format!("unexpected {other:?}"))),
                        }
                    }
                    Destination::Endpoint(ws, endpoint) => {
                        // One claim of one delivery, under the quota the dispatcher builds.
                        let quota = EndpointQuota {
                            per_endpoint: cap,
                            in_flight: gates.endpoints.counts().clone(),
                            per_workspace: workspace_cap,
                            workspace_in_flight: gates.workspaces.counts().clone(),
                        };
                        if quota.start().take(*ws, *endpoint) {
                            gates.endpoints.start(*endpoint);
                            gates.workspaces.start(*ws);
                            gates.deliveries.insert((*endpoint, work));
                            Answer::Go
                        } else {
                            Answer::Full
                        }
                    }
                };
                prop_assert_eq!(got, expected, "{:?} at {:?}", op, d);
            }
            Op::Finish { dest, work } => {
                let d = &dests[dest];
                model.in_flight.entry(d.clone()).or_default().remove(&work);
                match d {
                    Destination::Site(site) => gates.sites.release(site, lease_id(work), None, now),
                    Destination::Endpoint(ws, endpoint) => {
                        if gates.deliveries.remove(&(*endpoint, work)) {
                            gates.endpoints.finish(endpoint);
                            gates.workspaces.finish(ws);
                        }
                    }
                }
            }
            Op::Suspend { dest, ms } => {
                if let Destination::Site(site) = &dests[dest] {
                    let until = now + TimeDelta::milliseconds(ms);
                    let current = model.suspended.entry(dests[dest].clone()).or_insert(until);
                    *current = (*current).max(until);
                    let change = SiteChange::Suspend { until, reason: "by the test".to_owned() };
                    gates.sites.change(site, change, now);
                }
            }
            Op::Advance { ms } => now += TimeDelta::milliseconds(ms),
        }
        // What is in flight, as each kind's counts hold it, is the model's.
        for d in &dests {
            let expected = model.in_flight.get(d).map_or(0, BTreeSet::len);
            prop_assert!(expected <= cap, "never beyond the cap");
            let counted = match d {
                Destination::Site(site) => gates
                    .sites
                    .states(now)
                    .iter()
                    .find(|s| &s.site == site)
                    .map_or(0, |s| usize::try_from(s.leases).expect("small")),
                Destination::Endpoint(_, endpoint) => gates.endpoints.of(endpoint),
            };
            prop_assert_eq!(counted, expected, "in flight at {:?}", d);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn sites_and_endpoints_admit_by_the_same_rule(
        ops in proptest::collection::vec(op(), 1..80),
        cap in 0usize..4,
        workspace_cap in 0usize..6,
    ) {
        run(&ops, cap, workspace_cap)?;
    }
}

/// A claim of several deliveries counts those it took against the same rule: one claim never
/// takes more of an endpoint than its cap leaves, whatever the dispatcher had in flight.
#[test]
fn one_claim_counts_what_it_took_against_the_cap() {
    let (ws, endpoint) = (WorkspaceId(ulid::Ulid(1)), WebhookId(ulid::Ulid(11)));
    let mut in_flight = InFlightCounts::default();
    in_flight.start(endpoint);
    let quota = EndpointQuota { in_flight: in_flight.counts().clone(), ..EndpointQuota::per_endpoint(3) };
    let mut claim = quota.start();
    let taken: Vec<bool> = (0..4).map(|_| claim.take(ws, endpoint)).collect();
    assert_eq!(taken, [true, true, false, false], "three at once, one already in flight");
}
