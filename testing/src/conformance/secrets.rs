//! Node-independent secrets: the first value stored under a name is kept for good.

use std::sync::Arc;

use super::Must;
use tidings_core::ports::Store;
use tidings_core::secret::{Secret, SecretName};

const FIRST: SecretName = SecretName::new("conformance_first");
const SECOND: SecretName = SecretName::new("conformance_second");

fn bytes(fill: u8, len: usize) -> Secret<Vec<u8>> {
    Secret::new(vec![fill; len])
}

pub(super) async fn the_first_secret_stored_is_kept<S: Store + 'static>(s: Arc<S>) {
    let stored = s.ensure_secret(FIRST, &bytes(1, 32)).await.must("ensure_secret on a fresh store");
    assert_eq!(stored.expose(), &vec![1; 32], "the first call stores and returns its candidate");
    for candidate in [bytes(2, 32), bytes(1, 32), bytes(3, 7), bytes(0, 0)] {
        let again = s.ensure_secret(FIRST, &candidate).await.must("ensure_secret again");
        assert_eq!(again.expose(), &vec![1; 32], "later calls return the first value whatever their candidate");
    }

    let other = s.ensure_secret(SECOND, &bytes(9, 16)).await.must("ensure_secret of another name");
    assert_eq!(other.expose(), &vec![9; 16], "another name is independent of the first");
    let first = s.ensure_secret(FIRST, &bytes(4, 32)).await.must("ensure_secret of the first name");
    assert_eq!(first.expose(), &vec![1; 32], "storing another name leaves the first unchanged");

    let empty = SecretName::new("conformance_empty");
    let stored = s.ensure_secret(empty, &bytes(0, 0)).await.must("ensure_secret with an empty value");
    assert!(stored.expose().is_empty(), "an empty value is stored as it is");
    let again = s.ensure_secret(empty, &bytes(5, 5)).await.must("ensure_secret after an empty value");
    assert!(again.expose().is_empty(), "an empty value counts as stored");
}

pub(super) async fn racing_callers_all_get_one_secret<S: Store + 'static>(s: Arc<S>) {
    const RACERS: u8 = 16;
    for (round, name) in [FIRST, SECOND].into_iter().enumerate() {
        let barrier = Arc::new(tokio::sync::Barrier::new(usize::from(RACERS)));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..RACERS {
            let (s, barrier) = (Arc::clone(&s), Arc::clone(&barrier));
            tasks.spawn(async move {
                let candidate = bytes(i, 32);
                barrier.wait().await;
                s.ensure_secret(name, &candidate).await
            });
        }
        let mut values = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let value = joined.unwrap_or_else(|e| panic!("racing ensure_secret task failed: {e}"));
            values.push(value.must("racing ensure_secret").expose().clone());
        }
        values.sort();
        values.dedup();
        assert_eq!(values.len(), 1, "round {round}: every racing caller gets the same value, got {values:?}");
        assert!(
            values[0].len() == 32 && values[0].iter().all(|b| *b == values[0][0] && *b < RACERS),
            "round {round}: the value is one caller's candidate, got {:?}",
            values[0]
        );
        let after = s.ensure_secret(name, &bytes(200, 32)).await.must("ensure_secret after the race");
        assert_eq!(after.expose(), &values[0], "round {round}: the value the racers got is the one stored");
    }
}
