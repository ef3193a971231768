//! The integration tests of `tidings-inbound-smtp`, one binary: the server driven over TCP
//! by a hand-written client and by lettre.

mod common;
mod handler;
mod lettre_client;
mod limits;
mod protocol;
mod robustness;
mod shutdown;
mod submission;
