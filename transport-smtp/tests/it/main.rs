//! The integration tests of `tidings-transport-smtp`, one binary: the relay, direct MX and
//! outbox transports against the SMTP sink, and the sink itself.

mod common;
mod errors;
mod mta_sts;
mod mx;
mod mx_sites;
mod mx_sts;
mod outbox;
mod relay;
mod sink;
