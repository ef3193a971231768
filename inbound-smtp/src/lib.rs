//! Tidings' inbound SMTP listener: it receives delivery status notifications (RFC 3464) and
//! complaint reports (RFC 5965) sent to the per-message return path
//! `bounces+<message id>@<return-path domain>` (contract §8) and hands each accepted message
//! to an [`InboundHandler`], which turns it into events and suppressions.
//!
//! It is not a mail server. Decisions:
//! - **One domain, no relaying.** `RCPT TO` must be on [`InboundSettings::accept_domain`]
//!   (`<Postmaster>` is taken as `postmaster@` that domain, RFC 5321 §4.5.1); anything else
//!   is `550 5.7.1`. No AUTH: nobody submits mail here.
//! - **No STARTTLS yet.** Report senders fall back to plaintext, as they do for most MX
//!   hosts; reports carry no secrets beyond what the bounced message already exposed.
//! - **`250` only after the handler stored the report.** A handler error is `451` (the
//!   sender retries) or `554` (it gives up); a crash before the reply loses nothing.
//! - **Limits** (all in [`InboundSettings`]): 10 MiB messages (`SIZE=` above it is refused
//!   at `MAIL`; data beyond it is read to the final dot without being kept, then refused
//!   with `552`), 4096-byte command lines, no per-line limit in message data (real bounces
//!   quote overlong lines), 100 recipients, 100 sessions, 5 min idle, 10 min for the data,
//!   10 failed commands per session.
//! - **Strict data framing.** Only `<CRLF>.<CRLF>` ends the data and only a dot after CRLF
//!   is unstuffed; the message reaches the handler byte for byte otherwise.
//! - **Replies never echo client input**, and all parsing works on bytes: no input panics.
//! - Extensions: PIPELINING, 8BITMIME, SIZE, ENHANCEDSTATUSCODES. Not SMTPUTF8, DSN,
//!   CHUNKING.

mod command;
mod data;
mod handler;
mod line;
mod listener;
mod reply;
mod session;
mod settings;
mod stats;

pub use handler::{Envelope, HandlerError, InboundHandler};
pub use listener::InboundListener;
pub use settings::InboundSettings;
pub use stats::{InboundStats, StatsSnapshot};
