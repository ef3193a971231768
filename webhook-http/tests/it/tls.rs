//! HTTPS receivers: a certificate trusted through `extra_roots` is accepted, an untrusted one
//! fails with a TLS error before any request is sent.

use std::sync::Arc;

use crate::common::{Receiver, TestResult, dns, reply, request, sender};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tidings_core::ports::{WebhookResponse, WebhookSender};
use tidings_webhook_http::SenderSettings;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::aws_lc_rs;

/// A self-signed certificate for `hooks.test`, `localhost` and 127.0.0.1, and an acceptor
/// presenting it.
fn self_signed() -> Result<(CertificateDer<'static>, TlsAcceptor), Box<dyn std::error::Error + Send + Sync>> {
    let names = ["hooks.test", "localhost", "127.0.0.1"].map(str::to_owned).to_vec();
    let rcgen::CertifiedKey { cert, signing_key } = rcgen::generate_simple_self_signed(names)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(signing_key.serialize_der()));
    let config = ServerConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)?;
    Ok((cert.der().clone(), TlsAcceptor::from(Arc::new(config))))
}

fn trusting(root: CertificateDer<'static>) -> SenderSettings {
    SenderSettings { allow_private: true, extra_roots: vec![root], ..SenderSettings::default() }
}

#[tokio::test]
async fn a_receiver_with_a_trusted_certificate_is_reached_by_address_and_by_name() -> TestResult {
    let dns = dns().await?;
    let (certificate, acceptor) = self_signed()?;
    let receiver = Receiver::start_tls(acceptor, || reply(200, &[], "secure")).await?;
    let sender = sender(&dns, trusting(certificate));

    let by_address = sender.post(&request(&format!("https://127.0.0.1:{}/hook", receiver.port()))).await;
    let by_name = sender.post(&request(&format!("https://hooks.test:{}/hook", receiver.port()))).await;

    let expected = WebhookResponse::Answered { status: 200, retry_after: None, body_prefix: "secure".into() };
    assert_eq!(by_address, expected);
    assert_eq!(by_name, expected);
    assert_eq!(receiver.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn an_untrusted_certificate_fails_with_a_tls_error() -> TestResult {
    let dns = dns().await?;
    let (_certificate, acceptor) = self_signed()?;
    let receiver = Receiver::start_tls(acceptor, || reply(200, &[], "")).await?;
    let settings = SenderSettings { allow_private: true, ..SenderSettings::default() };

    let response = sender(&dns, settings).post(&request(&format!("https://127.0.0.1:{}/hook", receiver.port()))).await;

    let WebhookResponse::Failed { reason } = response else { panic!("{response:?}") };
    assert_eq!(reason, "TLS error: invalid peer certificate: UnknownIssuer");
    assert!(receiver.requests().is_empty());
    Ok(())
}
