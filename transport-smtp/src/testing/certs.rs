//! A throwaway CA and a server certificate it signed, generated per sink (SMTP or policy
//! server), so a test can trust exactly this server (the CA's certificate) and nothing else.

use std::io;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::aws_lc_rs;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The sink's TLS material.
pub(super) struct SinkCertificates {
    /// The CA certificate to trust, PEM.
    pub(super) ca_pem: String,
    /// The same, DER.
    pub(super) ca_der: CertificateDer<'static>,
    /// Accepts TLS with the server certificate.
    pub(super) acceptor: TlsAcceptor,
}

/// A CA, and a certificate signed by it for `names` (host names and IP addresses).
pub(super) fn generate(names: Vec<String>) -> io::Result<SinkCertificates> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(io::Error::other)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "Tidings test sink CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate().map_err(io::Error::other)?;
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(io::Error::other)?;

    let mut params = CertificateParams::new(names).map_err(io::Error::other)?;
    params.distinguished_name.push(DnType::CommonName, "Tidings test sink");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(io::Error::other)?;
    let certificate = params.signed_by(&key, &ca).map_err(io::Error::other)?;

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = ServerConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(vec![certificate.der().clone()], key)
        .map_err(io::Error::other)?;
    Ok(SinkCertificates { ca_pem: ca.pem(), ca_der: ca.der().clone(), acceptor: TlsAcceptor::from(Arc::new(config)) })
}
