//! The `Limits` conformance suite on `PgLimits`, each check in a fresh schema: the shared
//! limits answer exactly as one process's in-memory limits do, also under racing calls;
//! and the bound on tracked delivery sites, too many to reach by the suite's calls.

use chrono::{DateTime, Duration};
use tidings_core::ids::SiteLeaseId;
use tidings_core::ports::site_admission::{CONNECTION_WAIT, MAX_TRACKED_SITES};
use tidings_core::ports::{Limits, SiteAdmission, SiteChange, SiteLease, SiteQuota, SiteWait};
use tidings_core::shaping::{MessageRate, RatePeriod, SiteKey};
use tidings_core::usecases::AuthThrottleConfig;

use crate::common::{DropSchema, database_url, fresh_store, reachable};
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

/// The rows of `table` in `schema`.
async fn rows(client: &tokio_postgres::Client, schema: &str, table: &str) -> i64 {
    client.query_one(&format!("SELECT count(*) FROM {schema}.{table}"), &[]).await.expect("count").get(0)
}

/// Past [`MAX_TRACKED_SITES`] rows, a new site first makes the sites that limit nothing
/// forgotten, then waits as the in-memory table makes it; a change is kept over the bound,
/// and the states stop at the bound. (Filled by SQL: ten thousand admissions would be slow.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_site_past_the_tracked_bound_forgets_idle_sites_or_waits() {
    let url = database_url();
    if !reachable(&url).await {
        return;
    }
    let (store, guard) = fresh_store(&url).await;
    let limits = store.limits(AuthThrottleConfig::default());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    let t0 = DateTime::from_timestamp(1_700_000_000, 0).expect("a time");
    let far = (t0 + Duration::hours(1)).timestamp_nanos_opt().expect("in range");
    let busy = i64::try_from(MAX_TRACKED_SITES).expect("small") - 1;
    let fill = format!(
        "INSERT INTO {schema}.delivery_sites (site, suspended_until, suspend_reason)
             SELECT 'busy' || g, $1, 'held' FROM generate_series(1, $2::bigint) g;
         INSERT INTO {schema}.delivery_sites (site) VALUES ('idle.example')",
        schema = guard.schema
    );
    for statement in fill.split(';') {
        let params: &[&(dyn tokio_postgres::types::ToSql + Sync)] =
            if statement.contains("$1") { &[&far, &busy] } else { &[] };
        client.execute(statement, params).await.expect("fill");
    }
    let quota = SiteQuota { connections: 1, rate: MessageRate::new(1, RatePeriod::Minute).expect("a rate") };
    let lease = |until| SiteLease { id: SiteLeaseId(ulid::Ulid::new()), until };
    let new = SiteKey::parse(".new.example").expect("a site key");
    let admitted = limits.admit_delivery(&new, quota, lease(t0 + Duration::hours(1)), t0).await.expect("admit");
    assert_eq!(admitted, SiteAdmission::Admitted, "the idle site made room");
    assert_eq!(rows(&client, &guard.schema, "delivery_sites").await, busy + 1, "idle forgotten, new kept");

    let another = SiteKey::parse(".another.example").expect("a site key");
    let refused = limits.admit_delivery(&another, quota, lease(t0 + Duration::hours(1)), t0).await.expect("admit");
    assert_eq!(refused, SiteAdmission::Wait { until: t0 + CONNECTION_WAIT, why: SiteWait::Connections });
    assert_eq!(rows(&client, &guard.schema, "delivery_sites").await, busy + 1, "nothing kept of it");

    let hold = SiteChange::Suspend { until: t0 + Duration::hours(1), reason: "by the operator".to_owned() };
    limits.change_site(&another, hold, t0).await.expect("suspend");
    assert_eq!(rows(&client, &guard.schema, "delivery_sites").await, busy + 2, "a change is kept");
    let states = limits.site_states(t0).await.expect("states");
    assert_eq!(states.len(), MAX_TRACKED_SITES, "at most the bound");
    assert_eq!(states[0].site, another, "by site key");
}
