//! The per-key send rate limit at the HTTP edge (core takes the tokens): the `RateLimit-*`
//! headers (IETF draft names, as Resend and GitHub use).

use axum::http::{HeaderMap, HeaderValue};
use tidings_core::usecases::RateLimitState;

/// Writes `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`.
pub fn insert_headers(headers: &mut HeaderMap, state: &RateLimitState) {
    headers.insert("ratelimit-limit", HeaderValue::from(state.limit));
    headers.insert("ratelimit-remaining", HeaderValue::from(state.remaining));
    headers.insert("ratelimit-reset", HeaderValue::from(state.reset));
}
