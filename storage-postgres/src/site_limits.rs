//! Delivery-site admission on PostgreSQL: the site half of [`PgLimits`](crate::PgLimits),
//! answering exactly as the in-memory `SiteTable` of `tidings-core` does, for every node on
//! the database at once (tables in `migrations/0015_site_limits.sql`).
//!
//! An admission is one short READ COMMITTED transaction on the site's row: it upserts and
//! locks the row, then (in a new statement, whose snapshot therefore sees every admission
//! that held the lock before) deletes the site's expired leases and reads the row with its
//! live leases, decides in Rust with core's `AdmissionRule` (as the memory table does), and writes the lease and the
//! bucket. Admissions of one site thus run one after the other on every node; admissions of
//! other sites do not wait. Releases, changes and reads are single statements.
//!
//! Times are the callers' (the nodes' clocks), kept in nanoseconds: keep the clocks in sync
//! (NTP), as for the claims' leases.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tidings_core::ids::SiteLeaseId;
use tidings_core::ports::admission_rule::{DestinationState, Verdict};
use tidings_core::ports::site_admission::{
    CONNECTION_WAIT, MAX_TRACKED_SITES, SiteAdmission, SiteChange, SiteLease, SiteQuota, SiteState, SiteWait,
    bounded_reason,
};
use tidings_core::ports::{StoreError, StoreResult};
use tidings_core::shaping::{MessageRate, RatePeriod, SiteKey};
use tokio_postgres::{IsolationLevel, Row};

use crate::PgStore;
use crate::db::{count, db_error, execute, limit as sql_limit, query, query_opt, uuid};
use crate::limits::nanos;

/// Creates the site's row if it has none, and locks it either way: `DO UPDATE ... WHERE
/// false` locks the conflicting row without writing it. Changes one row when it created it.
const LOCK_SITE: &str = "INSERT INTO delivery_sites AS s (site) VALUES ($1)
     ON CONFLICT (site) DO UPDATE SET tat = s.tat WHERE false";

/// The locked site's row with its live leases (how many, the soonest end, whether lease `$3`
/// is one of them), after deleting its expired ones. A statement of its own after
/// [`LOCK_SITE`], so that it reads what the admissions before it committed.
const READ_SITE: &str = "WITH expired AS (
         DELETE FROM delivery_site_leases WHERE site = $1 AND held_until <= $2
     )
     SELECT s.tat, s.suspended_until, s.suspend_reason, s.throttle_count, s.throttle_period, s.throttle_until,
            l.live, l.soonest, l.held
     FROM delivery_sites s, (
         SELECT count(*) AS live, min(held_until) AS soonest, coalesce(bool_or(lease = $3), false) AS held
         FROM delivery_site_leases WHERE site = $1 AND held_until > $2
     ) l
     WHERE s.site = $1";

/// An admission's writes: the lease held (or taken over) until `$3`, the bucket moved to `$4`.
const ADMIT: &str = "WITH held AS (
         INSERT INTO delivery_site_leases (site, lease, held_until) VALUES ($1, $2, $3)
         ON CONFLICT (site, lease) DO UPDATE SET held_until = EXCLUDED.held_until
     )
     UPDATE delivery_sites SET tat = $4 WHERE site = $1";

/// Deletes up to `$2` sites other than `$3` that limit nothing at `$1`: full bucket, no live
/// lease, no suspension or throttle in force. `SKIP LOCKED` passes over sites being admitted;
/// an admission that committed meanwhile moved the bucket past `$1`, which the recheck of
/// the locked row sees.
const DELETE_IDLE_SITES: &str = "DELETE FROM delivery_sites WHERE site IN (
         SELECT site FROM delivery_sites s
         WHERE s.tat <= $1 AND s.site <> $3
           AND (s.suspended_until IS NULL OR s.suspended_until <= $1)
           AND (s.throttle_until IS NULL OR s.throttle_until <= $1)
           AND NOT EXISTS (SELECT 1 FROM delivery_site_leases l WHERE l.site = s.site AND l.held_until > $1)
         LIMIT $2 FOR UPDATE SKIP LOCKED)";

/// How many sites have a row, counting at most one past [`MAX_TRACKED_SITES`].
const COUNT_SITES: &str = "SELECT count(*) FROM (SELECT 1 FROM delivery_sites LIMIT $1) s";

fn from_nanos(ns: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(ns)
}

fn lease_uuid(lease: SiteLeaseId) -> uuid::Uuid {
    uuid(lease.0)
}

fn corrupt(e: tokio_postgres::Error) -> StoreError {
    StoreError::corrupt("delivery site", e)
}

/// A throttle's rate as stored: its count and its period's unit.
fn throttle_rate(count: i32, unit: &str) -> StoreResult<MessageRate> {
    let period = [RatePeriod::Second, RatePeriod::Minute, RatePeriod::Hour]
        .into_iter()
        .find(|period| period.unit() == unit)
        .ok_or_else(|| StoreError::Corrupt(format!("delivery site throttle period {unit:?}").into()))?;
    u32::try_from(count)
        .ok()
        .and_then(|count| MessageRate::new(count, period))
        .ok_or_else(|| StoreError::Corrupt(format!("delivery site throttle rate {count}/{unit}").into()))
}

/// The throttle in force at `now` of a row with the `throttle_count`, `throttle_period` and
/// `throttle_until` columns: its rate and end.
fn throttle_in_force(row: &Row, now: i64) -> StoreResult<Option<(MessageRate, i64)>> {
    let until: Option<i64> = row.try_get("throttle_until").map_err(corrupt)?;
    match until {
        Some(until) if until > now => {
            let count: i32 = row.try_get("throttle_count").map_err(corrupt)?;
            let unit: String = row.try_get("throttle_period").map_err(corrupt)?;
            Ok(Some((throttle_rate(count, &unit)?, until)))
        }
        _ => Ok(None),
    }
}

/// [`Limits::admit_delivery`](tidings_core::ports::Limits::admit_delivery).
pub(crate) async fn admit(
    store: &PgStore,
    site: &SiteKey,
    quota: SiteQuota,
    lease: SiteLease,
    now: DateTime<Utc>,
) -> StoreResult<SiteAdmission> {
    let (key, at) = (site.as_str(), nanos(now));
    let mut client = store.client().await?;
    // READ COMMITTED whatever the database's default: each statement must see what the
    // admissions that held the lock before it committed.
    let tx =
        client.build_transaction().isolation_level(IsolationLevel::ReadCommitted).start().await.map_err(db_error)?;
    let created = execute(&tx, LOCK_SITE, &[&key]).await? == 1;
    if created && !room_for_a_site(&tx, key, at).await? {
        // More sites busy at once than are tracked: this one waits its turn rather than
        // going unlimited (as the in-memory table does).
        execute(&tx, "DELETE FROM delivery_sites WHERE site = $1", &[&key]).await?;
        tx.commit().await.map_err(db_error)?;
        return Ok(SiteAdmission::Wait { until: now + CONNECTION_WAIT, why: SiteWait::Connections });
    }
    let row = query_opt(&tx, READ_SITE, &[&key, &at, &lease_uuid(lease.id)])
        .await?
        .ok_or_else(|| StoreError::Corrupt("the locked delivery site has no row".into()))?;
    let answer = match decide(&row, quota, at)? {
        Decision::Admit { tat } => {
            execute(&tx, ADMIT, &[&key, &lease_uuid(lease.id), &nanos(lease.until), &tat]).await?;
            SiteAdmission::Admitted
        }
        Decision::Refuse(wait) => wait,
    };
    // Committed in every case: it also ends the lock and keeps the expired leases deleted.
    tx.commit().await.map_err(db_error)?;
    Ok(answer)
}

/// What the locked site answers.
enum Decision {
    /// Admit, moving the bucket to `tat`.
    Admit { tat: i64 },
    /// Refuse, taking nothing.
    Refuse(SiteAdmission),
}

/// What the locked site answers from [`READ_SITE`]'s row: the destinations' one
/// [`AdmissionRule`](tidings_core::ports::AdmissionRule) decides, as it does for the
/// in-memory table.
fn decide(row: &Row, quota: SiteQuota, now: i64) -> StoreResult<Decision> {
    let suspended_until: Option<i64> = row.try_get("suspended_until").map_err(corrupt)?;
    let suspended_until = suspended_until.filter(|until| *until > now);
    let reason: Option<String> = match suspended_until {
        Some(_) => row.try_get("suspend_reason").map_err(corrupt)?,
        None => None,
    };
    let live: i64 = row.try_get("live").map_err(corrupt)?;
    let soonest: Option<i64> = row.try_get("soonest").map_err(corrupt)?;
    let state = DestinationState {
        suspended: suspended_until.map(|until| (from_nanos(until), reason.as_deref().unwrap_or(""))),
        in_flight: usize::try_from(live).unwrap_or(usize::MAX),
        holds: row.try_get("held").map_err(corrupt)?,
        soonest_end: soonest.map(from_nanos),
        throttle: throttle_in_force(row, now)?.map(|(rate, _)| rate),
        tat: row.try_get("tat").map_err(corrupt)?,
    };
    Ok(match quota.rule().decide(&state, from_nanos(now)) {
        Verdict::Admitted { tat } => Decision::Admit { tat },
        Verdict::Wait { until, why } => Decision::Refuse(SiteAdmission::Wait { until, why }),
    })
}

/// Whether the site `key` just created keeps the rows within [`MAX_TRACKED_SITES`], after
/// forgetting the sites that limit nothing if there are too many.
async fn room_for_a_site(tx: &impl GenericClient, key: &str, now: i64) -> StoreResult<bool> {
    let bound = i64::try_from(MAX_TRACKED_SITES).unwrap_or(i64::MAX);
    let sites = |rows: Vec<Row>| -> StoreResult<i64> {
        rows.first().map_or(Ok(0), |row| row.try_get::<_, i64>(0).map_err(corrupt))
    };
    let tracked = sites(query(tx, COUNT_SITES, &[&(bound + 1)]).await?)?;
    if tracked <= bound {
        return Ok(true);
    }
    let forgotten = execute(tx, DELETE_IDLE_SITES, &[&now, &i64::MAX, &key]).await?;
    Ok(tracked - i64::try_from(forgotten).unwrap_or(i64::MAX) <= bound)
}

/// [`Limits::release_delivery`](tidings_core::ports::Limits::release_delivery). A lease
/// that has ended is gone: it is not kept again.
pub(crate) async fn release(
    store: &PgStore,
    site: &SiteKey,
    lease: SiteLeaseId,
    keep_until: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let client = store.client().await?;
    let (key, lease) = (site.as_str(), lease_uuid(lease));
    match keep_until {
        Some(until) if until > now => {
            let sql = "UPDATE delivery_site_leases SET held_until = $3
                       WHERE site = $1 AND lease = $2 AND held_until > $4";
            execute(&client, sql, &[&key, &lease, &nanos(until), &nanos(now)]).await?;
        }
        _ => {
            let sql = "DELETE FROM delivery_site_leases WHERE site = $1 AND lease = $2";
            execute(&client, sql, &[&key, &lease]).await?;
        }
    }
    Ok(())
}

/// [`Limits::change_site`](tidings_core::ports::Limits::change_site). A suspension or
/// throttle that ends by `now` changes nothing. Kept whatever the number of sites, as the
/// in-memory table keeps it: a change is the operator's or a reply's, and rare.
pub(crate) async fn change(store: &PgStore, site: &SiteKey, change: SiteChange, now: DateTime<Utc>) -> StoreResult<()> {
    let client = store.client().await?;
    let key = site.as_str();
    match change {
        SiteChange::Suspend { until, reason } if until > now => {
            // A later end replaces an earlier one, also one that is over; an earlier keeps.
            let sql = "INSERT INTO delivery_sites AS s (site, suspended_until, suspend_reason) VALUES ($1, $2, $3)
                       ON CONFLICT (site) DO UPDATE
                           SET suspended_until = EXCLUDED.suspended_until, suspend_reason = EXCLUDED.suspend_reason
                       WHERE s.suspended_until IS NULL OR s.suspended_until < EXCLUDED.suspended_until";
            execute(&client, sql, &[&key, &nanos(until), &bounded_reason(&reason)]).await?;
        }
        SiteChange::Throttle { rate, until, reason } if until > now => {
            let count = i32::try_from(rate.count()).unwrap_or(i32::MAX);
            let sql = "INSERT INTO delivery_sites AS s (site, throttle_count, throttle_period, throttle_until, throttle_reason)
                       VALUES ($1, $2, $3, $4, $5)
                       ON CONFLICT (site) DO UPDATE SET throttle_count = EXCLUDED.throttle_count,
                           throttle_period = EXCLUDED.throttle_period, throttle_until = EXCLUDED.throttle_until,
                           throttle_reason = EXCLUDED.throttle_reason";
            let params: [crate::db::Param<'_>; 5] =
                [&key, &count, &rate.period().unit(), &nanos(until), &bounded_reason(&reason)];
            execute(&client, sql, &params).await?;
        }
        SiteChange::Suspend { .. } | SiteChange::Throttle { .. } => {}
        SiteChange::Resume => {
            let sql = "UPDATE delivery_sites SET suspended_until = NULL, suspend_reason = NULL, throttle_count = NULL,
                           throttle_period = NULL, throttle_until = NULL, throttle_reason = NULL
                       WHERE site = $1";
            execute(&client, sql, &[&key]).await?;
        }
    }
    Ok(())
}

/// [`Limits::site_states`](tidings_core::ports::Limits::site_states). A row whose key does
/// not read back as a site key is left out.
pub(crate) async fn states(store: &PgStore, now: DateTime<Utc>) -> StoreResult<Vec<SiteState>> {
    let client = store.client().await?;
    let at = nanos(now);
    let rows = query(
        &client,
        "SELECT s.site, coalesce(l.live, 0) AS live, s.suspended_until, s.suspend_reason,
                s.throttle_count, s.throttle_period, s.throttle_until, s.throttle_reason
         FROM delivery_sites s
         LEFT JOIN (
             SELECT site, count(*) AS live FROM delivery_site_leases WHERE held_until > $1 GROUP BY site
         ) l ON l.site = s.site
         WHERE l.live > 0 OR s.suspended_until > $1 OR s.throttle_until > $1
         ORDER BY s.site LIMIT $2",
        &[&at, &sql_limit(MAX_TRACKED_SITES)],
    )
    .await?;
    let mut states = Vec::with_capacity(rows.len());
    for row in &rows {
        let text: String = row.try_get("site").map_err(corrupt)?;
        let Some(site) = SiteKey::parse(&text) else { continue };
        let live: i64 = row.try_get("live").map_err(corrupt)?;
        let suspended_until: Option<i64> = row.try_get("suspended_until").map_err(corrupt)?;
        let suspended_until = suspended_until.filter(|until| *until > at);
        let suspend_reason: Option<String> = match suspended_until {
            Some(_) => row.try_get("suspend_reason").map_err(corrupt)?,
            None => None,
        };
        let throttle = match throttle_in_force(row, at)? {
            Some((rate, until)) => {
                let reason: String = row.try_get("throttle_reason").map_err(corrupt)?;
                Some((rate, from_nanos(until), reason))
            }
            None => None,
        };
        states.push(SiteState {
            site,
            leases: u32::try_from(live).unwrap_or(u32::MAX),
            suspended_until: suspended_until.map(from_nanos),
            suspend_reason,
            throttle,
        });
    }
    Ok(states)
}

/// The site half of [`Limits::purge`](tidings_core::ports::Limits::purge): up to `limit`
/// expired leases, then up to `limit` sites that limit nothing; how many rows it deleted.
pub(crate) async fn purge(store: &PgStore, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
    let client = store.client().await?;
    let (at, limit) = (nanos(now), sql_limit(limit));
    let leases = execute(
        &client,
        "DELETE FROM delivery_site_leases WHERE (site, lease) IN (
             SELECT site, lease FROM delivery_site_leases WHERE held_until <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)",
        &[&at, &limit],
    )
    .await?;
    // No site has the empty key: none is spared.
    let sites = execute(&client, DELETE_IDLE_SITES, &[&at, &limit, &""]).await?;
    Ok(count(leases).saturating_add(count(sites)))
}
