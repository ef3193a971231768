//! Tidings core: the rules of a transactional email service and the ports it needs.
//!
//! Everything the API promises is decided here: the message state machine, validation,
//! suppression, templates, idempotency, domain setup and verification, the use cases that
//! the HTTP adapter (and any other front end) call, and delivery: building, DKIM-signing and
//! handing messages to a transport, and classifying what it reports. No sockets, no files:
//! storage, DNS, mail transport, time and randomness come in through the traits in [`ports`].

pub mod delivery;
pub mod dkim_keys;
pub mod dns_records;
pub mod domain_name;
pub mod email;
pub mod error;
pub mod feedback;
pub mod ids;
pub mod model;
pub mod net_policy;
pub mod outbound;
pub mod ports;
pub mod runtime;
pub mod sealing;
pub mod secret;
pub mod state_machine;
pub mod templates;
pub mod text_checks;
pub mod tracking;
pub mod usecases;

pub use error::{Cause, Error, FieldError, IdempotencyConflict, Result};
