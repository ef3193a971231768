//! `PgLimits`: the send rate limits, the failed-authentication throttle
//! (docs/api.md#authentication) and the delivery sites' admission (`src/site_limits.rs`),
//! kept in the database so every node counts against the same limits.
//!
//! Each operation on keys and clients is one statement on an UNLOGGED table (`migrations/0002_limits.sql`): no
//! fsync, no transaction held, and the row lock of a key is held only for that statement.
//! The bucket is the GCRA form of the in-memory token bucket (`RateLimiter`): for a key with
//! `r` sends per second, each send moves its "theoretical arrival time" `tat` on by
//! `T = 1 s / r`, and is allowed while `max(tat, now) + T - now ≤ 1 s`: the same `r` sends
//! at once and `r` per second after. Times come from the nodes' clocks, as the leases'
//! do: keep them in sync (NTP).

use std::net::IpAddr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tidings_core::ids::{ApiKeyId, SiteLeaseId};
use tidings_core::model::RateLimit;
use tidings_core::ports::{Limits, SiteAdmission, SiteChange, SiteLease, SiteQuota, SiteState, StoreResult};
use tidings_core::shaping::SiteKey;
use tidings_core::usecases::{Admission, AuthThrottleConfig, RateLimitState, RetryAfter};

use crate::db::{db_error, uuid};
use crate::{PgStore, site_limits};

/// A second in nanoseconds: the bucket's burst, as the in-memory bucket's capacity is one
/// second's worth of sends.
const SECOND: i64 = 1_000_000_000;

/// Longest throttle window honoured (about 31 years): keeps `started + window` in range.
const MAX_WINDOW: i64 = 1_000_000_000_000_000_000;

/// The [`Limits`] of every node on one database. Make it with [`PgStore::limits`].
#[derive(Debug, Clone)]
pub struct PgLimits {
    store: PgStore,
    throttle: AuthThrottleConfig,
}

impl PgStore {
    /// Limits shared through this database, with these throttle settings (`max_clients` does
    /// not apply: rows are purged, not evicted).
    pub fn limits(&self, throttle: AuthThrottleConfig) -> PgLimits {
        let throttle = AuthThrottleConfig { max_failures: throttle.max_failures.max(1), ..throttle };
        PgLimits { store: self.clone(), throttle }
    }
}

impl PgLimits {
    fn window(&self) -> i64 {
        self.throttle.window.num_nanoseconds().unwrap_or(MAX_WINDOW).clamp(1, MAX_WINDOW)
    }
}

/// Nanoseconds since the Unix epoch (times outside 1677–2262 are clamped; none occur).
pub(crate) fn nanos(at: DateTime<Utc>) -> i64 {
    at.timestamp_nanos_opt().unwrap_or(if at.timestamp() < 0 { 0 } else { i64::MAX / 2 })
}

/// The emission interval `T` of a limit: nanoseconds per send.
fn interval(limit: RateLimit) -> i64 {
    SECOND / i64::from(limit.per_sec().max(1))
}

#[async_trait]
impl Limits for PgLimits {
    async fn acquire_send(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission<RateLimitState>> {
        self.acquire_sends(key, limit, 1, now).await
    }

    async fn refund_send(&self, key: ApiKeyId, limit: RateLimit, now: DateTime<Utc>) -> StoreResult<()> {
        self.refund_sends(key, limit, 1, now).await
    }

    async fn acquire_sends(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        n: u32,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission<RateLimitState>> {
        let (now, t, id) = (nanos(now), interval(limit), uuid(key.ulid()));
        // `n` sends advance the theoretical arrival time by `n` intervals at once.
        let cost = t.saturating_mul(i64::from(n.max(1)));
        let client = self.store.client().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO send_rate_limits AS r (key_id, tat) VALUES ($1, $2::bigint + $3::bigint)
                 ON CONFLICT (key_id) DO UPDATE SET tat = GREATEST(r.tat, $2) + $3
                 WHERE GREATEST(r.tat, $2) + $3 - $2 <= $4
                 RETURNING tat",
            )
            .await
            .map_err(db_error)?;
        if let Some(row) = client.query_opt(&statement, &[&id, &now, &cost, &SECOND]).await.map_err(db_error)? {
            let tat: i64 = row.get(0);
            return Ok(Admission::Allowed(RateLimitState {
                limit: limit.per_sec(),
                remaining: u32::try_from((now + SECOND - tat).max(0) / t).unwrap_or(u32::MAX),
                reset: (tat - now).max(0).unsigned_abs().div_ceil(SECOND.unsigned_abs()),
            }));
        }
        // Refused: the wait is until `n` more sends fit. The row exists (the insert
        // conflicted); if a purge removed it meanwhile, the bucket is full now.
        let row =
            client.query_opt("SELECT tat FROM send_rate_limits WHERE key_id = $1", &[&id]).await.map_err(db_error)?;
        let tat: i64 = row.map_or(now, |row| row.get(0));
        Ok(Admission::Limited {
            retry_after: RetryAfter::from_nanos(i128::from(tat.max(now) + cost.min(SECOND) - SECOND - now).max(1)),
        })
    }

    async fn refund_sends(&self, key: ApiKeyId, limit: RateLimit, n: u32, _now: DateTime<Utc>) -> StoreResult<()> {
        let client = self.store.client().await?;
        // A tat before now is a full bucket already: max(tat, now) caps what this gives back.
        client
            .execute(
                "UPDATE send_rate_limits SET tat = tat - $2 WHERE key_id = $1",
                &[&uuid(key.ulid()), &interval(limit).saturating_mul(i64::from(n))],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn check_auth(&self, client: IpAddr, now: DateTime<Utc>) -> StoreResult<Admission<()>> {
        let db = self.store.client().await?;
        let statement = db
            .prepare_cached("SELECT started, failures FROM auth_failures WHERE client = $1")
            .await
            .map_err(db_error)?;
        let Some(row) = db.query_opt(&statement, &[&client]).await.map_err(db_error)? else {
            return Ok(Admission::Allowed(()));
        };
        let (started, failures): (i64, i32) = (row.get(0), row.get(1));
        let end = started.saturating_add(self.window());
        let now = nanos(now);
        let used_up = u32::try_from(failures).unwrap_or(0) >= self.throttle.max_failures;
        // At most a window: a request that read the clock just before another opened the
        // window must not be told to wait longer.
        let wait = i128::from((end - now).min(self.window()));
        if used_up && now < end {
            Ok(Admission::Limited { retry_after: RetryAfter::from_nanos(wait) })
        } else {
            Ok(Admission::Allowed(()))
        }
    }

    async fn record_auth_failure(&self, client: IpAddr, now: DateTime<Utc>) -> StoreResult<Admission<()>> {
        let db = self.store.client().await?;
        // A window that is over starts afresh at this failure (fixed windows: the minute that
        // began with the first failure). SET sees the old row on both sides. The upsert locks
        // the row, so concurrent failures are counted one after the other and each learns its
        // own rank: those past the allowance are refused (429), exactly as many pass.
        let statement = db
            .prepare_cached(
                "INSERT INTO auth_failures AS a (client, started, failures) VALUES ($1, $2, 1)
                 ON CONFLICT (client) DO UPDATE SET
                     failures = CASE WHEN $2 < a.started + $3 THEN LEAST(a.failures, 2147483646) + 1 ELSE 1 END,
                     started  = CASE WHEN $2 < a.started + $3 THEN a.started ELSE $2 END
                 RETURNING started, failures",
            )
            .await
            .map_err(db_error)?;
        let row = db.query_one(&statement, &[&client, &nanos(now), &self.window()]).await.map_err(db_error)?;
        let (started, failures): (i64, i32) = (row.get(0), row.get(1));
        let end = started.saturating_add(self.window());
        let now = nanos(now);
        let past_allowance = u32::try_from(failures).unwrap_or(u32::MAX) > self.throttle.max_failures;
        let wait = i128::from((end - now).min(self.window()));
        if past_allowance && now < end {
            Ok(Admission::Limited { retry_after: RetryAfter::from_nanos(wait) })
        } else {
            Ok(Admission::Allowed(()))
        }
    }

    async fn purge(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize> {
        let sites = site_limits::purge(&self.store, now, limit).await?;
        let db = self.store.client().await?;
        let (now, limit) = (nanos(now), i64::try_from(limit).unwrap_or(i64::MAX));
        // SKIP LOCKED: never wait behind a send; a row being updated is not stale anyway.
        let buckets = db
            .execute(
                "DELETE FROM send_rate_limits WHERE key_id IN (
                     SELECT key_id FROM send_rate_limits WHERE tat <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)",
                &[&now, &limit],
            )
            .await
            .map_err(db_error)?;
        let windows = db
            .execute(
                "DELETE FROM auth_failures WHERE client IN (
                     SELECT client FROM auth_failures WHERE started + $3 <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)",
                &[&now, &limit, &self.window()],
            )
            .await
            .map_err(db_error)?;
        Ok(usize::try_from(buckets + windows).unwrap_or(usize::MAX).saturating_add(sites))
    }

    async fn admit_delivery(
        &self,
        site: &SiteKey,
        quota: SiteQuota,
        lease: SiteLease,
        now: DateTime<Utc>,
    ) -> StoreResult<SiteAdmission> {
        site_limits::admit(&self.store, site, quota, lease, now).await
    }

    async fn release_delivery(
        &self,
        site: &SiteKey,
        lease: SiteLeaseId,
        keep_until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        site_limits::release(&self.store, site, lease, keep_until, now).await
    }

    async fn change_site(&self, site: &SiteKey, change: SiteChange, now: DateTime<Utc>) -> StoreResult<()> {
        site_limits::change(&self.store, site, change, now).await
    }

    async fn site_states(&self, now: DateTime<Utc>) -> StoreResult<Vec<SiteState>> {
        site_limits::states(&self.store, now).await
    }
}
