//! [`RelayMailer`]: every message through one configured relay (`TIDINGS_SMTP_RELAY`), over pooled connections.

use async_trait::async_trait;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, CertificateStore, TlsParameters};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tidings_core::ports::{Mailer, OutboundEmail, SendError, SendReceipt};

use crate::attempt;
use crate::config::{ConfigError, client_id, human, validate_common};
use crate::pool::Destinations;
use crate::relay_config::{RelayConfig, RelaySecurity};
use crate::session::{Connector, Target, TlsPlan};

/// The one destination of a relay mailer.
const RELAY: &str = "relay";

/// Delivers through a relay: STARTTLS when offered (`smtp://`) or implicit TLS
/// (`smtps://`), the certificate always verified against the system's CA store plus
/// [`RelayConfig::trusted_ca_pem`]; AUTH PLAIN or LOGIN when the URL has credentials;
/// connections reused across messages, at most [`PoolSettings::max_connections`] at once.
///
/// [`PoolSettings::max_connections`]: crate::PoolSettings::max_connections
pub struct RelayMailer {
    connector: Connector,
    destinations: Destinations,
}

impl std::fmt::Debug for RelayMailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayMailer").field("remote", &self.connector.remote).finish_non_exhaustive()
    }
}

impl RelayMailer {
    /// A mailer for `config`. Loads the system's CA certificates once, here. Connects only
    /// when the first message is sent.
    pub fn new(config: &RelayConfig) -> Result<Self, ConfigError> {
        validate_common(&config.timeouts, &config.pool)?;
        let endpoint = &config.endpoint;
        let parameters = tls_parameters(&endpoint.host, config.trusted_ca_pem.as_deref())?;
        let tls = match endpoint.security {
            RelaySecurity::StartTls => TlsPlan::StartTls { parameters, verifies: true },
            RelaySecurity::ImplicitTls => TlsPlan::Implicit(parameters),
        };
        let credentials =
            endpoint.credentials.as_ref().map(|c| Credentials::new(c.username.clone(), c.password.expose().clone()));
        let connector = Connector {
            target: Target::Name { host: endpoint.host.clone(), port: endpoint.port },
            remote: endpoint.remote(),
            tls,
            credentials,
            plaintext_auth_allowed: config.allow_plaintext_auth || endpoint.is_loopback(),
            hello: client_id(config.ehlo_name.as_deref())?,
            timeouts: config.timeouts,
            // The relay is the operator's choice, not a tenant's: it may well be private.
            public_peer_only: false,
            audit: None,
        };
        Ok(Self { connector, destinations: Destinations::new(config.pool, 1) })
    }
}

#[async_trait]
impl Mailer for RelayMailer {
    async fn send(&self, email: &OutboundEmail) -> Result<SendReceipt, SendError> {
        let pool = self.destinations.get(RELAY);
        let total = self.connector.timeouts.total;
        match tokio::time::timeout(total, attempt::deliver(&pool, &self.connector, None, email)).await {
            Ok(result) => result.map(|delivered| delivered.receipt).map_err(attempt::AttemptError::into_send_error),
            Err(_elapsed) => Err(SendError::Unreachable {
                reason: format!(
                    "gave up after {} (the time allowed for one delivery) sending through {}; {} of its connections were busy",
                    human(total),
                    self.connector.remote,
                    pool.busy(),
                ),
            }),
        }
    }
}

/// TLS settings that verify `host`'s certificate against the system's store plus `extra_pem`.
fn tls_parameters(host: &str, extra_pem: Option<&str>) -> Result<TlsParameters, ConfigError> {
    let mut builder = TlsParameters::builder(host.to_owned()).certificate_store(CertificateStore::Default);
    if let Some(pem) = extra_pem {
        let certificates = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| ConfigError::CaCertificate(error.into()))?;
        if certificates.is_empty() {
            return Err(ConfigError::CaCertificate("the PEM text holds no CERTIFICATE block".into()));
        }
        for der in certificates {
            let certificate =
                Certificate::from_der(der.to_vec()).map_err(|error| ConfigError::CaCertificate(error.into()))?;
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build_rustls().map_err(|source| ConfigError::Tls { host: host.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_bundle_without_certificates_is_refused() {
        assert!(matches!(tls_parameters("relay.example", Some("not pem")), Err(ConfigError::CaCertificate(_))));
        assert!(tls_parameters("relay.example", None).is_ok());
    }

    #[test]
    fn relays_are_built_without_connecting() {
        let config = RelayConfig::from_url("smtps://me:secret@relay.example").unwrap();
        let mailer = RelayMailer::new(&config).unwrap();
        assert_eq!(mailer.connector.remote, "relay.example:465");
        assert!(!mailer.connector.plaintext_auth_allowed, "a remote relay gets the password over TLS only");
        assert!(!format!("{mailer:?}").contains("secret"));
    }

    #[cfg(feature = "testing")]
    #[tokio::test]
    async fn credentials_never_cross_the_network_in_clear_text() {
        use tidings_core::email::EmailAddress;
        use tidings_core::ids::MessageId;

        use crate::testing::{SinkConfig, SmtpSink};

        let auth = Some(("me".to_owned(), "secret".to_owned()));
        let sink = SmtpSink::start_with(SinkConfig { auth, ..SinkConfig::default() }).await.unwrap();
        let config = RelayConfig::from_url(&format!("smtp://me:secret@127.0.0.1:{}", sink.port())).unwrap();
        let mut mailer = RelayMailer::new(&config).unwrap();
        // As if 127.0.0.1 were a relay elsewhere on the network.
        mailer.connector.plaintext_auth_allowed = false;
        let email = OutboundEmail {
            message_id: MessageId::from_bytes([1; 16]),
            provider_message_id: "1@acme.test".to_owned(),
            envelope_from: EmailAddress::parse("from@acme.test").unwrap(),
            envelope_to: EmailAddress::parse("to@example.com").unwrap(),
            raw: (&b"Subject: x\r\n\r\nx\r\n"[..]).into(),
        };

        let error = mailer.send(&email).await.unwrap_err();

        assert!(
            matches!(&error, SendError::Local { reason } if reason.contains("did not offer STARTTLS")),
            "{error:?}"
        );
        assert_eq!(sink.message_count(), 0);
    }
}
