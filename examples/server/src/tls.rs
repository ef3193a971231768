//! The TLS server configuration: the operator's PEM files, or a self-signed certificate made
//! on first start and kept in `<data>/tls/` so clients can pin it across restarts.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

use crate::config::{Config, ConfigError};
use crate::data_dir;

/// A ready TLS configuration and what to tell the operator about it.
#[derive(Debug)]
pub struct Tls {
    /// For the acceptor.
    pub server_config: Arc<ServerConfig>,
    /// The certificate file in use.
    pub cert_path: PathBuf,
    /// SHA-256 of the leaf certificate, `AB:CD:…`.
    pub fingerprint: String,
    /// Whether the certificate was made (now or on an earlier start) by the server.
    pub self_signed: bool,
}

/// Loads the configured certificate, or the generated one (making it if absent).
pub fn load(config: &Config) -> Result<Tls, ConfigError> {
    let (cert_path, key_path, self_signed) = match &config.tls {
        Some(files) => (files.cert.clone(), files.key.clone(), false),
        None => {
            let dir = config.generated_tls_dir();
            let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
            if !(cert.exists() && key.exists()) {
                generate(&dir, &cert, &key, config.listen).map_err(|e| {
                    ConfigError::new("TIDINGS_DATA_DIR", None, format!("cannot write {}: {e}", dir.display()))
                })?;
            }
            (cert, key, true)
        }
    };
    // With a generated certificate the files are ours, so a problem is the data dir's.
    let (cert_var, key_var) =
        if self_signed { ("TIDINGS_DATA_DIR", "TIDINGS_DATA_DIR") } else { ("TIDINGS_TLS_CERT", "TIDINGS_TLS_KEY") };
    let certs = read_certs(&cert_path).map_err(|m| ConfigError::new(cert_var, None, m))?;
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
        ConfigError::new(key_var, None, format!("cannot read a private key from {}: {e}", key_path.display()))
    })?;
    let fingerprint = fingerprint(&certs[0]);
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut server_config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::new(cert_var, None, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| ConfigError::new(key_var, None, format!("the key does not suit the certificate: {e}")))?;
    server_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Tls { server_config: Arc::new(server_config), cert_path, fingerprint, self_signed })
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

/// A self-signed certificate for `localhost`, `127.0.0.1`, `::1` and the listen address.
fn generate(dir: &Path, cert_path: &Path, key_path: &Path, listen: SocketAddr) -> io::Result<()> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    let ip = listen.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        names.push(ip.to_string());
    }
    let made = rcgen::generate_simple_self_signed(names).map_err(io::Error::other)?;
    data_dir::create_private_dir(dir)?;
    // The certificate is no secret, but the data dir is the server's alone: 600 like the rest.
    data_dir::write_private(key_path, made.signing_key.serialize_pem().as_bytes(), false)?;
    data_dir::write_private(cert_path, made.cert.pem().as_bytes(), false)?;
    tracing::info!(path = %cert_path.display(), "generated a self-signed TLS certificate");
    Ok(())
}

fn fingerprint(cert: &CertificateDer<'_>) -> String {
    Sha256::digest(cert.as_ref()).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(data: &Path) -> Config {
        let data = data.to_owned();
        Config::load(None, move |k| (k == "TIDINGS_DATA_DIR").then(|| data.display().to_string())).unwrap()
    }

    #[test]
    fn a_generated_certificate_is_kept_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = load(&config(dir.path())).unwrap();
        assert!(first.self_signed);
        assert_eq!(first.cert_path, dir.path().join("tls/cert.pem"));
        assert_eq!(first.fingerprint.len(), 32 * 3 - 1);
        let second = load(&config(dir.path())).unwrap();
        assert_eq!(second.fingerprint, first.fingerprint);
    }

    #[test]
    fn unreadable_files_name_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem").display().to_string();
        let config = Config::load(None, |k| k.starts_with("TIDINGS_TLS_").then(|| missing.clone())).unwrap();
        assert_eq!(load(&config).unwrap_err().var, "TIDINGS_TLS_CERT");
    }
}
