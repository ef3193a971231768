//! `Random`: the source of randomness for ids, API keys, webhook secrets and DKIM selectors.
//!
//! A port like those in [`crate::ports`], which re-exports it, but kept below them: typed ids
//! ([`crate::ids`]) and the model's generated secrets are made from it, and the ports speak
//! of those, so it cannot live above them without a cycle.

/// Cryptographically secure random bytes.
pub trait Random: Send + Sync {
    /// Fills `buf` with random bytes.
    fn fill(&self, buf: &mut [u8]);
}

/// The operating system's CSPRNG (through aws-lc-rs).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemRandom;

impl Random for SystemRandom {
    fn fill(&self, buf: &mut [u8]) {
        use aws_lc_rs::rand::SecureRandom;
        // The system RNG failing means the process cannot do anything secure; there is no
        // sensible recovery.
        #[allow(clippy::expect_used)]
        aws_lc_rs::rand::SystemRandom::new().fill(buf).expect("system random number generator failed");
    }
}
