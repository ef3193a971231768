//! Tracking tokens from the public, unauthenticated `/t/o/` and `/t/c/` URLs: verifying
//! never panics, and nothing but a token this key signed verifies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidings_core::tracking::TrackingKey;

fuzz_target!(|token: &str| {
    let key = TrackingKey::from_bytes([7; 32]);
    assert!(key.verify(token).is_err(), "an unsigned token verified: {token:?}");
});
