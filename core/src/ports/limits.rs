//! The `Limits` port: where the per-key send rate limits and the failed-authentication
//! throttle (docs/api.md#rate-limits, #failed-authentication-throttle) keep their counts.
//!
//! One process keeps them in memory ([`LocalLimits`](crate::usecases::LocalLimits)); nodes
//! that share a database share them through it (`tidings-storage-postgres`'s `PgLimits`), so
//! a key's limit and a client's failures count once however many nodes serve them.

use std::net::IpAddr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::ids::ApiKeyId;
use crate::model::RateLimit;
use crate::usecases::{Admission, RateLimitState};

/// Send tokens and failed-authentication counts, with the semantics of
/// [`RateLimiter`](crate::usecases::RateLimiter) and
/// [`AuthThrottle`](crate::usecases::AuthThrottle): a token bucket of `limit` tokens refilled
/// at `limit` per second per key; per client, `max_failures` failures within a fixed window
/// block it until the window ends.
///
/// Every method takes the time as an argument. An `Err` means the counts could not be
/// reached; the front end answers 503, never grants or blocks on it.
#[async_trait]
pub trait Limits: Send + Sync {
    /// Takes one send token of `key` at `now`: `Allowed(state)` for the headers if granted;
    /// `Limited` if the bucket is empty, in which case nothing is taken.
    async fn acquire_send(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission<RateLimitState>>;

    /// Gives back a token taken by [`acquire_send`](Self::acquire_send) for a send that queued
    /// nothing (rejected, or an idempotent replay). Never fills past capacity.
    async fn refund_send(&self, key: ApiKeyId, limit: RateLimit, now: DateTime<Utc>) -> StoreResult<()>;

    /// Takes `n` send tokens at once (a batch of `n` messages), all or none: like
    /// [`acquire_send`](Self::acquire_send), `Limited` with nothing taken if fewer than
    /// `n` are available. The caller never asks for more than the capacity.
    async fn acquire_sends(
        &self,
        key: ApiKeyId,
        limit: RateLimit,
        n: u32,
        now: DateTime<Utc>,
    ) -> StoreResult<Admission<RateLimitState>>;

    /// Gives back `n` tokens taken by [`acquire_sends`](Self::acquire_sends) for items that
    /// queued nothing. Never fills past capacity.
    async fn refund_sends(&self, key: ApiKeyId, limit: RateLimit, n: u32, now: DateTime<Utc>) -> StoreResult<()>;

    /// `Limited` if `client` has used up its failures in its current window.
    async fn check_auth(&self, client: IpAddr, now: DateTime<Utc>) -> StoreResult<Admission<()>>;

    /// Counts one failed authentication of `client` at `now` if its window has room for it;
    /// `Limited` if the client had used up its failures already (that request is then
    /// a 429, not a 401). Deciding and counting in one step is what holds a burst of
    /// concurrent failures to the allowance: a [`check_auth`](Self::check_auth) before each
    /// would let every request that checked before any was counted through.
    async fn record_auth_failure(&self, client: IpAddr, now: DateTime<Utc>) -> StoreResult<Admission<()>>;

    /// Forgets state that no longer limits anything at `now` (full buckets, windows that are
    /// over), at most `limit` entries; returns how many. A background task calls it.
    async fn purge(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<usize>;
}
