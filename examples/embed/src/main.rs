//! Try it locally: Tidings inside an axum application, in one file, with stand-ins for the
//! outside world (an SMTP relay and a DNS server on loopback, a throwaway sealing key and
//! data directory), so it runs anywhere. `cargo run -p tidings-example-embed` sends one
//! message through the library, waits until the relay has it, reads it back through the
//! API mounted under `/mail`, and exits 0. For a service that keeps running, see
//! `examples/embed-production`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tidings_core::email::{EmailAddress, Mailbox};
use tidings_core::inprocess::{Content, Email};
use tidings_core::model::MessageStatus;
use tidings_core::ports::{SystemClock, SystemRandom};
use tidings_core::runtime::{Runtime, RuntimeSettings};
use tidings_core::sealing::{Sealer, SealingKey};
use tidings_core::usecases::{CoreConfig, CreateApiKeyRequest, Tidings};
use tidings_dns::HickoryDns;
use tidings_dns::testing::TestDnsServer;
use tidings_http::{ApiState, HttpConfig};
use tidings_storage_sled::SledStore;
use tidings_transport_smtp::testing::SmtpSink;
use tidings_transport_smtp::{RelayConfig, RelayMailer};
use tidings_webhook_http::{HttpWebhookSender, SenderSettings};
use tower::ServiceExt as _;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    // Test pieces: a relay and a DNS server on loopback, a key and a store thrown away on exit.
    let relay = SmtpSink::start().await?;
    let dns_server = TestDnsServer::start([]).await?;
    let data = tempfile::tempdir()?;
    let store =
        Arc::new(SledStore::open(data.path().join("store"), Sealer::new(&SealingKey::generate(&SystemRandom)))?);
    let dns = Arc::new(HickoryDns::with_server(dns_server.addr())?);
    let core = Tidings::new(store, Arc::new(SystemClock), Arc::new(SystemRandom), dns.clone(), CoreConfig::default());
    let mailer = RelayMailer::new(&RelayConfig::from_url(&format!("smtp://{}", relay.addr()))?)?;
    let webhooks = HttpWebhookSender::new(dns, SenderSettings::default())?;
    let runtime =
        Runtime::start(core.clone(), Some(Arc::new(mailer)), Some(Arc::new(webhooks)), RuntimeSettings::default())
            .await;

    // A workspace and a sending domain whose records the stand-in DNS publishes.
    let acme = core.ensure_workspace("acme").await?;
    let domain = acme.ensure_domain("example.com").await?;
    for record in &domain.records {
        dns_server.set_txt(&record.name, &[record.value.as_str()]).await;
    }
    core.domains().verify(acme.principal(), domain.id).await?;

    // Send through the library: no API key, typed fields.
    let email = Email::new(
        Mailbox::parse("Acme <hello@example.com>")?,
        EmailAddress::parse("ann@example.net")?,
        Content::text("Welcome", "Hello from inside your own service."),
    );
    let id = acme.send(email.idempotency_key("welcome-ann")).await?.message.id;

    // The runtime delivers it in the background.
    let delivered = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match acme.get_message(id).await? {
                m if m.status == MessageStatus::Delivered => return Ok::<_, Error>(m),
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .map_err(|_| "not delivered within 30 s")??;
    let received = relay.messages().len();
    println!("{id} {:?}: the relay received {received} message(s) for {}", delivered.status, delivered.to);
    if received != 1 {
        return Err(format!("the relay received {received} messages, not 1").into());
    }

    // The same message through the API mounted under /mail, with a key for other services.
    let key = core.keys().create(acme.principal(), CreateApiKeyRequest::default()).await?.plaintext;
    let app = Router::new().nest_service("/mail", tidings_http::router(ApiState::new(core, HttpConfig::default())));
    let read = axum::http::Request::get(format!("/mail/v1/messages/{id}"))
        .header("authorization", format!("Bearer {}", key.expose()))
        .body(axum::body::Body::empty())?;
    let body = http_body_util::BodyExt::collect(app.oneshot(read).await?.into_body()).await?.to_bytes();
    let status = serde_json::from_slice::<serde_json::Value>(&body)?["data"]["status"].clone();
    println!("GET /mail/v1/messages/{id}: status {status}");
    if status != "Delivered" {
        return Err(format!("the mounted API answered {status}").into());
    }
    runtime.shutdown().await;
    Ok(())
}
