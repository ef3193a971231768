//! Tidings inside your own axum application, in one file: the use cases called directly,
//! the REST API mounted under the application's own path, and the background runtime that
//! delivers through an SMTP relay. `cargo run -p tidings-example-embed` sends one message,
//! waits until it is `Delivered`, prints that and exits 0.
//!
//! The relay and the DNS server are stand-ins started on loopback, so the example runs
//! anywhere; in your service the relay is your provider's and the DNS records are published
//! at your DNS host.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tidings_core::model::MessageStatus;
use tidings_core::ports::{SystemClock, SystemRandom};
use tidings_core::runtime::{Runtime, RuntimeSettings};
use tidings_core::sealing::{Sealer, SealingKey};
use tidings_core::usecases::{AddDomainRequest, CoreConfig, SendRequest, Tidings};
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
    // Stand-ins for the outside world: an SMTP relay and a DNS server, on loopback.
    let relay = SmtpSink::start().await?;
    let dns_server = TestDnsServer::start([]).await?;

    // The store: sled in a directory of the application's. Its secrets (DKIM keys, webhook
    // secrets) are sealed with this key; keep yours apart from the store and reuse it.
    let data = tempfile::tempdir()?;
    let sealer = Sealer::new(&SealingKey::generate(&SystemRandom));
    let store = Arc::new(SledStore::open(data.path().join("store"), sealer)?);
    let dns = Arc::new(HickoryDns::with_server(dns_server.addr())?);
    let core = Tidings::new(store, Arc::new(SystemClock), Arc::new(SystemRandom), dns.clone(), CoreConfig::default());

    // The background loops: delivery through the relay, webhooks, re-checks, purges.
    let mailer = RelayMailer::new(&RelayConfig::from_url(&format!("smtp://{}", relay.addr()))?)?;
    let webhooks = HttpWebhookSender::new(dns, SenderSettings::default())?;
    let runtime =
        Runtime::start(core.clone(), Some(Arc::new(mailer)), Some(Arc::new(webhooks)), RuntimeSettings::default())
            .await;

    // A workspace, its first API key, and a sending domain whose records are published.
    let (_, first_key) = core.create_workspace("acme", None).await?;
    let who = core.authenticate(first_key.plaintext.expose()).await?;
    let domain = core.add_domain(&who, AddDomainRequest { domain: Some("example.com".into()) }).await?;
    for record in &domain.records {
        dns_server.set_txt(&record.name, &[record.value.as_str()]).await;
    }
    core.verify_domain(&who, domain.id).await?;

    // The application's own routes, with the Tidings API mounted under /mail.
    let api = tidings_http::router(ApiState::new(core.clone(), HttpConfig::default()));
    let app = Router::new().route("/", get(|| async { "my application" })).nest_service("/mail", api);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let served = app.clone().into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, served).await });

    // Send through the library, not over HTTP.
    let request = SendRequest {
        from: Some("Acme <hello@example.com>".into()),
        to: Some("ann@example.net".into()),
        subject: Some("Welcome".into()),
        text: Some("Hello from inside your own service.".into()),
        ..SendRequest::default()
    };
    let sent = core.send_message(&who, request, Some("welcome-ann")).await?;
    let id = sent.message.id;

    // The runtime delivers it in the background.
    let delivered = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let message = core.get_message(&who, id).await?;
            if message.status == MessageStatus::Delivered {
                return Ok::<_, Error>(message);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .map_err(|_| "not delivered within 30 s")??;
    let received = relay.messages();
    println!("{id} {:?}: the relay received {} message(s) for {}", delivered.status, received.len(), delivered.to);
    if received.len() != 1 {
        return Err(format!("the relay received {} messages, not 1", received.len()).into());
    }

    // The same message through the mounted API, as your other services would read it.
    let read = axum::http::Request::get(format!("/mail/v1/messages/{id}"))
        .header("authorization", format!("Bearer {}", first_key.plaintext.expose()))
        .body(axum::body::Body::empty())?;
    let response = app.oneshot(read).await?;
    let body = http_body_util::BodyExt::collect(response.into_body()).await?.to_bytes();
    let json: serde_json::Value = serde_json::from_slice(&body)?;
    let status = &json["data"]["status"];
    println!("GET /mail/v1/messages/{id}: status {status}");
    if status != "Delivered" {
        return Err(format!("the mounted API answered {json}").into());
    }

    runtime.shutdown().await;
    server.abort();
    Ok(())
}
