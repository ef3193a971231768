//! Bounce (RFC 3464) and complaint (RFC 5965) reports as any mail server may send them to the
//! inbound listener: parsing never panics, whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &[u8]| {
    let _ = tidings_core::feedback::parse_report(raw);
});
