//! What the server watches besides core's background loops (which `tidings_core::runtime`
//! runs): the health of the embedded store.

use std::sync::Arc;
use std::time::Duration;

/// How often [`store_failure`] looks.
const FAILURE_CHECK: Duration = Duration::from_millis(200);

/// Completes with the reason once the sled store has failed ([`SledStore::failure`]); never
/// without a sled store. A look is an atomic load, so polling costs nothing worth an event.
///
/// [`SledStore::failure`]: tidings_storage_sled::SledStore::failure
pub async fn store_failure(sled: Option<tidings_storage_sled::SledStore>) -> Arc<str> {
    let Some(sled) = sled else { return std::future::pending().await };
    loop {
        if let Some(reason) = sled.failure() {
            return reason;
        }
        tokio::time::sleep(FAILURE_CHECK).await;
    }
}
