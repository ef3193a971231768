//! `FileFetcher`: the port through which a front end fetches a file its client named by URL
//! rather than sending its bytes (Resend's attachment `path`). The adapter enforces the same
//! transport rules as webhooks (the SSRF guard at connect time, https only unless private
//! targets are allowed, no redirects) and its own time limit; the caller gives the size limit.

use async_trait::async_trait;

/// A file fetched whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedFile {
    /// The bytes, at most the limit asked for.
    pub bytes: Vec<u8>,
    /// The response's `Content-Type`, when it had a usable one.
    pub content_type: Option<String>,
}

/// Why no file came back; `Display` is the text the client is shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// This server fetches nothing by URL (no fetcher was configured).
    #[error("this server does not fetch files by URL")]
    Disabled,
    /// The URL may not be fetched: not a URL, a scheme other than https, or an address the
    /// SSRF guard refuses.
    #[error("cannot be fetched: {0}")]
    Refused(String),
    /// The file is over the limit (by its `Content-Length` or as it arrived).
    #[error("is larger than {limit} bytes")]
    TooLarge {
        /// The limit asked for.
        limit: usize,
    },
    /// The server answered with a status other than 200.
    #[error("was answered with HTTP {0}")]
    Status(u16),
    /// No answer in time, or the connection failed.
    #[error("could not be fetched: {0}")]
    Failed(String),
}

/// Fetches files by URL.
#[async_trait]
pub trait FileFetcher: Send + Sync {
    /// GETs `url` and returns its body if the answer is 200 and the body is at most
    /// `max_bytes` long.
    async fn fetch(&self, url: &str, max_bytes: usize) -> Result<FetchedFile, FetchError>;
}

/// The fetcher of a server that fetches nothing: every URL is [`FetchError::Disabled`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFileFetcher;

#[async_trait]
impl FileFetcher for NoFileFetcher {
    async fn fetch(&self, _url: &str, _max_bytes: usize) -> Result<FetchedFile, FetchError> {
        Err(FetchError::Disabled)
    }
}
