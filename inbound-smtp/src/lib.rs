//! Tidings' SMTP listener, in one of two [`Role`]s:
//! - **Reports**: it receives delivery status notifications (RFC 3464) and complaint reports
//!   (RFC 5965) sent to the per-message return path `bounces+<message id>-<signature>@<return-path
//!   domain>` (docs/api.md#bounce-and-complaint-reports) and hands each accepted message to an [`InboundHandler`],
//!   which turns it into events and suppressions.
//! - **Submission** (RFC 6409): applications that only speak SMTP hand it mail to send. The
//!   session offers STARTTLS (RFC 3207), then AUTH PLAIN and LOGIN (RFC 4954) checked by
//!   [`InboundHandler::authenticate`]; each `RCPT TO` is vetted by
//!   [`InboundHandler::check_recipient`], and the message goes to
//!   [`InboundHandler::receive`] with the authenticated principal in its [`Envelope`].
//!
//! It is not a mail server. Decisions:
//! - **Reports: our return paths only, no relaying.** `RCPT TO` must be on the role's `accept_domain`
//!   or an address the handler vouches for ([`InboundHandler::accepts_report_to`]: a sending
//!   domain's own return path; `<Postmaster>` is taken as `postmaster@` the domain, RFC 5321
//!   §4.5.1); anything else
//!   is `550 5.7.1`. No AUTH: nobody submits mail there.
//! - **Reports: no STARTTLS.** Report senders fall back to plaintext, as they do for most MX
//!   hosts; reports carry no secrets beyond what the bounced message already exposed.
//! - **Submission: AUTH only under TLS, and no insecure mode.** AUTH is advertised and
//!   accepted only after STARTTLS (`530 5.7.0` before it), and `MAIL` needs both; tests do
//!   STARTTLS with a self-signed certificate like any client. After STARTTLS the session
//!   starts over (RFC 3207 §4.2) and plaintext pipelined after the command is discarded.
//! - **`250` only after the handler stored the message.** A handler error is `451` (the
//!   sender retries), `554` (it gives up) or the handler's own [`Refusal`]; a crash before
//!   the reply loses nothing.
//! - **Limits** (all in [`InboundSettings`]): 10 MiB messages (`SIZE=` above it is refused
//!   at `MAIL`; data beyond it is read to the final dot without being kept, then refused
//!   with `552`), 4096-byte command lines, no per-line limit in message data (real bounces
//!   quote overlong lines), 100 recipients, 100 sessions of which 10 per client (an IPv4
//!   address or an IPv6 /64), 64 MiB of message data held at once by all sessions of which
//!   a quarter per client, 5 min idle, 10 min for the data, 30 min for the whole session
//!   (`421 4.4.2` at the next command, or at once while waiting for the client, never in the
//!   middle of a handler call), 10 failed commands per session, and on a report listener 100
//!   messages per client per sliding minute across its sessions (`MAIL` over it gets
//!   `450 4.7.1`; the place is taken at `MAIL` and kept only by an accepted message;
//!   submission is limited per API key instead).
//! - **Slow holders lose their place.** When every session place is taken, or the message
//!   data budget is spent, the session that has made no progress for longest (no command,
//!   no chunk of data, for at least a second) is closed with `421` for the newcomer; a
//!   session the server is working for is never chosen.
//! - **Strict data framing.** Only `<CRLF>.<CRLF>` ends the data and only a dot after CRLF
//!   is unstuffed; the message reaches the handler byte for byte otherwise.
//! - **Replies never echo client input**, and all parsing works on bytes: no input panics.
//! - Extensions: PIPELINING, 8BITMIME, SIZE, ENHANCEDSTATUSCODES; for submission STARTTLS
//!   (plaintext session) or AUTH PLAIN LOGIN (TLS session, after STARTTLS or with implicit
//!   TLS, RFC 8314). Not SMTPUTF8, DSN, CHUNKING. A TLS handshake gets the command timeout.

mod activity;
mod budget;
mod command;
mod data;
mod handler;
mod line;
mod listener;
mod message_budget;
mod message_rate;
mod places;
mod reply;
mod sasl;
mod session;
mod settings;
mod stats;
mod stream;
mod submission;

pub use handler::{AuthFailure, Credentials, Envelope, HandlerError, InboundHandler, Refusal};
pub use listener::InboundListener;
pub use settings::{DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_MESSAGES_PER_CLIENT, InboundSettings, Role};
pub use stats::{InboundStats, StatsSnapshot};
pub use submission::SubmissionHandler;
