//! The per-key send rate limit at the HTTP edge: takes a token before a send and writes the
//! `RateLimit-*` headers (IETF draft names, as Resend and GitHub use).

use axum::http::{HeaderMap, HeaderValue};
use tidings_core::usecases::{Principal, RateLimitState};

use crate::{ApiError, ApiState};

/// Takes one token for `who`, or refuses with 429.
pub fn acquire(state: &ApiState, who: &Principal) -> Result<RateLimitState, ApiError> {
    let now = state.core.clock().now();
    state
        .limiter
        .try_acquire(who.key_id, who.rate_limit, now)
        .map_err(|retry_after| ApiError::RateLimited { retry_after, limit: who.rate_limit.per_sec() })
}

/// Writes `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`.
pub fn insert_headers(headers: &mut HeaderMap, state: &RateLimitState) {
    headers.insert("ratelimit-limit", HeaderValue::from(state.limit));
    headers.insert("ratelimit-remaining", HeaderValue::from(state.remaining));
    headers.insert("ratelimit-reset", HeaderValue::from(state.reset));
}
