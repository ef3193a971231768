//! Wiring: opens the store (sled, or PostgreSQL with `TIDINGS_DATABASE_URL`), picks the DNS
//! resolver, assembles [`Tidings`], and the operator's first-start and command-line actions
//! (default workspace, `workspace create`, `key create`, `migrate`).

use std::sync::Arc;

use tidings_core::delivery::DeliverySettings;
use tidings_core::dns_records::RecordPolicy;
use tidings_core::ids::{ApiKeyId, WorkspaceId};
use tidings_core::model::{ApiKeyPlaintext, KeyScope, RateLimit};
use tidings_core::outbound::{ReturnPath, ReturnPathKey};
use tidings_core::ports::{DnsCheck, Limits, Mailer, NoDns, SecretResealStore, Store, SystemClock, SystemRandom};
use tidings_core::sealing::Sealer;
use tidings_core::tracking::{TRACKING_KEY_BYTES, TrackingConfig, TrackingKey};
use tidings_core::usecases::{
    AuthThrottleConfig, CoreConfig, CreateApiKeyRequest, CreatedKey, LocalLimits, Principal, Tidings,
};
use tidings_storage_postgres::{PgOptions, PgStore};
use tidings_storage_sled::{SledOptions, SledStore};
use tidings_transport_smtp::{
    MxConfig, MxMailer, OutboxMailer, PoolSettings, RelayConfig, RelayEndpoint, RelayMailer, Timeouts,
};

use crate::ServerError;
use crate::config::{Config, ConfigError, DatabaseUrl, Delivery};
use crate::secret_key;

/// The opened store and where the rate limits and the failed-auth throttle count.
pub struct OpenStore {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The send rate limits and the failed-auth throttle: in this process on sled (the
    /// only process), in the database on PostgreSQL so that every node counts against the
    /// same limits.
    pub limits: Arc<dyn Limits>,
    /// The same store, for `secret-key rotate`.
    pub reseal: Arc<dyn SecretResealStore>,
    /// What it was opened with: the key, and the previous key during a rotation.
    pub sealer: Sealer,
}

/// Opens the store: PostgreSQL at `TIDINGS_DATABASE_URL` (pending migrations applied) when
/// it is set, else sled at `<data>/store` (created if needed); its secrets sealed with the
/// key of [`secret_key::load`]. The data dir must be prepared ([`crate::data_dir::prepare`]).
pub async fn open_store(config: &Config) -> Result<OpenStore, ServerError> {
    let throttle = AuthThrottleConfig::default();
    let key = secret_key::load(config)?;
    let wrong_key = |store: String| {
        key.forget_generated();
        ServerError::WrongSecretKey { store, key: key.source.to_string() }
    };
    match &config.database_url {
        Some(url) => {
            let options = PgOptions { max_connections: config.database_pool, ..PgOptions::default() };
            let store = match PgStore::connect(url.expose(), options, key.sealer.clone()).await {
                Ok(store) => store,
                Err(e) if e.is_wrong_key() => {
                    return Err(wrong_key(format!("{} (TIDINGS_DATABASE_URL)", url.redacted())));
                }
                Err(e) => return Err(database_error(url, &e)),
            };
            tracing::info!(url = %url.redacted(), "store: PostgreSQL");
            log_sealed(store.sealed_at_connect());
            let limits = Arc::new(store.limits(throttle));
            let reseal = Arc::new(store.clone());
            Ok(OpenStore { store: Arc::new(store), limits, reseal, sealer: key.sealer.clone() })
        }
        None => {
            let sled = open_sled(config, &key.sealer).map_err(|e| match e {
                SledOpen::WrongKey(path) => wrong_key(path),
                SledOpen::Failed(e) => e,
            })?;
            log_sealed(sled.sealed_at_open());
            let reseal = Arc::new(sled.clone());
            let limits = Arc::new(LocalLimits::new(throttle));
            Ok(OpenStore { store: Arc::new(sled), limits, reseal, sealer: key.sealer.clone() })
        }
    }
}

fn log_sealed(count: usize) {
    if count > 0 {
        tracing::info!(
            count,
            "sealed the secrets an earlier version stored in plaintext (DKIM keys, webhook secrets, tracking key)"
        );
    }
}

/// `migrate`: applies pending migrations to `TIDINGS_DATABASE_URL` and returns.
pub async fn migrate(config: &Config) -> Result<(), ServerError> {
    let url = config.database_url.as_ref().ok_or_else(|| {
        ServerError::Config(ConfigError::new(
            "TIDINGS_DATABASE_URL",
            None,
            "is not set: `migrate` applies the PostgreSQL migrations to the database it names",
        ))
    })?;
    tidings_storage_postgres::migrate(url.expose(), PgOptions::default()).await.map_err(|e| database_error(url, &e))
}

/// A driver error, its cause chain flattened and the password scrubbed out of it.
fn database_error(url: &DatabaseUrl, error: &dyn std::error::Error) -> ServerError {
    let mut reason = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !reason.contains(&text) {
            reason = format!("{reason}: {text}");
        }
        source = cause.source();
    }
    ServerError::Database { url: url.redacted().to_owned(), reason: url.scrub(&reason) }
}

/// Why the sled store did not open.
enum SledOpen {
    /// Sealed with another key; the store's path.
    WrongKey(String),
    /// Anything else.
    Failed(ServerError),
}

/// Opens (creating if needed, `700`) the sled store at `<data>/store`.
fn open_sled(config: &Config, sealer: &Sealer) -> Result<SledStore, SledOpen> {
    let dir = config.store_dir();
    crate::data_dir::create_private_dir(&dir).map_err(|e| {
        SledOpen::Failed(ServerError::Config(ConfigError::new(
            "TIDINGS_DATA_DIR",
            None,
            format!("cannot create {}: {e}", dir.display()),
        )))
    })?;
    let options = SledOptions { cache_capacity_bytes: config.store_cache_bytes };
    SledStore::open_with(&dir, options, sealer.clone()).map_err(|e| {
        if e.is_wrong_key() {
            return SledOpen::WrongKey(dir.display().to_string());
        }
        let reason = match e {
            tidings_storage_sled::SledError::Open(sled::Error::Io(io))
                if io.kind() == std::io::ErrorKind::WouldBlock =>
            {
                "another process holds it (only one process may open a sled store: stop the tidings-server \
                 running on it first)"
                    .to_owned()
            }
            tidings_storage_sled::SledError::Open(sled::Error::Io(io)) => {
                format!("{} (is a tidings-server already running on it?)", io_reason(&io))
            }
            tidings_storage_sled::SledError::Open(_) => {
                format!("{e} (only one process may open a store: is a tidings-server already running on it?)")
            }
            e => e.to_string(),
        };
        SledOpen::Failed(ServerError::Store { path: dir.display().to_string(), reason })
    })
}

/// An I/O error as an operator reads it. sled copies its errors by writing the original's
/// `Debug` form into a new one (`Os { code: 11, kind: WouldBlock, … }`): that is turned back
/// into the system's words for the code.
fn io_reason(error: &std::io::Error) -> String {
    let text = error.to_string();
    let code = text
        .split_once("code: ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse::<i32>().ok());
    match code {
        Some(code) if text.contains("Os {") => std::io::Error::from_raw_os_error(code).to_string(),
        _ => text,
    }
}

/// The resolver of `TIDINGS_DNS_SERVER`, or the system's (for domain checks and MX lookups).
pub fn dns(config: &Config) -> Result<Arc<tidings_dns::HickoryDns>, ServerError> {
    let dns = match config.dns_server {
        Some(addr) => tidings_dns::HickoryDns::with_server(addr)
            .map_err(|e| ServerError::Config(ConfigError::new("TIDINGS_DNS_SERVER", None, e.to_string())))?,
        None => tidings_dns::HickoryDns::system().map_err(|e| {
            ServerError::Config(ConfigError::new(
                "TIDINGS_DNS_SERVER",
                None,
                format!("unset, and the system resolver configuration is unusable: {e}"),
            ))
        })?,
    };
    Ok(Arc::new(dns))
}

/// SPF, DKIM and DMARC of inbound mail, through the resolver of `TIDINGS_DNS_SERVER` or the
/// system's, as for [`dns`].
pub fn message_auth(config: &Config) -> Result<Arc<tidings_dns::MailAuthChecker>, ServerError> {
    let checker = match config.dns_server {
        Some(addr) => tidings_dns::MailAuthChecker::with_server(addr),
        None => tidings_dns::MailAuthChecker::system(),
    };
    let checker =
        checker.map_err(|e| ServerError::Config(ConfigError::new("TIDINGS_DNS_SERVER", None, e.to_string())))?;
    Ok(Arc::new(checker))
}

/// How long one webhook POST may take (docs/api.md#webhook-retries).
pub const WEBHOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The webhook sender: https only and public addresses only (checked on the address each
/// connection is made to, resolved by the same resolver as domain checks) unless
/// `TIDINGS_WEBHOOK_ALLOW_PRIVATE`; 10 s per POST (docs/api.md#webhook-retries).
pub fn webhook_sender(
    config: &Config,
    dns: Arc<tidings_dns::HickoryDns>,
) -> Result<Arc<dyn tidings_core::ports::WebhookSender>, ServerError> {
    let settings = tidings_webhook_http::SenderSettings {
        allow_private: config.webhook_allow_private,
        timeout: WEBHOOK_TIMEOUT,
        ..Default::default()
    };
    let sender = tidings_webhook_http::HttpWebhookSender::new(dns, settings)
        .map_err(|e| ServerError::WebhookSender(e.to_string()))?;
    Ok(Arc::new(sender))
}

/// The fetcher of Resend's attachment `path` URLs: the webhook sender's rules (SSRF guard on
/// the address connected to, https only unless `TIDINGS_WEBHOOK_ALLOW_PRIVATE`, no redirects)
/// and its time limit, per file.
pub fn file_fetcher(
    config: &Config,
    dns: Arc<tidings_dns::HickoryDns>,
) -> Result<Arc<dyn tidings_core::ports::FileFetcher>, ServerError> {
    let settings = tidings_webhook_http::FetcherSettings {
        allow_private: config.webhook_allow_private,
        timeout: WEBHOOK_TIMEOUT,
        ..Default::default()
    };
    let fetcher = tidings_webhook_http::HttpFileFetcher::new(dns, settings)
        .map_err(|e| ServerError::WebhookSender(e.to_string()))?;
    Ok(Arc::new(fetcher))
}

/// How messages leave: the transport of `TIDINGS_DELIVERY`, relay and mx sending
/// `TIDINGS_EHLO_NAME` with EHLO, mx obeying MTA-STS unless `TIDINGS_MTA_STS` is off;
/// `None` with `hold` (nothing leaves).
pub fn mailer(config: &Config, dns: Arc<tidings_dns::HickoryDns>) -> Result<Option<Arc<dyn Mailer>>, ServerError> {
    let bad = |var: &str, e: tidings_transport_smtp::ConfigError| {
        // Config has checked the name already; should the transport still refuse it, the
        // error names the variable that set it.
        let var = if matches!(e, tidings_transport_smtp::ConfigError::EhloName(_)) { "TIDINGS_EHLO_NAME" } else { var };
        ServerError::Config(ConfigError::new(var, None, e.to_string()))
    };
    let ehlo_name = config.delivery.ehlo_name.as_ref().map(ToString::to_string);
    Ok(Some(match config.delivery.mode {
        Delivery::Hold => {
            tracing::warn!("delivery: on hold (TIDINGS_DELIVERY=hold): messages are accepted and stay Queued");
            return Ok(None);
        }
        Delivery::Outbox => {
            let dir = config.outbox_dir();
            tracing::info!(dir = %dir.display(), "delivery: outbox (messages are written as .eml files, not sent)");
            Arc::new(OutboxMailer::new(dir).map_err(|e| bad("TIDINGS_DATA_DIR", e))?)
        }
        Delivery::Relay => {
            // Config guarantees a relay URL with `relay`.
            let url = config.delivery.smtp_relay.as_ref().ok_or_else(|| {
                ServerError::Config(ConfigError::new(
                    "TIDINGS_SMTP_RELAY",
                    None,
                    "is required with TIDINGS_DELIVERY=relay",
                ))
            })?;
            let endpoint = RelayEndpoint::from_url(url).map_err(|e| bad("TIDINGS_SMTP_RELAY", e))?;
            tracing::info!(relay = %endpoint, "delivery: through the relay");
            // One connection per message the worker sends at once: with fewer, sends queue for
            // a connection and the relay's round trips cap throughput (bench/README.md).
            let pool =
                PoolSettings { max_connections: DeliverySettings::default().concurrency, ..PoolSettings::default() };
            let timeouts = Timeouts::capped(config.delivery.smtp_timeout);
            let relay = RelayConfig { pool, timeouts, ehlo_name, ..RelayConfig::new(endpoint) };
            Arc::new(RelayMailer::new(&relay).map_err(|e| bad("TIDINGS_SMTP_RELAY", e))?)
        }
        Delivery::Mx => {
            let allow_private = config.delivery.mx_allow_private;
            let mta_sts = config.delivery.mta_sts.enabled;
            tracing::info!(
                port = config.delivery.mx_port,
                allow_private,
                mta_sts,
                "delivery: direct to each recipient's MX"
            );
            let timeouts = Timeouts::capped(config.delivery.smtp_timeout);
            let mx =
                MxConfig { port: config.delivery.mx_port, ehlo_name, timeouts, allow_private, ..MxConfig::default() };
            // The worker admits by the same table (`run`): the mailer names each domain's
            // site and keeps each site's connections and messages per connection.
            let shaping = Arc::new(config.delivery.shaping.clone());
            let mailer = MxMailer::new(dns.clone(), mx).map_err(|e| bad("TIDINGS_MX_PORT", e))?.with_shaping(shaping);
            match crate::mta_sts::policies(config, dns)? {
                None => Arc::new(mailer),
                Some((policies, roots)) => {
                    Arc::new(mailer.with_mta_sts(policies, &roots).map_err(|e| bad("TIDINGS_MTA_STS_CA_FILE", e))?)
                }
            }
        }
    }))
}

/// The service on `store` and `dns`, with the configured rules.
pub fn core(config: &Config, store: Arc<dyn Store>, dns: Arc<dyn DnsCheck>) -> Tidings {
    core_with_tracking(config, store, dns, None, SignedReturnPaths::default())
}

/// [`core`] with open and click tracking and the signed return path configured.
pub fn core_with_tracking(
    config: &Config,
    store: Arc<dyn Store>,
    dns: Arc<dyn DnsCheck>,
    tracking: Option<TrackingConfig>,
    return_paths: SignedReturnPaths,
) -> Tidings {
    let inbound = tidings_core::usecases::InboundPolicy {
        quota: config.inbound.quota,
        limits: tidings_core::inbound::InboundLimits {
            max_message_bytes: config.inbound.max_message_bytes,
            ..Default::default()
        },
        // The API's public base: the URLs in InboundReceived events are fetched there.
        public_url: tracking.as_ref().map(|t| t.public_url.clone()),
        ..Default::default()
    };
    let core_config = CoreConfig {
        tracking,
        inbound,
        idempotency_window: chrono::Duration::from_std(config.idempotency_window)
            .unwrap_or(chrono::Duration::hours(24)),
        allow_private_webhooks: config.webhook_allow_private,
        records: RecordPolicy {
            spf_mechanism: config.spf_mechanism().to_owned(),
            spf_warning: config.spf_warning(),
            return_path_host: config.delivery.inbound_mx_host.clone(),
            ..RecordPolicy::default()
        },
        return_path: return_paths.server,
        domain_return_paths: return_paths.per_domain,
        domain_recheck_interval: chrono::Duration::from_std(config.delivery.domain_recheck_interval)
            .unwrap_or(chrono::Duration::minutes(10)),
        dkim_retire_after: chrono::Duration::from_std(config.delivery.dkim_retire_after)
            .unwrap_or(tidings_core::dkim_rotation::DEFAULT_RETIRE_AFTER),
        dkim_rotate_every: config.delivery.dkim_rotate_every.and_then(|every| chrono::Duration::from_std(every).ok()),
        message_retention: config
            .retention
            .map(|keep| chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::MAX)),
        reputation: config.reputation.clone(),
        // The sandbox sending domain is for trying Tidings out: only where nothing leaves.
        sandbox_sending: config.delivery.mode == Delivery::Outbox,
        ..CoreConfig::default()
    };
    Tidings::new(store, Arc::new(SystemClock), Arc::new(SystemRandom), dns, core_config)
}

/// The return paths mail is sent with, signed with the key every node sharing the store
/// signs with.
#[derive(Debug, Clone, Default)]
pub struct SignedReturnPaths {
    /// On `TIDINGS_RETURN_PATH_DOMAIN`, when set.
    pub server: Option<ReturnPath>,
    /// The key of each domain's own (`bounces.<domain>`), when `TIDINGS_INBOUND_MX_HOST` is set.
    pub per_domain: Option<ReturnPathKey>,
}

impl SignedReturnPaths {
    /// The configured return paths; the key is read (or made) only when one is configured.
    pub async fn of(config: &Config, store: &dyn Store) -> Result<Self, ServerError> {
        let server_domain = config.delivery.return_path_domain.clone();
        let per_domain = config.delivery.inbound_mx_host.is_some();
        if server_domain.is_none() && !per_domain {
            return Ok(Self::default());
        }
        let key = ReturnPathKey::shared(store, &SystemRandom).await?;
        Ok(Self {
            server: server_domain.map(|domain| ReturnPath { domain, key: key.clone() }),
            per_domain: per_domain.then_some(key),
        })
    }
}

/// The file in which versions before the shared tracking key kept a node's key.
pub const TRACKING_KEY_FILE: &str = "tracking.key";

/// The tracking key, kept in the store so that every node sharing it signs and verifies
/// links alike ([`TrackingKey::shared`]). A store without one gets this node's
/// `<data>/tracking.key` when an earlier version made one (so the links it sent keep
/// working), or else a fresh random key. The file is only read, never written: once the
/// store has a key, the file is unused.
pub async fn tracking_key(config: &Config, store: &dyn Store) -> Result<TrackingKey, ServerError> {
    let kept = kept_tracking_key(config)?;
    Ok(TrackingKey::shared(store, &SystemRandom, kept).await?)
}

/// The key in `<data>/tracking.key`, if that file exists.
fn kept_tracking_key(config: &Config) -> Result<Option<[u8; TRACKING_KEY_BYTES]>, ServerError> {
    let path = config.data_dir.join(TRACKING_KEY_FILE);
    let bad = |reason: String| {
        ServerError::Config(ConfigError::new("TIDINGS_DATA_DIR", None, format!("{}: {reason}", path.display())))
    };
    match std::fs::read(&path) {
        Ok(bytes) => bytes
            .try_into()
            .map(Some)
            .map_err(|b: Vec<u8>| bad(format!("holds {} bytes, not {TRACKING_KEY_BYTES}", b.len()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(bad(format!("cannot read it: {e}"))),
    }
}

/// The service for an operator command: the store (either kind, sealed with the same key as
/// the server's), no DNS ([`NoDns`]: the operator commands never look anything up, so they
/// need no usable resolver configuration).
pub async fn operator_core(config: &Config) -> Result<Tidings, ServerError> {
    crate::data_dir::prepare(config)?;
    let store = open_store(config).await?.store;
    Ok(core(config, store, Arc::new(NoDns)))
}

/// First start: gives an empty store its default workspace and first key. Returns the
/// key's plaintext when it was generated (so the caller prints it once); `None` when the
/// store already had a workspace or the key came from `TIDINGS_BOOTSTRAP_KEY`.
pub async fn ensure_default_workspace(
    core: &Tidings,
    bootstrap: Option<ApiKeyPlaintext>,
) -> Result<Option<ApiKeyPlaintext>, ServerError> {
    let configured = bootstrap.is_some();
    match core.workspaces().ensure_default(bootstrap).await? {
        None => {
            if configured {
                tracing::info!("the store already has workspaces: TIDINGS_BOOTSTRAP_KEY is not used");
            }
            Ok(None)
        }
        Some((workspace, created)) => {
            tracing::info!(workspace = %workspace.id, key = %created.key.id, "created the default workspace");
            Ok((!configured).then_some(created.plaintext))
        }
    }
}

/// `workspace create NAME`: a new workspace and its first `full` key.
pub async fn create_workspace(core: &Tidings, name: &str) -> Result<(WorkspaceId, ApiKeyPlaintext), ServerError> {
    let (workspace, created) = core.workspaces().create(name, None).await?;
    Ok((workspace.id, created.plaintext))
}

/// `key create --workspace ID`: a key in an existing workspace, made as the operator.
pub async fn create_key(
    core: &Tidings,
    workspace: &str,
    name: Option<String>,
    scope: KeyScope,
) -> Result<CreatedKey, ServerError> {
    let unknown = || ServerError::Operator(format!("there is no workspace {workspace}"));
    let workspace_id = WorkspaceId::parse(workspace).ok_or_else(unknown)?;
    core.store().get_workspace(workspace_id).await?.ok_or_else(unknown)?;
    // The operator acts with the authority of a full key of that workspace; the key id is a
    // fresh one that no stored key has, so nothing can be attributed to a real key.
    let operator = Principal {
        workspace_id,
        key_id: ApiKeyId::new_at(core.clock().now(), &SystemRandom),
        scope: KeyScope::Full,
        sending_domain_id: None,
        rate_limit: RateLimit::DEFAULT,
    };
    let scope = match scope {
        KeyScope::Full => "full",
        KeyScope::Send => "send",
    };
    let request = CreateApiKeyRequest { name, scope: Some(scope.to_owned()), ..CreateApiKeyRequest::default() };
    Ok(core.keys().create(&operator, request).await?)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use tidings_core::ids::MessageId;
    use tidings_core::ports::Clock;

    use super::*;

    fn config_in(dir: &Path) -> Config {
        let dir = dir.display().to_string();
        Config::load(None, |name| (name == "TIDINGS_DATA_DIR").then(|| dir.clone())).expect("config")
    }

    fn same_key(a: &TrackingKey, b: &TrackingKey) -> bool {
        let now = SystemClock.now();
        let (ws, msg) = (WorkspaceId::new_at(now, &SystemRandom), MessageId::new_at(now, &SystemRandom));
        a.sign_open(ws, msg, None) == b.sign_open(ws, msg, None)
    }

    #[tokio::test]
    async fn the_tracking_key_is_the_stores_and_no_file_is_written() {
        let (a, b, store_dir) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store =
            SledStore::open(store_dir.path(), Sealer::new(&tidings_core::sealing::SealingKey::generate(&SystemRandom)))
                .unwrap();
        let on_a = tracking_key(&config_in(a.path()), &store).await.unwrap();
        let on_b = tracking_key(&config_in(b.path()), &store).await.unwrap();
        assert!(same_key(&on_a, &on_b), "two nodes on one store sign alike");
        assert!(!a.path().join(TRACKING_KEY_FILE).exists(), "the key stays out of the data dir");
    }

    #[tokio::test]
    async fn a_tracking_key_file_from_before_becomes_the_stores_key() {
        let (a, b, store_dir) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join(TRACKING_KEY_FILE), [7; TRACKING_KEY_BYTES]).unwrap();
        std::fs::write(b.path().join(TRACKING_KEY_FILE), [8; TRACKING_KEY_BYTES]).unwrap();
        let store =
            SledStore::open(store_dir.path(), Sealer::new(&tidings_core::sealing::SealingKey::generate(&SystemRandom)))
                .unwrap();
        let on_a = tracking_key(&config_in(a.path()), &store).await.unwrap();
        let on_b = tracking_key(&config_in(b.path()), &store).await.unwrap();
        assert!(same_key(&on_a, &TrackingKey::from_bytes([7; TRACKING_KEY_BYTES])), "links made before still open");
        assert!(same_key(&on_b, &on_a), "the first file to reach the store wins on every node");
    }

    #[tokio::test]
    async fn a_tracking_key_file_of_the_wrong_length_stops_the_start() {
        let (dir, store_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(dir.path().join(TRACKING_KEY_FILE), b"short").unwrap();
        let store =
            SledStore::open(store_dir.path(), Sealer::new(&tidings_core::sealing::SealingKey::generate(&SystemRandom)))
                .unwrap();
        let err = tracking_key(&config_in(dir.path()), &store).await.unwrap_err();
        assert!(matches!(&err, ServerError::Config(_)), "{err}");
        assert!(err.to_string().contains("holds 5 bytes"), "{err}");
    }
}
