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
    // Every refusal that needs no fetch first: nothing is fetched for a request refused anyway.
    let mut fetches = 0;
    for (item, email) in emails.iter().enumerate() {
        for (i, file) in email.attachments.iter().flatten().enumerate() {
            if file.path.is_none() {
                continue;
            }
            let name = field_name(batch, item, i);
            if file.content.is_some() {
                return Err(Error::field(name, "cannot be given with `content`: give one of them").into());
            }
            fetches += 1;
            if fetches > MAX_FETCHES {
                let why = format!("too many files to fetch: at most {MAX_FETCHES} per request");
                return Err(Error::field(name, why).into());
            }
        }
    }
    let mut claims = Vec::new();
    let mut bytes_left = max_fetched_bytes();
    for (item, email) in emails.iter_mut().enumerate() {
        for (i, file) in email.attachments.iter_mut().flatten().enumerate() {
            let Some(url) = file.path.take() else { continue };
            let name = field_name(batch, item, i);
            if bytes_left == 0 {
                return Err(Error::field(name, "the attachments already take the whole size limit").into());
            }
            let owner = Owner::Workspace(budget.workspace);
            // Held at the most the file may take while it arrives, then at what it took.
            let most = budget.memory.hold(owner, bytes_left).map_err(|_| ApiError::Busy)?;
            let fetched =
                budget.fetcher.fetch(&url, bytes_left).await.map_err(|e| Error::field(name, e.to_string()))?;
            drop(most);
            claims.push(budget.memory.hold(owner, fetched.bytes.len()).map_err(|_| ApiError::Busy)?);
            bytes_left -= fetched.bytes.len();
            if file.content_type.is_none() {
                file.content_type = fetched.content_type;
            }
            file.content = Some(Content::Bytes(fetched.bytes));
        }
    }
    Ok(claims)
}

/// `attachments[i].path`, or `[item].attachments[i].path` in a batch.
fn field_name(batch: bool, item: usize, i: usize) -> String {
    let field = format!("attachments[{i}].path");
    if batch { format!("[{item}].{field}") } else { field }
}
