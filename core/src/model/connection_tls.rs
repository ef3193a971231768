//! [`ConnectionTls`]: how the SMTP connection that carried a message was secured, as the
//! transport saw it (contract §12, "TLS policy"). The transport reports it with its receipt
//! (`SendReceipt::tls`) and the delivery worker keeps it in the `Delivered` event's details.
//!
//! The negotiated protocol version ([`TlsVersion`]) is known only for STARTTLS: lettre 0.11,
//! which speaks SMTP for the transports, keeps the rustls connection to itself, but STARTTLS
//! runs over a TCP stream the transport hands it, and the transport reads the version from
//! the server's ServerHello as it passes (`transport-smtp/src/tls_version.rs`). With TLS
//! from the first byte (a relay on `smtps://`) lettre opens the socket itself, and the
//! version is not known.

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
    /// TLS, with what is known of the server's certificate and of the protocol.
    Tls {
        /// What was checked of the server's certificate.
        certificate: CertificateCheck,
        /// The protocol version the server chose; `None` when the transport could not see
        /// it, and in events recorded before it was kept.
        version: Option<TlsVersion>,
    },
}

/// A TLS protocol version, as the server's ServerHello chose it (RFC 8446 §4.1.3, with
/// `supported_versions` for TLS 1.3). Its JSON and display form is OpenSSL's: `"TLSv1.3"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TlsVersion {
    /// 0x0301.
    #[serde(rename = "TLSv1")]
    Tls1_0,
    /// 0x0302.
    #[serde(rename = "TLSv1.1")]
    Tls1_1,
    /// 0x0303.
    #[serde(rename = "TLSv1.2")]
    Tls1_2,
    /// 0x0304.
    #[serde(rename = "TLSv1.3")]
    Tls1_3,
}

impl TlsVersion {
    /// The version a ServerHello's protocol number names; `None` for SSL and for numbers
    /// no TLS standard has assigned.
    pub fn from_wire(number: u16) -> Option<Self> {
        match number {
            0x0301 => Some(Self::Tls1_0),
            0x0302 => Some(Self::Tls1_1),
            0x0303 => Some(Self::Tls1_2),
            0x0304 => Some(Self::Tls1_3),
            _ => None,
        }
    }

    /// Its name, as in JSON: `TLSv1.3`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tls1_0 => "TLSv1",
            Self::Tls1_1 => "TLSv1.1",
            Self::Tls1_2 => "TLSv1.2",
            Self::Tls1_3 => "TLSv1.3",
        }
    }
}

impl std::fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
/// `{"plaintext": false, "certificate": "invalid", "certificateError": "..."}`, with
/// `"tlsVersion": "TLSv1.3"` beside `certificate` when the version is known.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    plaintext: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    certificate: Option<WireCertificate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    certificate_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tls_version: Option<TlsVersion>,
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
        let (certificate, version) = match tls {
            ConnectionTls::Plaintext => {
                return Self { plaintext: true, certificate: None, certificate_error: None, tls_version: None };
            }
            ConnectionTls::Tls { certificate, version } => (certificate, version),
        };
        let (certificate, certificate_error) = match certificate {
            CertificateCheck::Verified => (WireCertificate::Verified, None),
            CertificateCheck::NotVerified => (WireCertificate::Unverified, None),
            CertificateCheck::Invalid(reason) => (WireCertificate::Invalid, Some(reason)),
        };
        Self { plaintext: false, certificate: Some(certificate), certificate_error, tls_version: version }
    }
}

impl TryFrom<Wire> for ConnectionTls {
    type Error = &'static str;

    fn try_from(wire: Wire) -> Result<Self, Self::Error> {
        let certificate = match (wire.plaintext, wire.certificate) {
            (true, None) if wire.tls_version.is_none() => return Ok(Self::Plaintext),
            (true, _) => return Err("a plaintext connection has no certificate or TLS version"),
            (false, None) => return Err("a TLS connection names its certificate check"),
            (false, Some(WireCertificate::Verified)) => CertificateCheck::Verified,
            (false, Some(WireCertificate::Unverified)) => CertificateCheck::NotVerified,
            (false, Some(WireCertificate::Invalid)) => {
                CertificateCheck::Invalid(wire.certificate_error.unwrap_or_default())
            }
        };
        Ok(Self::Tls { certificate, version: wire.tls_version })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_kind_has_its_json_form_and_reads_back() {
        let tls = |certificate, version| ConnectionTls::Tls { certificate, version };
        let cases = [
            (ConnectionTls::Plaintext, json!({"plaintext": true})),
            (
                tls(CertificateCheck::Verified, Some(TlsVersion::Tls1_3)),
                json!({"plaintext": false, "certificate": "verified", "tlsVersion": "TLSv1.3"}),
            ),
            (
                tls(CertificateCheck::NotVerified, Some(TlsVersion::Tls1_2)),
                json!({"plaintext": false, "certificate": "unverified", "tlsVersion": "TLSv1.2"}),
            ),
            (
                tls(CertificateCheck::invalid("expired"), Some(TlsVersion::Tls1_0)),
                json!({"plaintext": false, "certificate": "invalid", "certificateError": "expired", "tlsVersion": "TLSv1"}),
            ),
            (tls(CertificateCheck::Verified, None), json!({"plaintext": false, "certificate": "verified"})),
        ];
        for (tls, expected) in cases {
            assert_eq!(serde_json::to_value(&tls).unwrap(), expected);
            assert_eq!(serde_json::from_value::<ConnectionTls>(expected).unwrap(), tls);
        }
    }

    #[test]
    fn an_event_recorded_before_the_version_was_kept_still_reads() {
        // The exact form events had before `tlsVersion`: no version, not an error.
        let old = json!({"plaintext": false, "certificate": "invalid", "certificateError": "expired"});
        assert_eq!(
            serde_json::from_value::<ConnectionTls>(old).unwrap(),
            ConnectionTls::Tls { certificate: CertificateCheck::invalid("expired"), version: None }
        );
    }

    #[test]
    fn each_version_reads_from_its_protocol_number_and_shows_its_json_name() {
        for (number, name) in [(0x0301, "TLSv1"), (0x0302, "TLSv1.1"), (0x0303, "TLSv1.2"), (0x0304, "TLSv1.3")] {
            let version = TlsVersion::from_wire(number).unwrap();
            assert_eq!(version.to_string(), name);
            assert_eq!(serde_json::to_value(version).unwrap(), json!(name));
        }
        for unassigned in [0x0300, 0x0305, 0x7f1c, 0xfefd] {
            assert_eq!(TlsVersion::from_wire(unassigned), None, "{unassigned:#06x}");
        }
    }

    #[test]
    fn contradictions_do_not_read() {
        for bad in [
            json!({"plaintext": true, "certificate": "verified"}),
            json!({"plaintext": true, "tlsVersion": "TLSv1.3"}),
            json!({"plaintext": false}),
            json!({"plaintext": false, "certificate": "verified", "tlsVersion": "SSLv3"}),
        ] {
            assert!(serde_json::from_value::<ConnectionTls>(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_long_refusal_is_cut() {
        let CertificateCheck::Invalid(reason) = CertificateCheck::invalid(&"x".repeat(1000)) else { unreachable!() };
        assert_eq!(reason.chars().count(), MAX_REASON_CHARS);
    }
}
