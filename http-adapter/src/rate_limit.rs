//! The per-key send rate limit at the HTTP edge: takes a token before a send and writes the
//! `RateLimit-*` headers (IETF draft names, as Resend and GitHub use).

use axum::http::{HeaderMap, HeaderValue};
use tidings_core::usecases::{Principal, RateLimitState};

use crate::{ApiError, ApiState};

/// Takes one token for `who`: `Ok(Err(429))` if the bucket is empty, `Err` if the limits
/// cannot be reached.
pub async fn acquire(state: &ApiState, who: &Principal) -> Result<Result<RateLimitState, ApiError>, ApiError> {
    let now = state.core.clock().now();
    let granted = state.limits.acquire_send(who.key_id, who.rate_limit, now).await.map_err(core_error)?;
    Ok(granted.map_err(|retry_after| ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() }))
}

/// Gives back the token of a send that queued nothing. A failure to reach the limits is
/// logged and otherwise ignored: the send was answered already, and a token lost costs the
/// key at most one send for a second.
pub async fn refund(state: &ApiState, who: &Principal) {
    let now = state.core.clock().now();
    if let Err(error) = state.limits.refund_send(who.key_id, who.rate_limit, now).await {
        tracing::warn!(key = %who.key_id, %error, "could not give back a rate-limit token");
    }
}

pub(crate) fn core_error(error: tidings_core::ports::StoreError) -> ApiError {
    ApiError::Core(error.into())
}

/// Writes `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`.
pub fn insert_headers(headers: &mut HeaderMap, state: &RateLimitState) {
    headers.insert("ratelimit-limit", HeaderValue::from(state.limit));
    headers.insert("ratelimit-remaining", HeaderValue::from(state.remaining));
    headers.insert("ratelimit-reset", HeaderValue::from(state.reset));
}
