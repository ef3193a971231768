//! `TrackedUrl`: a link destination that open and click tracking may sign and redirect to.
//! A value of the model, not of `crate::tracking`, because a message's tally
//! ([`super::tracking_tally`]) counts clicks by it.

use std::fmt;

/// Longest destination URL (after normalisation) that is tracked; longer links stay as
/// written.
pub const MAX_TRACKED_URL_BYTES: usize = 2000;

/// A destination that may be tracked: an absolute http or https URL of at most
/// [`MAX_TRACKED_URL_BYTES`], in the `url` crate's normalised form (so the redirect's
/// `Location` is always a valid header value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedUrl(url::Url);

impl TrackedUrl {
    /// `text` (surrounding whitespace ignored) if it can be tracked; `None` otherwise.
    pub fn parse(text: &str) -> Option<Self> {
        let url = url::Url::parse(text.trim()).ok()?;
        let tracked = matches!(url.scheme(), "http" | "https") && url.as_str().len() <= MAX_TRACKED_URL_BYTES;
        tracked.then_some(Self(url))
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl fmt::Display for TrackedUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
