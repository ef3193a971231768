//! Tidings core: the rules of a transactional email service and the ports it needs.
//!
//! Everything the API promises is decided here: the message state machine, validation,
//! suppression, templates, idempotency, domain setup and verification, the use cases that
//! the HTTP adapter (and any other front end) call, and delivery: building, DKIM-signing and
//! handing messages to a transport, and classifying what it reports. No sockets, no files:
//! storage, DNS, mail transport, time and randomness come in through the traits in [`ports`].
//!
//! The service is [`usecases::Tidings`], built from those ports; every front end calls its
//! methods. Here over the in-memory store of `tidings-testing` and a workspace's sandbox
//! domain, which needs no DNS (an application uses `tidings-storage-sled` or
//! `tidings-storage-postgres`, and a domain of its own):
//!
//! ```
//! use std::sync::Arc;
//! use tidings_core::model::MessageStatus;
//! use tidings_core::ports::{NoDns, SystemClock, SystemRandom};
//! use tidings_core::usecases::{CoreConfig, SendRequest, Tidings};
//! use tidings_testing::MemoryStore;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let config = CoreConfig { sandbox_sending: true, ..CoreConfig::default() };
//! let core = Tidings::new(
//!     Arc::new(MemoryStore::new()),
//!     Arc::new(SystemClock),
//!     Arc::new(SystemRandom),
//!     Arc::new(NoDns),
//!     config,
//! );
//! let (_, first_key) = core.workspaces().create("acme", None).await?;
//! let who = core.authenticate(first_key.plaintext.expose()).await?;
//! let request = SendRequest {
//!     to: Some("ann@example.net".into()),
//!     subject: Some("Welcome".into()),
//!     text: Some("Hello.".into()),
//!     ..SendRequest::default()
//! };
//! let sent = core.messages().send(&who, request, Some("welcome-ann")).await?;
//! assert_eq!(sent.message.status, MessageStatus::Queued);
//! assert_eq!(sent.message.from.address.domain().as_str(), "sandbox.tidings.invalid");
//! // The same Idempotency-Key answers with the same message, and sends nothing more.
//! let again = SendRequest {
//!     to: Some("ann@example.net".into()),
//!     subject: Some("Welcome".into()),
//!     text: Some("Hello.".into()),
//!     ..SendRequest::default()
//! };
//! let replayed = core.messages().send(&who, again, Some("welcome-ann")).await?;
//! assert_eq!(replayed.message.id, sent.message.id);
//! # Ok::<(), tidings_core::Error>(())
//! # }).unwrap();
//! ```
//!
//! What happens afterwards (delivery, webhooks, re-checks, purges) is the [`runtime`].

pub mod activity;
pub mod classify;
pub mod client_group;
pub mod delivery;
pub mod dkim_keys;
pub mod dkim_rotation;
pub mod dns_records;
pub mod domain_name;
pub mod duration_text;
pub mod email;
pub mod error;
pub mod feedback;
pub mod ids;
pub mod inbound;
pub mod inprocess;
pub mod message_search;
pub mod model;
pub mod net_policy;
pub mod outbound;
pub mod ports;
pub mod random;
pub mod reputation;
pub mod runtime;
pub mod sealing;
pub mod secret;
pub mod shaping;
pub mod shared_key;
pub mod state_machine;
pub mod templates;
pub mod text_checks;
pub mod tracking;
pub mod usecases;

pub use error::{Cause, Error, FieldError, IdempotencyConflict, Result};
