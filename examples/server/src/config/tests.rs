//! Parsing and validation of every setting.

use std::collections::BTreeMap;

use super::*;

fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: BTreeMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    Config::load(None, |k| vars.get(k).cloned())
}

#[test]
fn defaults_are_the_declared_ones() {
    let config = load(&[]).unwrap();
    assert_eq!(config.listen, "127.0.0.1:8443".parse().unwrap());
    assert_eq!(config.data_dir, PathBuf::from("./data"));
    assert_eq!(config.max_body_bytes, 10 * 1024 * 1024);
    assert_eq!(config.max_send_body_bytes, 56 * 1024 * 1024);
    assert_eq!(config.idempotency_window, Duration::from_secs(86_400));
    assert_eq!(config.spf_mechanism(), DEFAULT_SPF_MECHANISM);
    assert_eq!(config.spf_warning(), None, "no warning with the outbox transport");
    assert_eq!(config.delivery.mode, Delivery::Outbox);
    assert_eq!(config.delivery.mx_port, 25);
    assert!(!config.delivery.mx_allow_private, "MX delivery reaches public addresses only by default");
    assert_eq!(config.delivery.mta_sts, MtaStsConfig { enabled: true, ca_file: None, port: 443 }, "MTA-STS is on");
    assert_eq!(config.delivery.domain_recheck_interval, Duration::from_secs(600));
    assert_eq!(config.delivery.smtp_timeout, Duration::from_secs(300));
    assert_eq!(config.delivery.dkim_retire_after, Duration::from_secs(7 * 86_400));
    assert_eq!(config.delivery.dkim_rotate_every, None, "automatic DKIM rotation is off");
    assert_eq!(config.store_cache_bytes, 256 << 20);
    assert_eq!(config.database_pool, 16);
    assert_eq!(config.delivery.retry_schedule, RetrySchedule::default());
    assert_eq!(config.webhook_retry_schedule.to_string(), "5s,5m,30m,2h,5h,10h,10h");
    assert!(!config.webhook_allow_private);
    assert!(config.tls.is_none() && config.bootstrap_key.is_none());
    assert!(config.database_url.is_none(), "sled unless a database is named");
    assert_eq!(config.lease_margin, Duration::from_secs(60));
    assert_eq!(config.retention, Some(Duration::from_secs(30 * 86_400)));
    assert_eq!(config.retention_interval, Duration::from_secs(600));
    assert_eq!(config.shutdown_delay, Duration::ZERO);
    assert_eq!(
        config.smtp_limits,
        SmtpLimits { max_sessions: 100, max_sessions_per_ip: 10, data_bytes_in_flight: 64 << 20 }
    );
}

#[test]
fn dkim_rotation_settings_are_durations_and_rotation_may_be_off() {
    let config = load(&[("TIDINGS_DKIM_RETIRE_AFTER", "90s"), ("TIDINGS_DKIM_ROTATE_EVERY", "180d")]).unwrap();
    assert_eq!(config.delivery.dkim_retire_after, Duration::from_secs(90));
    assert_eq!(config.delivery.dkim_rotate_every, Some(Duration::from_secs(180 * 86_400)));
    assert_eq!(load(&[("TIDINGS_DKIM_ROTATE_EVERY", "OFF")]).unwrap().delivery.dkim_rotate_every, None);
    let bad = load(&[("TIDINGS_DKIM_RETIRE_AFTER", "a week")]).unwrap_err().to_string();
    assert!(bad.contains("TIDINGS_DKIM_RETIRE_AFTER"), "{bad}");
    assert!(load(&[("TIDINGS_DKIM_ROTATE_EVERY", "often")]).is_err());
}

#[test]
fn retention_is_a_duration_or_off_and_the_shutdown_delay_may_be_zero() {
    let config = load(&[("TIDINGS_RETENTION", "2s"), ("TIDINGS_RETENTION_INTERVAL", "500ms")]).unwrap();
    assert_eq!(
        (config.retention, config.retention_interval),
        (Some(Duration::from_secs(2)), Duration::from_millis(500))
    );
    assert_eq!(load(&[("TIDINGS_RETENTION", "off")]).unwrap().retention, None);
    assert_eq!(load(&[("TIDINGS_SHUTDOWN_DELAY", "0")]).unwrap().shutdown_delay, Duration::ZERO);
    assert_eq!(load(&[("TIDINGS_SHUTDOWN_DELAY", "5s")]).unwrap().shutdown_delay, Duration::from_secs(5));
    for (var, value) in [("TIDINGS_RETENTION", "0s"), ("TIDINGS_RETENTION", "forever"), ("TIDINGS_SHUTDOWN_DELAY", "x")]
    {
        let e = load(&[(var, value)]).unwrap_err();
        assert!(e.to_string().contains(var), "{e}");
    }
}

#[test]
fn bad_values_name_the_variable() {
    for (var, value) in [
        ("TIDINGS_LISTEN", "localhost"),
        ("TIDINGS_BOOTSTRAP_KEY", "tid_short"),
        ("TIDINGS_IDEMPOTENCY_WINDOW", "soon"),
        ("TIDINGS_IDEMPOTENCY_WINDOW", "0s"),
        ("TIDINGS_MAX_BODY_BYTES", "10 MX"),
        ("TIDINGS_MAX_BODY_BYTES", "0MiB"),
        ("TIDINGS_MX_PORT", "0"),
        ("TIDINGS_RETRY_SCHEDULE", "1s,,2s"),
        ("TIDINGS_RETRY_SCHEDULE", "1s,500ms"),
        ("TIDINGS_WEBHOOK_RETRY_SCHEDULE", "5s,later"),
        ("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:2525"),
        ("TIDINGS_SUBMISSION_LISTEN", "localhost:587"),
        ("TIDINGS_SUBMISSION_TLS_LISTEN", "465"),
        ("TIDINGS_PUBLIC_URL", "ftp://track.example"),
        ("TIDINGS_SMTP_RELAY", "http://relay"),
        ("TIDINGS_DELIVERY", "pigeon"),
        ("TIDINGS_DELIVERY", "relay"),
        ("TIDINGS_SPF_INCLUDE", "~all"),
        ("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "maybe"),
        ("TIDINGS_MX_ALLOW_PRIVATE", "maybe"),
        ("TIDINGS_MTA_STS", "maybe"),
        ("TIDINGS_MTA_STS_PORT", "0"),
        ("TIDINGS_MTA_STS_CA_FILE", "/nonexistent/tidings-test-ca.pem"),
        ("TIDINGS_SMTP_MAX_SESSIONS", "0"),
        ("TIDINGS_SMTP_MAX_SESSIONS_PER_IP", "many"),
        ("TIDINGS_SMTP_DATA_BYTES_IN_FLIGHT", "9MiB"),
        ("TIDINGS_LOG", "info,[[["),
        ("TIDINGS_LOG", "verbose"),
        ("TIDINGS_LOG", "info,tidings=loud"),
        ("TIDINGS_RETURN_PATH_DOMAIN", "not a domain"),
        ("TIDINGS_EHLO_NAME", "vm"),
        ("TIDINGS_EHLO_NAME", "mail server.example"),
        ("TIDINGS_DOMAIN_RECHECK_INTERVAL", "often"),
        ("TIDINGS_SMTP_TIMEOUT", "0s"),
        ("TIDINGS_LEASE_MARGIN", "0s"),
        ("TIDINGS_LEASE_MARGIN", "a bit"),
        ("TIDINGS_STORE_CACHE", "lots"),
        ("TIDINGS_DATABASE_URL", "mysql://localhost/tidings"),
        ("TIDINGS_DATABASE_URL", "host=localhost dbname=tidings"),
        ("TIDINGS_DATABASE_POOL", "0"),
        ("TIDINGS_DATABASE_POOL", "many"),
    ] {
        let err = load(&[(var, value)]).unwrap_err();
        assert_eq!(err.var, var, "{value}: {err}");
        assert!(err.to_string().starts_with(var), "{err}");
    }
}

#[test]
fn secrets_are_not_echoed() {
    let err = load(&[("TIDINGS_SMTP_RELAY", "ftp://user:hunter2@relay")]).unwrap_err();
    assert!(!err.to_string().contains("hunter2"), "{err}");
    let err = load(&[("TIDINGS_BOOTSTRAP_KEY", "tid_secretsecret")]).unwrap_err();
    assert!(!err.to_string().contains("secretsecret"), "{err}");
    for text in ["mysql://user:hunter2@db/tidings", "postgres://:hunter2@/tidings", "postgres://u:hunter2@[::1/x"] {
        let shown = match load(&[("TIDINGS_DATABASE_URL", text)]) {
            Ok(config) => format!("{:?} {}", config.database_url, config.database_url.as_ref().unwrap().redacted()),
            Err(err) => err.to_string(),
        };
        assert!(!shown.contains("hunter2"), "{text}: {shown}");
    }
}

#[test]
fn a_database_url_switches_to_postgres_and_hides_its_password() {
    let config = load(&[("TIDINGS_DATABASE_URL", "postgres://tidings:p%40ss+w0rd@db.internal:5433/mail")]).unwrap();

    let url = config.database_url.expect("a database URL");
    assert_eq!(url.expose(), "postgres://tidings:p%40ss+w0rd@db.internal:5433/mail", "connect with it as written");
    assert_eq!(url.redacted(), "postgres://tidings:***@db.internal:5433/mail");
    assert!(!format!("{url:?}").contains("p%40ss"), "{url:?}");
    assert_eq!(
        url.scrub("password authentication failed: p@ss+w0rd / p%40ss+w0rd"),
        "password authentication failed: *** / ***",
        "both the written and the decoded password are masked"
    );
}

#[test]
fn a_database_url_without_a_password_is_kept_whole() {
    for text in ["postgresql://postgres@127.0.0.1/tidings", "postgres://localhost/tidings?sslmode=disable"] {
        let url = load(&[("TIDINGS_DATABASE_URL", text)]).unwrap().database_url.unwrap();
        assert_eq!((url.expose(), url.redacted()), (text, text));
    }
}

#[test]
fn values_parse() {
    let config = load(&[
        ("TIDINGS_LISTEN", "[::1]:0"),
        ("TIDINGS_MAX_BODY_BYTES", "512KiB"),
        ("TIDINGS_MAX_SEND_BODY_BYTES", "64MiB"),
        ("TIDINGS_STORE_CACHE", "128MiB"),
        ("TIDINGS_IDEMPOTENCY_WINDOW", "1h30m"),
        ("TIDINGS_RETRY_SCHEDULE", "1s, 2s,1m30s"),
        ("TIDINGS_SMTP_RELAY", "smtps://u:p@relay.example:465"),
        ("TIDINGS_SPF_INCLUDE", "include:_spf.example.net  ip4:192.0.2.0/24"),
        ("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("TIDINGS_WEBHOOK_RETRY_SCHEDULE", "1s,3s"),
        ("TIDINGS_LEASE_MARGIN", "5s"),
        ("TIDINGS_DATABASE_POOL", "40"),
        ("TIDINGS_TLS_CERT", ""),
        ("TIDINGS_LOG", "tidings=debug, info,tidings_http[request]=trace,hyper=OFF"),
    ])
    .unwrap();
    assert_eq!(config.log, "tidings=debug, info,tidings_http[request]=trace,hyper=OFF");
    assert_eq!(config.listen.port(), 0);
    assert_eq!(config.max_body_bytes, 512 * 1024);
    assert_eq!(config.max_send_body_bytes, 64 * 1024 * 1024);
    assert_eq!(config.store_cache_bytes, 128 << 20);
    assert_eq!(config.database_pool, 40);
    assert_eq!(config.idempotency_window, Duration::from_secs(5400));
    assert_eq!(
        config.delivery.retry_schedule.delays(),
        [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(90)]
    );
    assert_eq!(config.delivery.mode, Delivery::Relay);
    assert_eq!(config.spf_mechanism(), "include:_spf.example.net ip4:192.0.2.0/24");
    assert!(config.webhook_allow_private);
    assert_eq!(config.webhook_retry_schedule.delays(), [Duration::from_secs(1), Duration::from_secs(3)]);
    assert_eq!(config.lease_margin, Duration::from_secs(5));
    assert!(config.inbound_smtp_listen.is_none() && config.public_url.is_none());
    assert!(config.submission_listen.is_none());
    assert!(config.tls.is_none(), "an empty value counts as unset");
}

#[test]
fn the_spf_warning_is_for_relay_and_mx_delivery_with_the_spf_term_unset() {
    let relay = ("TIDINGS_SMTP_RELAY", "smtp://relay.example:25");
    for mode in ["relay", "mx"] {
        let warning = load(&[("TIDINGS_DELIVERY", mode), relay]).unwrap().spf_warning();
        let warning = warning.unwrap_or_else(|| panic!("{mode}: a warning"));
        assert!(warning.contains("TIDINGS_SPF_INCLUDE") && warning.contains("ip4:127.0.0.1"), "{warning}");
        assert!(warning.contains(&format!("TIDINGS_DELIVERY={mode}")), "{warning}");
        // Set, even to the default, it is the operator's choice.
        for term in ["include:_spf.example.net", DEFAULT_SPF_MECHANISM] {
            let config = load(&[("TIDINGS_DELIVERY", mode), relay, ("TIDINGS_SPF_INCLUDE", term)]).unwrap();
            assert_eq!(config.spf_warning(), None, "{mode} with {term}");
            assert_eq!(config.spf_mechanism(), term);
        }
    }
    assert!(load(&[relay]).unwrap().spf_warning().is_some(), "a relay URL alone means relay delivery");
    for mode in ["outbox", "hold"] {
        assert_eq!(load(&[("TIDINGS_DELIVERY", mode)]).unwrap().spf_warning(), None, "{mode}");
    }
}

#[test]
fn tls_needs_both_files() {
    assert_eq!(load(&[("TIDINGS_TLS_CERT", "c.pem")]).unwrap_err().var, "TIDINGS_TLS_KEY");
    assert_eq!(load(&[("TIDINGS_TLS_KEY", "k.pem")]).unwrap_err().var, "TIDINGS_TLS_CERT");
}

#[test]
fn the_environment_wins_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tidings.toml");
    std::fs::write(
        &path,
        "listen = \"127.0.0.1:9000\"\ndata_dir = \"/srv/tidings\"\nretry_schedule = [\"1s\", \"2s\"]\n",
    )
    .unwrap();
    let env = |k: &str| (k == "TIDINGS_LISTEN").then(|| "127.0.0.1:9001".to_owned());
    let config = Config::load(Some(&path), env).unwrap();
    assert_eq!(config.listen.port(), 9001);
    assert_eq!(config.data_dir, PathBuf::from("/srv/tidings"));
    assert_eq!(config.delivery.retry_schedule.delays().len(), 2);

    std::fs::write(&path, "listen = \"nowhere\"\n").unwrap();
    let err = Config::load(Some(&path), |_| None).unwrap_err();
    assert_eq!(err.origin, Some(Origin::File(path.clone())));
    std::fs::write(&path, "lisen = \"127.0.0.1:1\"\n").unwrap();
    assert_eq!(Config::load(Some(&path), |_| None).unwrap_err().var, "TIDINGS_CONFIG");
}

#[test]
fn the_ehlo_name_comes_from_the_environment_or_the_file_and_a_bad_one_is_refused() {
    assert_eq!(load(&[]).unwrap().delivery.ehlo_name, None, "unset: the machine's host name");
    let config = load(&[("TIDINGS_EHLO_NAME", "Mail.Sender.Test")]).unwrap();
    assert_eq!(config.delivery.ehlo_name.map(|n| n.to_string()).as_deref(), Some("mail.sender.test"));
    let config = load(&[("TIDINGS_EHLO_NAME", "[192.0.2.1]")]).unwrap();
    assert_eq!(config.delivery.ehlo_name, Some(EhloName::Address("192.0.2.1".parse().unwrap())));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tidings.toml");
    std::fs::write(&path, "ehlo_name = \"out.sender.test\"\n").unwrap();
    let config = Config::load(Some(&path), |_| None).unwrap();
    assert_eq!(config.delivery.ehlo_name.map(|n| n.to_string()).as_deref(), Some("out.sender.test"));

    std::fs::write(&path, "ehlo_name = \"localhost\"\n").unwrap();
    let err = Config::load(Some(&path), |_| None).unwrap_err();
    assert_eq!((err.var.as_str(), err.origin.clone()), ("TIDINGS_EHLO_NAME", Some(Origin::File(path.clone()))));
    assert_eq!(
        err.to_string(),
        format!(
            "TIDINGS_EHLO_NAME (from config file {}): `localhost` is not a fully qualified host name such as \
             mail.example.com (it must have at least two labels, like example.com), nor an address literal such as \
             [192.0.2.1]",
            path.display()
        )
    );
    let err = load(&[("TIDINGS_EHLO_NAME", "192.0.2.1")]).unwrap_err();
    assert!(err.to_string().starts_with("TIDINGS_EHLO_NAME (from environment): `192.0.2.1` is not"), "{err}");
}

#[test]
fn the_inbound_listener_and_public_url_parse() {
    let config = load(&[
        ("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:2525"),
        ("TIDINGS_RETURN_PATH_DOMAIN", "bounces.example"),
        ("TIDINGS_PUBLIC_URL", "https://track.example/mail"),
        ("TIDINGS_SUBMISSION_LISTEN", "0.0.0.0:587"),
        ("TIDINGS_SUBMISSION_TLS_LISTEN", "[::]:465"),
    ])
    .unwrap();
    assert_eq!(config.inbound_smtp_listen, Some("127.0.0.1:2525".parse().unwrap()));
    assert_eq!(config.submission_listen, Some("0.0.0.0:587".parse().unwrap()));
    assert_eq!(config.submission_tls_listen, Some("[::]:465".parse().unwrap()));
    assert_eq!(config.public_url.unwrap().to_string(), "https://track.example/mail");
}

#[test]
fn the_inbound_mx_host_turns_on_the_domains_own_return_paths_and_is_enough_for_the_listener() {
    let config =
        load(&[("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:2525"), ("TIDINGS_INBOUND_MX_HOST", "MX.Tidings.Example.")])
            .unwrap();
    assert_eq!(config.delivery.inbound_mx_host.unwrap().as_str(), "mx.tidings.example");
    assert_eq!(config.delivery.return_path_domain, None);

    let err = load(&[("TIDINGS_INBOUND_MX_HOST", "192.0.2.1:25")]).unwrap_err();
    assert!(err.to_string().starts_with("TIDINGS_INBOUND_MX_HOST (from environment): `192.0.2.1:25` is not"), "{err}");
    let err = load(&[("TIDINGS_INBOUND_SMTP_LISTEN", "127.0.0.1:2525")]).unwrap_err();
    assert!(err.to_string().contains("needs TIDINGS_RETURN_PATH_DOMAIN or TIDINGS_INBOUND_MX_HOST"), "{err}");
}

#[test]
fn delivery_can_be_put_on_hold() {
    let config = load(&[("TIDINGS_DELIVERY", "HOLD")]).unwrap();
    assert_eq!(config.delivery.mode, Delivery::Hold);
}

#[test]
fn the_secret_key_is_base64_of_32_bytes_from_one_source_and_never_echoed() {
    let key = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
    let config = load(&[("TIDINGS_SECRET_KEY", key)]).unwrap();
    assert_eq!(config.secret_key, Some(SealingKey::from_base64(key).unwrap()));
    assert!(config.secret_key_file.is_none());
    assert!(!format!("{config:?}").contains(key), "Debug hides the key");
    let config = load(&[("TIDINGS_SECRET_KEY_FILE", "/run/secrets/tidings")]).unwrap();
    assert_eq!(config.secret_key_file, Some(PathBuf::from("/run/secrets/tidings")));
    assert!(config.secret_key.is_none());

    let short = load(&[("TIDINGS_SECRET_KEY", "c2VjcmV0LXRleHQ=")]).unwrap_err();
    assert_eq!(short.var, "TIDINGS_SECRET_KEY");
    assert!(short.message.contains("11 bytes") && !short.to_string().contains("c2VjcmV0"), "{short}");
    let both = load(&[("TIDINGS_SECRET_KEY", key), ("TIDINGS_SECRET_KEY_FILE", "/k")]).unwrap_err();
    assert!(both.message.contains("not both"), "{both}");
}

#[test]
fn the_previous_secret_key_is_read_like_the_key_from_one_source() {
    let key = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
    let config = load(&[("TIDINGS_PREVIOUS_SECRET_KEY", key)]).unwrap();
    assert_eq!(config.previous_secret_key, Some(SealingKey::from_base64(key).unwrap()));
    assert!(!format!("{config:?}").contains(key), "Debug hides the key");
    let config = load(&[("TIDINGS_PREVIOUS_SECRET_KEY_FILE", "/run/secrets/old")]).unwrap();
    assert_eq!(config.previous_secret_key_file, Some(PathBuf::from("/run/secrets/old")));
    let short = load(&[("TIDINGS_PREVIOUS_SECRET_KEY", "c2VjcmV0LXRleHQ=")]).unwrap_err();
    assert_eq!(short.var, "TIDINGS_PREVIOUS_SECRET_KEY");
    assert!(!short.to_string().contains("c2VjcmV0"), "{short}");
    let both = load(&[("TIDINGS_PREVIOUS_SECRET_KEY", key), ("TIDINGS_PREVIOUS_SECRET_KEY_FILE", "/k")]).unwrap_err();
    assert!(both.message.contains("not both"), "{both}");
}

#[test]
fn connection_limits_and_the_body_budget_have_defaults_and_are_checked() {
    let config = load(&[]).unwrap();
    assert_eq!(config.max_body_bytes_in_flight, 128 << 20);
    assert_eq!(config.connections.idle_timeout, Duration::from_secs(60));
    assert_eq!(config.connections.handshake_timeout, Duration::from_secs(10));
    assert_eq!((config.connections.max_connections, config.connections.max_connections_per_ip), (4096, 128));
    assert_eq!(config.connections.http2_max_streams, 100);

    let config = load(&[
        ("TIDINGS_MAX_CONNECTIONS", "50"),
        ("TIDINGS_MAX_CONNECTIONS_PER_IP", "5"),
        ("TIDINGS_IDLE_TIMEOUT", "2s"),
        ("TIDINGS_HANDSHAKE_TIMEOUT", "500ms"),
        ("TIDINGS_HTTP2_MAX_STREAMS", "10"),
        ("TIDINGS_MAX_BODY_BYTES_IN_FLIGHT", "1GiB"),
    ])
    .unwrap();
    assert_eq!(
        config.connections,
        ConnectionConfig {
            max_connections: 50,
            max_connections_per_ip: 5,
            idle_timeout: Duration::from_secs(2),
            handshake_timeout: Duration::from_millis(500),
            http2_max_streams: 10,
        }
    );
    assert_eq!(config.max_body_bytes_in_flight, 1 << 30);

    for (var, value) in [
        ("TIDINGS_MAX_CONNECTIONS", "0"),
        ("TIDINGS_MAX_CONNECTIONS_PER_IP", "many"),
        ("TIDINGS_IDLE_TIMEOUT", "0s"),
        ("TIDINGS_HANDSHAKE_TIMEOUT", "soon"),
        ("TIDINGS_HTTP2_MAX_STREAMS", "100000"),
        // Smaller than the largest send: such a send could never be served.
        ("TIDINGS_MAX_BODY_BYTES_IN_FLIGHT", "10MiB"),
    ] {
        let err = load(&[(var, value)]).unwrap_err();
        assert_eq!(err.var, var, "{value}: {err}");
    }
}

#[test]
fn trusted_proxies_and_the_metrics_settings_parse_and_default_to_none() {
    let config = load(&[]).unwrap();
    assert!(config.trusted_proxies.is_empty());
    assert!(config.metrics_token.is_none() && config.metrics_listen.is_none());

    let config = load(&[
        ("TIDINGS_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.7,fd00::/8"),
        ("TIDINGS_METRICS_TOKEN", "scrape-me-if-you-can-0123456789"),
        ("TIDINGS_METRICS_LISTEN", "127.0.0.1:9090"),
    ])
    .unwrap();
    assert!(config.trusted_proxies.contains("10.20.30.40".parse().unwrap()));
    assert!(config.trusted_proxies.contains("192.0.2.7".parse().unwrap()));
    assert!(!config.trusted_proxies.contains("192.0.2.8".parse().unwrap()));
    assert!(config.metrics_token.as_ref().is_some_and(|t| t.matches("scrape-me-if-you-can-0123456789")));
    assert_eq!(config.metrics_listen, Some("127.0.0.1:9090".parse().unwrap()));
}

#[test]
fn bad_proxies_and_metrics_settings_name_the_variable_and_never_echo_the_token() {
    for (var, value) in [
        ("TIDINGS_TRUSTED_PROXIES", "10.0.0.0/8,lb.internal"),
        ("TIDINGS_TRUSTED_PROXIES", "10.0.0.0/40"),
        ("TIDINGS_METRICS_LISTEN", "localhost:9090"),
        ("TIDINGS_METRICS_TOKEN", "tooshort"),
        ("TIDINGS_METRICS_TOKEN", "has spaces in the token text"),
    ] {
        let e = load(&[(var, value)]).unwrap_err();
        assert_eq!(e.var, var, "{e}");
        if var == "TIDINGS_METRICS_TOKEN" {
            assert!(!e.to_string().contains(value), "the token leaked: {e}");
        }
    }
}

#[test]
fn declared_defaults_agree_with_the_libraries_constants() {
    let config = load(&[]).unwrap();
    assert_eq!(config.max_send_body_bytes, tidings_http::DEFAULT_MAX_SEND_BODY_BYTES);
    assert_eq!(config.max_body_bytes_in_flight, tidings_http::DEFAULT_MAX_BODY_BYTES_IN_FLIGHT);
    assert_eq!(config.delivery.retry_schedule, RetrySchedule::default());
    assert_eq!(config.webhook_retry_schedule, tidings_core::delivery::webhook_retry_schedule());
    assert_eq!(config.spf_include, None, "the default is not a choice of the operator's");
}

#[test]
fn every_setting_is_a_variable_and_a_file_key() {
    let variables = Settings::variables();
    let declared = <Settings as clap::Args>::augment_args(clap::Command::new("t")).get_arguments().count();
    assert_eq!(variables.len(), declared, "every argument has a variable: {variables:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tidings.toml");
    for var in &variables {
        assert!(var.starts_with("TIDINGS_"), "{var}");
        // A value no setting accepts: the error names the variable, read from the file.
        let key = var["TIDINGS_".len()..].to_ascii_lowercase();
        std::fs::write(&path, format!("{key} = \"~\"\n")).unwrap();
        let result = Config::load(Some(&path), |_| None);
        // Paths accept any text (the TLS pair then misses its other half).
        const ANY_TEXT: &[&str] = &[
            "TIDINGS_DATA_DIR",
            "TIDINGS_SECRET_KEY_FILE",
            "TIDINGS_PREVIOUS_SECRET_KEY_FILE",
            "TIDINGS_TLS_CERT",
            "TIDINGS_TLS_KEY",
        ];
        if ANY_TEXT.contains(&var.as_str()) {
            assert!(result.as_ref().err().is_none_or(|e| e.var != "TIDINGS_CONFIG"), "{key}: {result:?}");
        } else {
            let e = result.unwrap_err();
            assert_eq!((e.var.as_str(), e.origin), (var.as_str(), Some(Origin::File(path.clone()))), "{key}");
        }
    }
}

#[test]
fn a_flag_wins_over_the_environment_which_wins_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tidings.toml");
    std::fs::write(&path, "idle_timeout = \"5s\"\nhandshake_timeout = \"6s\"\nlease_margin = \"7s\"\n").unwrap();
    let env = |k: &str| matches!(k, "TIDINGS_HANDSHAKE_TIMEOUT" | "TIDINGS_LEASE_MARGIN").then(|| "8s".to_owned());
    let flag = |id: &str| (id == "lease_margin").then(|| "9s".to_owned());
    let config = Config::from_sources(&Sources::load(Some(&path), env, flag).unwrap()).unwrap();
    assert_eq!(config.connections.idle_timeout, Duration::from_secs(5), "the file over the default");
    assert_eq!(config.connections.handshake_timeout, Duration::from_secs(8), "the environment over the file");
    assert_eq!(config.lease_margin, Duration::from_secs(9), "the flag over the environment");

    let env_empty = |k: &str| (k == "TIDINGS_IDLE_TIMEOUT").then(String::new);
    let config = Config::load(Some(&path), env_empty).unwrap();
    assert_eq!(config.connections.idle_timeout, Duration::from_secs(5), "an empty variable counts as unset");

    let err =
        Config::from_sources(&Sources::load(None, |_| None, |id| (id == "listen").then(|| "x".to_owned())).unwrap())
            .unwrap_err();
    assert_eq!(
        err.to_string(),
        "TIDINGS_LISTEN (from command line --listen): `x` is not an IP address and port such as 127.0.0.1:8443 or [::1]:8443"
    );
}

#[test]
fn bad_durations_and_sizes_name_the_variable_and_where_it_came_from() {
    let err = load(&[("TIDINGS_IDEMPOTENCY_WINDOW", "a while")]).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "TIDINGS_IDEMPOTENCY_WINDOW (from environment): `a while` is not a duration such as 500ms, 90s, 15m, 24h or 1h30m"
        ),
        "{err}"
    );
    let err = load(&[("TIDINGS_STORE_CACHE", "lots")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "TIDINGS_STORE_CACHE (from environment): `lots` is not a size in bytes such as 1048576, 512KiB or 10MiB"
    );
    let err = load(&[("TIDINGS_MAX_BODY_BYTES", "0")]).unwrap_err();
    assert_eq!(err.to_string(), "TIDINGS_MAX_BODY_BYTES (from environment): `0` must be more than zero");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tidings.toml");
    std::fs::write(&path, "smtp_timeout = \"5 fortnights\"\n").unwrap();
    let err = Config::load(Some(&path), |_| None).unwrap_err();
    assert_eq!((err.var.as_str(), err.origin), ("TIDINGS_SMTP_TIMEOUT", Some(Origin::File(path.clone()))));
}

#[test]
fn sizes_and_durations_take_the_crates_syntax_and_everything_accepted_before() {
    for (text, bytes) in [
        ("1048576", 1 << 20),
        ("512KiB", 512 << 10),
        ("10MiB", 10 << 20),
        ("1KiB", 1 << 10),
        ("10 MiB", 10 << 20),
        ("64B", 64),
    ] {
        assert_eq!(load(&[("TIDINGS_MAX_BODY_BYTES", text)]).unwrap().max_body_bytes, bytes, "{text}");
    }
    // New with bytesize: SI units are powers of 1000, units are case-insensitive.
    assert_eq!(load(&[("TIDINGS_MAX_BODY_BYTES", "10MB")]).unwrap().max_body_bytes, 10_000_000);
    assert_eq!(load(&[("TIDINGS_MAX_BODY_BYTES", "2mib")]).unwrap().max_body_bytes, 2 << 20);
    for (text, secs) in [("500ms", 0), ("90s", 90), ("15m", 900), ("24h", 86_400), ("1h30m", 5_400), ("2d", 172_800)] {
        let window = load(&[("TIDINGS_IDEMPOTENCY_WINDOW", text)]).unwrap().idempotency_window;
        assert_eq!(window.as_secs(), secs, "{text}");
    }
    // New with humantime: spaces between parts, long unit names, weeks.
    assert_eq!(load(&[("TIDINGS_IDEMPOTENCY_WINDOW", "1h 30m")]).unwrap().idempotency_window.as_secs(), 5_400);
    assert_eq!(load(&[("TIDINGS_RETENTION", "1week")]).unwrap().retention, Some(Duration::from_secs(7 * 86_400)));
}

#[test]
fn risky_settings_are_named_and_safe_ones_are_not() {
    assert!(load(&[]).unwrap().risky_settings().is_empty(), "the defaults are safe");
    let safe = load(&[
        ("TIDINGS_METRICS_LISTEN", "127.0.0.1:9090"),
        ("TIDINGS_PUBLIC_URL", "https://track.example"),
        ("TIDINGS_SMTP_RELAY", "smtp://127.0.0.1:2525"),
    ])
    .unwrap();
    assert!(safe.risky_settings().is_empty(), "{:?}", safe.risky_settings());
    let risky = load(&[
        ("TIDINGS_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("TIDINGS_MX_ALLOW_PRIVATE", "true"),
        ("TIDINGS_METRICS_LISTEN", "0.0.0.0:9090"),
        ("TIDINGS_PUBLIC_URL", "http://track.example"),
        ("TIDINGS_SMTP_RELAY", "smtp://relay.example:587"),
    ])
    .unwrap()
    .risky_settings();
    let named = [
        "TIDINGS_WEBHOOK_ALLOW_PRIVATE",
        "TIDINGS_MX_ALLOW_PRIVATE",
        "TIDINGS_METRICS_LISTEN",
        "TIDINGS_PUBLIC_URL",
        "TIDINGS_SMTP_RELAY",
    ];
    assert_eq!(risky.len(), named.len(), "{risky:?}");
    for (warning, var) in risky.iter().zip(named) {
        assert!(warning.starts_with(var), "{warning}");
    }
}

#[test]
fn the_shaping_file_is_read_at_start_and_a_bad_one_names_the_file_and_line() {
    assert_eq!(load(&[]).unwrap().delivery.shaping, ShapingTable::default(), "unset: the built-in table");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shaping.toml");
    let name = path.to_str().unwrap();

    std::fs::write(&path, "[default]\nconnection_limit = 3\n\n[\".google.com\"]\nmax_message_rate = \"fast\"\n")
        .unwrap();
    let err = load(&[("TIDINGS_SHAPING_FILE", name)]).unwrap_err();
    assert_eq!((err.var.as_str(), err.origin.clone()), ("TIDINGS_SHAPING_FILE", Some(Origin::Env)));
    assert!(
        err.message.starts_with(&format!("{name}: line 5, \".google.com\".max_message_rate: `fast` is not a rate")),
        "{err}"
    );

    let missing = dir.path().join("missing.toml");
    let err = load(&[("TIDINGS_SHAPING_FILE", missing.to_str().unwrap())]).unwrap_err();
    assert!(err.message.starts_with("cannot read the shaping file") && err.message.contains("missing.toml"), "{err}");

    std::fs::write(&path, "[default]\nconnection_limit = 3\n").unwrap();
    let config = load(&[("TIDINGS_SHAPING_FILE", name)]).unwrap();
    assert_eq!(config.delivery.shaping.default_limits().connection_limit, 3);
    assert_eq!(config.delivery.shaping, ShapingTable::from_toml("[default]\nconnection_limit = 3\n").unwrap());
}

#[test]
fn the_mta_sts_ca_file_is_read_at_start_and_one_without_a_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cas.pem");
    let name = path.to_str().unwrap();
    let first = rcgen::generate_simple_self_signed(vec!["ca-one.test".to_owned()]).unwrap().cert;
    let second = rcgen::generate_simple_self_signed(vec!["ca-two.test".to_owned()]).unwrap().cert;
    std::fs::write(&path, format!("{}{}", first.pem(), second.pem())).unwrap();
    let config = load(&[("TIDINGS_MTA_STS_CA_FILE", name), ("TIDINGS_MTA_STS_PORT", "8443")]).unwrap();
    let ca_file = config.delivery.mta_sts.ca_file.clone().expect("the CA file");
    assert_eq!(ca_file.path, path);
    assert_eq!(ca_file.certificates, [first.der().clone(), second.der().clone()]);
    assert_eq!(config.delivery.mta_sts.port, 8443);

    std::fs::write(&path, "not a certificate\n").unwrap();
    let err = load(&[("TIDINGS_MTA_STS_CA_FILE", name)]).unwrap_err();
    assert_eq!((err.var.as_str(), err.origin.clone()), ("TIDINGS_MTA_STS_CA_FILE", Some(Origin::Env)));
    assert_eq!(err.message, format!("{name} holds no PEM certificate"));
}

#[test]
fn mta_sts_settings_that_weaken_it_are_risky() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ca.pem");
    let ca = rcgen::generate_simple_self_signed(vec!["ca.test".to_owned()]).unwrap().cert;
    std::fs::write(&path, ca.pem()).unwrap();
    assert!(load(&[("TIDINGS_DELIVERY", "mx")]).unwrap().risky_settings().is_empty(), "on by default");
    let off = load(&[("TIDINGS_MTA_STS", "off")]).unwrap();
    assert!(off.risky_settings().is_empty(), "off matters to mx delivery only");
    let risky = load(&[
        ("TIDINGS_DELIVERY", "mx"),
        ("TIDINGS_MTA_STS", "off"),
        ("TIDINGS_MTA_STS_CA_FILE", path.to_str().unwrap()),
        ("TIDINGS_MTA_STS_PORT", "8443"),
    ])
    .unwrap()
    .risky_settings();
    let named = ["TIDINGS_MTA_STS is off", "TIDINGS_MTA_STS_CA_FILE replaces", "TIDINGS_MTA_STS_PORT is 8443"];
    assert_eq!(risky.len(), named.len(), "{risky:?}");
    for (warning, start) in risky.iter().zip(named) {
        assert!(warning.starts_with(start), "{warning}");
    }
    assert!(risky[1].contains("1 certificate(s)") && risky[1].contains(path.to_str().unwrap()), "{}", risky[1]);
}
