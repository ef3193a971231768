//! Response bodies that hold their place in the memory budget ([`tidings_http::Claim`]) for
//! as long as they exist: a client that opens many responses and never reads them holds its
//! share of the budget, then gets 503s, rather than making the process hold a copy per
//! stream without bound (docs/decisions.md, "Exhaustion").

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use tidings_http::{Claim, Owner};
use tokio::io::AsyncReadExt as _;

use crate::error::PageError;
use crate::session::Viewer;

/// Chunks handed to the connection: small enough that HTTP/2 flow control holds back the
/// rest of an unread response here, in the claimed buffer, rather than in a copy.
const CHUNK: usize = 64 * 1024;

/// What an `.eml` stream holds at most: the chunk being read and what hyper buffers per
/// HTTP/2 stream before it stops asking for more (400 KiB by default), rounded up.
pub(crate) const FILE_STREAM_BYTES: usize = 512 * 1024;

/// `bytes` as a body, `claim` given back once it is sent or dropped.
pub(crate) fn bytes(bytes: Bytes, claim: Claim) -> Body {
    let chunks = futures::stream::unfold((bytes, claim), |(mut rest, claim)| async move {
        if rest.is_empty() {
            return None;
        }
        let chunk = rest.split_to(rest.len().min(CHUNK));
        Some((Ok::<_, Infallible>(chunk), (rest, claim)))
    });
    Body::from_stream(chunks)
}

/// `file` read a chunk at a time as the client takes it, `claim` given back at its end.
pub(crate) fn file(file: tokio::fs::File, claim: Claim) -> Body {
    let state = (file, vec![0u8; CHUNK], claim, false);
    let chunks = futures::stream::unfold(state, |(mut file, mut buf, claim, failed)| async move {
        if failed {
            return None;
        }
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                let chunk = Bytes::copy_from_slice(&buf[..n]);
                Some((Ok(chunk), (file, buf, claim, false)))
            }
            // The response is under way: all that can be done is to end it early.
            Err(e) => Some((Err(e), (file, buf, claim, true))),
        }
    });
    Body::from_stream(chunks)
}

/// Whose share of the memory budget a response counts in.
pub(crate) fn owner(viewer: &Viewer) -> Owner {
    Owner::Workspace(viewer.principal().workspace_id)
}

/// 503 while the workspace holds its share of the budget (or the budget is full).
pub(crate) fn busy(viewer: &Viewer) -> PageError {
    PageError::status(
        StatusCode::SERVICE_UNAVAILABLE,
        "Busy",
        "Too many large pages of this workspace are being sent now. Try again in a moment.",
    )
    .retry_after(1)
    .with_viewer(viewer)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::BodyExt as _;
    use tidings_http::{MemoryBudget, Owner};

    use super::*;

    #[tokio::test]
    async fn the_claim_is_held_until_the_body_is_read_or_dropped() {
        let budget = MemoryBudget::new(4 << 20, 1 << 20, Duration::from_secs(30));
        let owner = Owner::Client([127, 0, 0, 1].into());
        let text = Bytes::from(vec![b'h'; 200_000]);
        let body = bytes(text.clone(), budget.hold(owner, text.len()).unwrap());
        assert!(budget.used() >= 200_000);
        assert_eq!(body.collect().await.unwrap().to_bytes(), text);
        assert_eq!(budget.used(), 0);

        let unread = bytes(text.clone(), budget.hold(owner, text.len()).unwrap());
        assert!(budget.used() >= 200_000);
        drop(unread);
        assert_eq!(budget.used(), 0);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.eml");
        std::fs::write(&path, &text).unwrap();
        let opened = tokio::fs::File::open(&path).await.unwrap();
        let body = file(opened, budget.hold(owner, FILE_STREAM_BYTES).unwrap());
        assert_eq!(body.collect().await.unwrap().to_bytes(), text);
        assert_eq!(budget.used(), 0);
    }
}
