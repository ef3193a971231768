//! [`ConnectionTls`]: how the SMTP connection that carried a message was secured, as the
//! transport saw it (contract §12, "TLS policy"). The transport reports it with its receipt
//! (`SendReceipt::tls`) and the delivery worker keeps it in the `Delivered` event's details.
//!
//! The negotiated protocol version is not part of it: lettre 0.11, which speaks SMTP for
//! the transports, keeps the rustls connection to itself and says only whether the
//! connection is encrypted and which certificates the server sent.

use serde::{Deserialize, Serialize};

/// Most characters of a certificate's refusal kept in an event.
const MAX_REASON_CHARS: usize = 300;

/// How a connection was secured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Wire", try_from = "Wire")]
pub enum ConnectionTls {
    /// No TLS: the server did not offer STARTTLS, STARTTLS failed (opportunistic TLS retries
    /// in plaintext), or it failed with this server within the last hour.
    Plaintext,
    /// TLS, with what is known of the server's certificate.
    Tls(CertificateCheck),
}

/// What was checked of the server's certificate on a TLS connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateCheck {
    /// Valid for the server's name and chained to a trusted root: the connection required
    /// it (a relay, an MTA-STS `enforce` policy, a site requiring TLS), or it was judged so.
    Verified,
    /// Accepted without a check (opportunistic TLS between MTAs, docs/decisions.md "MTA-STS
    /// as built"): it encrypts, but nothing says who the server is.
    NotVerified,
    /// Judged and found wanting (with MTA-STS on, every opportunistic connection is judged
    /// as `enforce` would), yet used, since nothing required it: why it would be refused.
    Invalid(String),
}

impl CertificateCheck {
    /// A refused certificate, its reason cut to a length an event keeps.
    pub fn invalid(reason: &str) -> Self {
        Self::Invalid(reason.chars().take(MAX_REASON_CHARS).collect())
    }
}

/// The JSON form: `{"plaintext": true}`, `{"plaintext": false, "certificate": "verified"}`,
/// `{"plaintext": false, "certificate": "invalid", "certificateError": "..."}`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    plaintext: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    certificate: Option<WireCertificate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    certificate_error: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum WireCertificate {
    Verified,
    Unverified,
    Invalid,
}

impl From<ConnectionTls> for Wire {
    fn from(tls: ConnectionTls) -> Self {
        let (certificate, certificate_error) = match tls {
            ConnectionTls::Plaintext => return Self { plaintext: true, certificate: None, certificate_error: None },
            ConnectionTls::Tls(CertificateCheck::Verified) => (WireCertificate::Verified, None),
            ConnectionTls::Tls(CertificateCheck::NotVerified) => (WireCertificate::Unverified, None),
            ConnectionTls::Tls(CertificateCheck::Invalid(reason)) => (WireCertificate::Invalid, Some(reason)),
        };
        Self { plaintext: false, certificate: Some(certificate), certificate_error }
    }
}

impl TryFrom<Wire> for ConnectionTls {
    type Error = &'static str;

    fn try_from(wire: Wire) -> Result<Self, Self::Error> {
        match (wire.plaintext, wire.certificate) {
            (true, None) => Ok(Self::Plaintext),
            (true, Some(_)) => Err("a plaintext connection has no certificate"),
            (false, None) => Err("a TLS connection names its certificate check"),
            (false, Some(WireCertificate::Verified)) => Ok(Self::Tls(CertificateCheck::Verified)),
            (false, Some(WireCertificate::Unverified)) => Ok(Self::Tls(CertificateCheck::NotVerified)),
            (false, Some(WireCertificate::Invalid)) => {
                Ok(Self::Tls(CertificateCheck::Invalid(wire.certificate_error.unwrap_or_default())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_kind_has_its_json_form_and_reads_back() {
        let cases = [
            (ConnectionTls::Plaintext, json!({"plaintext": true})),
            (ConnectionTls::Tls(CertificateCheck::Verified), json!({"plaintext": false, "certificate": "verified"})),
            (
                ConnectionTls::Tls(CertificateCheck::NotVerified),
                json!({"plaintext": false, "certificate": "unverified"}),
            ),
            (
                ConnectionTls::Tls(CertificateCheck::invalid("expired")),
                json!({"plaintext": false, "certificate": "invalid", "certificateError": "expired"}),
            ),
        ];
        for (tls, expected) in cases {
            assert_eq!(serde_json::to_value(&tls).unwrap(), expected);
            assert_eq!(serde_json::from_value::<ConnectionTls>(expected).unwrap(), tls);
        }
    }

    #[test]
    fn contradictions_do_not_read() {
        for bad in [json!({"plaintext": true, "certificate": "verified"}), json!({"plaintext": false})] {
            assert!(serde_json::from_value::<ConnectionTls>(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_long_refusal_is_cut() {
        let CertificateCheck::Invalid(reason) = CertificateCheck::invalid(&"x".repeat(1000)) else { unreachable!() };
        assert_eq!(reason.chars().count(), MAX_REASON_CHARS);
    }
}
