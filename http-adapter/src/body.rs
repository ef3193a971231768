//! Request bodies: read once into one buffer, within the route's size limit and within the
//! server-wide budget of body bytes in flight (docs/decisions.md, "Exhaustion").
//!
//! - A declared `Content-Length` over the route's limit is a 413 before a byte of the body
//!   is read (the client is not kept waiting while it uploads, or not at all).
//! - The budget is a semaphore of kibibytes shared by every request of the router. A body
//!   takes its declared length up front (or, without one, each chunk as it arrives) and keeps
//!   it until its response is made, because parsing and storing hold copies of it that long.
//!   A body that does not fit is answered 503 `unavailable` with `Retry-After` at once:
//!   queueing would hold the connection and its partly sent body, the very memory the
//!   budget bounds.
//! - With a declared length the buffer is allocated once at that size and each chunk copied
//!   in as it arrives (hyper's chunks are freed as they go); collecting the chunks first and
//!   joining them, as axum's `Bytes` extractor does, held the body twice.

use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ApiError;

/// Default of [`crate::HttpConfig::max_body_bytes_in_flight`]: 128 MiB, two of the largest
/// sends and room for small requests beside them.
pub const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT: usize = 128 * 1024 * 1024;

/// The largest body a route takes; set on the request by the router (and by the send routes,
/// for their larger limit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimit(pub usize);

/// The server-wide budget of body bytes in flight, counted in KiB (so that a permit count
/// fits the semaphore's `u32` for any body size).
#[derive(Debug, Clone)]
pub(crate) struct BodyBudget(Arc<Semaphore>);

/// The budget taken by one request's body, given back when the request's response is made.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl BodyBudget {
    /// A budget of `bytes`.
    pub(crate) fn new(bytes: usize) -> Self {
        Self(Arc::new(Semaphore::new(kib(bytes).min(Semaphore::MAX_PERMITS))))
    }

    /// Takes `bytes` more of the budget for the request holding `held`; `Busy` if they are
    /// not free now.
    fn take(&self, bytes: usize, held: &Held) -> Result<(), ApiError> {
        let n = u32::try_from(kib(bytes)).map_err(|_| ApiError::Busy)?;
        if n == 0 {
            return Ok(());
        }
        let permit = Arc::clone(&self.0).try_acquire_many_owned(n).map_err(|_| ApiError::Busy)?;
        let mut slot = held.0.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_mut() {
            Some(taken) => taken.merge(permit),
            None => *slot = Some(permit),
        }
        Ok(())
    }
}

fn kib(bytes: usize) -> usize {
    bytes.div_ceil(1024)
}

/// Middleware: whatever budget the request's body takes is held until its response is made.
pub(crate) async fn hold_budget(mut req: Request, next: Next) -> Response {
    let held = Held::default();
    req.extensions_mut().insert(held.clone());
    let response = next.run(req).await;
    drop(held);
    response
}

/// Reads the whole body of `req`: 413 over the route's limit (at once for a declared
/// length), 503 when the budget cannot hold it.
pub(crate) async fn read(req: Request, budget: &BodyBudget, default_limit: usize) -> Result<Vec<u8>, ApiError> {
    let limit = req.extensions().get::<BodyLimit>().map_or(default_limit, |l| l.0);
    let held = req.extensions().get::<Held>().cloned().unwrap_or_default();
    // hyper refused a malformed Content-Length already; an absent one means chunked (HTTP/1)
    // or simply unsaid (HTTP/2).
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::PayloadTooLarge);
    }
    if let Some(n) = declared {
        budget.take(n, &held)?;
    }
    let mut buf = Vec::with_capacity(declared.unwrap_or(0));
    let mut body = req.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::InvalidJson(format!("could not read the request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        if buf.len() + data.len() > limit {
            return Err(ApiError::PayloadTooLarge);
        }
        if declared.is_none() {
            budget.take(data.len(), &held)?;
        }
        buf.extend_from_slice(&data);
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_and_given_back_with_the_request() {
        let budget = BodyBudget::new(100 * 1024);
        let first = Held::default();
        budget.take(60 * 1024, &first).unwrap();
        let second = Held::default();
        assert!(matches!(budget.take(50 * 1024, &second), Err(ApiError::Busy)));
        budget.take(30 * 1024, &second).unwrap();
        budget.take(10 * 1024, &second).unwrap();
        assert!(matches!(budget.take(1, &Held::default()), Err(ApiError::Busy)), "all 100 KiB are taken");
        drop(first);
        budget.take(60 * 1024, &Held::default()).unwrap();
    }
}
