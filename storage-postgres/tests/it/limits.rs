//! The `Limits` conformance suite on `PgLimits`, each check in a fresh schema: the shared
//! limits answer exactly as one process's in-memory limits do, also under racing calls.

use crate::common::{DropSchema, database_url, fresh_store, reachable};
use tidings_core::usecases::AuthThrottleConfig;
use tidings_storage_postgres::PgLimits;
use tidings_testing::limits::{LimitsFactory, run_limits_checks};

struct FreshSchema {
    url: String,
}

impl LimitsFactory for FreshSchema {
    type Limits = PgLimits;
    type Guard = DropSchema;

    async fn make(&self, throttle: AuthThrottleConfig) -> (PgLimits, DropSchema) {
        let (store, guard) = fresh_store(&self.url).await;
        (store.limits(throttle), guard)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pg_limits_pass_the_limits_conformance_suite() {
    let url = database_url();
    if reachable(&url).await {
        run_limits_checks(&FreshSchema { url }).await;
    }
}
