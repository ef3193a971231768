//! Ports: the narrow traits through which the use cases reach storage, the network and the
//! environment. Adapters implement them; core never opens a socket or a file.

pub mod admission_rule;
mod clock;
mod dns;
mod endpoint_quota;
mod file_fetcher;
mod limits;
mod mailer;
mod message_auth;
mod observer;
pub mod site_admission;
mod store;
mod store_error;
mod webhook_sender;

pub use admission_rule::{AdmissionRule, InFlightCounts};
pub use clock::{Clock, SystemClock};
#[cfg(test)]
pub(crate) use dns::MockDnsCheck;
pub use dns::{DnsCheck, DnsError, NoDns, StaticDns};
pub use endpoint_quota::{EndpointQuota, QuotaCount};
pub use file_fetcher::{FetchError, FetchedFile, FileFetcher, NoFileFetcher};
pub use limits::{Admission, Limits, RateLimitState, RetryAfter};
pub use mailer::{EnhancedStatus, Mailer, OutboundEmail, SendError, SendReceipt, SmtpReply};
pub use message_auth::{AuthInput, MessageAuth, NoMessageAuth};
// The results the port answers, defined in the model (the store keeps them).
pub use crate::model::{AuthCheck, AuthOutcome, AuthResults};
pub use observer::{EventObserver, ObserverId, ObserverSet, WebhookAttemptResult, delivery_latency};
pub use site_admission::{SiteAdmission, SiteChange, SiteLease, SiteQuota, SiteState, SiteWait};
pub use store::*;
pub(crate) use store_error::missing;
pub use store_error::{StoreError, StoreResult};
pub use webhook_sender::{MAX_BODY_PREFIX, WebhookRequest, WebhookResponse, WebhookSender};

// A port like these, defined below the model because ids and generated secrets are made from it.
pub use crate::random::{Random, SystemRandom};
