//! Ports: the narrow traits through which the use cases reach storage, the network and the
//! environment. Adapters implement them; core never opens a socket or a file.

mod clock;
mod dns;
mod mailer;
mod random;
mod store;

pub use clock::{Clock, SystemClock};
pub use dns::{DnsCheck, DnsError};
pub use mailer::{Mailer, OutboundEmail, SendError, SendReceipt};
pub use random::{Random, SystemRandom};
pub use store::*;
