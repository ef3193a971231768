//! The `Limits` conformance suite on the in-memory limits of one process.
use tidings_core::usecases::{AuthThrottleConfig, LocalLimits};
use tidings_testing::limits::{LimitsFactory, run_limits_checks};

struct Fresh;

impl LimitsFactory for Fresh {
    type Limits = LocalLimits;
    type Guard = ();
    async fn make(&self, throttle: AuthThrottleConfig) -> (LocalLimits, ()) {
        (LocalLimits::new(throttle), ())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_limits_pass_the_limits_conformance_suite() {
    run_limits_checks(&Fresh).await;
}
