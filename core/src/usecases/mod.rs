//! The use cases: one function per operation of the API, shared by every front end.
//!
//! [`Tidings`] holds the ports and the configuration; each submodule adds the use cases of
//! one resource. An area is reached through a handle that [`Tidings`] hands out, so a front
//! end calls the area it needs (`core.webhooks().create(..)`: [`Webhooks`]) instead of one
//! object with every method (docs/decisions.md "Use cases by area" says what stays on
//! [`Tidings`]). Every use case that acts for a client takes the authenticated
//! [`Principal`] and enforces scope and workspace isolation itself.

mod address_list;
mod auth;
mod batch;
mod client_auth;
mod domains;
mod event_feed;
mod feedback;
mod idempotency;
mod inbound;
mod keys;
mod message_list;
mod message_source;
mod messages;
mod metrics_access;
mod named;
mod operations;
mod operator_session;
mod overview;
mod pagination;
mod rate_limited_send;
mod recipient_fields;
mod render_pool;
mod reputation;
pub(crate) mod sandbox;
mod scheduling;
mod send_fields;
mod send_turns;
mod senders;
mod sessions;
mod submission;
mod submitted_message;
mod suppressions;
pub(crate) mod templates;
mod tracking;
mod webhooks;

use std::sync::Arc;

use chrono::Duration;

use crate::dns_records::RecordPolicy;
use crate::ids::{ApiKeyId, DomainId, WorkspaceId};
use crate::model::{Domain, KeyScope, RateLimit};
use crate::outbound::{ReturnPath, ReturnPathKey, ReturnPaths};
use crate::ports::{Clock, DnsCheck, EventObserver, ObserverId, ObserverSet, Random, Store};
use crate::tracking::TrackingConfig;

pub use auth::*;
pub use batch::*;
pub use client_auth::*;
pub use domains::*;
pub use event_feed::*;
pub use feedback::*;
pub use inbound::routes::{InboundRoutes, RouteRequest};
pub use inbound::{
    DOMAINS_TTL, Inbound, InboundDomains, InboundPolicy, ReceiveOutcome, ReceivedEnvelope, RecipientVerdict, Unreadable,
};
pub use keys::*;
pub use message_list::*;
pub use message_source::MessageSource;
pub use messages::*;
pub use metrics_access::*;
pub use named::Named;
pub use operator_session::*;
pub use overview::*;
pub use pagination::*;
pub use rate_limited_send::*;
pub use render_pool::{default_render_threads, default_render_threads_per_workspace};
pub use reputation::{JudgeReport, Reputation, ReputationMemory, STANDING_TTL, ScopeFigures};
pub use sandbox::{SANDBOX_DOMAIN, SANDBOX_RECORD_NOTE, is_reserved_for_sandbox};
pub use scheduling::{MAX_SCHEDULE_AHEAD, MessageChange, SCHEDULE_PAST_TOLERANCE};
pub use send_fields::{AttachmentRequest, TagRequest};
pub use send_turns::{SendTurn, SendTurns};
pub use senders::*;
pub use sessions::*;
pub use submission::*;
pub use submitted_message::*;
pub use suppressions::*;
pub use templates::*;
pub use tracking::*;
pub use webhooks::*;

/// How long activity counters are kept by default: 90 days, three times the overview's
/// longest range, and room for the reputation guard's windows.
pub const DEFAULT_ACTIVITY_RETENTION: Duration = Duration::days(90);

/// Settings of the rules that operators may change.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// How long an Idempotency-Key is remembered (docs/api.md#idempotency: 24 h).
    pub idempotency_window: Duration,
    /// Allow webhook URLs on private addresses and plain http (README.md#configuration).
    pub allow_private_webhooks: bool,
    /// How long the old webhook secret keeps signing after a rotation (docs/api.md#webhooks:
    /// 24 h).
    pub webhook_secret_overlap: Duration,
    /// What the generated DNS records say.
    pub records: RecordPolicy,
    /// The per-message return path (docs/api.md#bounce-and-complaint-reports,
    /// `TIDINGS_RETURN_PATH_DOMAIN`): when set, the envelope sender is
    /// `bounces+<message id>-<signature>@<its domain>` and reports are taken only at such
    /// addresses; otherwise the envelope sender is the `From` address and no report matches.
    pub return_path: Option<ReturnPath>,
    /// Return paths on each sending domain's own subdomain (contract §12, "Return path per
    /// domain"; the server sets it with `TIDINGS_INBOUND_MX_HOST`, which also makes the
    /// records ask for them): with the key, mail from a domain whose return-path records are
    /// `Verified` goes with the envelope sender `bounces+<message id>-<signature>@bounces.<domain>`
    /// signed with it, and reports are taken there too. Other mail keeps `return_path`.
    pub domain_return_paths: Option<ReturnPathKey>,
    /// How long after its last check (or its creation) a domain that is not Verified is
    /// checked again by [`Domains::recheck`].
    pub domain_recheck_interval: Duration,
    /// How long a DKIM pair replaced by a rotation stays published (`Retiring`) before its
    /// private keys are deleted, and how long it is then still listed (`Retired`)
    /// (`TIDINGS_DKIM_RETIRE_AFTER`, default [`crate::dkim_rotation::DEFAULT_RETIRE_AFTER`]).
    pub dkim_retire_after: Duration,
    /// Automatic DKIM rotation (`TIDINGS_DKIM_ROTATE_EVERY`): a Verified domain whose active
    /// pair is older than this gets a new pending pair ([`Domains::rotate_due`]). `None`
    /// (the default) rotates only when asked.
    pub dkim_rotate_every: Option<Duration>,
    /// Open and click tracking (docs/api.md#tracking, `TIDINGS_PUBLIC_URL`): `None` tracks
    /// nothing (sends asking for it are accepted; their HTML is sent as written).
    pub tracking: Option<TrackingConfig>,
    /// How long message bodies and timelines are kept (`TIDINGS_RETENTION`, default 30
    /// days); `None` keeps them forever. See [`Operations::purge_expired_message_content`].
    pub message_retention: Option<Duration>,
    /// How long the activity counters of an hour are kept (`crate::activity`; default
    /// [`DEFAULT_ACTIVITY_RETENTION`]). At least the overview's longest range (30 days) is
    /// kept whatever this says. See [`Operations::purge_expired_activity`].
    pub activity_retention: Duration,
    /// How many template compiles and renders may run at once, each on a blocking thread
    /// (see [`default_render_threads`]): the rest wait their turn without holding
    /// up the async executor.
    pub render_threads: usize,
    /// How many of those one workspace may run at once (see
    /// [`default_render_threads_per_workspace`]; at most `render_threads`): below
    /// `render_threads`, one workspace's renders never take every thread, and waiting
    /// workspaces take turns, so one workspace's costly renders do not hold up another's.
    pub render_threads_per_workspace: usize,
    /// Whether each workspace may send from its sandbox sending domain ([`SANDBOX_DOMAIN`]):
    /// set it only when the [`Mailer`](crate::ports::Mailer) keeps mail on the
    /// machine (the server sets it with `TIDINGS_DELIVERY=outbox`). Off (the default), the
    /// sandbox is invisible: not listed, not found, never a default `from`, and a send from
    /// it is refused with `domain_not_verified`.
    pub sandbox_sending: bool,
    /// How long dashboard sessions last.
    pub sessions: SessionPolicy,
    /// The reputation guard's window, volume and thresholds (contract §12).
    pub reputation: crate::reputation::ReputationPolicy,
    /// Inbound mail: quota, limits, the URLs its events give (contract §13).
    pub inbound: InboundPolicy,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            idempotency_window: Duration::hours(24),
            allow_private_webhooks: false,
            webhook_secret_overlap: Duration::hours(24),
            records: RecordPolicy::default(),
            return_path: None,
            domain_return_paths: None,
            domain_recheck_interval: Duration::minutes(10),
            dkim_retire_after: crate::dkim_rotation::DEFAULT_RETIRE_AFTER,
            dkim_rotate_every: None,
            tracking: None,
            message_retention: Some(Duration::days(30)),
            activity_retention: DEFAULT_ACTIVITY_RETENTION,
            render_threads: default_render_threads(),
            render_threads_per_workspace: default_render_threads_per_workspace(),
            sandbox_sending: false,
            sessions: SessionPolicy::default(),
            reputation: crate::reputation::ReputationPolicy::default(),
            inbound: InboundPolicy::default(),
        }
    }
}

impl CoreConfig {
    /// The return path of mail from `domain`: the domain's own (`bounces.<domain>`) once its
    /// records verify and per-domain return paths are on, else the server-wide one, else
    /// none (the envelope sender is then the `From` address).
    pub fn return_path_for(&self, domain: &Domain) -> Option<ReturnPath> {
        if let Some(key) = &self.domain_return_paths
            && let Some(at) = domain.return_path_domain()
        {
            return Some(ReturnPath { domain: at, key: key.clone() });
        }
        self.return_path.clone()
    }

    /// Every return path this configuration signs, for matching reports.
    pub fn return_paths(&self) -> ReturnPaths<'_> {
        ReturnPaths { server: self.return_path.as_ref(), per_domain: self.domain_return_paths.as_ref() }
    }
}

/// The authenticated caller of a use case: a key that passed [`Tidings::authenticate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The key's workspace; everything the caller touches is in it.
    pub workspace_id: WorkspaceId,
    /// The key.
    pub key_id: ApiKeyId,
    /// Its scope.
    pub scope: KeyScope,
    /// Its domain restriction.
    pub sending_domain_id: Option<DomainId>,
    /// Its send rate (enforced by the front end's limiter).
    pub rate_limit: RateLimit,
}

impl Principal {
    /// Management operations need a `full` key (docs/api.md#authentication).
    pub fn require_full(&self) -> crate::Result<()> {
        match self.scope {
            KeyScope::Full => Ok(()),
            KeyScope::Send => Err(crate::Error::InsufficientScope),
        }
    }

    /// Whether this key may create or revoke a key restricted to `domain` (`None`: a key
    /// that may send from any domain). An unrestricted key may; a key restricted to a domain
    /// only for that same domain, so that it cannot hand out or take away more than it has
    /// (docs/api.md#authentication). 403 `insufficient_scope` otherwise.
    pub fn require_key_manager_of(&self, domain: Option<DomainId>) -> crate::Result<()> {
        match self.sending_domain_id {
            Some(own) if domain != Some(own) => Err(crate::Error::InsufficientScope),
            _ => Ok(()),
        }
    }
}

/// The service: ports plus configuration. Cheap to clone (all `Arc`s).
#[derive(Clone)]
pub struct Tidings {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) random: Arc<dyn Random>,
    pub(crate) dns: Arc<dyn DnsCheck>,
    pub(crate) config: Arc<CoreConfig>,
    /// Sends holding an Idempotency-Key in this process ([`Tidings::take_send_turn`]).
    pub(crate) send_turns: SendTurns,
    /// Told of every recorded event ([`Tidings::add_observer`]); shared by every clone,
    /// empty by default.
    pub(crate) observer: ObserverSet,
    /// Where templates are compiled and rendered ([`render_pool`]).
    pub(crate) render_pool: render_pool::RenderPool,
    /// What this node keeps of the reputation guard's standings ([`Reputation`]).
    pub(crate) reputation_memory: Arc<ReputationMemory>,
    /// The domains that receive mail, as this node last read them ([`Inbound`]).
    pub(crate) inbound_domains: Arc<InboundDomains>,
}

impl Tidings {
    /// Assembles the service from its ports.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        random: Arc<dyn Random>,
        dns: Arc<dyn DnsCheck>,
        config: CoreConfig,
    ) -> Self {
        let render_pool = render_pool::RenderPool::new(config.render_threads, config.render_threads_per_workspace);
        Self {
            store,
            clock,
            random,
            dns,
            // Shared: the service is cloned per request (axum state), and a deep copy of
            // the configuration per send showed in the profile (bench/README.md).
            config: Arc::new(config),
            send_turns: SendTurns::default(),
            observer: ObserverSet::default(),
            render_pool,
            reputation_memory: Arc::default(),
            inbound_domains: Arc::default(),
        }
    }

    /// Adds `observer` beside any others (the metrics, the operator log, an application's
    /// reactions): it is told of every event this service records from now on, through
    /// every clone of it, made before or after this call. Returns the id that
    /// [`Self::remove_observer`] takes.
    pub fn add_observer(&self, observer: Arc<dyn EventObserver>) -> ObserverId {
        self.observer.add(observer)
    }

    /// Takes out an observer [`Self::add_observer`] added; `false` if it was not there.
    pub fn remove_observer(&self, id: ObserverId) -> bool {
        self.observer.remove(id)
    }

    /// [`Self::add_observer`] as a builder step, for wiring at start.
    pub fn with_observer(self, observer: Arc<dyn EventObserver>) -> Self {
        self.observer.add(observer);
        self
    }

    /// The observers, for workers that report what core does not record itself (webhook
    /// attempts).
    pub fn observer(&self) -> &ObserverSet {
        &self.observer
    }

    /// Queues a send behind any other send of this process with the same Idempotency-Key
    /// (see [`SendTurns`]); a front end holds the turn from taking the rate-limit token until
    /// the send is answered. `None` (no waiting) for a send without a key.
    pub async fn take_send_turn(&self, who: &Principal, idempotency_key: Option<&str>) -> Option<SendTurn> {
        match idempotency_key {
            Some(key) => Some(self.send_turns.take(who.workspace_id, &idempotency::turn_key(who, key)).await),
            None => None,
        }
    }

    /// The store, for workers and adapters that need direct reads.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The clock, so front ends measure rate-limit windows on the same time as the rules.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The configuration.
    pub fn config(&self) -> &CoreConfig {
        &self.config
    }

    /// Readiness (`GET /readyz`): the store answers a cheap read, a point lookup of a
    /// workspace that does not exist. Any store failure is [`crate::Error::Unavailable`]: a
    /// node that cannot read its store should get no traffic, whatever the cause.
    pub async fn check_ready(&self) -> crate::Result<()> {
        match self.store.get_workspace(WorkspaceId::from_bytes([0; 16])).await {
            Ok(_) => Ok(()),
            Err(e) => Err(crate::Error::Unavailable(crate::Cause::context("readiness check", e))),
        }
    }
}
