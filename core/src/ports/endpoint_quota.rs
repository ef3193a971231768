//! [`EndpointQuota`]: how many deliveries of each webhook endpoint, and of each workspace, one
//! claim may take, so that a dead endpoint with a backlog cannot fill every claim, nor one
//! workspace's many dead endpoints every slot of the dispatcher.
//!
//! An endpoint's limit is the destinations' one [`AdmissionRule`]'s in-flight part, the same
//! code as a site's connection limit (an endpoint has no rate and no suspension); the
//! workspace's limit is the same rule over the tenant. It is applied inside the store's claim,
//! not after it as a site's is: a claim that took a dead endpoint's backlog only to put it
//! back would fill every pass with it (docs/decisions.md, "One admission rule for sites and
//! endpoints").

use std::collections::HashMap;

use super::admission_rule::{AdmissionRule, InFlightCounts};
use crate::ids::{WebhookId, WorkspaceId};

/// How many more deliveries of each endpoint and of each workspace one claim may take:
/// `per_endpoint` minus what the claimer already has `in_flight` for the endpoint, and
/// `per_workspace` minus what it has `workspace_in_flight` for the workspace. A delivery is
/// taken only when both have room. See
/// [`WebhookStore::claim_due_webhook_deliveries`](super::WebhookStore::claim_due_webhook_deliveries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointQuota {
    /// Most deliveries of one endpoint in flight at once (claimed by this call included).
    pub per_endpoint: usize,
    /// Deliveries of each endpoint the claimer already has in flight; absent means none.
    pub in_flight: HashMap<WebhookId, usize>,
    /// Most deliveries of one workspace in flight at once, all its endpoints together
    /// (claimed by this call included).
    pub per_workspace: usize,
    /// Deliveries of each workspace the claimer already has in flight; absent means none.
    pub workspace_in_flight: HashMap<WorkspaceId, usize>,
}

impl EndpointQuota {
    /// No limit: a claim takes due deliveries regardless of their endpoint or workspace.
    pub fn unlimited() -> Self {
        Self::per_endpoint(usize::MAX)
    }

    /// At most `per_endpoint` of each endpoint, none in flight yet, any number per workspace.
    pub fn per_endpoint(per_endpoint: usize) -> Self {
        Self { per_endpoint, in_flight: HashMap::new(), per_workspace: usize::MAX, workspace_in_flight: HashMap::new() }
    }

    /// How many deliveries of `endpoint` a claim may still take.
    pub fn remaining(&self, endpoint: WebhookId) -> usize {
        self.per_endpoint.saturating_sub(self.in_flight.get(&endpoint).copied().unwrap_or(0))
    }

    /// How many deliveries of `workspace` a claim may still take.
    pub fn remaining_in_workspace(&self, workspace: WorkspaceId) -> usize {
        self.per_workspace.saturating_sub(self.workspace_in_flight.get(&workspace).copied().unwrap_or(0))
    }

    /// Whether no delivery at all can be taken (a limit of 0).
    pub fn admits_none(&self) -> bool {
        self.per_endpoint == 0 || self.per_workspace == 0
    }

    /// A fresh count for one claim, for the stores: see [`QuotaCount`].
    pub fn start(&self) -> QuotaCount<'_> {
        QuotaCount { quota: self, taken: InFlightCounts::default(), taken_in_workspace: InFlightCounts::default() }
    }
}

/// A quota as one claim uses it up: the stores scan due deliveries earliest first and ask
/// [`QuotaCount::take`] of each, so that every store applies the rule the same way.
#[derive(Debug)]
pub struct QuotaCount<'a> {
    quota: &'a EndpointQuota,
    taken: InFlightCounts<WebhookId>,
    taken_in_workspace: InFlightCounts<WorkspaceId>,
}

impl QuotaCount<'_> {
    /// Whether a delivery of `endpoint` may still be taken as far as the endpoint goes
    /// (without counting it).
    pub fn has_room(&self, endpoint: WebhookId) -> bool {
        let in_flight = self.quota.in_flight.get(&endpoint).copied().unwrap_or(0);
        AdmissionRule::in_flight(self.quota.per_endpoint)
            .has_room(in_flight.saturating_add(self.taken.of(&endpoint)), false)
    }

    /// Whether a delivery of `workspace` may still be taken as far as the workspace goes
    /// (without counting it).
    pub fn workspace_has_room(&self, workspace: WorkspaceId) -> bool {
        let in_flight = self.quota.workspace_in_flight.get(&workspace).copied().unwrap_or(0);
        AdmissionRule::in_flight(self.quota.per_workspace)
            .has_room(in_flight.saturating_add(self.taken_in_workspace.of(&workspace)), false)
    }

    /// Counts a delivery of `endpoint` in `workspace` as taken if both have room; returns
    /// whether it was.
    pub fn take(&mut self, workspace: WorkspaceId, endpoint: WebhookId) -> bool {
        let room = self.has_room(endpoint) && self.workspace_has_room(workspace);
        if room {
            self.taken.start(endpoint);
            self.taken_in_workspace.start(workspace);
        }
        room
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_takes_what_remains_of_each_endpoint() {
        let ws = WorkspaceId(ulid::Ulid(7));
        let (a, b) = (WebhookId(ulid::Ulid(1)), WebhookId(ulid::Ulid(2)));
        let quota = EndpointQuota { in_flight: HashMap::from([(a, 1), (b, 5)]), ..EndpointQuota::per_endpoint(2) };
        assert_eq!((quota.remaining(a), quota.remaining(b)), (1, 0));
        let mut count = quota.start();
        assert_eq!([count.take(ws, a), count.take(ws, a), count.take(ws, b)], [true, false, false]);
        assert!(EndpointQuota::unlimited().start().take(ws, b));
    }

    #[test]
    fn a_workspace_at_its_quota_takes_nothing_more_whatever_its_endpoints_have_left() {
        let (busy, other) = (WorkspaceId(ulid::Ulid(7)), WorkspaceId(ulid::Ulid(8)));
        let (a, b, c) = (WebhookId(ulid::Ulid(1)), WebhookId(ulid::Ulid(2)), WebhookId(ulid::Ulid(3)));
        let quota = EndpointQuota {
            per_workspace: 3,
            workspace_in_flight: HashMap::from([(busy, 1)]),
            ..EndpointQuota::per_endpoint(10)
        };
        assert_eq!(quota.remaining_in_workspace(busy), 2);
        let mut count = quota.start();
        assert_eq!([count.take(busy, a), count.take(busy, b), count.take(busy, a)], [true, true, false]);
        assert!(count.has_room(a) && !count.workspace_has_room(busy), "the endpoint has room, its workspace not");
        assert_eq!([count.take(other, c), count.take(other, c), count.take(other, c)], [true, true, true]);
        assert!(!count.take(other, c), "the other workspace stops at its own quota");
        let refused = EndpointQuota { per_workspace: 0, ..EndpointQuota::unlimited() };
        assert!(refused.admits_none() && !refused.start().take(other, c));
    }
}
