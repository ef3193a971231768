//! `StoreError`: what a store call can fail with, and what the use cases' [`Error`] makes of
//! it. The mapping lives here rather than in `crate::error` because `Error` sits below the
//! ports (every layer returns it, and `StoreError` carries its `Cause`).

use crate::error::{Cause, Error};

/// Storage failures, in terms a caller can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The record to change does not exist (in this workspace).
    #[error("not found")]
    NotFound,
    /// A uniqueness rule or an optimistic-concurrency expectation failed.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The store cannot be reached or written (disk full, I/O error, connection lost). The
    /// operation had no effect; retrying later may succeed.
    #[error("storage unavailable: {0}")]
    Unavailable(#[source] Cause),
    /// Stored data could not be decoded: a bug or corruption, never the caller's fault.
    #[error("stored data is corrupt: {0}")]
    Corrupt(#[source] Cause),
}

impl StoreError {
    /// [`StoreError::Unavailable`] because of `error`, which happened while doing `what`.
    pub fn unavailable(what: impl Into<String>, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Unavailable(Cause::context(what, error))
    }

    /// [`StoreError::Corrupt`] because of `error`, met while reading or writing `what`.
    pub fn corrupt(what: impl Into<String>, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Corrupt(Cause::context(what, error))
    }
}

/// Result alias for store calls.
pub type StoreResult<T> = Result<T, StoreError>;

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            // A use case that expects NotFound/Conflict handles them itself; one that reaches
            // here lost a race with a delete, which the client sees as a missing resource.
            StoreError::NotFound => Self::NotFound("resource"),
            StoreError::Conflict(text) => Self::Conflict(text),
            StoreError::Unavailable(cause) => Self::Unavailable(cause),
            e @ StoreError::Corrupt(_) => Self::Internal(Cause::new(e)),
        }
    }
}

/// Maps a store error for a use case that names what it was looking for: the store's
/// `NotFound` (the record never existed or vanished mid-operation) becomes a 404 for `what`.
pub(crate) fn missing(what: &'static str) -> impl Fn(StoreError) -> Error {
    move |e| match e {
        StoreError::NotFound => Error::NotFound(what),
        other => other.into(),
    }
}
