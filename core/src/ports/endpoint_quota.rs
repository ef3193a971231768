//! [`EndpointQuota`]: how many deliveries of each webhook endpoint one claim may take, so that
//! a dead endpoint with a backlog cannot fill every claim.

use std::collections::HashMap;

use crate::ids::WebhookId;

/// How many more deliveries of each endpoint one claim may take: `per_endpoint` minus what
/// the claimer already has `in_flight` for it. See
/// [`WebhookStore::claim_due_webhook_deliveries`](super::WebhookStore::claim_due_webhook_deliveries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointQuota {
    /// Most deliveries of one endpoint in flight at once (claimed by this call included).
    pub per_endpoint: usize,
    /// Deliveries of each endpoint the claimer already has in flight; absent means none.
    pub in_flight: HashMap<WebhookId, usize>,
}

impl EndpointQuota {
    /// No limit: a claim takes due deliveries regardless of their endpoint.
    pub fn unlimited() -> Self {
        Self::per_endpoint(usize::MAX)
    }

    /// At most `per_endpoint` of each endpoint, none in flight yet.
    pub fn per_endpoint(per_endpoint: usize) -> Self {
        Self { per_endpoint, in_flight: HashMap::new() }
    }

    /// How many deliveries of `endpoint` a claim may still take.
    pub fn remaining(&self, endpoint: WebhookId) -> usize {
        self.per_endpoint.saturating_sub(self.in_flight.get(&endpoint).copied().unwrap_or(0))
    }

    /// A fresh count for one claim, for the stores: see [`QuotaCount`].
    pub fn start(&self) -> QuotaCount<'_> {
        QuotaCount { quota: self, taken: HashMap::new() }
    }
}

/// A quota as one claim uses it up: the stores scan due deliveries earliest first and ask
/// [`QuotaCount::take`] of each, so that every store applies the rule the same way.
#[derive(Debug)]
pub struct QuotaCount<'a> {
    quota: &'a EndpointQuota,
    taken: HashMap<WebhookId, usize>,
}

impl QuotaCount<'_> {
    /// Whether a delivery of `endpoint` may still be taken (without counting it).
    pub fn has_room(&self, endpoint: WebhookId) -> bool {
        self.taken.get(&endpoint).copied().unwrap_or(0) < self.quota.remaining(endpoint)
    }

    /// Counts a delivery of `endpoint` as taken if there is room; returns whether it was.
    pub fn take(&mut self, endpoint: WebhookId) -> bool {
        let room = self.has_room(endpoint);
        if room {
            *self.taken.entry(endpoint).or_default() += 1;
        }
        room
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_takes_what_remains_of_each_endpoint() {
        let (a, b) = (WebhookId(ulid::Ulid(1)), WebhookId(ulid::Ulid(2)));
        let quota = EndpointQuota { per_endpoint: 2, in_flight: HashMap::from([(a, 1), (b, 5)]) };
        assert_eq!((quota.remaining(a), quota.remaining(b)), (1, 0));
        let mut count = quota.start();
        assert_eq!([count.take(a), count.take(a), count.take(b)], [true, false, false]);
        assert!(EndpointQuota::unlimited().start().take(b));
    }
}
