//! Request ids: every response carries `X-Request-Id`, and every log line written while a
//! request is handled is inside a `request` span with that id.
//!
//! A well-formed id sent by the client (1–128 printable ASCII characters, as a proxy or the
//! client's own tracing would send) is kept, so one id follows a request across systems;
//! anything else is replaced by a fresh ULID rather than refused: the id is for operators, and
//! a request must not fail over it.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// The header, in requests and responses.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Longest client-sent id that is kept.
const MAX_LEN: usize = 128;

/// Middleware: picks the request's id, handles the request inside a span carrying it, and
/// writes it on the response.
pub async fn with_request_id(req: Request, next: Next) -> Response {
    let id = req.headers().get(&REQUEST_ID).filter(|v| well_formed(v.as_bytes())).cloned().unwrap_or_else(|| {
        // A ULID is 26 Crockford base32 characters: always a valid header value.
        HeaderValue::try_from(ulid::Ulid::new().to_string()).unwrap_or_else(|_| HeaderValue::from_static("-"))
    });
    let span = tracing::info_span!("request", request_id = %id.to_str().unwrap_or_default());
    let mut response = next.run(req).instrument(span).await;
    response.headers_mut().insert(REQUEST_ID, id);
    response
}

/// 1–128 printable ASCII characters (space included, as in any header value).
fn well_formed(id: &[u8]) -> bool {
    (1..=MAX_LEN).contains(&id.len()) && id.iter().all(|&b| b == b' ' || b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::well_formed;

    #[test]
    fn only_short_printable_ascii_ids_are_kept() {
        assert!(well_formed(b"abc-123"));
        assert!(well_formed(b"trace 7/42"));
        assert!(well_formed("x".repeat(128).as_bytes()));
        assert!(!well_formed(b""));
        assert!(!well_formed("x".repeat(129).as_bytes()));
        assert!(!well_formed(b"tab\there"));
        assert!(!well_formed("caf\u{e9}".as_bytes()));
    }
}
