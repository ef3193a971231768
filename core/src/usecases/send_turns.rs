//! One send at a time per Idempotency-Key within this process.
//!
//! Requests that repeat a key while its first send is still being stored would each take a
//! rate-limit token (the replay is only recognised once the first one is stored), and with
//! the bucket nearly empty the repeats were refused with 429 although replays take
//! none (docs/api.md#rate-limits). Queued behind the first, each repeat finds it stored and is
//! answered as a replay. Across nodes the same race is settled by the store (one message) and a
//! repeat may still see a 429 if the key's bucket is empty at that instant; its retry is a
//! replay.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::ids::WorkspaceId;

type Slot = Arc<tokio::sync::Mutex<()>>;
type Table = Mutex<HashMap<(WorkspaceId, String), Slot>>;

/// The keys being sent right now. Cheap to clone; clones share the table.
#[derive(Debug, Clone, Default)]
pub struct SendTurns {
    table: Arc<Table>,
}

/// A send's turn on its key; the next send with the key proceeds when this is dropped.
#[derive(Debug)]
pub struct SendTurn {
    table: Arc<Table>,
    key: (WorkspaceId, String),
    slot: Slot,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl SendTurns {
    /// Waits until no other send of this process holds `key` in `workspace`, then holds it.
    pub async fn take(&self, workspace: WorkspaceId, key: &str) -> SendTurn {
        let key = (workspace, key.to_owned());
        let slot = Arc::clone(self.lock().entry(key.clone()).or_default());
        let guard = Arc::clone(&slot).lock_owned().await;
        SendTurn { table: Arc::clone(&self.table), key, slot, guard: Some(guard) }
    }

    /// How many keys are held or waited for (for tests).
    pub fn in_flight(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(WorkspaceId, String), Slot>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for SendTurn {
    fn drop(&mut self) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        // Three owners mean no one else: the table, this turn, and the guard's own clone.
        // Waiters hold clones too, so the entry stays while anyone waits for it.
        if Arc::strong_count(&self.slot) == 3 {
            table.remove(&self.key);
        }
        drop(self.guard.take());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ws() -> WorkspaceId {
        WorkspaceId(ulid::Ulid::from_parts(1, 1))
    }

    #[tokio::test]
    async fn a_second_send_with_the_key_waits_for_the_first() {
        let turns = SendTurns::default();
        let first = turns.take(ws(), "k").await;
        let waiting = tokio::spawn({
            let turns = turns.clone();
            async move { drop(turns.take(ws(), "k").await) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "the second send ran while the first held the key");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("released").expect("task");
        assert_eq!(turns.in_flight(), 0, "the table forgets keys no one holds");
    }

    #[tokio::test]
    async fn other_keys_and_workspaces_do_not_wait() {
        let turns = SendTurns::default();
        let _held = turns.take(ws(), "k").await;
        let other_ws = WorkspaceId(ulid::Ulid::from_parts(2, 2));
        let quick = async {
            drop(turns.take(ws(), "other").await);
            drop(turns.take(other_ws, "k").await);
        };
        tokio::time::timeout(Duration::from_secs(5), quick).await.expect("not blocked by another key");
        assert_eq!(turns.in_flight(), 1);
    }
}
