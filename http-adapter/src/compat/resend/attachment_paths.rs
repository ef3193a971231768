//! Resend's attachment `path`: a URL whose file becomes the attachment. Each is fetched
//! through the state's [`FileFetcher`] (on the server, the webhook sender's SSRF guard, https
//! only unless `TIDINGS_WEBHOOK_ALLOW_PRIVATE`, 10 s per file) before the request reaches the
//! send use case, and put in `content`, so core sees an ordinary attachment. A file that
//! cannot be fetched refuses the request with a 422 naming `attachments[i].path` and why.
//!
//! Bounds: at most [`MAX_FETCHES`] files per request, together at most the bytes core takes
//! for a message's attachments ([`max_fetched_bytes`]), each counted in the memory budget
//! for the workspace before it is fetched (a full budget is a 503, as for a large body).

use tidings_core::Error;
use tidings_core::ids::WorkspaceId;
use tidings_core::model::extras::MAX_ATTACHMENTS_ENCODED_BYTES;
use tidings_core::ports::FileFetcher;

use super::emails::{Content, CreateEmailRequest};
use super::error::ResendError;
use crate::{ApiError, Claim, MemoryBudget, Owner};

/// Most attachments fetched by URL in one request (a batch's items together): each may
/// take the fetcher's whole time limit, and the request has its own.
pub(super) const MAX_FETCHES: usize = 10;

/// Most bytes fetched for one request: what core takes as a message's attachments, decoded
/// (core counts their base64, 4 characters for 3 bytes).
pub(super) const fn max_fetched_bytes() -> usize {
    MAX_ATTACHMENTS_ENCODED_BYTES / 4 * 3
}

/// Where fetched files are counted: the process's memory budget, for one workspace.
pub(super) struct FetchBudget<'a> {
    pub(super) fetcher: &'a dyn FileFetcher,
    pub(super) memory: &'a MemoryBudget,
    pub(super) workspace: WorkspaceId,
}

/// Fetches every `path` of `emails` into its `content`; `batch` says whether the emails are
/// a batch's items, whose fields are named with their index (`[2].attachments[0].path`).
/// The claims hold the fetched bytes in the memory budget until the answer is made.
pub(super) async fn fetch_paths(
    emails: &mut [CreateEmailRequest],
    batch: bool,
    budget: &FetchBudget<'_>,
) -> Result<Vec<Claim>, ResendError> {
    let mut claims = Vec::new();
    let (mut fetches, mut bytes_left) = (0, max_fetched_bytes());
    for (item, email) in emails.iter_mut().enumerate() {
        for (i, file) in email.attachments.iter_mut().flatten().enumerate() {
            let Some(url) = file.path.take() else { continue };
            let name = |leaf: &str| {
                let field = format!("attachments[{i}].{leaf}");
                if batch { format!("[{item}].{field}") } else { field }
            };
            if file.content.is_some() {
                return Err(Error::field(name("path"), "cannot be given with `content`: give one of them").into());
            }
            fetches += 1;
            if fetches > MAX_FETCHES {
                let why = format!("too many files to fetch: at most {MAX_FETCHES} per request");
                return Err(Error::field(name("path"), why).into());
            }
            if bytes_left == 0 {
                return Err(Error::field(name("path"), "the attachments already take the whole size limit").into());
            }
            let claim =
                budget.memory.hold(Owner::Workspace(budget.workspace), bytes_left).map_err(|_| ApiError::Busy)?;
            let fetched =
                budget.fetcher.fetch(&url, bytes_left).await.map_err(|e| Error::field(name("path"), e.to_string()))?;
            claims.push(claim);
            bytes_left -= fetched.bytes.len();
            if file.content_type.is_none() {
                file.content_type = fetched.content_type;
            }
            file.content = Some(Content::Bytes(fetched.bytes));
        }
    }
    Ok(claims)
}
