//! `Secret<T>`: a value that must never appear in `Debug` output or logs (API key plaintext,
//! webhook secrets, DKIM private keys).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Wraps a secret so `Debug` prints `Secret(***)`. Serialisation is transparent, because
/// stores must persist DKIM and webhook secrets; the HTTP layer decides what leaves the
/// process.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a value.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret value; call sites that need it are easy to grep for.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_value() {
        let s = Secret::new("tid_hunter2".to_owned());
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.expose(), "tid_hunter2");
    }
}
