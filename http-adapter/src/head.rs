//! Limits on the request head, checked before routing so that an oversized URI or header
//! section gets the envelope (414 `uri_too_long`, 431 `headers_too_large`) on HTTP/1 and
//! HTTP/2 alike. hyper's own limits are far larger (HTTP/1: a 65,534-byte URI, a ~400 KB
//! head; HTTP/2: a header list of [`MAX_HEADER_LIST_BYTES`], which the server sets to the
//! same figure) and answer without the envelope, so the ordinary oversized request meets
//! these first (docs/decisions.md, "Exhaustion").

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

use crate::ApiError;

/// Longest request target (path and query) the API takes, in bytes. Every id and filter of
/// the API fits many times over; browsers and proxies commonly stop at 8 KiB.
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// Largest header section the API takes: the sum over the headers of name, value and 32
/// bytes each (HTTP/2's measure, RFC 9113 §6.5.2), the same on both protocols.
pub const MAX_HEADER_LIST_BYTES: usize = 16 * 1024;

/// Middleware: 414 or 431 in the envelope (in Resend's or Postmark's body under `/resend`
/// or `/postmark`) for a head over the limits.
pub(crate) async fn check_head(req: Request, next: Next) -> Response {
    // An SDK of another provider reads only that provider's error body.
    let refuse = |e: ApiError| crate::compat::outer_answer(req.uri().path(), e);
    let uri = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if uri > MAX_URI_BYTES {
        return refuse(ApiError::UriTooLong);
    }
    let headers: usize = req.headers().iter().map(|(name, value)| name.as_str().len() + value.len() + 32).sum();
    if headers > MAX_HEADER_LIST_BYTES {
        return refuse(ApiError::HeadersTooLarge);
    }
    next.run(req).await
}
