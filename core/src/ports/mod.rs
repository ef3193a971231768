//! Ports: the narrow traits through which the use cases reach storage, the network and the
//! environment. Adapters implement them; core never opens a socket or a file.

mod clock;
mod dns;
mod endpoint_quota;
mod file_fetcher;
mod limits;
mod mailer;
mod observer;
mod random;
mod store;
mod webhook_sender;

pub use clock::{Clock, SystemClock};
#[cfg(test)]
pub(crate) use dns::MockDnsCheck;
pub use dns::{DnsCheck, DnsError, NoDns, StaticDns};
pub use endpoint_quota::{EndpointQuota, QuotaCount};
pub use file_fetcher::{FetchError, FetchedFile, FileFetcher, NoFileFetcher};
pub use limits::Limits;
pub use mailer::{EnhancedStatus, Mailer, OutboundEmail, SendError, SendReceipt, SmtpReply};
pub use observer::{EventObserver, ObserverId, ObserverSet, WebhookAttemptResult, delivery_latency};
pub use random::{Random, SystemRandom};
pub use store::*;
pub use webhook_sender::{MAX_BODY_PREFIX, WebhookRequest, WebhookResponse, WebhookSender};
