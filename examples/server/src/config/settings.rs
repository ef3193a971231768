//! Every setting, declared once: its variable, command-line flag, default and help, as clap
//! arguments. `tidings-server --help` lists them from here, and [`super::Sources`] reads
//! their values from the same declarations (flag, environment, the TOML file, the default).
//!
//! The fields hold the text as given; [`super::Config`] parses and checks it, so an error can
//! name the variable and where its value came from without quoting a secret. Secrets hide
//! their environment value from `--help`.

use tidings_core::dns_records::DEFAULT_SPF_MECHANISM;

/// The server's settings, flattened into [`crate::cli::Cli`].
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Settings (flag, environment variable, or key in the --config file)")]
pub struct Settings {
    /// The data dir: the sled store (store/, unless TIDINGS_DATABASE_URL is set), the
    /// generated TLS certificate (tls/), the outbox (outbox/) and secret.key. Made 700 with
    /// every file in it 600; looser permissions are narrowed at start.
    #[arg(long, env = "TIDINGS_DATA_DIR", value_name = "DIR", default_value = "./data")]
    pub data_dir: Option<String>,
    /// Base64 of 32 random bytes (openssl rand -base64 32): the key that seals DKIM private
    /// keys, webhook secrets and the tracking key in the store. Every node and operator command
    /// on one store needs the same. Unset: TIDINGS_SECRET_KEY_FILE.
    #[arg(long, env = "TIDINGS_SECRET_KEY", value_name = "BASE64", hide_env_values = true)]
    pub secret_key: Option<String>,
    /// A file holding that key instead. With neither set, secret.key in the data dir is
    /// generated on the first start (it protects a copy of the store made without the data
    /// dir).
    #[arg(long, env = "TIDINGS_SECRET_KEY_FILE", value_name = "FILE")]
    pub secret_key_file: Option<String>,
    /// During a change of that key (tidings-server secret-key rotate): the key the store's
    /// secrets were sealed with until now, base64 of 32 bytes. Opens secrets, never seals
    /// one; the store opens with either key's check. Unset once the rotation has finished.
    #[arg(long, env = "TIDINGS_PREVIOUS_SECRET_KEY", value_name = "BASE64", hide_env_values = true)]
    pub previous_secret_key: Option<String>,
    /// A file holding that previous key instead.
    #[arg(long, env = "TIDINGS_PREVIOUS_SECRET_KEY_FILE", value_name = "FILE")]
    pub previous_secret_key_file: Option<String>,
    /// HTTPS listener, IP:port (port 0 picks a free one and logs it).
    #[arg(long, env = "TIDINGS_LISTEN", value_name = "ADDR", default_value = "127.0.0.1:8443")]
    pub listen: Option<String>,
    /// PEM certificate chain, leaf first (with TIDINGS_TLS_KEY). Unset: a self-signed
    /// certificate is made once and kept in the data dir.
    #[arg(long, env = "TIDINGS_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<String>,
    /// PEM private key of that certificate (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "TIDINGS_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<String>,
    /// Full key of a fresh store's first workspace (tid_ and 40 letters or digits). Unset: one
    /// is generated and printed once on stdout.
    #[arg(long, env = "TIDINGS_BOOTSTRAP_KEY", value_name = "KEY", hide_env_values = true)]
    pub bootstrap_key: Option<String>,
    /// ip:port of the DNS resolver used for domain verification and MX lookups. Unset: the
    /// system's resolver.
    #[arg(long, env = "TIDINGS_DNS_SERVER", value_name = "ADDR")]
    pub dns_server: Option<String>,
    /// SPF term(s) the domains' SPF record must contain, e.g. include:_spf.example.net. The
    /// default authorises loopback only: with relay or mx delivery and this unset, a warning
    /// is logged and shown on every domain's SPF record.
    #[arg(long, env = "TIDINGS_SPF_INCLUDE", value_name = "TERMS", default_value = DEFAULT_SPF_MECHANISM)]
    pub spf_include: Option<String>,
    /// Largest request body (413 above); bytes, or with a unit (KiB, MiB, GiB; kB, MB, GB).
    #[arg(long, env = "TIDINGS_MAX_BODY_BYTES", value_name = "SIZE", default_value = "10MiB")]
    pub max_body_bytes: Option<String>,
    /// Largest body of POST /v1/messages (room for 40 MiB of base64 attachments); at least
    /// TIDINGS_MAX_BODY_BYTES.
    #[arg(long, env = "TIDINGS_MAX_SEND_BODY_BYTES", value_name = "SIZE", default_value = "56MiB")]
    pub max_send_body_bytes: Option<String>,
    /// Most request-body bytes (and large dashboard responses) held at once, all requests
    /// together; one workspace, or one client address without a key, holds at most half
    /// (never less than the largest body); a body that does not fit is answered 503 with
    /// Retry-After, and slow uploads lose their place to others. At least
    /// TIDINGS_MAX_SEND_BODY_BYTES.
    #[arg(long, env = "TIDINGS_MAX_BODY_BYTES_IN_FLIGHT", value_name = "SIZE", default_value = "128MiB")]
    pub max_body_bytes_in_flight: Option<String>,
    /// Most open HTTPS connections; over it new clients wait and idle connections are closed
    /// to make room.
    #[arg(long, env = "TIDINGS_MAX_CONNECTIONS", value_name = "N", default_value = "4096")]
    pub max_connections: Option<String>,
    /// Most open HTTPS connections from one client address (more are closed at once; raise it
    /// behind a proxy).
    #[arg(long, env = "TIDINGS_MAX_CONNECTIONS_PER_IP", value_name = "N", default_value = "128")]
    pub max_connections_per_ip: Option<String>,
    /// A connection (HTTP/1 or HTTP/2) with no request in flight for this long is closed.
    #[arg(long, env = "TIDINGS_IDLE_TIMEOUT", value_name = "DURATION", default_value = "60s")]
    pub idle_timeout: Option<String>,
    /// Longest a client may take over the TLS handshake.
    #[arg(long, env = "TIDINGS_HANDSHAKE_TIMEOUT", value_name = "DURATION", default_value = "10s")]
    pub handshake_timeout: Option<String>,
    /// Most requests in flight on one HTTP/2 connection.
    #[arg(long, env = "TIDINGS_HTTP2_MAX_STREAMS", value_name = "N", default_value = "100")]
    pub http2_max_streams: Option<String>,
    /// sled's page cache: memory grows with the data up to about this much, then stays.
    #[arg(long, env = "TIDINGS_STORE_CACHE", value_name = "SIZE", default_value = "256MiB")]
    pub store_cache: Option<String>,
    /// How long an Idempotency-Key is remembered (e.g. 90s, 12h).
    #[arg(long, env = "TIDINGS_IDEMPOTENCY_WINDOW", value_name = "DURATION", default_value = "24h")]
    pub idempotency_window: Option<String>,
    /// Log filter in RUST_LOG syntax (e.g. info,tidings_http=debug); logs go to stderr.
    /// tokio_postgres stays at info unless the filter names it.
    #[arg(long, env = "TIDINGS_LOG", value_name = "FILTER", default_value = "info")]
    pub log: Option<String>,
    /// relay, mx, outbox or hold. Unset: relay if TIDINGS_SMTP_RELAY is set, else outbox
    /// (.eml files in the data dir's outbox/); hold accepts and queues, delivering nothing.
    #[arg(long, env = "TIDINGS_DELIVERY", value_name = "MODE")]
    pub delivery: Option<String>,
    /// smtp://[user:pass@]host:port (STARTTLS when offered) or smtps://... (implicit TLS).
    #[arg(long, env = "TIDINGS_SMTP_RELAY", value_name = "URL", hide_env_values = true)]
    pub smtp_relay: Option<String>,
    /// Port for direct MX delivery.
    #[arg(long, env = "TIDINGS_MX_PORT", value_name = "PORT", default_value = "25")]
    pub mx_port: Option<String>,
    /// Allow direct MX delivery to loopback, private and link-local addresses (tests). Off: an
    /// MX resolving only to such addresses is never connected to, and the recipient fails.
    #[arg(long, env = "TIDINGS_MX_ALLOW_PRIVATE", value_name = "BOOL", default_value = "false")]
    pub mx_allow_private: Option<String>,
    /// MTA-STS (RFC 8461) for mx delivery, on or off. On: a recipient domain's policy in mode
    /// enforce is obeyed (only the MX hosts it lists, over STARTTLS with a valid certificate,
    /// or the message is Deferred naming the policy); in mode testing mail goes as without a
    /// policy and what enforce would have refused is logged as a warning.
    #[arg(long, env = "TIDINGS_MTA_STS", value_name = "BOOL", default_value = "on")]
    pub mta_sts: Option<String>,
    /// For tests and private CAs only: a PEM file of CA certificates that replaces the
    /// system's CA store for MTA-STS (the policy fetch and MX certificates under a policy).
    /// Unset: the system's store.
    #[arg(long, env = "TIDINGS_MTA_STS_CA_FILE", value_name = "FILE")]
    pub mta_sts_ca_file: Option<String>,
    /// For tests only: the port MTA-STS policies are fetched from over HTTPS (RFC 8461
    /// allows 443 only).
    #[arg(long, env = "TIDINGS_MTA_STS_PORT", value_name = "PORT", default_value = "443")]
    pub mta_sts_port: Option<String>,
    /// TOML file of per-site limits and adaptive rules for mx delivery: [default] and one
    /// table per MX host suffix ([".google.com"]) over the built-in ones. A bad file stops the
    /// start naming its line. Unset: the built-in limits. Read and checked only for now:
    /// delivery does not apply it yet.
    #[arg(long, env = "TIDINGS_SHAPING_FILE", value_name = "FILE")]
    pub shaping_file: Option<String>,
    /// Delays between delivery attempts, whole seconds each; when used up the message ends
    /// Bounced (Soft).
    #[arg(
        long,
        env = "TIDINGS_RETRY_SCHEDULE",
        value_name = "DURATIONS",
        default_value = "1m,5m,15m,30m,1h,2h,4h,8h,12h,12h,12h,12h,12h"
    )]
    pub retry_schedule: Option<String>,
    /// Domain of the per-message signed return path (bounces+MESSAGE_ID-SIGNATURE@DOMAIN), the
    /// only address bounce and complaint reports count at. Unset: the From address.
    #[arg(long, env = "TIDINGS_RETURN_PATH_DOMAIN", value_name = "DOMAIN")]
    pub return_path_domain: Option<String>,
    /// Public name of the host whose SMTP listener (TIDINGS_INBOUND_SMTP_LISTEN, on this node
    /// or another) takes bounces. Set, every domain's records also ask for an MX on
    /// bounces.DOMAIN naming it and an SPF record there; once both verify, that domain's mail
    /// goes with the envelope sender bounces+MESSAGE_ID-SIGNATURE@bounces.DOMAIN.
    #[arg(long, env = "TIDINGS_INBOUND_MX_HOST", value_name = "HOST")]
    pub inbound_mx_host: Option<String>,
    /// Name sent with EHLO by relay and mx delivery: this host's public name (the one the
    /// reverse DNS of its address gives), or an address literal such as [192.0.2.1]. Unset:
    /// the machine's host name. With mx delivery, a warning at start when it does not resolve
    /// to an address of this host.
    #[arg(long, env = "TIDINGS_EHLO_NAME", value_name = "NAME")]
    pub ehlo_name: Option<String>,
    /// How often domains not yet verified are checked again.
    #[arg(long, env = "TIDINGS_DOMAIN_RECHECK_INTERVAL", value_name = "DURATION", default_value = "10m")]
    pub domain_recheck_interval: Option<String>,
    /// How long a DKIM key pair replaced by a rotation stays published (Retiring) before its
    /// private keys are deleted, and how long it is then still listed (Retired).
    #[arg(long, env = "TIDINGS_DKIM_RETIRE_AFTER", value_name = "DURATION", default_value = "7d")]
    pub dkim_retire_after: Option<String>,
    /// Rotate the DKIM keys of Verified domains automatically once they are this old; off:
    /// only when asked (POST /v1/domains/{id}/rotate-dkim).
    #[arg(long, env = "TIDINGS_DKIM_ROTATE_EVERY", value_name = "DURATION", default_value = "off")]
    pub dkim_rotate_every: Option<String>,
    /// Longest one delivery attempt may take (connect 30s, each reply 60s, the message 3m,
    /// each capped by it).
    #[arg(long, env = "TIDINGS_SMTP_TIMEOUT", value_name = "DURATION", default_value = "5m")]
    pub smtp_timeout: Option<String>,
    /// Allow webhook URLs on loopback or private addresses and plain http.
    #[arg(long, env = "TIDINGS_WEBHOOK_ALLOW_PRIVATE", value_name = "BOOL", default_value = "false")]
    pub webhook_allow_private: Option<String>,
    /// Slack added to the longest an attempt can take to make the lease on claimed work:
    /// messages 2 x (TIDINGS_SMTP_TIMEOUT + 10s) + this, webhook deliveries 15s + this. How
    /// soon other nodes take over a crashed node's work.
    #[arg(long, env = "TIDINGS_LEASE_MARGIN", value_name = "DURATION", default_value = "60s")]
    pub lease_margin: Option<String>,
    /// Delays between webhook attempts; when used up the delivery is Failed.
    #[arg(
        long,
        env = "TIDINGS_WEBHOOK_RETRY_SCHEDULE",
        value_name = "DURATIONS",
        default_value = "5s,5m,30m,2h,5h,10h,10h"
    )]
    pub webhook_retry_schedule: Option<String>,
    /// ip:port of the bounce and complaint SMTP listener (needs TIDINGS_RETURN_PATH_DOMAIN or
    /// TIDINGS_INBOUND_MX_HOST).
    #[arg(long, env = "TIDINGS_INBOUND_SMTP_LISTEN", value_name = "ADDR")]
    pub inbound_smtp_listen: Option<String>,
    /// Most sessions on each SMTP listener (bounces and submission); at the cap a newcomer
    /// waits up to 10s while the session idle longest (1s or more) is closed to make room.
    #[arg(long, env = "TIDINGS_SMTP_MAX_SESSIONS", value_name = "N", default_value = "100")]
    pub smtp_max_sessions: Option<String>,
    /// Most sessions on each SMTP listener from one client: an IPv4 address or an IPv6 /64
    /// (more get 421 at once).
    #[arg(long, env = "TIDINGS_SMTP_MAX_SESSIONS_PER_IP", value_name = "N", default_value = "10")]
    pub smtp_max_sessions_per_ip: Option<String>,
    /// Message data each SMTP listener holds at once, all sessions together (a quarter of it
    /// per client); at least 10MiB, the largest message.
    #[arg(long, env = "TIDINGS_SMTP_DATA_BYTES_IN_FLIGHT", value_name = "SIZE", default_value = "64MiB")]
    pub smtp_data_bytes_in_flight: Option<String>,
    /// Largest inbound message the listener at TIDINGS_INBOUND_SMTP_LISTEN takes (552 over it).
    #[arg(long, env = "TIDINGS_INBOUND_MAX_MESSAGE_BYTES", value_name = "SIZE", default_value = "25MiB")]
    pub inbound_max_message_bytes: Option<String>,
    /// Messages one client (an IPv4 address or an IPv6 /64) may hand the inbound listener per
    /// minute (450 at MAIL over it).
    #[arg(long, env = "TIDINGS_INBOUND_MESSAGES_PER_MINUTE", value_name = "N", default_value = "100")]
    pub inbound_messages_per_minute: Option<String>,
    /// Inbound messages one workspace keeps at most (452 for new mail past it).
    #[arg(long, env = "TIDINGS_INBOUND_QUOTA_MESSAGES", value_name = "N", default_value = "10000")]
    pub inbound_quota_messages: Option<String>,
    /// Bytes of inbound mail one workspace keeps at most (raw and parsed; 452 past it).
    #[arg(long, env = "TIDINGS_INBOUND_QUOTA_BYTES", value_name = "SIZE", default_value = "1GiB")]
    pub inbound_quota_bytes: Option<String>,
    /// How long message bodies and timelines are kept (delivered or finished messages only;
    /// the status stays); off: forever.
    #[arg(long, env = "TIDINGS_RETENTION", value_name = "DURATION", default_value = "30d")]
    pub retention: Option<String>,
    /// How often the retention purge runs.
    #[arg(long, env = "TIDINGS_RETENTION_INTERVAL", value_name = "DURATION", default_value = "10m")]
    pub retention_interval: Option<String>,
    /// How far back the reputation guard's bounce and complaint rates look.
    #[arg(long, env = "TIDINGS_REPUTATION_WINDOW", value_name = "DURATION", default_value = "7d")]
    pub reputation_window: Option<String>,
    /// Recipients delivered or bounced in the window below which the guard judges nothing.
    #[arg(long, env = "TIDINGS_REPUTATION_MIN_VOLUME", value_name = "N", default_value = "200")]
    pub reputation_min_volume: Option<String>,
    /// How often each node judges every workspace's rates.
    #[arg(long, env = "TIDINGS_REPUTATION_CHECK_INTERVAL", value_name = "DURATION", default_value = "1m")]
    pub reputation_check_interval: Option<String>,
    /// Hard-bounce rate from which a ReputationWarning event goes out (a percentage, or off).
    #[arg(long, env = "TIDINGS_BOUNCE_RATE_WARN", value_name = "PERCENT", default_value = "4%")]
    pub bounce_rate_warn: Option<String>,
    /// Hard-bounce rate from which sending from the domain (or workspace) is paused.
    #[arg(long, env = "TIDINGS_BOUNCE_RATE_PAUSE", value_name = "PERCENT", default_value = "8%")]
    pub bounce_rate_pause: Option<String>,
    /// Complaint rate from which a ReputationWarning event goes out (a percentage, or off).
    #[arg(long, env = "TIDINGS_COMPLAINT_RATE_WARN", value_name = "PERCENT", default_value = "0.08%")]
    pub complaint_rate_warn: Option<String>,
    /// Complaint rate from which sending from the domain (or workspace) is paused.
    #[arg(long, env = "TIDINGS_COMPLAINT_RATE_PAUSE", value_name = "PERCENT", default_value = "0.3%")]
    pub complaint_rate_pause: Option<String>,
    /// After SIGTERM, how long to keep accepting requests with /readyz answering 503 before
    /// draining (for load balancers).
    #[arg(long, env = "TIDINGS_SHUTDOWN_DELAY", value_name = "DURATION", default_value = "0s")]
    pub shutdown_delay: Option<String>,
    /// ip:port of the SMTP submission listener (e.g. 0.0.0.0:587): STARTTLS with the HTTPS
    /// certificate, then AUTH PLAIN or LOGIN with an API key as the password.
    #[arg(long, env = "TIDINGS_SUBMISSION_LISTEN", value_name = "ADDR")]
    pub submission_listen: Option<String>,
    /// ip:port of the same with implicit TLS (e.g. 0.0.0.0:465).
    #[arg(long, env = "TIDINGS_SUBMISSION_TLS_LISTEN", value_name = "ADDR")]
    pub submission_tls_listen: Option<String>,
    /// Load balancers in front of the server: IPs and CIDR networks, comma-separated (e.g.
    /// 10.0.0.0/8,192.0.2.7). From those, the client is the right-most address of
    /// X-Forwarded-For that is not one of them. Unset: the TCP peer, the header ignored.
    #[arg(long, env = "TIDINGS_TRUSTED_PROXIES", value_name = "LIST")]
    pub trusted_proxies: Option<String>,
    /// /metrics answers only this bearer token (16-256 printable characters). Unset: open,
    /// like the probes.
    #[arg(long, env = "TIDINGS_METRICS_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// The operator's API (/v1/operator/sites: the delivery sites, suspend and resume) and
    /// the `sites` command answer only this bearer token (16-256 printable characters).
    /// Unset: not served.
    #[arg(long, env = "TIDINGS_OPERATOR_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub operator_token: Option<String>,
    /// ip:port of a plain-HTTP listener serving only /metrics (e.g. 127.0.0.1:9090); the
    /// HTTPS listener then no longer serves it.
    #[arg(long, env = "TIDINGS_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Base of open and click tracking URLs. Unset: https:// and the address the HTTPS
    /// listener bound.
    #[arg(long, env = "TIDINGS_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// The web dashboard on the HTTPS listener (sign in with an API key); off: the API only.
    #[arg(long, env = "TIDINGS_DASHBOARD", value_name = "BOOL", default_value = "on")]
    pub dashboard: Option<String>,
    /// postgres://user:pass@host:5432/db: keep the data in PostgreSQL instead of sled
    /// (several nodes may share it; migrations run at start or by migrate). Unset: sled in the
    /// data dir.
    #[arg(long, env = "TIDINGS_DATABASE_URL", value_name = "URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Most pooled connections this node opens to PostgreSQL (1-1000); it opens one more,
    /// which listens for changes to webhooks, domains and senders.
    #[arg(long, env = "TIDINGS_DATABASE_POOL", value_name = "N", default_value = "16")]
    pub database_pool: Option<String>,
}

/// One declared setting, as [`super::Sources`] reads it.
#[derive(Debug, Clone)]
pub(super) struct Declared {
    /// The clap id (the field's name), to find a command-line value.
    pub id: String,
    /// The environment variable, `TIDINGS_…`.
    pub var: String,
    /// The command-line flag, `--…`.
    pub flag: String,
    /// The default, when there is one.
    pub default: Option<String>,
}

impl Settings {
    /// Every environment variable the settings declare, in `--help` order.
    pub fn variables() -> Vec<String> {
        declared().into_iter().map(|d| d.var).collect()
    }
}

/// The declarations of [`Settings`], read back from clap.
pub(super) fn declared() -> Vec<Declared> {
    use clap::Args as _;
    let command = Settings::augment_args(clap::Command::new("tidings-server"));
    command
        .get_arguments()
        .filter_map(|arg| {
            let var = arg.get_env()?.to_str()?.to_owned();
            let default = arg.get_default_values().first().and_then(|d| d.to_str()).map(str::to_owned);
            let flag = format!("--{}", arg.get_long()?);
            Some(Declared { id: arg.get_id().to_string(), var, flag, default })
        })
        .collect()
}
