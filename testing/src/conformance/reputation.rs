//! The reputation guard's standings (`ReputationStore`): a change is written only over the
//! version it was made from, with its webhook deliveries or not at all; racing writers of one
//! version see exactly one succeed; workspaces and scopes are independent.

use std::sync::Arc;

use super::Must;
use crate::fixtures::{delivery, now, ulid, webhook};
use tidings_core::activity::rates::Percent;
use tidings_core::ids::{DomainId, WorkspaceId};
use tidings_core::ports::Store;
use tidings_core::reputation::{Breach, RateKind, Scope, ScopeReputation, Standing};

fn paused(ws: WorkspaceId, scope: Scope, version: u64) -> ScopeReputation {
    let breach = Breach { kind: RateKind::Bounce, part: 30, whole: 300, threshold: Percent(8_000) };
    // A fixed time: records are compared whole, and PostgreSQL's JSON keeps what it was given.
    let since = chrono::DateTime::from_timestamp(1_796_000_000, 0).unwrap_or_else(now);
    ScopeReputation { standing: Standing::Paused { since, breach }, version, ..ScopeReputation::fresh(ws, scope) }
}

pub(super) async fn changes_are_written_over_the_version_they_were_made_from<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let domain = Scope::Domain(DomainId(ulid()));
    assert!(s.reputation(ws).await.must("reputation").is_empty(), "a workspace starts with no record");
    let endpoint = webhook(ws);
    s.insert_webhook(&endpoint).await.must("insert_webhook");
    let said = delivery(ws, endpoint.id);
    assert!(s.change_reputation(&paused(ws, domain, 1), 0, std::slice::from_ref(&said)).await.must("first change"));
    assert_eq!(s.reputation(ws).await.must("reputation"), vec![paused(ws, domain, 1)]);
    let logged = s.get_webhook_delivery(ws, said.id).await.must("get_webhook_delivery");
    assert_eq!(logged.map(|d| d.id), Some(said.id), "the delivery is written with the change");

    // Made from a version that is no longer stored: nothing is written, deliveries neither.
    let stale = delivery(ws, endpoint.id);
    let good = ScopeReputation { version: 1, ..ScopeReputation::fresh(ws, domain) };
    assert!(!s.change_reputation(&good, 0, std::slice::from_ref(&stale)).await.must("stale change"));
    assert!(s.get_webhook_delivery(ws, stale.id).await.must("get").is_none(), "a refused change queues nothing");
    assert_eq!(s.reputation(ws).await.must("reputation"), vec![paused(ws, domain, 1)]);

    let resumed = ScopeReputation { version: 2, ..ScopeReputation::fresh(ws, domain) };
    assert!(s.change_reputation(&resumed, 1, &[]).await.must("change over version 1"));
    assert_eq!(s.reputation(ws).await.must("reputation"), vec![resumed.clone()]);

    // Scopes and workspaces are independent.
    assert!(s.change_reputation(&paused(ws, Scope::Workspace, 1), 0, &[]).await.must("workspace scope"));
    let other = WorkspaceId(ulid());
    assert!(s.change_reputation(&paused(other, Scope::Workspace, 1), 0, &[]).await.must("other workspace"));
    let mut mine = s.reputation(ws).await.must("reputation");
    mine.sort_by_key(|r| r.scope);
    assert_eq!(mine, vec![paused(ws, Scope::Workspace, 1), resumed]);
    assert_eq!(s.reputation(other).await.must("reputation"), vec![paused(other, Scope::Workspace, 1)]);

    // A delivery to an endpoint deleted meanwhile is dropped, the change still made.
    let gone = webhook(ws);
    s.insert_webhook(&gone).await.must("insert_webhook");
    s.delete_webhook(ws, gone.id).await.must("delete_webhook");
    let orphan = delivery(ws, gone.id);
    assert!(s.change_reputation(&paused(ws, domain, 3), 2, std::slice::from_ref(&orphan)).await.must("change"));
    assert!(s.get_webhook_delivery(ws, orphan.id).await.must("get").is_none());
}

pub(super) async fn racing_changes_of_one_version_write_once<S: Store + 'static>(s: Arc<S>) {
    let ws = WorkspaceId(ulid());
    let endpoint = webhook(ws);
    s.insert_webhook(&endpoint).await.must("insert_webhook");
    for expected in 0..3u64 {
        let mut racers = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let (s, d) = (Arc::clone(&s), delivery(ws, endpoint.id));
            racers.spawn(async move {
                let next = paused(ws, Scope::Workspace, expected + 1);
                let won = s.change_reputation(&next, expected, std::slice::from_ref(&d)).await.must("racing change");
                (won, d.id)
            });
        }
        let results = racers.join_all().await;
        let winners: Vec<_> = results.iter().filter(|(won, _)| *won).collect();
        assert_eq!(winners.len(), 1, "exactly one of 8 racing changes over version {expected} is written");
        for (won, id) in &results {
            let kept = s.get_webhook_delivery(ws, *id).await.must("get").is_some();
            assert_eq!(kept, *won, "only the winner's delivery is queued");
        }
    }
    assert_eq!(s.reputation(ws).await.must("reputation")[0].version, 3);
}
