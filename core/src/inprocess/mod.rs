//! The typed in-process API: what a Rust service that embeds Tidings calls, beside the
//! HTTP front end's JSON DTOs (which stay as they are).
//!
//! - A workspace is found or made by name ([`Tidings::ensure_workspace`]) and acted on
//!   through a [`WorkspaceHandle`], whose [`Principal::trusted`] needs no API key: the
//!   application is trusted by being in the process.
//! - A send is an [`Email`]: from, one or more recipients ([`Recipients`]) and a
//!   [`Content`] (a subject with a body, or a template) are required by its constructor;
//!   the rest are typed setters. It becomes the same [`SendRequest`](crate::usecases::SendRequest)
//!   the HTTP API builds and goes through the same use case, so it is validated exactly as
//!   a request over HTTP is and there is no second send path.
//! - Domains and templates are named, found or made idempotently, so a service that restarts
//!   calls the same lines again: [`WorkspaceHandle::ensure_domain`],
//!   [`WorkspaceHandle::upsert_template`].
//! - Sends are not rate limited unless the caller asks: [`WorkspaceHandle::send`] applies
//!   none (as [`Messages::send`](crate::usecases::Messages::send)),
//!   [`WorkspaceHandle::send_rate_limited`] takes one token of a
//!   [`Limits`](crate::ports::Limits) per message, for a route the public can call.
//!
//! ```
//! use tidings_core::email::{EmailAddress, Mailbox};
//! use tidings_core::inprocess::{Content, Email};
//! # use std::sync::Arc;
//! # use tidings_core::ports::{NoDns, SystemClock, SystemRandom};
//! # use tidings_core::usecases::{CoreConfig, Tidings};
//! # async fn run(core: Tidings) -> tidings_core::Result<()> {
//! let acme = core.ensure_workspace("acme").await?;
//! let domain = acme.ensure_domain("example.com").await?;
//! # let _ = domain;
//! let email = Email::new(
//!     Mailbox::parse("Acme <hello@example.com>").expect("a mailbox"),
//!     EmailAddress::parse("ann@example.net").expect("an address"),
//!     Content::text("Welcome", "Hello, Ann."),
//! )
//! .idempotency_key("welcome-ann");
//! let sent = acme.send(email).await?;
//! println!("queued {}", sent.message.id);
//! # Ok(())
//! # }
//! ```

mod email;
mod named;
mod trusted;
mod workspace;

pub use email::{Content, Email, NoRecipients, Recipients};
pub use named::TemplateBody;
pub use workspace::WorkspaceHandle;

#[cfg(doc)]
use crate::usecases::{Principal, Tidings};
