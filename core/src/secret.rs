//! `Secret<T>`: a value that must never appear in `Debug` output or logs (API key plaintext,
//! webhook secrets, DKIM private keys); and [`SecretName`], the name under which the store
//! keeps a secret every node shares (the tracking key).

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

/// Longest [`SecretName`], in bytes.
pub const MAX_SECRET_NAME_BYTES: usize = 64;

/// The name of a secret kept by [`SecretStore::ensure_secret`]: 1–64 bytes of `a-z`, `0-9`
/// and `_`. Names are fixed in code, not taken from input, so [`SecretName::new`] is a
/// `const fn` and a bad name fails the build where it is declared as a `const`.
///
/// [`SecretStore::ensure_secret`]: crate::ports::SecretStore::ensure_secret
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretName(&'static str);

impl SecretName {
    /// The name `name`; panics (at compile time in a `const`) unless it is 1–64 bytes of
    /// `a-z`, `0-9` and `_`, so that every store can keep it as it is.
    pub const fn new(name: &'static str) -> Self {
        let bytes = name.as_bytes();
        assert!(!bytes.is_empty() && bytes.len() <= MAX_SECRET_NAME_BYTES, "a secret name has 1 to 64 bytes");
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            assert!(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_', "a secret name is a-z, 0-9 and _");
            i += 1;
        }
        Self(name)
    }

    /// The name as text.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for SecretName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_plain_identifiers() {
        const NAME: SecretName = SecretName::new("tracking_key_2");
        assert_eq!(NAME.as_str(), "tracking_key_2");
        for bad in ["", "Upper", "with-dash", "sp ace", "é"] {
            assert!(std::panic::catch_unwind(|| SecretName::new(bad)).is_err(), "{bad:?}");
        }
        assert!(std::panic::catch_unwind(|| SecretName::new("x".repeat(65).leak())).is_err());
    }

    #[test]
    fn debug_hides_the_value() {
        let s = Secret::new("tid_hunter2".to_owned());
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.expose(), "tid_hunter2");
    }
}
