//! Request bodies: read once into one buffer, within the route's size limit and within the
//! process's memory budget ([`crate::budget`]; docs/decisions.md, "Exhaustion").
//!
//! - A declared `Content-Length` over the route's limit is a 413 before a byte of the body
//!   is read (the client is not kept waiting while it uploads, or not at all).
//! - A body takes its declared length from its owner's share of the budget up front (or,
//!   without one, each chunk as it arrives) and keeps it until its response is made, because
//!   parsing and storing hold copies of it that long. A body that does not fit is answered
//!   503 `unavailable` with `Retry-After` at once: queueing would hold the connection and its
//!   partly sent body, the very memory the budget bounds. An upload too slow to keep its
//!   place is cancelled when another request needs the room, also with a 503.
//! - With a declared length the buffer is allocated once at that size and each chunk copied
//!   in as it arrives (hyper's chunks are freed as they go); collecting the chunks first and
//!   joining them, as axum's `Bytes` extractor does, held the body twice.
//! - [`ConnectionUploads`] tells the server which connections are only waiting for their
//!   clients' bodies, so that at the connection cap the slow ones can be closed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Extensions, HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt as _;

use crate::budget::{Claim, MemoryBudget, Owner, Refusal};
use crate::{ApiError, ClientIp};

/// Default of [`crate::HttpConfig::max_body_bytes_in_flight`]: 128 MiB, two of the largest
/// sends and room for small requests beside them.
pub const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT: usize = 128 * 1024 * 1024;

/// The largest body a route takes; set on the request by the router (and by the send routes,
/// for their larger limit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimit(pub usize);

/// The budget taken by one request's body, given back when the request's response is made.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held(Arc<Mutex<Vec<Claim>>>);

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Over the route's limit (declared, or as it arrived).
    #[error("the request body is over the limit of {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The budget (or the owner's share of it) cannot hold it now.
    #[error("the server's memory budget cannot hold the body now ({0:?})")]
    Busy(Refusal),
    /// Cancelled while arriving too slowly, to make room for another request.
    #[error("the body arrived too slowly and its place was given to another request")]
    TooSlow,
    /// The connection failed while the body arrived.
    #[error("could not read the request body: {0}")]
    Read(#[source] axum::Error),
}

impl From<BodyError> for ApiError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::TooLarge { .. } => ApiError::PayloadTooLarge,
            BodyError::Busy(_) => ApiError::Busy,
            BodyError::TooSlow => ApiError::TooSlow,
            BodyError::Read(e) => ApiError::InvalidJson(format!("could not read the request body: {e}")),
        }
    }
}

/// One connection's uploads: how many of its requests are receiving a body now and how many
/// body bytes it has received. The server puts one in every request's extensions; a
/// connection whose requests all wait for slow bodies is shed first at the connection cap.
#[derive(Debug, Clone, Default)]
pub struct ConnectionUploads(Arc<UploadCounts>);

#[derive(Debug, Default)]
struct UploadCounts {
    receiving: AtomicUsize,
    received: AtomicU64,
}

impl ConnectionUploads {
    /// Requests of this connection receiving a body now.
    pub fn receiving(&self) -> usize {
        self.0.receiving.load(Ordering::Acquire)
    }

    /// Body bytes received on this connection so far.
    pub fn received(&self) -> u64 {
        self.0.received.load(Ordering::Acquire)
    }
}

/// Counts a request as receiving while it lives.
struct Receiving(Option<ConnectionUploads>);

impl Receiving {
    fn new(uploads: Option<ConnectionUploads>) -> Self {
        if let Some(u) = &uploads {
            u.0.receiving.fetch_add(1, Ordering::AcqRel);
        }
        Self(uploads)
    }

    fn arrived(&self, bytes: usize) {
        if let Some(u) = &self.0 {
            u.0.received.fetch_add(bytes as u64, Ordering::AcqRel);
        }
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        if let Some(u) = &self.0 {
            u.0.receiving.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Middleware: whatever budget the request's body takes is held until its response is made.
pub(crate) async fn hold_budget(mut req: Request, next: Next) -> Response {
    let held = Held::default();
    req.extensions_mut().insert(held.clone());
    let response = next.run(req).await;
    drop(held);
    response
}

/// Reads the whole body of an API request: 413 over the route's limit (at once for a
/// declared length), 503 when the budget cannot hold it or it is cancelled for being slow.
/// It counts for the workspace of the request's key (set by the `Authed` extractor), else
/// for its client address.
pub(crate) async fn read(req: Request, budget: &MemoryBudget, default_limit: usize) -> Result<Vec<u8>, ApiError> {
    let limit = req.extensions().get::<BodyLimit>().map_or(default_limit, |l| l.0);
    let held = req.extensions().get::<Held>().cloned().unwrap_or_default();
    let owner = req.extensions().get::<Owner>().copied().unwrap_or_else(|| Owner::client(client(req.extensions())));
    let (parts, body) = req.into_parts();
    let (bytes, claim) = receive(budget, owner, &parts.headers, &parts.extensions, body, limit).await?;
    held.0.lock().unwrap_or_else(PoisonError::into_inner).push(claim);
    Ok(bytes)
}

/// The request's client address as the API counts it (unspecified when served without
/// connection info).
fn client(extensions: &Extensions) -> std::net::IpAddr {
    extensions.get::<ClientIp>().map_or(std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), |c| c.0)
}

/// Reads a whole body of at most `limit` bytes counted in `budget` for `owner`; returns it
/// with the claim that counts it, to be held until the request's answer is made. `extensions`
/// are the request's (for its connection's [`ConnectionUploads`]).
pub async fn receive(
    budget: &MemoryBudget,
    owner: Owner,
    headers: &HeaderMap,
    extensions: &Extensions,
    body: Body,
    limit: usize,
) -> Result<(Vec<u8>, Claim), BodyError> {
    // hyper refused a malformed Content-Length already; an absent one means chunked (HTTP/1)
    // or simply unsaid (HTTP/2).
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    if declared.is_some_and(|n| n > limit) {
        return Err(BodyError::TooLarge { limit });
    }
    let claim = budget.upload(owner, declared);
    if let Some(n) = declared {
        claim.take(n).map_err(BodyError::Busy)?;
    }
    let receiving = Receiving::new(extensions.get::<ConnectionUploads>().cloned());
    let mut buf = Vec::with_capacity(declared.unwrap_or(0));
    let mut body = body;
    loop {
        let frame = tokio::select! {
            frame = body.frame() => frame,
            () = claim.cancelled() => return Err(BodyError::TooSlow),
        };
        let Some(frame) = frame else { break };
        let Ok(data) = frame.map_err(BodyError::Read)?.into_data() else { continue };
        if buf.len() + data.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        if declared.is_none() {
            claim.take(data.len()).map_err(BodyError::Busy)?;
        }
        claim.received(data.len());
        receiving.arrived(data.len());
        buf.extend_from_slice(&data);
    }
    claim.finished_receiving();
    Ok((buf, claim))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MIB: usize = 1024 * 1024;

    #[tokio::test]
    async fn a_body_is_counted_until_its_claim_is_dropped_and_a_declared_one_over_the_budget_is_busy() {
        let budget = MemoryBudget::new(4 * MIB, MIB, Duration::from_secs(30));
        let owner = Owner::Client([127, 0, 0, 1].into());
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, (MIB / 2).into());
        let body = Body::from(vec![b'x'; MIB / 2]);
        let (bytes, claim) = receive(&budget, owner, &headers, &Extensions::new(), body, MIB).await.unwrap();
        assert_eq!(bytes.len(), MIB / 2);
        assert_eq!(budget.used(), MIB / 2);
        drop(claim);
        assert_eq!(budget.used(), 0);

        let _hold = budget.hold(owner, 2 * MIB - 1024).unwrap();
        let e = receive(&budget, owner, &headers, &Extensions::new(), Body::empty(), MIB).await.unwrap_err();
        assert!(matches!(e, BodyError::Busy(Refusal::OverShare)), "{e:?}");
        headers.insert(header::CONTENT_LENGTH, (2 * MIB).into());
        let e = receive(&budget, owner, &headers, &Extensions::new(), Body::empty(), MIB).await.unwrap_err();
        assert!(matches!(e, BodyError::TooLarge { .. }), "{e:?}");
    }

    #[tokio::test]
    async fn chunks_without_a_declared_length_are_counted_as_they_arrive_and_the_connection_sees_them() {
        let budget = MemoryBudget::new(4 * MIB, MIB, Duration::from_secs(30));
        let owner = Owner::Client([127, 0, 0, 1].into());
        let uploads = ConnectionUploads::default();
        let mut extensions = Extensions::new();
        extensions.insert(uploads.clone());
        let chunks = futures::stream::iter((0..4).map(|_| Ok::<_, std::io::Error>(vec![b'y'; 1000])));
        let body = Body::from_stream(chunks);
        let (bytes, claim) = receive(&budget, owner, &HeaderMap::new(), &extensions, body, MIB).await.unwrap();
        assert_eq!(bytes.len(), 4000);
        assert_eq!(budget.used(), 4 * 1024, "each chunk rounded up to a KiB");
        assert_eq!((uploads.receiving(), uploads.received()), (0, 4000));
        drop(claim);
        let big = Body::from_stream(futures::stream::iter((0..3).map(|_| Ok::<_, std::io::Error>(vec![0u8; MIB / 2]))));
        let e = receive(&budget, owner, &HeaderMap::new(), &extensions, big, MIB).await.unwrap_err();
        assert!(matches!(e, BodyError::TooLarge { .. }), "{e:?}");
        assert_eq!(budget.used(), 0, "a refused body gives its bytes back");
    }
}
