//! [`Named`]: a resource named in a request by text that must be parsed first (an address,
//! a username), as a front end hands it to a use case.

use crate::{Error, Result};

/// The name a request gives, parsed once by the front end: the name, or text that is no
/// such name and so names nothing. A use case answers [`Named::Malformed`] exactly as a
/// well-formed name that names nothing (404, after the same scope checks), so front ends
/// need not know the order of those checks. Typed ids use their `NONE` for the same end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named<T> {
    /// A well-formed name (which may still name nothing).
    Parsed(T),
    /// Text that is not a name of this kind.
    Malformed,
}

impl<T, E> From<std::result::Result<T, E>> for Named<T> {
    fn from(parsed: std::result::Result<T, E>) -> Self {
        parsed.map_or(Self::Malformed, Self::Parsed)
    }
}

impl<T> Named<T> {
    /// The name, or a 404 for `what`.
    pub(crate) fn or_not_found(self, what: &'static str) -> Result<T> {
        match self {
            Self::Parsed(name) => Ok(name),
            Self::Malformed => Err(Error::NotFound(what)),
        }
    }
}
