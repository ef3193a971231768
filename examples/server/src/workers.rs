//! What the server watches besides core's background loops (which `tidings_core::runtime`
//! runs): the health of the store, through its port.

use std::sync::Arc;
use std::time::Duration;

/// How often [`store_failure`] looks.
const FAILURE_CHECK: Duration = Duration::from_millis(200);

/// Completes with the reason once the store has failed for good ([`MessageStore::failure`]:
/// sled's flush to disk failed; never on PostgreSQL, which reconnects by itself). A look is
/// an atomic load, so polling costs nothing worth an event.
///
/// [`MessageStore::failure`]: tidings_core::ports::MessageStore::failure
pub async fn store_failure(store: Arc<dyn tidings_core::ports::Store>) -> Arc<str> {
    loop {
        if let Some(reason) = store.failure() {
            return reason;
        }
        tokio::time::sleep(FAILURE_CHECK).await;
    }
}
